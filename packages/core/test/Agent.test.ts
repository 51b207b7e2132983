import { describe, expect, it } from "@effect/vitest"
import { Agent, AgentError, Approval, type Event } from "@tether/core"
import { Gateway } from "@tether/gateway"
import { FakeCli, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String, state: Schema.String }),
  revision: "lookup_issue/v1"
})
const IssueTools = Toolkit.make(LookupIssue)
const seen: Array<string> = []
const IssueToolsLive = IssueTools.toLayer({
  lookup_issue: ({ key }) =>
    Effect.sync(() => {
      seen.push(key)
      return { title: `Title of ${key}`, state: "open" }
    })
})

const makeAgent = (sandbox: Harness.Sandbox, options: Partial<Agent.Options<typeof IssueTools>> = {}) =>
  Agent.make({
    driver: FakeCli.driver(),
    definition: { instructions: "You triage issues.", skills: [], tools: IssueTools },
    workspace: sandbox.workspace,
    profile: sandbox.selection,
    ...options
  })

/**
 * Runs `body` with a fresh agent in a fresh sandbox, closes the agent through its scope, then
 * checks that nothing is left: no marked process, no clone, the token revoked, the source
 * profile byte-identical.
 */
const withAgent = <A, E>(
  body: (agent: Agent.Agent) => Effect.Effect<A, E, Scope.Scope>,
  options: Partial<Agent.Options<typeof IssueTools>> = {}
) =>
  Effect.gen(function*() {
    const observed: Array<Harness.Observed> = []
    const sandbox = yield* Harness.sandbox
    const before = yield* Harness.treeDigest(sandbox.source)
    const [agent, value] = yield* Effect.gen(function*() {
      // Another registration keeps the listener up, so the closed agent's token is seen to get 401.
      const gateway = yield* Gateway.Gateway
      yield* gateway.register(yield* Toolkit.executor(Toolkit.empty))
      const agent = yield* makeAgent(sandbox, options)
      expect(observed).toHaveLength(2)
      const token = observed[1]!
      expect(yield* Harness.probe(token)).toBe(200)
      const value = yield* body(agent)
      // Closed (by the body or here), while the gateway keeps serving others: the token gets 401.
      yield* agent.close()
      expect(yield* Harness.probe(token)).toBe(401)
      return [agent, value] as const
    }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.recordingLayer(observed)]))
    expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    expect(yield* Harness.treeDigest(sandbox.source)).toBe(before)
    return value
  }).pipe(Effect.scoped)

const failure = <A>(
  effect: Effect.Effect<A, AgentError.RunError | AgentError.AgentClosed | AgentError.InvalidTurn, Scope.Scope>
) =>
  Effect.flip(effect).pipe(
    Effect.map((error) => {
      if (error._tag !== "RunError") throw new Error(`expected a RunError, got ${error._tag}`)
      return error
    })
  )

