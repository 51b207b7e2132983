/**
 * End to end through the public API: `Agent.make` with `Codex.driver` and the real Codex binary
 * (`@openai/codex` 0.171.0, native binary of the platform package), offline: the scripted
 * Responses server on 127.0.0.1 is the model, the real gateway serves the host tools.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as AgentError from "@tether/core/AgentError"
import type * as Event from "@tether/core/Event"
import { Codex } from "@tether/drivers"
import { Gateway } from "@tether/gateway"
import { Harness, ResponsesServer } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String, verbose: Schema.Boolean },
  output: Schema.Struct({ title: Schema.String, state: Schema.String }),
  revision: "lookup_issue/v1"
})
const CloseIssue = Tool.make("close_issue", {
  description: "Close an issue.",
  input: { key: Schema.String },
  output: Schema.Struct({ closed: Schema.Boolean }),
  revision: "close_issue/v1"
})
const Explode = Tool.make("explode", {
  description: "Always fails with a defect.",
  input: { why: Schema.String },
  output: Schema.Struct({ ok: Schema.Boolean }),
  revision: "explode/v1"
})
const IssueTools = Toolkit.make(LookupIssue, CloseIssue, Explode)

const secret = "SECRET-DEFECT-TEXT-c0d3x"
const seen: Array<unknown> = []
const IssueToolsLive = IssueTools.toLayer({
  lookup_issue: (input) =>
    Effect.sync(() => {
      seen.push(input)
      return { title: `Title of ${input.key}`, state: "open" }
    }),
  close_issue: ({ key }) => Tool.reject("not_found", `Choose an issue key that exists; ${key} does not.`),
  explode: () => Effect.die(new Error(secret))
})

const instructions = "You triage issues. INSTRUCTIONS-MARKER-7."

/** The user's own Codex settings in the source profile: kept in the clone, never modified. */
const userConfig = "personality = \"pragmatic\"\n\n[features]\nweb_search_request = false\n"

const driverFor = (server: ResponsesServer.ResponsesServer, overrides: Partial<Codex.Config> = {}) =>
  Codex.driver({
    model: "fake-model",
    modelProvider: {
      id: "fake",
      baseUrl: overrides.modelProvider?.baseUrl ?? server.baseUrl,
      apiKey: Redacted.make("sk-fake-codex"),
      requestMaxRetries: 0,
      streamMaxRetries: 0
    },
    settings: Codex.offlineSettings,
    ...(overrides.maxReconnects === undefined ? {} : { maxReconnects: overrides.maxReconnects })
  })

/** Live processes whose executable is Codex and whose working directory lies under `dir`. */
const codexProcessesUnder = (dir: string) =>
  Effect.promise(async () => {
    const found: Array<number> = []
    for (const entry of await Fs.readdir("/proc")) {
      if (!/^[0-9]+$/.test(entry)) continue
      try {
        const exe = await Fs.readlink(`/proc/${entry}/exe`)
        const cwd = await Fs.readlink(`/proc/${entry}/cwd`)
        if (exe.includes("codex") && cwd.startsWith(dir)) found.push(Number(entry))
      } catch {
        // gone or not ours
      }
    }
    return found
  })

/**
 * Runs `body` with a Codex agent in a fresh sandbox, closes it through its scope, then checks
 * that nothing is left: no Codex process, no clone, the token revoked, the source untouched.
 */
const withCodexAgent = <A, E>(
  server: ResponsesServer.ResponsesServer,
  body: (agent: Agent.Agent, sandbox: Harness.Sandbox) => Effect.Effect<A, E, Scope.Scope>,
  overrides: Partial<Codex.Config> = {}
) => {
  const observed: Array<Harness.Observed> = []
  return Effect.gen(function*() {
    // A bystander registration keeps the shared listener up after the agent's own is revoked,
    // so the revoked token is answered (401) rather than refused.
    const gateway = yield* Gateway.Gateway
    yield* gateway.register(yield* Toolkit.executor(IssueTools))
    const sandbox = yield* Harness.sandbox
    yield* Effect.promise(() => Fs.writeFile(Path.join(sandbox.source, "config.toml"), userConfig, { mode: 0o600 }))
    const before = yield* Harness.treeDigest(sandbox.source)
    const [agent, value] = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver: driverFor(server, overrides),
        definition: { instructions, skills: [], tools: IssueTools },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      return [agent, yield* body(agent, sandbox)] as const
    }).pipe(Effect.scoped)
    expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
    expect(yield* codexProcessesUnder(sandbox.base)).toEqual([])
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    expect(observed).toHaveLength(2)
    expect(yield* Harness.probe(observed[1]!)).toBe(401)
    expect(yield* Harness.probe(observed[0]!)).toBe(200)
    expect(yield* Harness.treeDigest(sandbox.source)).toBe(before)
    return value
  }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.recordingLayer(observed)]))
}

