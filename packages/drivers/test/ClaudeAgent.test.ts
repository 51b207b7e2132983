/**
 * End to end through the public API: `Agent.make` with `Claude.driver` and the real Claude
 * Code binary (node_modules/.bin/claude, 2.1.197), offline: the scripted Anthropic server on
 * 127.0.0.1 is the model, the real gateway serves the host tools.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, ThreadStore } from "@tether/core"
import type * as AgentError from "@tether/core/AgentError"
import type * as Event from "@tether/core/Event"
import { Claude } from "@tether/drivers"
import { Gateway } from "@tether/gateway"
import * as Profile from "@tether/profile/Profile"
import { AnthropicServer, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs/promises"
import { Clashing, ClashingLive, Dotted, dottedCalls, DottedLive } from "./DottedTools.js"

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
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

const secret = "SECRET-DEFECT-TEXT-5b1f"
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

const driverFor = (server: AnthropicServer.AnthropicServer) =>
  Claude.driver({
    env: {
      ANTHROPIC_BASE_URL: server.url,
      ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
      CLAUDE_CODE_MAX_RETRIES: "0"
    }
  })

/**
 * Runs `body` with a Claude agent in a fresh sandbox, closes it through its scope, then checks
 * that nothing is left: no claude process, no clone, the token revoked, the source untouched.
 */
const withClaudeAgent = <A, E>(
  server: AnthropicServer.AnthropicServer,
  body: (agent: Agent.Agent) => Effect.Effect<A, E, Scope.Scope>
) => {
  const observed: Array<Harness.Observed> = []
  return Effect.gen(function*() {
    // A bystander registration keeps the shared listener up after the agent's own is revoked,
    // so the revoked token is answered (401) rather than refused.
    const gateway = yield* Gateway.Gateway
    yield* gateway.register(yield* Toolkit.executor(IssueTools))
    const sandbox = yield* Harness.sandbox
    const before = yield* Harness.treeDigest(sandbox.source)
    const [agent, value] = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver: driverFor(server),
        definition: { instructions: "You triage issues.", skills: [], tools: IssueTools },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      return [agent, yield* body(agent)] as const
    }).pipe(Effect.scoped)
    // The agent's scope is closed; the gateway (provided around this test) still listens.
    expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
    expect(yield* claudeProcessesUnder(sandbox.base)).toEqual([])
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    expect(observed).toHaveLength(2)
    expect(yield* Harness.probe(observed[1]!)).toBe(401)
    expect(yield* Harness.probe(observed[0]!)).toBe(200)
    expect(yield* Harness.treeDigest(sandbox.source)).toBe(before)
    return value
  }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.recordingLayer(observed)]))
}

/** Live `claude` processes whose working directory lies under `dir` (the test's sandbox). */
const claudeProcessesUnder = (dir: string) =>
  Effect.promise(async () => {
    const found: Array<number> = []
    for (const entry of await Fs.readdir("/proc")) {
      if (!/^[0-9]+$/.test(entry)) continue
      try {
        const exe = await Fs.readlink(`/proc/${entry}/exe`)
        const cwd = await Fs.readlink(`/proc/${entry}/cwd`)
        if (
          exe.includes("claude") && cwd.startsWith(dir) &&
          (await Harness.isAlive(Number(entry)).pipe(Effect.runPromise))
        ) {
          found.push(Number(entry))
        }
      } catch {
        // gone or not ours
      }
    }
    return found
  })

const bodies = (server: AnthropicServer.AnthropicServer) =>
  server.requests.pipe(Effect.map((all) => all.filter((r) => r.method === "POST").map((r) => r.body)))

