/**
 * The ordered close of DESIGN §6 and §9: deadlines on the Clock, pending steps, CLIs finishing
 * after their terminal record, a store or a handler that never answers, defects kept whole.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, ThreadStore } from "@tether/core"
import type { Driver, Event } from "@tether/core"
import { FakeCli, Harness, Reference } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import * as NodeProcess from "node:process"
import * as Close from "../src/internal/close.js"

describe("the closer", () => {
  it.effect("a deadline on the Clock leaves the step in progress and every later step pending; a later call continues", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const ran: Array<string> = []
      const step = (name: string, wait: Effect.Effect<void> = Effect.void) => ({
        name,
        run: Effect.zipRight(wait, Effect.sync(() => ran.push(name)))
      })
      const removal = yield* Close.once(Effect.sync(() => ran.push("removal")).pipe(Effect.delay("5 seconds")))
      const closer = yield* Close.make("agent-1", [
        step("first"),
        step("waits", Deferred.await(gate)),
        { name: "removal", run: removal },
        step("last")
      ])
      const first = yield* Effect.fork(Effect.flip(closer.close("10 seconds")))
      yield* TestClock.adjust("10 seconds")
      const timeout = yield* Fiber.join(first)
      expect(timeout).toMatchObject({ _tag: "CloseTimeout", agent: "agent-1", pending: ["waits", "removal", "last"] })
      expect(ran).toEqual(["first"])
      expect(closer.done()).toBe(false)

      // The next call continues at the pending step; a removal cut by its deadline is not
      // started twice: the later call waits for the same one.
      yield* Deferred.succeed(gate, undefined)
      const second = yield* Effect.fork(Effect.flip(closer.close("1 second")))
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(second)).toMatchObject({ pending: ["removal", "last"] })
      const third = yield* Effect.fork(closer.close("10 seconds"))
      yield* TestClock.adjust("5 seconds")
      yield* Fiber.join(third)
      expect(ran).toEqual(["first", "waits", "removal", "last"])
      expect(closer.done()).toBe(true)
      // Completed: a no-op, even with a zero deadline.
      yield* closer.close(0)
    }))

  it.effect("concurrent calls are serialized, and waiting for the previous call counts against the deadline", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const closer = yield* Close.make("agent-2", [{ name: "slow", run: Deferred.await(gate) }])
      const first = yield* Effect.fork(closer.close("1 minute"))
      const second = yield* Effect.fork(Effect.flip(closer.close("2 seconds")))
      yield* TestClock.adjust("2 seconds")
      expect(yield* Fiber.join(second)).toMatchObject({ pending: ["slow"] })
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(first)
      expect(closer.done()).toBe(true)
    }))
})

const withSandbox = <A, E>(body: (sandbox: Harness.Sandbox) => Effect.Effect<A, E, Agent.Requirements>) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    return yield* body(sandbox).pipe(Effect.scoped, Effect.provide(Harness.layer))
  }).pipe(Effect.scoped)

const options = (sandbox: Harness.Sandbox, driver: Driver.Driver) => ({
  driver,
  definition: { instructions: "", skills: [], tools: Toolkit.empty },
  workspace: sandbox.workspace,
  profile: sandbox.selection
})

/** A provider that answers at once, then keeps working `ms` and records whether it was signalled. */
const finishingDriver = (record: string, ms: number): Driver.Driver => {
  const terminal = Reference.answer("done").at(-1)
  const program = `
    const fs = require("fs")
    process.on("SIGTERM", () => { fs.writeFileSync(process.argv[1], "signalled"); process.exit(143) })
    process.stdout.write(${JSON.stringify(JSON.stringify(terminal))} + "\\n")
    setTimeout(() => { fs.writeFileSync(process.argv[1], "finished"); process.exit(0) }, ${ms})
  `
  const reference = Reference.driver()
  return {
    ...reference,
    prepare: (request) =>
      Effect.succeed({
        command: NodeProcess.execPath,
        args: ["-e", program, record],
        env: { PATH: request.hostEnv["PATH"] ?? "/usr/bin:/bin" },
        cwd: request.workspace,
        stdin: undefined,
        files: []
      })
  }
}

