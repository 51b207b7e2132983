/**
 * The Gemini driver end to end through the public API (`Agent.make`), the real gateway and the
 * real Gemini CLI (pinned 0.61.0) against the scripted GeminiServer, offline. Each CLI turn takes
 * ≈3 s: the matrix uses five turns, the conformance suite about eight.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Gemini } from "@tether/drivers"
import { Conformance, GeminiServer, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"

const secret = "db-password=hunter2"

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String, state: Schema.String }),
  revision: "lookup_issue/v1"
})
const CloseIssue = Tool.make("close_issue", {
  description: "Close one issue.",
  input: { key: Schema.String },
  output: Schema.Struct({ closed: Schema.Boolean }),
  revision: "close_issue/v1"
})
const Explode = Tool.make("explode", {
  description: "Always breaks.",
  input: {},
  output: Schema.Struct({ ok: Schema.Boolean }),
  revision: "explode/v1"
})
const IssueTools = Toolkit.make(LookupIssue, CloseIssue, Explode)
const looked: Array<string> = []
const IssueToolsLive = IssueTools.toLayer({
  lookup_issue: ({ key }) =>
    Effect.sync(() => {
      looked.push(key)
      return { title: `Title of ${key}`, state: "open" }
    }),
  close_issue: ({ key }) => Tool.reject("not_found", `Choose an issue key that exists; ${key} does not.`),
  explode: () => Effect.die(new Error(`connection failed: ${secret}`))
})

const instructions = "You triage issues. INSTRUCTIONS-MARKER-42."

const driverFor = (server: GeminiServer.GeminiServer) =>
  Gemini.driver({
    model: "gemini-2.5-flash",
    env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
  })

/** A sandbox whose source profile has a user's Gemini settings and memory file. */
const geminiSandbox = Effect.gen(function*() {
  const sandbox = yield* Harness.sandbox
  Fs.mkdirSync(Path.join(sandbox.source, ".gemini"), { mode: 0o700 })
  Fs.writeFileSync(Path.join(sandbox.source, Gemini.settingsFile), JSON.stringify({ ui: { theme: "Dracula" } }))
  Fs.writeFileSync(Path.join(sandbox.source, ".gemini", "GEMINI.md"), "USER-MEMORY-MARKER\n")
  return sandbox
})

// One-shot turns (`gemini -p`), threads included: the live path (`gemini --acp`) is covered by
// LiveThread.test.ts. (Its ACP tool calls carry no input, and a model error there ends the turn
// without a stream-json result record.)
const makeAgent = (server: GeminiServer.GeminiServer, sandbox: Harness.Sandbox) =>
  Agent.make({
    driver: driverFor(server),
    definition: { instructions, skills: [], tools: IssueTools },
    workspace: sandbox.workspace,
    profile: sandbox.selection,
    live: { threads: false }
  })

const sinceLast = (request: GeminiServer.GenerateRequest) => GeminiServer.functionResponses(request)

