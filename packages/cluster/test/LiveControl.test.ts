/**
 * A live thread controlled through the cluster (`Runner.layerTest`: messages serialized as between
 * runners): `send` steers the turn running on the thread's runner and `approve` answers its
 * approval requests, with the reference driver's live process, the real gateway, real clones.
 */
import { describe, expect, it } from "@effect/vitest"
import { ThreadEntity } from "@tether/cluster"
import { Approval, type Driver, type Event } from "@tether/core"
import { Reference } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as Fixture from "./fixtures/agent.js"
import { withRunner } from "./fixtures/withRunner.js"

/** Waits on the live process until input is steered into the turn, then answers the prompt. */
const respond = (prompt: string): ReadonlyArray<Reference.Step> =>
  prompt === "warm"
    ? Reference.answer(prompt)
    : [
      { _tag: "TextDelta", text: "waiting" },
      { _tag: "$sleep", ms: 30_000, untilInput: true },
      ...Reference.answer(prompt)
    ]

/** The reference live driver `asking` for an approval on "ask"; the decisions go to `decisions`. */
const asking = (decisions: Array<Approval.Decision>): Driver.Driver =>
  Fixture.asking(Reference.driver({ live: true, respond }), (decision) => decisions.push(decision))

/** The fixture's runner, its agent on `driver` (answering approvals through the host when it asks). */
const withLiveRunner = <A, E>(driver: Driver.Driver, body: (threads: ThreadEntity.Client) => Effect.Effect<A, E>) =>
  withRunner(({ threads }) => body(threads), {
    agent: (options) => ({ ...options, driver, ...(driver.approvals === undefined ? {} : { approvals: {} }) })
  })

/** Streams a turn of the remote thread in the background; resolves once `tag` went by. */
const streamUntil = (thread: ThreadEntity.RemoteThread, input: string, tag: Event.Event["_tag"]) =>
  Effect.gen(function*() {
    const events: Array<Event.Event> = []
    const fiber = yield* thread.stream(input).pipe(
      Stream.runForEach((event) => Effect.sync(() => events.push(event))),
      Effect.fork
    )
    while (!events.some((event) => event._tag === tag)) yield* Effect.sleep("10 millis")
    return { events, fiber }
  })