describe("Agent close", () => {
  it.live("a CLI that delivered its terminal record finishes (within its exit grace) before close signals it", () =>
    withSandbox((sandbox) =>
      Effect.gen(function*() {
        const record = NodePath.join(sandbox.base, "record")
        const agent = yield* Agent.make({
          ...options(sandbox, finishingDriver(record, 600)),
          processes: { exitGrace: "10 seconds", killGrace: "300 millis" }
        })
        expect((yield* agent.run("x")).text).toBe("done")
        yield* agent.close()
        expect(Fs.readFileSync(record, "utf8")).toBe("finished")
        expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
      })
    ))

  it.live(
    "a deadline expiring while a run is undrained leaves the clone and the token alone, names the pending steps; a later close finishes",
    () =>
      Effect.gen(function*() {
        const observed: Array<Harness.Observed> = []
        const sandbox = yield* Harness.sandbox
        yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            ...options(sandbox, FakeCli.driver()),
            processes: { exitGrace: "20 seconds", killGrace: "300 millis" }
          })
          // Answered, then still busy (writing its session, say) for 1.5 s.
          const result = yield* agent.run(
            FakeCli.script({ op: "result", text: "answered" }, { op: "linger", ms: 1500 })
          )
          expect(result.text).toBe("answered")
          const timeout = yield* Effect.flip(agent.close({ timeout: "300 millis" }))
          expect(timeout.pending).toEqual(["drain-runs", "reap-leftovers", "remove-clones", "revoke-registration"])
          expect(yield* Harness.entries(sandbox.root)).toHaveLength(1)
          expect(yield* Harness.probe(observed[0]!)).toBe(200)
          expect((yield* Effect.flip(agent.run("late")))._tag).toBe("AgentClosed")
          yield* agent.close()
          expect(yield* Harness.entries(sandbox.root)).toEqual([])
          expect(yield* Harness.probe(observed[0]!)).not.toBe(200)
          expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
        }).pipe(Effect.scoped, Effect.provide(Harness.recordingLayer(observed)))
      }).pipe(Effect.scoped)
  )

  it.live(
    "a consumer that stops reading cannot hold the close: the canceled run's last events go past the buffer",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          // A buffer of one batch, and a consumer that takes the first event and then stops reading
          // without ending its stream (a remote reader that stalled): the run fills the buffer and
          // waits for it, in its body or with its RunFinished.
          const agent = yield* Agent.make({
            ...options(sandbox, FakeCli.driver()),
            events: { buffer: 1, blocking: true }
          })
          const stalled = yield* Deferred.make<void>()
          const reader = yield* Effect.fork(
            Stream.runForEach(
              agent.stream(FakeCli.script(
                { op: "text", text: "a" },
                { op: "text", text: "b" },
                { op: "text", text: "c" },
                { op: "result", text: "abc" }
              )),
              () => Effect.zipRight(Deferred.succeed(stalled, undefined), Effect.never)
            )
          )
          yield* Deferred.await(stalled)
          yield* Effect.sleep("1 second")
          const closed = yield* Effect.either(agent.close({ timeout: "5 seconds" }))
          expect(closed._tag).toBe("Right")
          expect(yield* Harness.entries(sandbox.root)).toEqual([])
          expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
          yield* Fiber.interrupt(reader)
        })
      ),
    30_000
  )

  it.live("a ThreadStore that never answers a commit cannot hold the scope past the close deadline", () =>
    withSandbox((sandbox) =>
      Effect.gen(function*() {
        const committing = yield* Deferred.make<void>()
        const stuck = Layer.effect(
          ThreadStore.ThreadStore,
          Effect.map(ThreadStore.ThreadStore, (store) => ({
            ...store,
            commit: () => Effect.zipRight(Deferred.succeed(committing, undefined), Effect.never)
          }))
        ).pipe(Layer.provide(ThreadStore.layerMemory))
        const turn = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            ...options(sandbox, Reference.driver({ capabilities: { resume: true } })),
            closeTimeout: "1 second"
          })
          const thread = yield* agent.thread("t")
          const turn = yield* Effect.fork(thread.run("hello"))
          yield* Deferred.await(committing)
          return turn
        }).pipe(Effect.scoped, Effect.provide(stuck), Effect.timeoutOption("20 seconds"))
        expect(Option.isSome(turn)).toBe(true)
        const exit = yield* Fiber.await(Option.getOrThrow(turn))
        expect(Exit.isFailure(exit) && String(exit.cause)).toContain("Canceled")
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
      })
    ))

  it.live("a tool handler that ignores interruption cannot hold the scope past the close deadline", () =>
    withSandbox((sandbox) =>
      Effect.gen(function*() {
        const Stuck = Tool.make("stuck", {
          description: "Never answers, and ignores interruption.",
          input: {},
          output: Schema.Struct({ ok: Schema.Boolean })
        })
        const called = yield* Deferred.make<void>()
        const StuckLive = Toolkit.make(Stuck).toLayer({
          stuck: () => Effect.zipRight(Deferred.succeed(called, undefined), Effect.uninterruptible(Effect.never))
        })
        const left = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            ...options(sandbox, FakeCli.driver()),
            definition: { instructions: "", skills: [], tools: Toolkit.make(Stuck) },
            closeTimeout: "1 second",
            processes: { killGrace: "300 millis" }
          })
          yield* agent.stream(FakeCli.script({ op: "call", tool: "stuck" })).pipe(Stream.runDrain, Effect.fork)
          yield* Deferred.await(called)
        }).pipe(Effect.scoped, Effect.provide(StuckLive), Effect.timeoutOption("20 seconds"))
        expect(Option.isSome(left)).toBe(true)
      })
    ))

  it.live("a defect in a driver's parser stays a defect, logged with its whole cause, after RunFinished", () =>
    withSandbox((sandbox) =>
      Effect.gen(function*() {
        const bug = new Error("parser bug 7f3a")
        const reference = Reference.driver()
        const broken: Driver.Driver = {
          ...reference,
          parse: (lines, context) =>
            reference.parse(lines, context).pipe(Stream.map((output) => {
              if (output._tag === "Terminal") throw bug
              return output
            }))
        }
        const logged: Array<{ readonly level: string; readonly cause: Cause.Cause<unknown> }> = []
        const logger = Logger.make(({ cause, logLevel }) => {
          logged.push({ level: logLevel.label, cause })
        })
        const agent = yield* Agent.make(options(sandbox, broken))
        const events: Array<Event.Event> = []
        const exit = yield* agent.stream("hello").pipe(
          Stream.runForEach((event) => Effect.sync(() => events.push(event))),
          Effect.exit,
          Effect.provide(Logger.replace(Logger.defaultLogger, logger))
        )
        expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
        expect(Exit.isFailure(exit) && Cause.squash(exit.cause)).toBe(bug)
        const last = events.at(-1)
        expect(last?._tag === "RunFinished" && [last.outcome, last.reason]).toEqual(["failure", "Defect"])
        const error = logged.find((entry) => entry.level === "ERROR")
        expect(error !== undefined && Cause.squash(error.cause)).toBe(bug)
        expect(error !== undefined && Cause.pretty(error.cause)).toContain("parser bug 7f3a")
        // The same through run: the defect, not a RunError.
        const run = yield* Effect.exit(agent.run("again"))
        expect(Exit.isFailure(run) && Cause.isDie(run.cause)).toBe(true)
      })
    ))
})