describe("Gemini through Agent.make and the real CLI", () => {
  it.live(
    "host tool round trip, instructions sent, a resumed thread turn under a tool policy; nothing left after close",
    () =>
      Effect.gen(function*() {
        const server = yield* GeminiServer.make({
          script: [GeminiServer.callTool("lookup_issue", { key: "ISSUE-42" })],
          respond: GeminiServer.roundTrip(
            () => GeminiServer.reply("plain turn"),
            (responses) =>
              GeminiServer.reply(responses[0]!.output.includes(`"state":"open"`) ? "It is open." : "unknown")
          )
        })
        const observed: Array<Harness.Observed> = []
        const sandbox = yield* geminiSandbox
        const before = yield* Harness.treeDigest(sandbox.source)
        const timings: Array<number> = []
        const { agent, events, second } = yield* Effect.gen(function*() {
          const agent = yield* makeAgent(server, sandbox)
          const thread = yield* agent.thread("tenant-42/issue-42")
          let started = performance.now()
          const events = Array.from(yield* thread.stream("Is ISSUE-42 still open?").pipe(Stream.runCollect))
          timings.push(performance.now() - started)
          started = performance.now()
          // The second turn resumes the thread's session under a narrower tool policy.
          const second = yield* thread.run({ input: "Thanks.", toolPolicy: { allow: ["lookup_issue"] } })
          timings.push(performance.now() - started)
          const witness = yield* makeAgent(server, sandbox)
          yield* agent.close()
          expect(yield* Harness.probe(observed[0]!)).toBe(401)
          expect(yield* Harness.probe(observed[1]!)).toBe(200)
          yield* witness.close()
          return { agent, events, second }
        }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.recordingLayer(observed)]))

        const calls = events.filter((event) => event._tag === "ToolCall")
        expect(calls.map((call) => [call.phase, call.name, call.source])).toEqual([
          ["start", "lookup_issue", "host"],
          ["end", "lookup_issue", "host"]
        ])
        expect(calls[0]!.input).toEqual({ key: "ISSUE-42" })
        expect(looked).toContain("ISSUE-42")
        const finished = events.at(-1)!
        expect(finished._tag === "RunFinished" && finished.outcome).toBe("success")
        expect(finished._tag === "RunFinished" && finished.result?.text).toBe("It is open.")
        const session = events.find((event) => event._tag === "SessionStarted")
        expect(session?._tag === "SessionStarted" && session.model).toBe("gemini-2.5-flash")
        expect(events.some((event) => event._tag === "TextDelta")).toBe(true)
        expect(second.text).toBe("plain turn")
        expect(second.provider).toBe("gemini")
        expect(second.instructions).toBe(instructions)
        expect(second.usage?.inputTokens).toBe(20)
        expect(second.effectiveTools).toEqual(["lookup_issue"])
        expect(session?._tag === "SessionStarted" ? session.sessionId : undefined).toBe(second.session)

        const generations = yield* server.generations
        expect(generations).toHaveLength(3)
        const system = GeminiServer.systemText(generations[0]!)
        expect(system).toContain(instructions)
        expect(system).toContain("USER-MEMORY-MARKER")
        expect(GeminiServer.declaredTools(generations[0]!).filter((n) => n.startsWith("mcp_")).sort()).toEqual([
          "mcp_tether_close_issue",
          "mcp_tether_explode",
          "mcp_tether_lookup_issue"
        ])
        expect(sinceLast(generations[1]!)[0]?.output).toContain("\"state\":\"open\"")
        expect(GeminiServer.systemText(generations[2]!)).toContain(instructions)
        // The resumed request carries the first turn; the policy narrowed the offered host tools.
        const resumed = GeminiServer.transcript(generations[2]!)
        expect(resumed.some(([role, text]) => role === "user" && text.includes("Is ISSUE-42 still open?"))).toBe(true)
        expect(resumed.at(-1)).toEqual(["user", "Thanks."])
        expect(GeminiServer.declaredTools(generations[2]!).filter((n) => n.startsWith("mcp_"))).toEqual([
          "mcp_tether_lookup_issue"
        ])
        expect((yield* server.requests).every((r) => r.headers["x-goog-api-key"] === "fake-gemini-key")).toBe(true)

        expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
        for (const registration of observed) expect(yield* Harness.probe(registration)).not.toBe(200)
        expect(yield* Harness.treeDigest(sandbox.source)).toBe(before)
        console.info(
          `gemini agent turns (run to result): tool turn ${Math.round(timings[0]!)} ms, plain turn ${
            Math.round(timings[1]!)
          } ms`
        )
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "a rejection reaches the model with its code and message; a defect only as a generic error",
    () =>
      Effect.gen(function*() {
        const server = yield* GeminiServer.make({
          script: [
            GeminiServer.callTool("close_issue", { key: "ISSUE-404" }),
            GeminiServer.callTool("explode", {})
          ],
          respond: () => GeminiServer.reply("done")
        })
        const sandbox = yield* geminiSandbox
        const events = yield* Effect.gen(function*() {
          const agent = yield* makeAgent(server, sandbox)
          return Array.from(yield* agent.stream("Close ISSUE-404.").pipe(Stream.runCollect))
        }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.layer]))
        const ends = events.filter((event) => event._tag === "ToolCall" && event.phase === "end")
        expect(ends.map((event) => event._tag === "ToolCall" && [event.name, event.isError])).toEqual([
          ["close_issue", true],
          ["explode", true]
        ])
        const generations = yield* server.generations
        expect(generations).toHaveLength(3)
        const rejected = JSON.stringify(generations[1]!.contents.at(-1))
        expect(rejected).toContain("not_found")
        expect(rejected).toContain("ISSUE-404 does not.")
        const defect = JSON.stringify(generations[2]!.contents.at(-1))
        expect(defect).toContain("internal_error")
        expect(JSON.stringify(generations)).not.toContain(secret)
        expect(JSON.stringify(events)).not.toContain(secret)
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "a model 4xx ends in a RunError and commits no checkpoint; the thread then starts cleanly",
    () =>
      Effect.gen(function*() {
        const server = yield* GeminiServer.make({ script: [GeminiServer.fail(400, "scripted bad request")] })
        const sandbox = yield* geminiSandbox
        const { error, before, after } = yield* Effect.gen(function*() {
          const agent = yield* makeAgent(server, sandbox)
          const thread = yield* agent.thread("tenant-42/issue-400")
          const error = yield* Effect.flip(thread.run("hi"))
          const before = yield* thread.snapshot
          yield* server.enqueue(GeminiServer.reply("recovered"))
          const result = yield* thread.run("again")
          expect(result.text).toBe("recovered")
          const after = yield* thread.snapshot
          return { error, before, after }
        }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.layer]))
        expect(error._tag).toBe("RunError")
        if (error._tag !== "RunError") return
        expect(error.reason).toBe("ProviderFailed")
        expect(error.detail).toContain("scripted bad request")
        expect(error.result.raw.terminal).toMatchObject({ type: "result", status: "error" })
        expect(error.result.text).toBe("")
        expect(Option.isNone(before)).toBe(true)
        expect(Option.map(after, (record) => [record.provider, record.turns])).toEqual(Option.some(["gemini", 1]))
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
      }).pipe(Effect.scoped),
    120_000
  )
})

// The conformance suite needs its subject at collection time: one server for the file.
const conformanceScope = Effect.runSync(Scope.make())
const conformanceServer = await Effect.runPromise(
  GeminiServer.make({ respond: () => GeminiServer.reply("conformance answer") }).pipe(Scope.extend(conformanceScope))
)
afterAll(() => Effect.runPromise(Scope.close(conformanceScope, Exit.void)))

describe("Gemini conformance (real CLI)", () => {
  const clauses = Conformance.clauses({
    driver: driverFor(conformanceServer),
    plain: "hello",
    plainText: "conformance answer",
    // The CLI needs ≈2.5 s before its first model request: long enough for a cancel at start.
    slow: "hello"
  })
  for (const clause of clauses) it.live(`${clause.id} ${clause.title}`, () => clause.run, 120_000)
})
