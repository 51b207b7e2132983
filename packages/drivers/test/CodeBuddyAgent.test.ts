/**
 * End to end through the public API: `Agent.make` with `CodeBuddy.driver` and the real CodeBuddy
 * Code CLI (2.117.0, bundled in @tencent-ai/agent-sdk 0.3.201), offline: the scripted Chat
 * Completions server on 127.0.0.1 is the model, the real gateway serves the host tools.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, ThreadStore } from "@tether/core"
import type * as Event from "@tether/core/Event"
import { CodeBuddy } from "@tether/drivers"
import { ChatCompletionsServer, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Cp from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { Dotted, dottedCalls, DottedLive } from "./DottedTools.js"

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
const IssueTools = Toolkit.make(LookupIssue, CloseIssue)

const seen: Array<unknown> = []
const IssueToolsLive = IssueTools.toLayer({
  lookup_issue: (input) =>
    Effect.sync(() => {
      seen.push(input)
      return { title: `Title of ${input.key}`, state: "open" }
    }),
  close_issue: ({ key }) => Tool.reject("not_found", `Choose an issue key that exists; ${key} does not.`)
})

const apiKey = "sk-fake-codebuddy-7c1"

const driverFor = (baseUrl: string) => CodeBuddy.driver({ endpoint: { baseUrl, apiKey: Redacted.make(apiKey) } })

const completions = (server: ChatCompletionsServer.ChatCompletionsServer) => server.requests

/** What the CLI may write under a home directory, digested (absent entries included as such). */
const homeTraps = [".codebuddy", ".cache/dconf", ".local/share/CodeBuddyExtension"]
const homeDigest = (home: string) =>
  Effect.gen(function*() {
    const parts: Array<string> = []
    for (const entry of homeTraps) {
      const full = Path.join(home, entry)
      parts.push(`${entry}=${Fs.existsSync(full) ? yield* Harness.treeDigest(full) : "absent"}`)
    }
    return parts.join("\n")
  })

/** Every path under `dir` ending with `suffix` (relative to `dir`). */
const findUnder = (dir: string, suffix: string): ReadonlyArray<string> =>
  (Fs.readdirSync(dir, { recursive: true }) as Array<string>).filter((entry) => entry.endsWith(suffix))

