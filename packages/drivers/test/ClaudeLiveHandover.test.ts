/**
 * A Claude Code live thread whose next turn does not run on the warm process: a narrowing tool
 * policy (another reuse key: a fresh live process resumes the checkpoint) or a `runAs` attempt
 * (one-shot with `--json-schema`, resuming the checkpoint). DESIGN §12: "Otherwise core shuts it
 * down and starts a fresh one that resumes the checkpoint"; docs/structured-output.md: "An attempt
 * therefore runs as a one-shot turn of the thread with `--json-schema`, resuming the checkpoint".
 * The previous turn's answer must be in the conversation the next turn's model sees.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { AnthropicServer, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { offlineClaude } from "./ClaudeHarness.js"

const tool = (name: string) =>
  Tool.make(name, {
    description: `Tool ${name}.`,
    input: { key: Schema.String },
    output: Schema.Struct({ ok: Schema.Boolean }),
    revision: `${name}/v1`
  })
const Tools = Toolkit.make(tool("lookup_issue"), tool("close_issue"))
const ToolsLive = Tools.toLayer({
  lookup_issue: () => Effect.succeed({ ok: true }),
  close_issue: () => Effect.succeed({ ok: true })
})
const Codename = Schema.Struct({ codename: Schema.String })

const structuredTool = (request: AnthropicServer.MessagesRequest) =>
  (request.tools as ReadonlyArray<{ readonly name: string }> | undefined)?.some((t) => t.name === "StructuredOutput")

const flat = (request: AnthropicServer.MessagesRequest) =>
  AnthropicServer.transcript(request).map(([role, text]) => `${role}:${text}`).join(" | ")

/**
 * T1 narrowed (a fresh process, new session), T2 unnarrowed (the process restarts and resumes
 * the session), then the next turn on yet another process: T3 narrowed again, or a `runAs`
 * attempt (one-shot). What the next turn's model is sent.
 */
const scenario = (next: "policy" | "runAs") =>
  Effect.gen(function*() {
    const server = yield* AnthropicServer.make({
      respond: (request) =>
        structuredTool(request)
          ? AnthropicServer.callTool("StructuredOutput", { codename: "x" })
          : AnthropicServer.reply(`Noted ${/(T\d)/.exec(AnthropicServer.transcript(request).at(-1)?.[1] ?? "")?.[1]}.`)
    })
    const sandbox = yield* Harness.sandbox
    yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver: offlineClaude(server.url),
        definition: { instructions: "", skills: [], tools: Tools },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      // Three threads: the loss is a race with the previous turn's late save (lost 2 runs in 3).
      for (const key of ["a", "b", "c"]) {
        const thread = yield* agent.thread(`handover-${key}`)
        yield* thread.run({ input: "T1: the codename is KESTREL.", toolPolicy: { allow: ["lookup_issue"] } })
        yield* thread.run("T2: the colour is TEAL.")
        if (next === "policy") {
          yield* thread.run({ input: "T3: what did I say?", toolPolicy: { allow: ["lookup_issue"] } })
        } else {
          yield* thread.runAs(Codename, "T3: what did I say?", { repairs: 0 })
        }
      }
      yield* agent.close()
    }).pipe(Effect.scoped, Effect.provide([Harness.layer, ToolsLive]))
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    const requests = yield* server.messages
    return requests.filter((r) => (AnthropicServer.transcript(r).at(-1)?.[1] ?? "").includes("T3")).map((r) =>
      flat(r).replace(/<system-reminder>[\s\S]*?<\/system-reminder>/g, "")
    )
  }).pipe(Effect.scoped)

describe("Claude live thread, the next turn on another process", () => {
  it.live("a narrowed turn's fresh live process resumes the previous (committed) turn", () =>
    Effect.gen(function*() {
      const seen = yield* scenario("policy")
      expect(seen).toHaveLength(3)
      for (const said of seen) {
        expect(said).toContain("T1: the codename is KESTREL.")
        expect(said).toContain("T2: the colour is TEAL. | assistant:Noted T2.")
      }
    }), 150_000)

  it.live("a runAs attempt (one-shot) resumes the previous (committed) live turn", () =>
    Effect.gen(function*() {
      const seen = yield* scenario("runAs")
      expect(seen).toHaveLength(3)
      for (const said of seen) {
        expect(said).toContain("T1: the codename is KESTREL.")
        expect(said).toContain("T2: the colour is TEAL. | assistant:Noted T2.")
      }
    }), 150_000)
})
