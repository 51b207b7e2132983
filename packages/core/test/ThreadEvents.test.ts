// `thread.events`: fed by the runs themselves (a turn whose caller stopped reading still reaches
// it, RunStarted and RunFinished included), under the agent's drop/block event policy.
import { describe, expect, it } from "@effect/vitest"
import type { Event } from "@tether/core"
import { ThreadStore } from "@tether/core"
import { FakeCli } from "@tether/testing"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import { startTurn, text, withThreads } from "./fixtures/threadTest.js"

const deltas = 20_000

/** Subscribes to `events` now; the returned fiber collects until the thread closes. */
const subscribe = (events: Stream.Stream<Event.Event>, hold?: Deferred.Deferred<void>) =>
  Effect.gen(function*() {
    const subscribed = yield* Deferred.make<void>()
    const fiber = yield* events.pipe(
      Stream.onStart(Deferred.succeed(subscribed, undefined)),
      // A subscriber that reads its first event, then nothing until `hold` opens.
      Stream.tap(() => hold === undefined ? Effect.void : Deferred.await(hold)),
      Stream.runCollect,
      Effect.map((chunk) => Array.from(chunk)),
      Effect.fork
    )
    yield* Deferred.await(subscribed)
    return fiber
  })

/** Every run's events arrive in strictly increasing sequence. */
const expectIncreasing = (events: ReadonlyArray<Event.Event>) => {
  const last = new Map<string, number>()
  for (const event of events) {
    expect(event.sequence).toBeGreaterThan(last.get(event.runId) ?? -1)
    last.set(event.runId, event.sequence)
  }
}

/** Counts the deltas of a turn: delivered ones plus those a `Dropped` stands for. */
const accounted = (events: ReadonlyArray<Event.Event>) =>
  events.reduce(
    (sum, event) => sum + (event._tag === "TextDelta" ? 1 : event._tag === "Dropped" ? event.count : 0),
    0
  )

