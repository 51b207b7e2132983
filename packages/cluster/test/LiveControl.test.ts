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
import * as Stream from "effect/Stream"
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

/**
 * On the prompt "ask" the provider asks for an approval from a fiber of its own (as a live driver's
 * permission callback does), records the decision, and steers the turn to its end.
 */
const asking = (decisions: Array<Approval.Decision>): Driver.Driver => {
  const base = Reference.driver({ live: true, respond })
  return {
    ...base,
    approvals: { live: true },
    live: {
      ...base.live!,
      attach: (channel, context) =>
        Effect.map(base.live!.attach(channel, context), (session): Driver.LiveSession => ({
          ...session,
          turn: (request) =>
            request.prompt !== "ask" ? session.turn(request) : Stream.merge(
              session.turn(request),
              Stream.execute(Effect.forkDaemon(
                context.approve!({ toolName: "Bash", kind: "command", input: { command: "ls" }, command: "ls" }).pipe(
                  Effect.tap((decision) => Effect.sync(() => decisions.push(decision))),
                  Effect.zipRight(session.steer!("decided"))
                )
              ))
            )
        }))
    }
  }
}

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