describe("Agent through the fake CLI", () => {
  it.live("a run calls a host tool through the real gateway and returns the result", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        const events = Array.from(
          yield* agent.stream(FakeCli.script(
            { op: "call", tool: "lookup_issue", input: { key: "ISSUE-42" } },
            { op: "text", text: "ISSUE-42 is open." }
          )).pipe(Stream.runCollect)
        )
        const result = yield* agent.run("hello")
        const tags = events.map((event) => event._tag)
        expect(tags[0]).toBe("RunStarted")
        expect(tags[tags.length - 1]).toBe("RunFinished")
        expect(tags.filter((tag) => tag === "RunStarted")).toHaveLength(1)
        expect(events.map((event) => event.sequence)).toEqual(events.map((_, i) => i))
        const calls = events.filter((event) => event._tag === "ToolCall")
        expect(calls.map((call) => [call.phase, call.name, call.source])).toEqual([
          ["start", "lookup_issue", "host"],
          ["end", "lookup_issue", "host"]
        ])
        expect(calls[1]!.output).toEqual({ title: "Title of ISSUE-42", state: "open" })
        expect(seen).toContain("ISSUE-42")
        const finished = events[events.length - 1]!
        expect(finished._tag === "RunFinished" && finished.result.text).toBe("ISSUE-42 is open.")
        expect(finished._tag === "RunFinished" && finished.result.transcript.map((entry) => entry._tag)).toEqual([
          "ToolCall",
          "Message"
        ])
        expect(result.text).toBe("echo: hello")
        expect(result.provider).toBe("fake-cli")
        expect(result.effectiveTools).toEqual(["lookup_issue"])
        expect(result.instructions).toBe("You triage issues.")
      })
    ))

  it.live("a crash mid-turn ends in ExitedWithoutResult with the partial result", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        const error = yield* failure(
          agent.run(FakeCli.script({ op: "text", text: "partial" }, { op: "crash", code: 3 }))
        )
        expect(error.reason).toBe("ExitedWithoutResult")
        expect(error.exitCode).toBe(3)
        expect(error.result.transcript.map((entry) => entry._tag === "Message" && entry.text)).toEqual(["partial"])
        expect(error.result.text).toBe("partial")
        expect(error.result.raw.stderr).toContain("crashing mid-turn")
      })
    ))

  it.live("a CLI that exits before any output ends in ExitedWithoutResult", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        const error = yield* failure(agent.run(FakeCli.script({ op: "exit-early", code: 7 })))
        expect(error.reason).toBe("ExitedWithoutResult")
        expect(error.exitCode).toBe(7)
        expect(error.result.raw.stdoutBytes).toBe(0)
        expect(error.result.raw.stderr).toContain("exiting before output")
      })
    ))

  it.live("a failed terminal record ends in ProviderFailed", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        const error = yield* failure(agent.run(FakeCli.script({ op: "result", ok: false, error: "model overloaded" })))
        expect(error.reason).toBe("ProviderFailed")
        expect(error.detail).toBe("model overloaded")
        expect(error.result.raw.terminal).toMatchObject({ type: "result", ok: false })
      })
    ))

  it.live("malformed lines become notices; without a terminal record the run fails", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        const events = yield* agent.stream(FakeCli.script({ op: "malformed" }, { op: "text", text: "fine" })).pipe(
          Stream.runCollect
        )
        expect(Array.from(events).some((event) => event._tag === "Notice" && event.kind === "malformed")).toBe(true)
        const error = yield* failure(agent.run(FakeCli.script({ op: "malformed" }, { op: "no-result" })))
        expect(error.reason).toBe("ExitedWithoutResult")
        expect(error.exitCode).toBe(0)
        expect(error.result.raw.stdout).toContain("this is {not json")
      })
    ))

  it.live("a line over the bound ends in OutputLimit", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        const error = yield* failure(
          agent.run(FakeCli.script({ op: "huge", bytes: 2 * 1024 * 1024 }, { op: "sleep", ms: 5000 }))
        )
        expect(error.reason).toBe("OutputLimit")
        expect(error.result.raw.stdout.length).toBeLessThanOrEqual(64 * 1024)
      }), { limits: { maxLineBytes: 1024 * 1024, maxRawBytes: 64 * 1024 } }))

  it.live("a stderr flood is drained and kept bounded", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        const result = yield* agent.run(
          FakeCli.script({ op: "stderr", bytes: 4 * 1024 * 1024 }, { op: "text", text: "done" })
        )
        expect(result.text).toBe("done")
        // The result is a snapshot taken at the terminal record: everything written to stderr
        // before it was read, except what may still sit in the pipe (64 KiB).
        expect(result.raw.stderrBytes).toBeGreaterThanOrEqual(4 * 1024 * 1024 - 64 * 1024)
        expect(result.raw.stderr.length).toBeLessThanOrEqual(64 * 1024)
      }), { limits: { maxRawBytes: 64 * 1024 } }))

  it.live("grandchildren, in the group and in their own session, are reaped at close", () =>
    Effect.gen(function*() {
      const pids = yield* withAgent((agent) =>
        Effect.gen(function*() {
          const events = yield* agent.stream(FakeCli.script(
            { op: "grandchild" },
            { op: "grandchild", setsid: true },
            { op: "text", text: "spawned" }
          )).pipe(Stream.runCollect)
          const pids = Array.from(events).flatMap((event) =>
            event._tag === "Notice" && event.kind === "grandchild" ? [Number(event.message)] : []
          )
          expect(pids).toHaveLength(2)
          return pids
        })
      )
      for (const pid of pids) expect(yield* Harness.isAlive(pid)).toBe(false)
    }))

  it.live("a CLI ignoring SIGTERM after its result does not delay the result and is killed", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        const started = Date.now()
        const result = yield* agent.run(FakeCli.script({ op: "result", text: "answered" }, { op: "hang" }))
        expect(result.text).toBe("answered")
        expect(Date.now() - started).toBeLessThan(5000)
        yield* agent.close()
      }), { processes: { exitGrace: "100 millis", killGrace: "200 millis" } }))

  it.live("a hanging run is canceled by close: RunFinished(canceled), then RunError Canceled", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        const collected: Array<string> = []
        const consumer = yield* agent.stream(FakeCli.script({ op: "text", text: "before" }, { op: "hang" })).pipe(
          Stream.runForEach((event) => Effect.sync(() => collected.push(event._tag))),
          Effect.flip,
          Effect.fork
        )
        while (!collected.includes("Notice")) yield* Effect.sleep("20 millis")
        yield* agent.close()
        const error = yield* Fiber.join(consumer)
        expect(error._tag).toBe("RunError")
        expect(error._tag === "RunError" && error.reason).toBe("Canceled")
        expect(error._tag === "RunError" && error.result.text).toBe("before")
        expect(collected[collected.length - 1]).toBe("RunFinished")
        const after = yield* Effect.flip(agent.run("late"))
        expect(after._tag).toBe("AgentClosed")
      }), { processes: { killGrace: "200 millis" } }))

  it.live("a turn's cancel ends the run while its consumer reads RunFinished(canceled); the process is gone", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        const cancel = yield* Deferred.make<void>()
        const collected: Array<Event.Event> = []
        const consumer = yield* agent.stream({
          input: FakeCli.script({ op: "text", text: "before" }, { op: "hang" }),
          cancel: Deferred.await(cancel)
        }).pipe(
          Stream.runForEach((event) => Effect.sync(() => collected.push(event))),
          Effect.flip,
          Effect.fork
        )
        while (!collected.some((event) => event._tag === "Notice")) yield* Effect.sleep("20 millis")
        yield* Deferred.succeed(cancel, undefined)
        const error = yield* Fiber.join(consumer)
        expect(error._tag === "RunError" && error.reason).toBe("Canceled")
        const last = collected[collected.length - 1]!
        expect(last._tag === "RunFinished" && last.outcome).toBe("canceled")
        expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
        // The agent stays open: the next turn runs.
        expect((yield* agent.run(FakeCli.script({ op: "result", text: "next" }))).text).toBe("next")
      }), { processes: { killGrace: "200 millis" } }))

  // `run` reads no events: its end is its fiber's. Cancel, close and its caller leaving still end it.
  /** Writes "before", calls the host tool with `key`, then hangs. */
  const hanging = (key: string) =>
    FakeCli.script({ op: "text", text: "before" }, { op: "call", tool: "lookup_issue", input: { key } }, { op: "hang" })
  /** Waits until the fake CLI called the host tool (its output before the call was written first). */
  const called = (key: string) =>
    Effect.gen(function*() {
      while (!seen.includes(key)) yield* Effect.sleep("20 millis")
      // The text line before the call went through the pipe before the call's request was sent.
      yield* Effect.sleep("200 millis")
    })

  it.live("run: a turn's cancel ends it in RunError Canceled with the partial result; the process is gone", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        const cancel = yield* Deferred.make<void>()
        const run = yield* agent.run({
          input: hanging("CANCEL-1"),
          cancel: Deferred.await(cancel)
        }).pipe(Effect.flip, Effect.fork)
        yield* called("CANCEL-1")
        yield* Deferred.succeed(cancel, undefined)
        const error = yield* Fiber.join(run)
        expect(error._tag === "RunError" && error.reason).toBe("Canceled")
        expect(error._tag === "RunError" && error.result.text).toBe("before")
        expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
        // The agent runs on.
        expect((yield* agent.run(FakeCli.script({ op: "result", text: "after" }))).text).toBe("after")
      }), { processes: { killGrace: "200 millis" } }))

  it.live("run: close cancels it (RunError Canceled with the partial result), then runs are refused", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        const run = yield* agent.run(hanging("CLOSE-1")).pipe(Effect.flip, Effect.fork)
        yield* called("CLOSE-1")
        yield* agent.close()
        const error = yield* Fiber.join(run)
        expect(error._tag === "RunError" && error.reason).toBe("Canceled")
        expect(error._tag === "RunError" && error.result.text).toBe("before")
        expect((yield* Effect.flip(agent.run("late")))._tag).toBe("AgentClosed")
      }), { processes: { killGrace: "200 millis" } }))

  it.live("run: a caller that leaves interrupts it; its process is gone when the interruption returns", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        const run = yield* agent.run(hanging("LEAVE-1")).pipe(Effect.fork)
        yield* called("LEAVE-1")
        expect(yield* Harness.markedProcesses(agent.marker)).toHaveLength(1)
        const exit = yield* Fiber.interrupt(run)
        expect(exit._tag === "Failure" && Cause.isInterruptedOnly(exit.cause)).toBe(true)
        expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
        expect((yield* agent.run(FakeCli.script({ op: "result", text: "after" }))).text).toBe("after")
      }), { processes: { killGrace: "200 millis" } }))

  it.live("a driver's prepare runs in its run's span, not in the span Agent.make ran in", () =>
    Effect.gen(function*() {
      const fake = FakeCli.driver()
      const spans: Array<string> = []
      const driver: typeof fake = {
        ...fake,
        prepare: (request) =>
          Effect.currentSpan.pipe(
            Effect.map((span) => span.name),
            Effect.orElseSucceed(() => "no span"),
            Effect.flatMap((name) => {
              spans.push(name)
              return fake.prepare(request)
            })
          )
      }
      const result = yield* withAgent((agent) => agent.run(FakeCli.script({ op: "result", text: "done" })), { driver })
      expect(result.text).toBe("done")
      expect(spans).toEqual(["Run.execute"])
    }))

  it.live("a one-shot run's approver registration closes with its run: gone when its RunFinished is read", () =>
    Effect.gen(function*() {
      const observed: Array<Harness.Observed> = []
      const sandbox = yield* Harness.sandbox
      yield* Effect.gen(function*() {
        // Another registration keeps the listener up, so a closed registration is seen to get 401.
        const gateway = yield* Gateway.Gateway
        yield* gateway.register(yield* Toolkit.executor(Toolkit.empty))
        const fake = FakeCli.driver()
        const driver: typeof fake = {
          ...fake,
          approvals: {
            tool: {
              name: "approve",
              description: "Asks the host.",
              inputSchema: { type: "object" },
              ask: () => "not asked here",
              answer: () => ({ behavior: "deny" })
            }
          }
        }
        const agent = yield* Agent.make({
          driver,
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection,
          approvals: { handler: () => Effect.succeed(Approval.allow) }
        })
        expect(observed).toHaveLength(2)
        // Each run registers its approver on the gateway; once its RunFinished is read, that registration is closed.
        const atFinish: Array<number> = []
        yield* agent.stream(FakeCli.script({ op: "result", text: "streamed" })).pipe(
          Stream.runForEach((event) =>
            event._tag === "RunFinished"
              ? Effect.flatMap(Harness.probe(observed[2]!), (status) => Effect.sync(() => atFinish.push(status)))
              : Effect.void
          )
        )
        expect(observed).toHaveLength(3)
        expect(atFinish).toEqual([401])
        expect((yield* agent.run(FakeCli.script({ op: "result", text: "ran" }))).text).toBe("ran")
        expect(observed).toHaveLength(4)
        expect(yield* Harness.probe(observed[3]!)).toBe(401)
        // The agent's own registration is still open.
        expect(yield* Harness.probe(observed[1]!)).toBe(200)
      }).pipe(Effect.scoped, Effect.provide(Harness.recordingLayer(observed)))
      expect(yield* Harness.entries(sandbox.root)).toEqual([])
    }).pipe(Effect.scoped))

  it.live("a consumer that stops early cancels the run and its process", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        const first = yield* agent.stream(FakeCli.script({ op: "text", text: "one" }, { op: "sleep", ms: 60000 })).pipe(
          Stream.filter((event) => event._tag === "Message"),
          Stream.take(1),
          Stream.runCollect
        )
        expect(Array.from(first).map((event) => event._tag)).toEqual(["Message"])
        expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
      })
    ))

  it.live("a crashed CLI whose grandchild holds stdout open still ends, and the grandchild is reaped", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        const started = Date.now()
        const error = yield* failure(agent.run(FakeCli.script(
          { op: "grandchild", holdStdout: true },
          { op: "grandchild", holdStdout: true, setsid: true },
          { op: "text", text: "partial" },
          { op: "crash", code: 5 }
        )))
        expect(error.reason).toBe("ExitedWithoutResult")
        expect(error.exitCode).toBe(5)
        expect(error.result.text).toBe("partial")
        expect(Date.now() - started).toBeLessThan(10_000)
      }), { processes: { killGrace: "300 millis" } }))
})