const hangOrAnswer = (prompt: string): ReadonlyArray<Reference.Step> =>
  prompt.includes("hang")
    ? [
      { _tag: "SessionStarted", sessionId: "s-1", model: "reference-model" },
      { _tag: "TextDelta", text: "a" },
      { _tag: "TextDelta", text: "b" },
      { _tag: "TextDelta", text: "c" },
      { _tag: "$sleep", ms: 60_000 }
    ]
    : Reference.answer(prompt)

const closeFromConsumer = (live: boolean, where: "stream" | "events") =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const observed: Array<Harness.Observed> = []
    const outcome = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver: Reference.driver({ live, respond: hangOrAnswer }),
        definition: { instructions: "", tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        events: { buffer: 1, blocking: true },
        processes: { killGrace: "500 millis" },
        closeTimeout: "20 seconds"
      })
      const seen: Array<Event.Event> = []
      let closedIn = -1
      const closeOnce = Effect.suspend(() => {
        if (closedIn !== -1) return Effect.void
        closedIn = 0
        const started = Date.now()
        return Effect.map(Effect.either(agent.close()), (r) => {
          closedIn = Date.now() - started
          expect(Either.isRight(r), String(Either.isLeft(r) ? r.left : "")).toBe(true)
        })
      })
      let stream: Stream.Stream<Event.Event, unknown>
      if (live) {
        const thread = yield* agent.thread("k")
        if (where === "events") {
          const watcher = yield* thread.events.pipe(
            Stream.runForEach((e) => e._tag === "TextDelta" ? closeOnce : Effect.void),
            Effect.fork
          )
          yield* Effect.sleep("50 millis")
          const turn = yield* Effect.either(
            Stream.runForEach(thread.stream("hang"), (e) => Effect.sync(() => seen.push(e)))
          )
          yield* Fiber.join(watcher).pipe(Effect.timeout("20 seconds"))
          return { turn, closedIn, seen, marker: agent.marker }
        }
        stream = thread.stream("hang")
      } else {
        stream = agent.stream("hang")
      }
      const turn = yield* Effect.either(
        Stream.runForEach(stream, (e) =>
          Effect.zipRight(
            Effect.sync(() => seen.push(e)),
            e._tag === "TextDelta" ? closeOnce : Effect.void
          ))
      ).pipe(Effect.timeout("25 seconds"))
      return { turn, closedIn, seen, marker: agent.marker }
    }).pipe(
      Effect.scoped,
      Effect.provide(Layer.mergeAll(Harness.recordingLayer(observed), ThreadStore.layerMemory))
    )
    expect(outcome.closedIn).toBeGreaterThanOrEqual(0)
    expect(outcome.closedIn).toBeLessThan(10_000)
    expect(Either.isLeft(outcome.turn)).toBe(true)
    expect(Either.isLeft(outcome.turn) && (outcome.turn.left as { _tag: string })._tag).toMatch(/RunError|AgentClosed/)
    expect(yield* Harness.markedProcesses(outcome.marker)).toEqual([])
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
  }).pipe(Effect.scoped)

// docs/concepts.md: `agent.close()` is "safe to call concurrently and from inside a stream consumer".
describe("close from inside a consumer (blocking events, buffer 1)", () => {
  it.live(
    "one-shot run, close from the run's own consumer (blocking, buffer 1)",
    () => closeFromConsumer(false, "stream"),
    40_000
  )
  it.live(
    "live thread turn, close from the turn's own consumer (blocking, buffer 1)",
    () => closeFromConsumer(true, "stream"),
    40_000
  )
  it.live(
    "live thread turn, close from a thread.events consumer (blocking, buffer 1)",
    () => closeFromConsumer(true, "events"),
    40_000
  )
})
