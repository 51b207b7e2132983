/**
 * The agent definition through each real CLI, offline (scripted model servers on 127.0.0.1):
 * the instructions reach the model request; `read_skill` returns the skill's content to the
 * model; an external stdio MCP server (the test server of `@tether/testing`) is reachable
 * beside the hosted tools, with the `env` the definition declared; the skill is also projected
 * natively (each CLI lists it in its own skills section of the request).
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Skill } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import type * as Result from "@tether/core/Result"
import { Claude, CodeBuddy, Cursor, Gemini } from "@tether/drivers"
import {
  AnthropicServer,
  ChatCompletionsServer,
  CursorAgent,
  GeminiServer,
  Harness,
  McpStdioServer,
  ResponsesServer
} from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { offlineCodex } from "./CodexHarness.js"

const Lookup = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String }),
  revision: "lookup_issue/v1"
})
const Tools = Toolkit.make(Lookup)
const ToolsLive = Tools.toLayer({ lookup_issue: ({ key }) => Effect.succeed({ title: `Title of ${key}` }) })

const skillMarkdown =
  "---\ndescription: Label new issues by area.\n---\n# Triage\nSKILL-CONTENT-MARKER-3f1: label by area."
const suffix = "ENV-SUFFIX-91"
const stamped = McpStdioServer.stamp("hi", suffix)

interface Scenario {
  readonly instructions: string
  /** The stdio server's request log. */
  readonly log: string
  readonly result: Result.Result
}

/** Runs one turn of an agent whose definition has instructions, one skill and one stdio source. */
const scenario = (driver: Driver.Driver, instructions: string) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const log = NodePath.join(sandbox.base, "stamp.log")
    const result = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver,
        definition: {
          instructions,
          skills: [Skill.inline("triage", skillMarkdown)],
          tools: Tools,
          mcp: [McpStdioServer.source("ext", { suffix, log })]
        },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      return yield* agent.run("Triage the new issue.")
    }).pipe(Effect.scoped, Effect.provide([ToolsLive, Harness.layer]))
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    return {
      instructions,
      log: NodeFs.existsSync(log) ? NodeFs.readFileSync(log, "utf8") : "",
      result
    } satisfies Scenario
  })

/** What every CLI must show: the skill content and the stamp reached the model; the log shows the call. */
const expectCommon = ({ log, result }: Scenario) => {
  expect(result.text).toContain("FINAL")
  expect(result.effectiveTools).toEqual(["lookup_issue", "read_skill"])
  const calls = log.split("\n").filter((line) => line !== "").map((line) => JSON.parse(line) as { method: string })
  expect(calls.map((call) => call.method)).toContain("tools/list")
  expect(calls.filter((call) => call.method === "tools/call")).toEqual([
    expect.objectContaining({ params: { name: "stamp", arguments: { text: "hi" } } })
  ])
}

const step = <A>(count: number, first: A, second: A, last: A): A => (count === 0 ? first : count === 1 ? second : last)