/** Binds `127.0.0.1:port` (succeeds only when nothing listens there); released with the scope. */
const holdPort = (port: number) =>
  Effect.acquireRelease(
    Effect.async<Net.Server, Error>((resume) => {
      const server = Net.createServer()
      server.once("error", (error) => resume(Effect.fail(error)))
      server.listen(port, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
  )

describe("CodeBuddy agent end to end (real CLI)", () => {
  it.live(
    "host tools through the real gateway: results in the next model request, events, usage; nothing left, HOME untouched",
    () =>
      Effect.gen(function*() {
        // lookup_issue, then close_issue (rejected), then the final answer.
        const server = yield* ChatCompletionsServer.make({
          script: (request) => {
            switch (ChatCompletionsServer.toolResults(request).length) {
              case 0:
                return ChatCompletionsServer.callTool("lookup_issue", { key: "ISSUE-42" }, { text: "Looking it up." })
              case 1:
                return ChatCompletionsServer.callTool("close_issue", { key: "ISSUE-9" })
              default:
                return ChatCompletionsServer.text("ISSUE-42 is open; ISSUE-9 does not exist.", {
                  usage: { promptTokens: 120, completionTokens: 12 }
                })
            }
          }
        })
        const realHome = Os.homedir()
        const homeBefore = yield* homeDigest(realHome)
        const observed: Array<Harness.Observed> = []
        const sandbox = yield* Harness.sandbox
        // A git workspace: the CLI then writes `$HOME/.codebuddy/code-ratio/` (into the sibling).
        Cp.execFileSync("git", ["init", "-q", sandbox.workspace])
        Cp.execFileSync("git", [
          "-C",
          sandbox.workspace,
          "-c",
          "user.name=t",
          "-c",
          "user.email=t@t.invalid",
          "commit",
          "-q",
          "--allow-empty",
          "-m",
          "start"
        ])
        const sourceBefore = yield* Harness.treeDigest(sandbox.source)
        const started = performance.now()
        const { events, result, marker, trapped } = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: driverFor(server.baseUrl),
            definition: { instructions: "You triage issues. INSTRUCTIONS-7f2", skills: [], tools: IssueTools },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          const events = Array.from(yield* Stream.runCollect(agent.stream("Is ISSUE-42 open? Close ISSUE-9.")))
          const finished = events.at(-1)
          return {
            events,
            result: finished?._tag === "RunFinished" ? finished.result : undefined,
            marker: agent.marker,
            trapped: findUnder(sandbox.root, Path.join("home", ".codebuddy", "code-ratio"))
          }
        }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.recordingLayer(observed)]))
        console.log(`[codebuddy e2e] two host tool calls, make → close: ${(performance.now() - started).toFixed(0)} ms`)

        expect(seen).toContainEqual({ key: "ISSUE-42" })
        const tags = events.map((e) => e._tag)
        expect(tags[0]).toBe("RunStarted")
        expect(tags.at(-1)).toBe("RunFinished")
        expect(tags).toContain("SessionStarted")
        const calls = events.filter((e): e is Event.ToolCall => e._tag === "ToolCall")
        expect(calls.map((c) => [c.phase, c.name, c.source])).toEqual([
          ["start", "lookup_issue", "host"],
          ["end", "lookup_issue", "host"],
          ["start", "close_issue", "host"],
          ["end", "close_issue", "host"]
        ])
        expect(calls[0]!.input).toEqual({ key: "ISSUE-42" })
        expect(JSON.parse(calls[1]!.output as string)).toEqual({ title: "Title of ISSUE-42", state: "open" })
        // CodeBuddy Code drops the MCP result's `isError`; the rejection's text is the output.
        expect(calls[3]!.output).toContain("Choose an issue key that exists; ISSUE-9 does not.")
        const text = events.flatMap((e) => e._tag === "TextDelta" ? [e.text] : []).join("")
        expect(text).toBe("Looking it up.ISSUE-42 is open; ISSUE-9 does not exist.")
        expect(result?.text).toBe("ISSUE-42 is open; ISSUE-9 does not exist.")
        expect(result?.provider).toBe("codebuddy")
        expect(result?.usage?.inputTokens).toBeGreaterThan(0)
        expect(result?.effectiveTools).toEqual(["close_issue", "lookup_issue"])

        const requests = yield* completions(server)
        expect(requests).toHaveLength(3)
        expect(requests[0]!.headers["authorization"]).toBe(`Bearer ${apiKey}`)
        expect(ChatCompletionsServer.toolNames(requests[0]!)).toEqual(
          expect.arrayContaining(["mcp__tether__lookup_issue", "mcp__tether__close_issue"])
        )
        expect(ChatCompletionsServer.texts(requests[0]!, "system").join("\n")).toContain("INSTRUCTIONS-7f2")
        // The tool result reached the next model request.
        const lookedUp = ChatCompletionsServer.lastToolResults(requests[1]!)
        expect(lookedUp).toHaveLength(1)
        expect(lookedUp[0]!.text).toContain("Title of ISSUE-42")
        expect(ChatCompletionsServer.lastToolResults(requests[2]!)[0]!.text).toContain("not_found")

        // The CLI's home writes landed in the clone's sibling, never in the user's home.
        expect(trapped.length).toBeGreaterThan(0)
        expect(yield* homeDigest(realHome)).toBe(homeBefore)
        // Nothing left: no process, no clone, the token revoked, the source untouched.
        expect(yield* Harness.markedProcesses(marker)).toEqual([])
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
        expect(observed).toHaveLength(1)
        expect(yield* Harness.treeDigest(sandbox.source)).toBe(sourceBefore)
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "tool calls of successive model responses reusing one id: each call runs, start and end paired, the result",
    () =>
      Effect.gen(function*() {
        // Some OpenAI-compatible servers number each response's calls from `call_0`.
        const server = yield* ChatCompletionsServer.make({
          script: (request) => {
            switch (ChatCompletionsServer.toolResults(request).length) {
              case 0:
                return ChatCompletionsServer.callTool("lookup_issue", { key: "ISSUE-1" }, { id: "call_0" })
              case 1:
                return ChatCompletionsServer.callTool("lookup_issue", { key: "ISSUE-2" }, { id: "call_0" })
              default:
                return ChatCompletionsServer.text("Both are open.")
            }
          }
        })
        const sandbox = yield* Harness.sandbox
        seen.length = 0
        const { events, marker } = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: driverFor(server.baseUrl),
            definition: { instructions: "", skills: [], tools: IssueTools },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          const events = Array.from(yield* Stream.runCollect(agent.stream("Are ISSUE-1 and ISSUE-2 open?")))
          return { events, marker: agent.marker }
        }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.layer]))

        expect(seen).toEqual([{ key: "ISSUE-1" }, { key: "ISSUE-2" }])
        const calls = events.filter((e): e is Event.ToolCall => e._tag === "ToolCall")
        expect(calls.map((c) => [c.phase, c.callId, c.name])).toEqual([
          ["start", "call_0", "lookup_issue"],
          ["end", "call_0", "lookup_issue"],
          ["start", "call_0", "lookup_issue"],
          ["end", "call_0", "lookup_issue"]
        ])
        expect(calls.map((c) => c.phase === "start" ? c.input : JSON.parse(c.output as string).title)).toEqual([
          { key: "ISSUE-1" },
          "Title of ISSUE-1",
          { key: "ISSUE-2" },
          "Title of ISSUE-2"
        ])
        const finished = events.at(-1)
        expect(finished?._tag === "RunFinished" && finished.result.text).toBe("Both are open.")
        // The result's transcript holds both calls, each with its own input and output.
        const transcript = finished?._tag === "RunFinished" ? finished.result.transcript : []
        expect(
          transcript.flatMap((entry) =>
            entry._tag === "ToolCall" ? [[entry.callId, entry.input, JSON.parse(entry.output as string).title]] : []
          )
        ).toEqual([
          ["call_0", { key: "ISSUE-1" }, "Title of ISSUE-1"],
          ["call_0", { key: "ISSUE-2" }, "Title of ISSUE-2"]
        ])
        const requests = yield* completions(server)
        expect(requests).toHaveLength(3)
        expect(ChatCompletionsServer.toolResults(requests[2]!).map((r) => r.toolCallId)).toEqual(["call_0", "call_0"])
        expect(yield* Harness.markedProcesses(marker)).toEqual([])
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "two tool calls of one response sharing an id: the CLI merges them and never ends the turn; the run fails",
    () =>
      Effect.gen(function*() {
        // CodeBuddy Code reads the second call as more of the first (a tool named by both names),
        // prompts the model twice more, then stops without a result and without exiting.
        const server = yield* ChatCompletionsServer.make({
          script: () =>
            ChatCompletionsServer.callTools([
              { name: "lookup_issue", input: { key: "ISSUE-1" }, id: "call_0" },
              { name: "lookup_issue", input: { key: "ISSUE-2" }, id: "call_0" }
            ])
        })
        const sandbox = yield* Harness.sandbox
        seen.length = 0
        const events: Array<Event.Event> = []
        const started = performance.now()
        const { outcome, marker } = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: driverFor(server.baseUrl),
            definition: { instructions: "", skills: [], tools: IssueTools },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          const outcome = yield* agent.stream("Are ISSUE-1 and ISSUE-2 open?").pipe(
            Stream.runForEach((event) => Effect.sync(() => events.push(event))),
            // Without the parser's bound the run waits for the CLI forever (a TimeoutException here).
            Effect.timeout("30 seconds"),
            Effect.either
          )
          return { outcome, marker: agent.marker }
        }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.layer]))
        console.log(`[codebuddy e2e] merged tool calls, make → close: ${(performance.now() - started).toFixed(0)} ms`)

        const error = Either.isLeft(outcome) ? outcome.left : undefined
        expect(error?._tag).toBe("RunError")
        const merged = "Tool mcp__tether__lookup_issuemcp__tether__lookup_issue not found in agent cli."
        expect(error?._tag === "RunError" && [error.reason, error.detail]).toEqual([
          "ProviderFailed",
          `${merged} (CodeBuddy Code gave up after the model called a tool it does not have 3 times)`
        ])
        expect(seen).toEqual([])
        expect(events.filter((e) => e._tag === "ToolCall")).toEqual([])
        expect(events.flatMap((e) => e._tag === "Notice" ? [[e.kind, e.message]] : [])).toEqual(
          Array(3).fill(["tool_not_found", merged])
        )
        expect(events.at(-1)?._tag).toBe("RunFinished")
        expect(yield* completions(server)).toHaveLength(3)
        expect(yield* Harness.markedProcesses(marker)).toEqual([])
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "a thread resumes after the agent is rebuilt (new port, new token, the session store); a fork continues it",
    () =>
      Effect.gen(function*() {
        const server = yield* ChatCompletionsServer.make({
          script: (request) => ChatCompletionsServer.text(`answer ${request.index}`)
        })
        const sandbox = yield* Harness.sandbox
        const observed: Array<Harness.Observed> = []
        const build = Agent.make({
          driver: driverFor(server.baseUrl),
          definition: { instructions: "", skills: [], tools: IssueTools },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        const withAgent = <A, E>(body: (agent: Agent.Agent) => Effect.Effect<A, E>) =>
          build.pipe(
            Effect.flatMap(body),
            Effect.scoped,
            Effect.provide([IssueToolsLive, Harness.recordingLayer(observed)])
          )

        const started = performance.now()
        const first = yield* withAgent((agent) =>
          Effect.flatMap(agent.thread("tenant-42/issue-123"), (thread) => thread.run("first question"))
        )
        console.log(
          `[codebuddy e2e] one plain thread turn, make → close: ${(performance.now() - started).toFixed(0)} ms`
        )
        expect(first.text).toBe("answer 0")
        expect(first.session).toBeDefined()
        // The first endpoint is gone; holding its port forces the next listener elsewhere.
        const oldPort = Number(new URL(observed[0]!.url).port)
        yield* holdPort(oldPort)

        const { second, forked, snapshot } = yield* withAgent((agent) =>
          Effect.gen(function*() {
            const thread = yield* agent.thread("tenant-42/issue-123", { resumeOnly: true })
            const second = yield* thread.run("second question")
            expect(yield* Harness.probe({ url: observed[1]!.url, token: observed[0]!.token })).toBe(401)
            const forked = yield* Effect.flatMap(
              thread.fork("tenant-42/issue-123/fork"),
              (fork) => fork.run("fork question")
            )
            return { second, forked, snapshot: yield* thread.snapshot }
          })
        )
        expect(Number(new URL(observed[1]!.url).port)).not.toBe(oldPort)
        expect(Redacted.value(observed[1]!.token)).not.toBe(Redacted.value(observed[0]!.token))
        expect(second.session).toBe(first.session)
        expect(second.text).toBe("answer 1")
        expect(Option.getOrUndefined(snapshot)).toMatchObject({
          provider: "codebuddy",
          session: first.session,
          turns: 2
        })
        expect(forked.session).toBeDefined()
        expect(forked.session).not.toBe(first.session)

        const requests = yield* completions(server)
        expect(requests).toHaveLength(3)
        const conversation = (index: number) =>
          ChatCompletionsServer.messages(requests[index]!).filter((m) => m.role !== "system")
            .map((
              m
            ) => [m.role, m.role === "user" ? (/<user_query>([\s\S]*)<\/user_query>/.exec(m.text)?.[1] ?? "") : m.text])
        expect(conversation(1)).toEqual([
          ["user", "first question"],
          ["assistant", "answer 0"],
          ["user", "second question"]
        ])
        expect(conversation(2)).toEqual([
          ["user", "first question"],
          ["assistant", "answer 0"],
          ["user", "second question"],
          ["assistant", "answer 1"],
          ["user", "fork question"]
        ])
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
      }).pipe(Effect.scoped, Effect.provide(ThreadStore.layerMemory)),
    120_000
  )

  // CodeBuddy Code names MCP tools as Claude Code does: each character outside [A-Za-z0-9_-] becomes `_`.
  it.live(
    "a hosted tool whose name holds a '.' is allowed, runs, and its events carry the catalog's name",
    () =>
      Effect.gen(function*() {
        const server = yield* ChatCompletionsServer.make({
          script: (request) =>
            ChatCompletionsServer.toolResults(request).length === 0
              ? ChatCompletionsServer.callTool("mcp__tether__issue_lookup", { key: "ISSUE-1" })
              : ChatCompletionsServer.text("done")
        })
        const sandbox = yield* Harness.sandbox
        dottedCalls.length = 0
        const events = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: driverFor(server.baseUrl),
            definition: { instructions: "", skills: [], tools: Dotted },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          return Array.from(yield* Stream.runCollect(agent.stream("Look up ISSUE-1.")))
        }).pipe(Effect.scoped, Effect.provide([DottedLive, Harness.layer]))
        expect(dottedCalls).toEqual(["ISSUE-1"])
        const calls = events.filter((e): e is Event.ToolCall => e._tag === "ToolCall")
        expect(calls.map((c) => [c.phase, c.name, c.source])).toEqual([
          ["start", "issue.lookup", "host"],
          ["end", "issue.lookup", "host"]
        ])
        expect(events.at(-1)?._tag).toBe("RunFinished")
      }).pipe(Effect.scoped),
    90_000
  )
})