const bodies = (server: ResponsesServer.ResponsesServer) =>
  server.requests.pipe(Effect.map((all) => all.map((r) => JSON.stringify(r.body))))

const developerTexts = (request: ResponsesServer.RecordedRequest) =>
  ResponsesServer.inputItems(request).flatMap((item) =>
    item["type"] === "message" && item["role"] === "developer" ? [JSON.stringify(item["content"])] : []
  )

describe("Codex agent end to end (real CLI)", () => {
  it.live("a host tool round trip: typed input, result in the next request, events, text and usage", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make({
        script: (request) => {
          const output = ResponsesServer.lastFunctionCallOutput(request)
          return output === undefined
            ? ResponsesServer.mcpTool("tether", "lookup_issue", { key: "ISSUE-42", verbose: true })
            : ResponsesServer.text(`ISSUE-42 is ${output.text.includes("\"state\":\"open\"") ? "open" : "unknown"}.`)
        }
      })
      const started = performance.now()
      const { events, result } = yield* withCodexAgent(server, (agent) =>
        Effect.gen(function*() {
          const events = Array.from(yield* Stream.runCollect(agent.stream("Is ISSUE-42 still open?")))
          const finished = events.at(-1)
          return { events, result: finished?._tag === "RunFinished" ? finished.result : undefined }
        }))
      const elapsed = performance.now() - started
      expect(seen).toContainEqual({ key: "ISSUE-42", verbose: true })
      const tags = events.map((e) => e._tag)
      expect(tags[0]).toBe("RunStarted")
      expect(tags.at(-1)).toBe("RunFinished")
      expect(tags).toContain("SessionStarted")
      expect(tags).toContain("Usage")
      const calls = events.filter((e): e is Event.ToolCall => e._tag === "ToolCall")
      expect(calls.map((c) => [c.phase, c.name, c.source])).toEqual([
        ["start", "lookup_issue", "host"],
        ["end", "lookup_issue", "host"]
      ])
      expect(calls[0]!.input).toEqual({ key: "ISSUE-42", verbose: true })
      expect(calls[1]!.isError).toBe(false)
      expect(calls[1]!.output).toEqual({ title: "Title of ISSUE-42", state: "open" })
      expect(result?.text).toBe("ISSUE-42 is open.")
      expect(result?.provider).toBe("codex")
      expect(result?.session).toMatch(/^[0-9a-f-]{36}$/)
      expect(result?.usage?.inputTokens).toBe(20)
      expect(result?.usage?.outputTokens).toBe(10)
      expect(result?.effectiveTools).toEqual(["close_issue", "explode", "lookup_issue"])
      const requests = yield* server.requests
      expect(requests).toHaveLength(2)
      expect(ResponsesServer.namespaceTools(requests[0]!)["mcp__tether"]).toEqual(
        expect.arrayContaining(["lookup_issue", "close_issue", "explode"])
      )
      expect(developerTexts(requests[0]!).some((t) => t.includes("INSTRUCTIONS-MARKER-7"))).toBe(true)
      // The prompt arrives alone: nothing of stdin was appended to it.
      expect(ResponsesServer.userTexts(requests[0]!).filter((t) => !t.startsWith("<environment_context>"))).toEqual([
        "Is ISSUE-42 still open?"
      ])
      expect(ResponsesServer.lastFunctionCallOutput(requests[1]!)?.text).toContain("Title of ISSUE-42")
      for (const body of yield* bodies(server)) expect(body).not.toContain("source-secret")
      // The sandbox's profile has an auth.json: with the offline settings Codex still never
      // tries the ChatGPT apps connector (https://chatgpt.com/backend-api/ps/mcp).
      expect(result?.raw.stderr).not.toContain("chatgpt.com")
      console.log(`[codex e2e] tool round trip, make → close: ${elapsed.toFixed(0)} ms`)
    }).pipe(Effect.scoped))

  it.live("a rejection reaches the model as code + message; a defect only as the generic message", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make({
        script: ResponsesServer.sequence(
          ResponsesServer.mcpTool("tether", "close_issue", { key: "ISSUE-9" }),
          ResponsesServer.mcpTool("tether", "explode", { why: "test" }),
          ResponsesServer.text("Both failed.")
        )
      })
      const result = yield* withCodexAgent(server, (agent) => agent.run("Close ISSUE-9, then explode."))
      expect(result.text).toBe("Both failed.")
      const requests = yield* server.requests
      expect(requests).toHaveLength(3)
      const rejected = ResponsesServer.lastFunctionCallOutput(requests[1]!)!
      expect(rejected.text).toContain("not_found")
      expect(rejected.text).toContain("Choose an issue key that exists; ISSUE-9 does not.")
      const defect = ResponsesServer.lastFunctionCallOutput(requests[2]!)!
      expect(defect.text).toContain("internal_error")
      for (const body of yield* bodies(server)) expect(body).not.toContain(secret)
      const ends = result.transcript.filter((e) => e._tag === "ToolCall" && e.output !== undefined)
      expect(ends.map((e) => e._tag === "ToolCall" && [e.name, e.isError])).toEqual([
        ["close_issue", true],
        ["explode", true]
      ])
      expect(JSON.stringify(result)).not.toContain(secret)
    }).pipe(Effect.scoped))

  it.live("a model failure with retries disabled is a RunError with the partial result", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make({ script: () => ResponsesServer.fail(500, "scripted outage") })
      const error = yield* withCodexAgent(server, (agent) =>
        Effect.flip(agent.run("hello")).pipe(Effect.map((e) =>
          e as AgentError.RunError | AgentError.AgentClosed | AgentError.InvalidTurn
        )))
      expect(error._tag).toBe("RunError")
      if (error._tag === "RunError") {
        expect(error.reason).toBe("ProviderFailed")
        expect(error.result.provider).toBe("codex")
        expect(error.result.text).toBe("")
        expect(error.result.raw.terminal).toMatchObject({ type: "turn.failed" })
        expect(error.detail).toContain("high demand")
      }
      expect(yield* server.requests).toHaveLength(1)
    }).pipe(Effect.scoped))

  it.live("two turns of one agent reuse the clone; the second still sees the user's settings and the tools", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make({ script: (r) => ResponsesServer.text(`answer ${r.index}`) })
      const [first, second] = yield* withCodexAgent(
        server,
        (agent) => Effect.all([agent.run("first"), agent.run("second")], { concurrency: 1 })
      )
      expect([first.text, second.text]).toEqual(["answer 0", "answer 1"])
      // Without threads each turn is a new Codex thread.
      expect(first.session).not.toBe(second.session)
      for (const request of yield* server.requests) {
        expect(ResponsesServer.namespaceTools(request)["mcp__tether"]?.length).toBe(3)
        const developer = developerTexts(request).join("\n")
        expect(developer.split("INSTRUCTIONS-MARKER-7").length - 1).toBe(1)
      }
    }).pipe(Effect.scoped))

  it.live("an unreachable model endpoint with maxReconnects 0 is a RunError instead of an endless wait", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make()
      const error = yield* withCodexAgent(
        server,
        (agent) =>
          Effect.flip(agent.run("hello")).pipe(
            Effect.map((e) => e as AgentError.RunError | AgentError.AgentClosed | AgentError.InvalidTurn)
          ),
        { maxReconnects: 0, modelProvider: { id: "fake", baseUrl: "http://127.0.0.1:1/v1" } }
      )
      expect(error._tag).toBe("RunError")
      if (error._tag === "RunError") {
        expect(error.reason).toBe("ProtocolError")
        expect(error.detail).toContain("cannot reach the model endpoint")
      }
    }).pipe(Effect.scoped))
})
