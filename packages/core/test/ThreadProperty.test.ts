import { describe, expect, it } from "@effect/vitest"
import type { Agent, Event, Result } from "@tether/core"
import { ThreadStore } from "@tether/core"
import { FakeCli, Harness } from "@tether/testing"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as ShellCli from "./fixtures/shellCli.js"
import * as Threads from "./fixtures/threads.js"
import { watch as watchEvents } from "./fixtures/threadTest.js"

const keys = ["a", "b\u0000", "ç/😀"] as const
type Key = typeof keys[number]
type Outcome = "success" | "failure" | "crash" | "cancel"
/** Which agent runs a turn: the base one, or one whose model differs (another fingerprint). */
type Who = "base" | "other"

type Op =
  | { readonly _tag: "Run"; readonly key: Key; readonly outcome: Outcome; readonly who: Who }
  | { readonly _tag: "Concurrent"; readonly key: Key; readonly outcomes: readonly [Outcome, Outcome] }
  | { readonly _tag: "Fork"; readonly from: Key; readonly to: Key }
  | { readonly _tag: "ResumeOnly"; readonly key: Key }
  | { readonly _tag: "Strict"; readonly key: Key; readonly who: Who }
  | { readonly _tag: "Reject"; readonly key: Key }
  | { readonly _tag: "CloseThread"; readonly key: Key; readonly midTurn: boolean }
  | { readonly _tag: "CloseAgent" }

const key = FastCheck.constantFrom(...keys)
const who = FastCheck.constantFrom<Who>("base", "base", "other")
const outcome = FastCheck.constantFrom<Outcome>("success", "success", "failure", "crash", "cancel")
const op: FastCheck.Arbitrary<Op> = FastCheck.oneof(
  { arbitrary: FastCheck.record({ _tag: FastCheck.constant("Run" as const), key, outcome, who }), weight: 4 },
  FastCheck.record({
    _tag: FastCheck.constant("Concurrent" as const),
    key,
    outcomes: FastCheck.tuple(outcome, outcome)
  }),
  FastCheck.record({ _tag: FastCheck.constant("Fork" as const), from: key, to: key }),
  FastCheck.record({ _tag: FastCheck.constant("ResumeOnly" as const), key }),
  FastCheck.record({ _tag: FastCheck.constant("Strict" as const), key, who }),
  FastCheck.record({ _tag: FastCheck.constant("Reject" as const), key }),
  FastCheck.record({ _tag: FastCheck.constant("CloseThread" as const), key, midTurn: FastCheck.boolean() }),
  FastCheck.record({ _tag: FastCheck.constant("CloseAgent" as const) })
)

const script = (outcome: Outcome): string => {
  switch (outcome) {
    case "success":
      return FakeCli.script({ op: "text", text: "ok" })
    case "failure":
      return FakeCli.script({ op: "result", ok: false, error: "refused" })
    case "crash":
      return FakeCli.script({ op: "text", text: "partial" }, { op: "crash", code: 7 })
    case "cancel":
      // A first answer: a resuming turn's events are shown from there on.
      return FakeCli.script({ op: "text", text: "on it" }, { op: "sleep", ms: 5_000 })
  }
}

/** What must be committed under a key: the current checkpoint and the ones it replaced. */
interface Model {
  readonly session: string
  readonly turns: number
  readonly fingerprint: string
  /** Replaced sessions, most recent first (none is ever pruned here). */
  readonly history: ReadonlyArray<string>
}

interface World {
  readonly agents: { base: Agent.Agent; other: Agent.Agent }
  readonly store: ThreadStore.ThreadStore["Type"]
  readonly control: Threads.Control
  /** Closes both agents and makes them again (a host restart: new clones, new registrations). */
  readonly rebuild: Effect.Effect<void>
}

type Expected = { readonly mode: "started" | "resumed" | "forked" | "restarted"; readonly from?: string }

/**
 * Runs the ops against two agents sharing one store and one session store, keeping a model of
 * what must be committed and of what the host must have been told, and checks the invariants
 * after every op: no checkpoint changes without a turn whose `ThreadOpened` / `Result.thread`
 * says so (with the reason), a replaced checkpoint stays in the key's history, failures never
 * overwrite a healthy record, one run per key at a time, and every admitted run of a thread
 * handle reaches its `events` with one `RunStarted` and one `RunFinished`.
 */