describe("Claude agent end to end (real CLI)", () => {
  it.live(
    "a host tool round trip: typed input, result in the next request, events, text and usage",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          respond: AnthropicServer.roundTrip(
            () => AnthropicServer.callTool("lookup_issue", { key: "ISSUE-42" }, { text: "Looking it up." }),
            (results) => AnthropicServer.reply(`ISSUE-42 is ${results[0]!.text.includes("open") ? "open" : "unknown"}.`)
          )
        })
        const started = performance.now()
        const { events, result } = yield* withClaudeAgent(server, (agent) =>
          Effect.gen(function*() {
            const events = Array.from(yield* Stream.runCollect(agent.stream("Is ISSUE-42 still open?")))
            const finished = events.at(-1)
            return { events, result: finished?._tag === "RunFinished" ? finished.result : undefined }
          }))
        const elapsed = performance.now() - started
        expect(seen).toContainEqual({ key: "ISSUE-42" })
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
        expect(calls[0]!.input).toEqual({ key: "ISSUE-42" })
        expect(calls[1]!.isError).toBe(false)
        expect(calls[1]!.output).toEqual({ title: "Title of ISSUE-42", state: "open" })
        const text = events.flatMap((e) => e._tag === "TextDelta" ? [e.text] : []).join("")
        expect(text).toBe("Looking it up.ISSUE-42 is open.")
        expect(result?.text).toBe("ISSUE-42 is open.")
        expect(result?.provider).toBe("claude")
        expect(result?.usage?.inputTokens).toBeGreaterThan(0)
        expect(result?.usage?.outputTokens).toBeGreaterThan(0)
        expect(result?.effectiveTools).toEqual(["close_issue", "explode", "lookup_issue"])
        const messages = yield* server.messages
        expect(messages).toHaveLength(2)
        expect(messages[0]!.tools?.map((t) => t.name)).toEqual(
          expect.arrayContaining(["mcp__tether__lookup_issue", "mcp__tether__close_issue", "mcp__tether__explode"])
        )
        expect(JSON.stringify(messages[0]!.system)).toContain("You triage issues.")
        const results = AnthropicServer.toolResults(messages[1]!)
        expect(results).toHaveLength(1)
        expect(JSON.parse(results[0]!.text)).toEqual({ title: "Title of ISSUE-42", state: "open" })
        console.log(`[claude e2e] tool round trip, make → close: ${elapsed.toFixed(0)} ms`)
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "a rejection reaches the model as code + message; a defect only as the generic message",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          script: [
            AnthropicServer.callTool("close_issue", { key: "ISSUE-9" }),
            AnthropicServer.callTool("explode", { why: "test" }),
            AnthropicServer.reply("Both failed.")
          ]
        })
        const result = yield* withClaudeAgent(server, (agent) => agent.run("Close ISSUE-9, then explode."))
        expect(result.text).toBe("Both failed.")
        const messages = yield* server.messages
        expect(messages).toHaveLength(3)
        const rejected = AnthropicServer.toolResults(messages[1]!)[0]!
        expect(rejected.isError).toBe(true)
        expect(rejected.text).toContain("not_found")
        expect(rejected.text).toContain("Choose an issue key that exists; ISSUE-9 does not.")
        const defect = AnthropicServer.toolResults(messages[2]!)[0]!
        expect(defect.isError).toBe(true)
        expect(defect.text).toContain("internal_error")
        for (const body of yield* bodies(server)) expect(body).not.toContain(secret)
        const ends = result.transcript.filter((e) => e._tag === "ToolCall" && e.output !== undefined)
        expect(ends.map((e) => e._tag === "ToolCall" && [e.name, e.isError])).toEqual([
          ["close_issue", true],
          ["explode", true]
        ])
        expect(JSON.stringify(result)).not.toContain(secret)
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "a thread's second turn resumes the same Claude session and its request carries the first turn",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          script: [AnthropicServer.reply("first answer"), AnthropicServer.reply("second answer")]
        })
        const { first, second, resumed, record } = yield* withClaudeAgent(server, (agent) =>
          Effect.gen(function*() {
            const thread = yield* agent.thread("tenant-42/issue-123")
            const first = yield* thread.run("first question")
            const events = Array.from(yield* Stream.runCollect(thread.stream("second question")))
            const finished = events.at(-1)
            const started = events.find((e): e is Event.SessionStarted => e._tag === "SessionStarted")
            return {
              first,
              second: finished?._tag === "RunFinished" ? finished.result : undefined,
              resumed: started,
              record: yield* thread.snapshot
            }
          }))
        expect(first.session).toBeDefined()
        expect(second?.session).toBe(first.session)
        expect(second?.text).toBe("second answer")
        expect(resumed).toMatchObject({ sessionId: first.session, resumed: true })
        expect(Option.getOrUndefined(record)).toMatchObject({ provider: "claude", session: first.session, turns: 2 })
        const messages = yield* server.messages
        expect(messages).toHaveLength(2)
        const transcript = AnthropicServer.transcript(messages[1]!)
        expect(transcript.map(([role]) => role)).toEqual(["user", "assistant", "user"])
        expect(transcript[0]![1]).toContain("first question")
        expect(transcript[1]![1]).toBe("first answer")
        expect(transcript[2]![1]).toContain("second question")
        const sessions = (yield* server.requests).filter((r) => r.method === "POST")
          .map((r) => r.headers["x-claude-code-session-id"])
        expect(sessions).toEqual([first.session, first.session])
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "a checkpoint whose Claude session is gone (agent rebuilt, clone removed) fails with ResumeRejected",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.reply("ok") })
        const sandbox = yield* Harness.sandbox
        const make = Agent.make({
          driver: driverFor(server),
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          // Without a session store the rebuilt agent's clone lacks the transcript.
          profile: Profile.cloneFrom(sandbox.source, sandbox.root, { sessions: false })
        })
        const first = yield* make.pipe(
          Effect.flatMap((agent) => agent.thread("k")),
          Effect.flatMap((thread) => thread.run("first")),
          Effect.scoped
        )
        const error = yield* make.pipe(
          Effect.flatMap((agent) => agent.thread("k", { resumeOnly: true })),
          Effect.flatMap((thread) => Effect.flip(thread.run("second"))),
          Effect.scoped
        )
        expect(error._tag).toBe("ResumeRejected")
        expect(error.message).toContain(first.session)
        expect(yield* server.messages).toHaveLength(1)
      }).pipe(Effect.scoped, Effect.provide([Harness.layer, ThreadStore.layerMemory])),
    60_000
  )

  it.live(
    "a forked thread continues the history under its own session; the original is untouched",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          script: [AnthropicServer.reply("original answer"), AnthropicServer.reply("forked answer")]
        })
        const { first, forked, original } = yield* withClaudeAgent(server, (agent) =>
          Effect.gen(function*() {
            const thread = yield* agent.thread("original")
            const first = yield* thread.run("first question")
            const fork = yield* thread.fork("forked")
            const forked = yield* fork.run("fork question")
            return { first, forked, original: yield* thread.snapshot }
          }))
        expect(forked.session).toBeDefined()
        expect(forked.session).not.toBe(first.session)
        expect(forked.text).toBe("forked answer")
        expect(Option.getOrUndefined(original)).toMatchObject({ session: first.session, turns: 1 })
        const transcript = AnthropicServer.transcript((yield* server.messages)[1]!)
        expect(transcript.map(([role, text]) => [role, text.split("\n").at(-1)])).toEqual([
          ["user", "first question"],
          ["assistant", "original answer"],
          ["user", "fork question"]
        ])
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "a turn's tool policy narrows what the model is offered and what the CLI allows",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({ script: [AnthropicServer.reply("ok")] })
        const result = yield* withClaudeAgent(
          server,
          (agent) => agent.run({ input: "look only", toolPolicy: { allow: ["lookup_issue"] } })
        )
        expect(result.effectiveTools).toEqual(["lookup_issue"])
        const offered = (yield* server.messages)[0]!.tools?.map((t) => t.name).filter((n) => n.startsWith("mcp__"))
        expect(offered).toEqual(["mcp__tether__lookup_issue"])
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "a model error on a thread is a RunError and commits no checkpoint; a healthy one is kept",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          script: [AnthropicServer.fail(400, "bad request"), AnthropicServer.reply("fine"), AnthropicServer.fail(529)]
        })
        const { failed, afterFailure, ok, afterSecondFailure } = yield* withClaudeAgent(server, (agent) =>
          Effect.gen(function*() {
            const thread = yield* agent.thread("t-error")
            const failed = yield* Effect.flip(thread.run("first"))
            const afterFailure = yield* thread.snapshot
            const ok = yield* thread.run("second")
            yield* Effect.flip(thread.run("third"))
            return { failed, afterFailure, ok, afterSecondFailure: yield* thread.snapshot }
          }))
        expect(failed._tag).toBe("RunError")
        expect(Option.isNone(afterFailure)).toBe(true)
        expect(Option.getOrUndefined(afterSecondFailure)).toMatchObject({ session: ok.session, turns: 1 })
      }).pipe(Effect.scoped),
    60_000
  )

  it.live("a model error with retries disabled is a RunError with the partial result", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({ script: [AnthropicServer.fail(500, "scripted outage")] })
      const error = yield* withClaudeAgent(server, (agent) =>
        Effect.flip(agent.run("hello")).pipe(Effect.map((e) =>
          e as AgentError.RunError | AgentError.AgentClosed | AgentError.InvalidTurn
        )))
      expect(error._tag).toBe("RunError")
      if (error._tag === "RunError") {
        expect(error.reason).toBe("ProviderFailed")
        expect(error.detail).toContain("500")
        expect(error.result.provider).toBe("claude")
        expect(error.result.raw.terminal).toMatchObject({ type: "result", is_error: true, api_error_status: 500 })
      }
      expect(yield* server.messages).toHaveLength(1)
    }).pipe(Effect.scoped), 60_000)

  // Claude Code turns each character of an MCP tool's name outside [A-Za-z0-9_-] into `_`.
  it.live(
    "a hosted tool whose name holds a '.' is allowed, runs, and its events carry the catalog's name",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          respond: AnthropicServer.roundTrip(
            () => AnthropicServer.callTool("mcp__tether__issue_lookup", { key: "ISSUE-1" }),
            () => AnthropicServer.reply("done")
          )
        })
        const sandbox = yield* Harness.sandbox
        dottedCalls.length = 0
        const events = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: driverFor(server),
            definition: { instructions: "", skills: [], tools: Dotted },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          return Array.from(yield* Stream.runCollect(agent.stream("Look up ISSUE-1.")))
        }).pipe(Effect.scoped, Effect.provide([DottedLive, Harness.layer]))
        expect(dottedCalls).toEqual(["ISSUE-1"])
        const calls = events.filter((e): e is Event.ToolCall => e._tag === "ToolCall")
        expect(calls.map((c) => [c.phase, c.name, c.source, c.isError ?? false])).toEqual([
          ["start", "issue.lookup", "host", false],
          ["end", "issue.lookup", "host", false]
        ])
        const finished = events.at(-1)
        expect(finished?._tag === "RunFinished" && finished.result.transcript).toContainEqual(
          expect.objectContaining({ _tag: "ToolCall", name: "issue.lookup", source: "host" })
        )
      }).pipe(Effect.scoped),
    90_000
  )

  it.live("two hosted tools the CLI would name alike are refused before it starts", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.reply("never") })
      const sandbox = yield* Harness.sandbox
      const error = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver: driverFor(server),
          definition: { instructions: "", skills: [], tools: Clashing },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        return yield* Effect.flip(agent.run("Look up ISSUE-1."))
      }).pipe(
        Effect.scoped,
        Effect.provide([ClashingLive, Harness.layer])
      )
      // The tag first: a turn that ran would fail with its whole Result printed.
      expect(error._tag).toBe("RunError")
      expect(error).toMatchObject({ _tag: "RunError", reason: "PrepareFailed" })
      expect((error as AgentError.RunError).detail).toContain("\"issue.lookup\" and \"issue_lookup\" alike")
      expect(yield* server.messages).toHaveLength(0)
    }).pipe(Effect.scoped), 60_000)
})
