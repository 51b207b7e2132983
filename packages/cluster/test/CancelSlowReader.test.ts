/**
 * Cancel of a turn that has already ended (committed) on its runner, while the turn's
 * RunStream consumer is slow. ThreadEntity.Cancel promises: a run id answered means the turn ends
 * RunFinished(canceled), its stream fails RunError Canceled and nothing is committed;
 * NoActiveTurn when no turn is running (as Send says for the same turn).
 */
import { describe, expect, it } from "@effect/vitest"
import type { ThreadEntity } from "@tether/cluster"
import type { Event } from "@tether/core"
import { Reference } from "@tether/testing"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { withRunner } from "./fixtures/withRunner.js"

// Many events after the first one: more than the cluster client's stream buffer (16).
const respond = (prompt: string): ReadonlyArray<Reference.Step> => [
  { _tag: "TextDelta", text: "first" },
  ...Array.from({ length: 40 }, (): Reference.Step => ({ _tag: "TextDelta", text: "x" })),
  ...Reference.answer(prompt)
]

const withLiveRunner = <A, E>(body: (threads: ThreadEntity.Client) => Effect.Effect<A, E>) =>
  withRunner(({ threads }) => body(threads), {
    agent: (options) => ({ ...options, driver: Reference.driver({ live: true, respond }) })
  })

describe("live control through the cluster, a slow reader", () => {
  it.live(
    "cancel of a turn that already committed (its stream's reader is slow) is NoActiveTurn, as send is",
    () =>
      withLiveRunner((threads) =>
        Effect.gen(function*() {
          const thread = threads.thread("tenant-r/slow-reader")
          const gate = yield* Deferred.make<void>()
          const events: Array<Event.Event> = []
          // A reader that takes the first event, then stops reading for a while (not gone).
          const fiber = yield* thread.stream("long").pipe(
            Stream.runForEach((event) =>
              Effect.zipRight(
                Effect.sync(() => events.push(event)),
                events.length === 1 ? Deferred.await(gate) : Effect.void
              )
            ),
            Effect.either,
            Effect.fork
          )
          // The turn ends on the runner and commits (the commit precedes its RunFinished).
          const committed = yield* thread.snapshot.pipe(
            Effect.flatMap((record) => Option.isSome(record) ? Effect.succeed(record.value) : Effect.fail("none")),
            Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("20 seconds")))
          )
          expect(committed.turns).toBe(1)
          yield* Effect.sleep("300 millis")
          // Send sees no running turn.
          const sent = yield* Effect.either(thread.send("late"))
          // Cancel should too: the turn cannot end canceled any more.
          const canceled = yield* Effect.either(thread.cancel())
          yield* Deferred.succeed(gate, undefined)
          const ended = yield* Fiber.join(fiber)
          const outcome = {
            send: sent._tag === "Left" ? sent.left._tag : sent.right,
            cancel: canceled._tag === "Left" ? canceled.left._tag : `answered run ${canceled.right}`,
            stream: ended._tag === "Left" ? ended.left._tag : "ended without error",
            last: events.at(-1)?._tag === "RunFinished" ? (events.at(-1) as Event.RunFinished).outcome : undefined
          }
          expect(outcome).toEqual({
            send: "NoActiveTurn",
            cancel: "NoActiveTurn",
            stream: "ended without error",
            last: "success"
          })
        })
      ),
    60_000
  )
})