const check = (ops: ReadonlyArray<Op>, world: World, prefix: string) =>
  Effect.gen(function*() {
    // Each sequence has keys of its own in the shared store.
    const at = (k: Key) => `${prefix}/${k}`
    const model = new Map<Key, Model>()
    const active = new Map<Key, number>()
    let maxActive = 0

    /** What a successful turn of `agent` on `k` must announce, from the model. */
    const expectedOpening = (agent: Agent.Agent, k: Key): Expected => {
      const current = model.get(k)
      if (current === undefined) return { mode: "started" }
      // Another fingerprint, or a session the provider now refuses: a fresh session.
      if (current.fingerprint !== agent.fingerprint || world.control.rejected.has(current.session)) {
        return { mode: "restarted", from: current.session }
      }
      return { mode: "resumed", from: current.session }
    }

    // Drives one turn on a handle; tracks runs in flight per key; collects the handle's events.
    const turn = (
      thread: { readonly stream: (input: string) => Stream.Stream<Event.Event, unknown> },
      k: Key,
      o: Outcome
    ) =>
      Effect.suspend(() => {
        const results: Array<Result.Result> = []
        const openings: Array<Event.ThreadOpened["opening"]> = []
        let open = 0
        const events = thread.stream(script(o)).pipe(
          Stream.tap((event) =>
            Effect.sync(() => {
              if (event._tag === "RunStarted") {
                open++
                active.set(k, (active.get(k) ?? 0) + 1)
                maxActive = Math.max(maxActive, active.get(k)!)
              } else if (event._tag === "ThreadOpened") {
                openings.push(event.opening)
              } else if (event._tag === "RunFinished") {
                open--
                active.set(k, (active.get(k) ?? 0) - 1)
                if (event.outcome === "success") results.push(event.result)
              }
            })
          )
        )
        const consumed = o === "cancel" ? Stream.takeUntil(events, (event) => event._tag === "ProcessStarted") : events
        return Stream.runDrain(consumed).pipe(
          Effect.ensuring(Effect.sync(() => active.set(k, (active.get(k) ?? 0) - open))),
          Effect.either,
          Effect.map((either) => ({ either, result: results.at(-1), openings }))
        )
      })

    /** Subscribes to a handle's events; `stop` closes the handle and returns what it saw. */
    const watch = (thread: { readonly events: Stream.Stream<Event.Event>; readonly close: Effect.Effect<void> }) =>
      Effect.gen(function*() {
        const fiber = yield* watchEvents(thread.events)
        return Effect.zipRight(thread.close, Fiber.join(fiber))
      })

    const expectPaired = (events: ReadonlyArray<Event.Event>) => {
      const started = events.filter((event) => event._tag === "RunStarted").map((event) => event.runId)
      const finished = events.filter((event) => event._tag === "RunFinished").map((event) => event.runId)
      expect(finished).toEqual(started)
    }

    /** A successful turn: its announced opening matches the model; the model advances. */
    const succeeded = (agent: Agent.Agent, k: Key, expected: Expected, result: Result.Result | undefined) => {
      const thread = result?.thread
      expect(thread?.mode).toBe(expected.mode)
      expect(thread?.from).toBe(expected.from)
      const before = model.get(k)
      const session = result!.session!
      if (expected.mode === "resumed") {
        expect(session).toBe(before!.session)
        model.set(k, { ...before!, turns: before!.turns + 1 })
      } else {
        if (expected.mode === "restarted") {
          expect(thread?.reason?._tag).toBe(
            before!.fingerprint === agent.fingerprint ? "ResumeRejected" : "Incompatible"
          )
        }
        model.set(k, {
          session,
          turns: expected.mode === "forked" ? thread!.fromTurns! + 1 : 1,
          fingerprint: agent.fingerprint,
          history: before === undefined ? [] : [before.session, ...before.history]
        })
      }
    }

    /** Runs `o` on a fresh handle of `agent` and checks what it announced. */
    const runOn = (agent: Agent.Agent, k: Key, o: Outcome) =>
      Effect.gen(function*() {
        const thread = yield* agent.thread(at(k))
        const stop = yield* watch(thread)
        const expected = expectedOpening(agent, k)
        const current = model.get(k)
        const rejected = current !== undefined && current.fingerprint === agent.fingerprint &&
          world.control.rejected.has(current.session)
        const { either, openings, result } = yield* turn(thread, k, o)
        expectPaired(yield* stop)
        if (rejected) {
          // The rejected resume is retried fresh, and seen only as the restart (one run).
          expect(openings).toEqual([expect.objectContaining({ mode: "restarted", from: expected.from })])
        }
        expect(openings.at(-1)?.mode).toBe(expected.mode)
        if (o === "success") {
          expect(either._tag).toBe("Right")
          succeeded(agent, k, expected, result)
        } else {
          expect(either._tag).toBe(o === "cancel" ? "Right" : "Left")
        }
      })

    for (const next of ops) {
      switch (next._tag) {
        case "Run": {
          yield* runOn(world.agents[next.who], next.key, next.outcome)
          break
        }
        case "Concurrent": {
          const agent = world.agents.base
          const thread = yield* agent.thread(at(next.key))
          const outcomes = yield* Effect.all(
            next.outcomes.map((o) => turn(thread, next.key, o)),
            { concurrency: "unbounded" }
          )
          const successes = outcomes.filter(({ either }, index) => {
            const busy = either._tag === "Left" && (either.left as { readonly _tag?: string })._tag === "ThreadBusy"
            if (!busy && next.outcomes[index] === "success") expect(either._tag).toBe("Right")
            return !busy && next.outcomes[index] === "success"
          })
          // In the order they held the thread: a later one continues what the earlier committed.
          successes.sort((x, y) => (x.result?.thread?.fromTurns ?? 0) - (y.result?.thread?.fromTurns ?? 0))
          for (const { result } of successes) succeeded(agent, next.key, expectedOpening(agent, next.key), result)
          break
        }
        case "Fork": {
          const agent = world.agents.base
          const source = yield* agent.thread(at(next.from))
          const forked = yield* Effect.either(source.fork(at(next.to)))
          const from = model.get(next.from)
          if (model.has(next.to)) {
            expect(forked._tag === "Left" && forked.left._tag).toBe("ThreadAlreadyExists")
          } else if (from === undefined) {
            expect(forked._tag === "Left" && forked.left._tag).toBe("ThreadNotFound")
          } else if (from.fingerprint !== agent.fingerprint) {
            expect(forked._tag === "Left" && forked.left._tag).toBe("ThreadIncompatible")
          } else {
            expect(forked._tag).toBe("Right")
            if (forked._tag === "Right") {
              const { either, openings, result } = yield* turn(forked.right, next.to, "success")
              expect(either._tag).toBe("Right")
              if (world.control.rejected.has(from.session)) {
                // A fork resumes its source's session: rejected, it is retried fresh within the turn
                // and never seen (docs/threads.md), one run whose only ThreadOpened says restarted.
                expect(openings.map((opening) => opening.mode)).toEqual(["restarted"])
                expect(result?.thread).toMatchObject({ mode: "restarted", from: from.session })
                model.set(next.to, { session: result!.session!, turns: 1, fingerprint: agent.fingerprint, history: [] })
              } else {
                succeeded(agent, next.to, { mode: "forked", from: from.session }, result)
              }
            }
          }
          break
        }
        case "ResumeOnly": {
          const current = model.get(next.key)
          const opened = yield* Effect.either(world.agents.base.thread(at(next.key), { resumeOnly: true }))
          if (current === undefined) {
            expect(opened._tag === "Left" && opened.left._tag).toBe("ThreadNotFound")
          } else if (current.fingerprint !== world.agents.base.fingerprint) {
            expect(opened._tag === "Left" && opened.left).toMatchObject({
              _tag: "ThreadIncompatible",
              components: ["model"]
            })
          } else if (opened._tag === "Right") {
            const { either, result } = yield* turn(opened.right, next.key, "success")
            if (world.control.rejected.has(current.session)) {
              expect(either._tag === "Left" && (either.left as { readonly _tag: string })._tag).toBe("ResumeRejected")
            } else {
              expect(either._tag).toBe("Right")
              succeeded(world.agents.base, next.key, { mode: "resumed", from: current.session }, result)
            }
          } else {
            expect.fail(`resumeOnly failed on a resumable thread: ${opened.left._tag}`)
          }
          break
        }
        case "Strict": {
          const agent = world.agents[next.who]
          const current = model.get(next.key)
          const prepared = world.control.prepared.length
          const opened = yield* Effect.either(agent.thread(at(next.key), { onUnresumable: "fail" }))
          if (current !== undefined && current.fingerprint !== agent.fingerprint) {
            expect(opened._tag === "Left" && opened.left._tag).toBe("ThreadIncompatible")
            expect(world.control.prepared.length).toBe(prepared)
          } else if (opened._tag === "Right") {
            const { either, result } = yield* turn(opened.right, next.key, "success")
            if (current !== undefined && world.control.rejected.has(current.session)) {
              expect(either._tag === "Left" && (either.left as { readonly _tag: string })._tag).toBe("ResumeRejected")
            } else {
              expect(either._tag).toBe("Right")
              succeeded(agent, next.key, expectedOpening(agent, next.key), result)
            }
          } else {
            expect.fail(`a strict thread failed to open: ${opened.left._tag}`)
          }
          break
        }
        case "Reject": {
          // The provider will refuse to resume the key's current session from now on.
          const current = model.get(next.key)
          if (current !== undefined) world.control.rejected.add(current.session)
          break
        }
        case "CloseThread": {
          const thread = yield* world.agents.base.thread(at(next.key))
          const stop = yield* watch(thread)
          if (next.midTurn) {
            const started = yield* Deferred.make<void>()
            const running = yield* thread.stream(script("cancel")).pipe(
              Stream.tap((event) =>
                event._tag === "ProcessStarted" ? Deferred.succeed(started, undefined) : Effect.void
              ),
              Stream.runDrain,
              Effect.either,
              Effect.fork
            )
            yield* Deferred.await(started)
            const seen = yield* stop
            expectPaired(seen)
            const outcome = yield* Fiber.join(running)
            expect(outcome._tag === "Left" && (outcome.left as { readonly _tag: string })._tag).toBe("ThreadClosed")
          } else {
            expectPaired(yield* stop)
          }
          expect(yield* Effect.flip(thread.run(script("success")))).toMatchObject({ _tag: "ThreadClosed" })
          break
        }
        case "CloseAgent": {
          yield* world.rebuild
          break
        }
      }
      // Every record is what the model says, and so is its history: no checkpoint changed
      // without a turn that announced it, and no replaced one was lost.
      for (const k of keys) {
        const stored = yield* world.store.get(at(k))
        const expected = model.get(k)
        if (expected === undefined) {
          expect(Option.isNone(stored)).toBe(true)
        } else {
          expect(Option.getOrThrow(stored)).toMatchObject({
            key: at(k),
            session: expected.session,
            turns: expected.turns,
            fingerprint: expected.fingerprint
          })
        }
        expect((yield* world.store.history(at(k))).map((entry) => entry.record.session)).toEqual(
          expected?.history ?? []
        )
      }
      // At most one run per key at a time.
      expect(maxActive).toBeLessThanOrEqual(1)
    }
  })