describe("agent definition through the real CLIs", () => {
  it.live("Claude: instructions in the system prompt, read_skill content and the stdio source's result", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({
        respond: (request) => {
          const results = request.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []))
            .filter((block: { type?: string }) => block.type === "tool_result").length
          return step(
            results,
            AnthropicServer.callTool("read_skill", { skill: "triage" }),
            AnthropicServer.callTool("stamp", { text: "hi" }),
            AnthropicServer.reply("FINAL")
          )
        }
      })
      const instructions = "INSTRUCTIONS-MARKER-claude: you triage issues."
      const outcome = yield* scenario(
        Claude.driver({
          env: {
            ANTHROPIC_BASE_URL: server.url,
            ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
            CLAUDE_CODE_MAX_RETRIES: "0"
          }
        }),
        instructions
      )
      expectCommon(outcome)
      const messages = yield* server.messages
      expect(messages.length).toBe(3)
      expect(JSON.stringify(messages[0]!.system)).toContain(instructions)
      // Native projection: Claude's Skill tool lists it (beside read_skill's own description).
      expect(JSON.stringify(messages[0])).toMatch(/Skill tool:(?:\\n)+- triage: Label new issues by area\./)
      const offered = (messages[0]!.tools ?? []).map((tool) => tool.name)
      expect(offered).toEqual(
        expect.arrayContaining(["mcp__tether__read_skill", "mcp__tether__lookup_issue", "mcp__ext__stamp"])
      )
      expect(JSON.stringify(messages[1]!.messages)).toContain("SKILL-CONTENT-MARKER-3f1")
      expect(JSON.stringify(messages[2]!.messages)).toContain(stamped)
    }).pipe(Effect.scoped))

  it.live("Codex: developer instructions, read_skill content and the stdio source's result", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make({
        script: (request) => {
          const outputs = ResponsesServer.functionCallOutputs(request).length
          return step(
            outputs,
            ResponsesServer.mcpTool("tether", "read_skill", { skill: "triage" }),
            ResponsesServer.mcpTool("ext", "stamp", { text: "hi" }),
            ResponsesServer.text("FINAL")
          )
        }
      })
      const instructions = "INSTRUCTIONS-MARKER-codex: you triage issues."
      const outcome = yield* scenario(
        offlineCodex(server.baseUrl),
        instructions
      )
      expectCommon(outcome)
      const requests = yield* server.requests
      expect(requests.length).toBe(3)
      expect(JSON.stringify(ResponsesServer.inputItems(requests[0]!))).toContain(instructions)
      // Native projection: Codex lists it among its skills.
      expect(JSON.stringify(ResponsesServer.inputItems(requests[0]!))).toMatch(
        /- triage: Label new issues by area\. \(file: [^)]*triage\/SKILL\.md\)/
      )
      expect(ResponsesServer.namespaceTools(requests[0]!)).toMatchObject({
        mcp__tether: expect.arrayContaining(["read_skill", "lookup_issue"]),
        mcp__ext: ["stamp"]
      })
      expect(ResponsesServer.functionCallOutputs(requests[1]!).map((o) => o.text).join("\n")).toContain(
        "SKILL-CONTENT-MARKER-3f1"
      )
      expect(ResponsesServer.functionCallOutputs(requests[2]!).map((o) => o.text).join("\n")).toContain(stamped)
    }).pipe(Effect.scoped))

  it.live("Gemini: instructions in the system instruction, read_skill content and the stdio source's result", () =>
    Effect.gen(function*() {
      const server = yield* GeminiServer.make({
        respond: (request) => {
          const responses = request.contents.flatMap((c) => c.parts).filter((p) => p.functionResponse !== undefined)
            .length
          return step(
            responses,
            GeminiServer.callTool("read_skill", { skill: "triage" }),
            GeminiServer.callTool("stamp", { text: "hi" }),
            GeminiServer.reply("FINAL")
          )
        }
      })
      const instructions = "INSTRUCTIONS-MARKER-gemini: you triage issues."
      const outcome = yield* scenario(
        Gemini.driver({
          model: "gemini-2.5-flash",
          env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
        }),
        instructions
      )
      expectCommon(outcome)
      const generations = yield* server.generations
      expect(generations.length).toBe(3)
      expect(GeminiServer.systemText(generations[0]!)).toContain(instructions)
      // Native projection: Gemini lists it among its available skills.
      expect(GeminiServer.systemText(generations[0]!)).toMatch(
        /<name>triage<\/name>\s*<description>Label new issues by area\.<\/description>/
      )
      expect(GeminiServer.declaredTools(generations[0]!)).toEqual(
        expect.arrayContaining(["mcp_tether_read_skill", "mcp_ext_stamp"])
      )
      expect(JSON.stringify(generations[1]!.contents)).toContain("SKILL-CONTENT-MARKER-3f1")
      expect(JSON.stringify(generations[2]!.contents)).toContain(stamped)
    }).pipe(Effect.scoped))

  it.live("CodeBuddy: instructions in the system prompt, read_skill content and the stdio source's result", () =>
    Effect.gen(function*() {
      const server = yield* ChatCompletionsServer.make({
        script: (request) =>
          step(
            ChatCompletionsServer.toolResults(request).length,
            ChatCompletionsServer.callTool("read_skill", { skill: "triage" }),
            ChatCompletionsServer.callTool("stamp", { text: "hi" }),
            ChatCompletionsServer.text("FINAL")
          )
      })
      const instructions = "INSTRUCTIONS-MARKER-codebuddy: you triage issues."
      const outcome = yield* scenario(
        // A stdio source in a fresh clone stalls the CLI's start-up for its MCP wait (30 s by default).
        CodeBuddy.driver({
          endpoint: { baseUrl: server.baseUrl, apiKey: Redacted.make("sk-fake-codebuddy") },
          mcpTimeout: "3 seconds"
        }),
        instructions
      )
      expectCommon(outcome)
      const requests = yield* server.requests
      expect(requests.length).toBe(3)
      expect(ChatCompletionsServer.texts(requests[0]!, "system").join("\n")).toContain(instructions)
      // Native projection: CodeBuddy's Skill tool lists it among the available skills.
      expect(JSON.stringify(requests[0]!.body)).toMatch(
        /- triage: Label new issues by area\. \(user\) \(location: [^)]*\/skills\/triage\/SKILL\.md\)/
      )
      expect(ChatCompletionsServer.toolNames(requests[0]!)).toEqual(
        expect.arrayContaining(["mcp__tether__read_skill", "mcp__tether__lookup_issue", "mcp__ext__stamp"])
      )
      expect(ChatCompletionsServer.lastToolResults(requests[1]!).map((r) => r.text).join("\n")).toContain(
        "SKILL-CONTENT-MARKER-3f1"
      )
      expect(ChatCompletionsServer.lastToolResults(requests[2]!).map((r) => r.text).join("\n")).toContain(stamped)
    }).pipe(Effect.scoped))

  it.live("Cursor (fake CLI): read_skill serves the skill; instructions fail construction, before anything starts", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const driver = Cursor.driver(CursorAgent.config())
      const make = (instructions: string) =>
        Agent.make({
          driver,
          definition: { instructions, skills: [Skill.inline("triage", skillMarkdown)], tools: Tools },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
      const refused = yield* Effect.flip(make("Be brief.")).pipe(
        Effect.scoped,
        Effect.provide([ToolsLive, Harness.layer])
      )
      expect(refused).toMatchObject({ _tag: "UnsupportedCapability", driver: "cursor", capability: "instructions" })
      const result = yield* Effect.gen(function*() {
        const agent = yield* make("")
        return yield* agent.run(`Triage.\n${CursorAgent.call("read_skill", { skill: "triage" })}`)
      }).pipe(Effect.scoped, Effect.provide([ToolsLive, Harness.layer]))
      expect(result.text).toContain("read_skill ->")
      expect(result.text).toContain("SKILL-CONTENT-MARKER-3f1")
      expect(result.effectiveTools).toEqual(["lookup_issue", "read_skill"])
      expect(result.instructions).toBe("")
      expect(yield* Harness.entries(sandbox.root)).toEqual([])
    }).pipe(Effect.scoped))
})