describe("Thread events", () => {
  it.live("a turn whose caller stopped reading reaches events with exactly one RunStarted and RunFinished", () =>
    withThreads(() => ThreadStore.layerMemory, ({ agent }) =>
      Effect.gen(function*() {
        const thread = yield* agent.thread("k")
        const watching = yield* subscribe(thread.events)
        // The caller stops once the process started: the run is canceled.
        yield* thread.stream(FakeCli.script({ op: "sleep", ms: 5_000 })).pipe(
          Stream.takeUntil((event) => event._tag === "ProcessStarted"),
          Stream.runDrain
        )
        // And a caller interrupted while it waits.
        const interrupted = yield* startTurn(thread.stream(FakeCli.script({ op: "sleep", ms: 5_000 })))
        yield* Fiber.interrupt(interrupted)
        yield* thread.run(text("after"))
        yield* thread.close
        const events = yield* Fiber.join(watching)
        const started = events.filter((event) => event._tag === "RunStarted")
        const finished = events.flatMap((event) => event._tag === "RunFinished" ? [event] : [])
        expect(started.map((event) => event.runId)).toEqual(finished.map((event) => event.runId))
        expect(finished.map((event) => event.outcome)).toEqual(["canceled", "canceled", "success"])
        expectIncreasing(events)
      })))

  it.live("a slow subscriber loses only deltas, counted in a Dropped; every other event arrives", () =>
    withThreads(() => ThreadStore.layerMemory, ({ agent }) =>
      Effect.gen(function*() {
        const thread = yield* agent.thread("k")
        const hold = yield* Deferred.make<void>()
        const watching = yield* subscribe(thread.events, hold)
        // The subscriber's buffer of 2 is full (ProcessStarted, SessionStarted) when the first batch of
        // deltas comes: the caller sees them only after the subscriber dropped them; then it reads.
        yield* thread.stream(FakeCli.script({ op: "deltas", count: deltas }, { op: "text", text: "end." })).pipe(
          Stream.tap((event) => event._tag === "TextDelta" ? Deferred.succeed(hold, undefined) : Effect.void),
          Stream.runDrain
        )
        yield* thread.close
        const events = yield* Fiber.join(watching)
        expect(events.filter((event) => event._tag === "Dropped").length).toBeGreaterThan(0)
        expect(accounted(events)).toBe(deltas + 1)
        const critical = events.map((event) => event._tag).filter((tag) => tag !== "TextDelta" && tag !== "Dropped")
        expect(critical.slice(0, 3)).toEqual(["RunStarted", "ThreadOpened", "ProcessStarted"])
        expect(critical.filter((tag) => tag === "RunStarted" || tag === "RunFinished")).toHaveLength(2)
        expect(events.filter((event) => event._tag === "Message")).toMatchObject([{ text: "end." }])
        expect(events.at(-1)).toMatchObject({ _tag: "RunFinished", outcome: "success" })
        expectIncreasing(events)
      }), { events: { buffer: 2 } }))

  it.live("in blocking mode a slow subscriber loses nothing: the run waits for it", () =>
    withThreads(() => ThreadStore.layerMemory, ({ agent }) =>
      Effect.gen(function*() {
        const thread = yield* agent.thread("k")
        const hold = yield* Deferred.make<void>()
        const watching = yield* subscribe(thread.events, hold)
        // The subscriber's buffer is full (ProcessStarted, SessionStarted) before any delta: the run
        // waits for it, so it reads once the caller saw SessionStarted.
        yield* thread.stream(FakeCli.script({ op: "deltas", count: 1_000 })).pipe(
          Stream.tap((event) => event._tag === "SessionStarted" ? Deferred.succeed(hold, undefined) : Effect.void),
          Stream.runDrain
        )
        yield* thread.close
        const events = yield* Fiber.join(watching)
        expect(events.filter((event) => event._tag === "Dropped")).toEqual([])
        expect(events.filter((event) => event._tag === "TextDelta")).toHaveLength(1_000)
        expect(events.at(-1)).toMatchObject({ _tag: "RunFinished", outcome: "success" })
      }), { events: { buffer: 2, blocking: true } }))

  // Critical events wait for a subscriber's room, but not past the start of a close: a subscriber
  // that stopped reading (here: until `hold` opens) holds up neither the run's end nor the close,
  // and reads, when it comes back, a `Dropped` counting what had no room, then its end.
  for (const closing of ["agent.close", "thread.close"] as const) {
    it.live(
      `a subscriber that stopped reading cannot hold up ${closing}; it is told what it lost`,
      () =>
        withThreads(() => ThreadStore.layerMemory, ({ agent }) =>
          Effect.gen(function*() {
            const thread = yield* agent.thread("k")
            const hold = yield* Deferred.make<void>()
            const watching = yield* subscribe(thread.events, hold)
            // Its buffer of 1 holds RunStarted: the run waits for room at its ProcessStarted.
            const turn = yield* Effect.fork(thread.run(FakeCli.script({ op: "text", text: "a" })))
            yield* Effect.sleep("500 millis")
            expect(turn.unsafePoll()).toBeNull()
            if (closing === "agent.close") yield* agent.close({ timeout: "10 seconds" })
            else {yield* Effect.timeoutFail(thread.close, {
                duration: "10 seconds",
                onTimeout: () => "thread.close hung"
              })}
            const outcome = yield* Fiber.await(turn)
            expect(outcome._tag).toBe("Failure")
            yield* Deferred.succeed(hold, undefined)
            if (closing === "thread.close") yield* agent.close({ timeout: "10 seconds" })
            const events = yield* Fiber.join(watching)
            expect(events[0]).toMatchObject({ _tag: "RunStarted" })
            const dropped = events.filter((event): event is Event.Dropped => event._tag === "Dropped")
            expect(dropped).toHaveLength(1)
            expect(dropped[0]!.kinds).toContain("RunFinished")
            expect(events.at(-1)).toBe(dropped[0])
          }), { events: { buffer: 1 } }),
      60_000
    )
  }
})