describe("a live thread through the cluster", () => {
  it.live(
    "send delivers input into the turn running on the thread's runner, with the turn's run id",
    () =>
      withLiveRunner(Reference.driver({ live: true, respond }), (threads) =>
        Effect.gen(function*() {
          const thread = threads.thread("tenant-1/live")
          expect(yield* Effect.flip(thread.send("too early"))).toMatchObject({
            _tag: "NoActiveTurn",
            key: "tenant-1/live"
          })
          expect((yield* thread.run("warm")).text).toBe("warm")
          const turn = yield* streamUntil(thread, "long", "TextDelta")
          const started = turn.events.find((event): event is Event.RunStarted => event._tag === "RunStarted")!
          expect(yield* thread.send("go on")).toEqual(
            new ThreadEntity.Delivery({ runId: started.runId, mode: "injected" })
          )
          yield* Fiber.join(turn.fiber)
          expect(turn.events.filter((event) => event._tag === "InputDelivered")).toMatchObject([
            { runId: started.runId, text: "go on", delivery: "Injected" }
          ])
          expect(turn.events.at(-1)).toMatchObject({ _tag: "RunFinished", result: { text: "long" } })
          // The turn is over: nothing runs to take input.
          expect(yield* Effect.flip(thread.send("too late"))).toMatchObject({ _tag: "NoActiveTurn" })
        })),
    60_000
  )

  it.live(
    "cancel ends the running turn, commits nothing, and the warm process serves the next turn",
    () =>
      withLiveRunner(Reference.driver({ live: true, respond }), (threads) =>
        Effect.gen(function*() {
          const thread = threads.thread("tenant-1/cancel")
          expect(yield* Effect.flip(thread.cancel())).toMatchObject({ _tag: "NoActiveTurn", key: "tenant-1/cancel" })
          const warm = yield* thread.run("warm")
          const turn = yield* streamUntil(thread, "long", "TextDelta")
          const started = turn.events.find((event): event is Event.RunStarted => event._tag === "RunStarted")!
          // Another run's id cancels nothing.
          expect(yield* Effect.flip(thread.cancel("another-run"))).toMatchObject({ _tag: "NoActiveTurn" })
          expect(yield* thread.cancel(started.runId)).toBe(started.runId)
          const ended = yield* Effect.either(Fiber.join(turn.fiber))
          expect(ended._tag === "Left" && ended.left).toMatchObject({ _tag: "RunError", reason: "Canceled" })
          expect(turn.events.at(-1)).toMatchObject({ _tag: "RunFinished", outcome: "canceled" })
          expect(Option.getOrThrow(yield* thread.snapshot)).toMatchObject({ session: warm.session, turns: 1 })
          // The next turn runs on the same process.
          const next = yield* streamUntil(thread, "warm", "RunFinished")
          yield* Fiber.join(next.fiber)
          const pids = [...turn.events, ...next.events].flatMap((event) =>
            event._tag === "ProcessStarted" ? [event.pid] : []
          )
          expect(new Set(pids).size).toBe(1)
          expect(next.events.at(-1)).toMatchObject({ _tag: "RunFinished", outcome: "success" })
          expect(yield* Effect.flip(thread.cancel())).toMatchObject({ _tag: "NoActiveTurn" })
        })),
    60_000
  )

  it.live(
    "cancel ends a turn run with run (a persisted message): it fails with RunError Canceled",
    () =>
      withLiveRunner(Reference.driver({ live: true, respond }), (threads) =>
        Effect.gen(function*() {
          const thread = threads.thread("tenant-1/cancel-run")
          const run = yield* Effect.fork(Effect.either(thread.run("long")))
          // The turn is cancellable once it has started on the runner.
          const canceled = yield* thread.cancel().pipe(
            Effect.retry(Schedule.spaced("20 millis").pipe(Schedule.upTo("10 seconds")))
          )
          const ended = yield* Fiber.join(run)
          expect(ended._tag === "Left" && ended.left).toMatchObject({
            _tag: "RunError",
            reason: "Canceled",
            result: { runId: canceled }
          })
          expect(Option.isNone(yield* thread.snapshot)).toBe(true)
        })),
    60_000
  )

  it.live("approve answers the running turn's approval request on its runner; the first answer wins", () => {
    const decisions: Array<Approval.Decision> = []
    return withLiveRunner(asking(decisions), (threads) =>
      Effect.gen(function*() {
        const thread = threads.thread("tenant-1/ask")
        expect(yield* Effect.flip(thread.approve("unknown", Approval.allow))).toMatchObject({
          _tag: "ApprovalNotFound",
          id: "unknown"
        })
        const turn = yield* streamUntil(thread, "ask", "ApprovalRequested")
        const requested = turn.events.find((event): event is Event.ApprovalRequested =>
          event._tag === "ApprovalRequested"
        )!
        expect(yield* Effect.flip(thread.approve("unknown", Approval.allow))).toMatchObject({
          _tag: "ApprovalNotFound"
        })
        yield* thread.approve(requested.request.id, Approval.allow)
        yield* Fiber.join(turn.fiber)
        expect(decisions.map((decision) => decision._tag)).toEqual(["Allow"])
        expect(turn.events.filter((event) => event._tag === "ApprovalResolved")).toMatchObject([
          { approvalId: requested.request.id, decision: { _tag: "Allow" }, by: "host" }
        ])
        expect(turn.events.at(-1)).toMatchObject({ _tag: "RunFinished", result: { text: "ask" } })
        expect(yield* Effect.flip(thread.approve(requested.request.id, Approval.deny("late")))).toMatchObject({
          _tag: "ApprovalAlreadyResolved"
        })
      }))
  }, 60_000)
})