const runs = Number(process.env["THREAD_PROPERTY_RUNS"] ?? 100)

for (const [name, storeLayer] of Threads.stores) {
  describe(`Thread invariants (${name} store)`, () => {
    // One store, one session store and two agents for all the sequences (each with keys of its
    // own), so that hundreds of sequences stay cheap; `CloseAgent` rebuilds the agents.
    it.live(
      `${runs} random sequences of turns on two agents, concurrent runs, forks, rejected resumes, incompatible records, thread and agent closes: no history is lost without the host being told`,
      () =>
        Effect.gen(function*() {
          const sandbox = yield* Harness.sandbox
          const source = yield* Harness.treeDigest(sandbox.source)
          const control = Threads.makeControl()
          const markers: Array<string> = []
          yield* Effect.gen(function*() {
            const store = yield* ThreadStore.ThreadStore
            const outer = yield* Effect.scope
            const make = (model?: string) =>
              Effect.gen(function*() {
                const scope = yield* Scope.fork(outer, ExecutionStrategy.sequential)
                const agent = yield* Threads.makeAgent(
                  sandbox,
                  Threads.driver(control, {}, ShellCli.driver),
                  model === undefined ? {} : { model }
                ).pipe(Scope.extend(scope))
                markers.push(agent.marker)
                return { agent, scope }
              })
            let base = yield* make()
            let other = yield* make("other-model")
            const agents = { base: base.agent, other: other.agent }
            const services = yield* Effect.context<Effect.Effect.Context<ReturnType<typeof make>>>()
            const rebuild = Effect.gen(function*() {
              yield* Scope.close(base.scope, Exit.void)
              yield* Scope.close(other.scope, Exit.void)
              base = yield* make()
              other = yield* make("other-model")
              agents.base = base.agent
              agents.other = other.agent
            }).pipe(Effect.orDie, Effect.provide(services))
            let sequence = 0
            yield* Effect.promise(() =>
              FastCheck.assert(
                FastCheck.asyncProperty(FastCheck.array(op, { minLength: 3, maxLength: 5 }), (ops) =>
                  Effect.runPromise(Effect.gen(function*() {
                    yield* check(ops, { agents, store, control, rebuild }, String(sequence++))
                    // Nothing of the sequence keeps running, and only the live agents' clones exist.
                    for (const agent of [agents.base, agents.other]) {
                      expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
                    }
                    expect(yield* Harness.entries(sandbox.root)).toHaveLength(2)
                  }))),
                { numRuns: runs }
              )
            )
          }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(Threads.ToolsLive, Harness.layer, storeLayer())))
          for (const marker of markers) {
            expect(yield* Harness.markedProcesses(marker)).toEqual([])
          }
          expect(yield* Harness.entries(sandbox.root)).toEqual([])
          expect(yield* Harness.treeDigest(sandbox.source)).toBe(source)
        }).pipe(Effect.scoped),
      600_000
    )
  })
}
