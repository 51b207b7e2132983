// A turn's `id` is an idempotency key: "the same turn delivered again after it committed
// fails with TurnAlreadyCommitted instead of running twice". A thread's `runAs` takes the same
// `Agent.Input` (its `id` included); its repair turn is part of the host's turn.
import { describe, expect, it } from "@effect/vitest"
import type { Driver } from "@tether/core"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Threads from "./fixtures/threads.js"
import { record, text, withThreads } from "./fixtures/threadTest.js"

for (const [name, storeLayer] of Threads.stores) {
  describe(`turn id and structured output (${name})`, () => {
    it.live("a runAs turn with an id that needed a repair turn is not run again when delivered twice", () =>
      withThreads(storeLayer, ({ control, make }) =>
        Effect.gen(function*() {
          let spawned = 0
          const base = Threads.driver(control)
          // The provider's first answer does not decode; every later one does.
          const drv: Driver.Driver = {
            ...base,
            prepare: (request) => {
              spawned++
              return base.prepare({ ...request, prompt: spawned === 1 ? text("no json here") : text("{\"n\": 1}") })
            }
          }
          const agent = yield* make(drv)
          const thread = yield* agent.thread("k")
          const N = Schema.Struct({ n: Schema.Number })
          const decoded = yield* thread.runAs(N, { input: "give n", id: "turn-1" })
          expect(decoded.value).toEqual({ n: 1 })
          expect(spawned).toBe(2) // the first attempt and its repair turn
          const committed = yield* record(thread)
          // The cluster redelivers the same turn (its runner died before replying).
          const again = yield* Effect.either(thread.runAs(N, { input: "give n", id: "turn-1" }))
          expect.soft(spawned).toBe(2)
          expect.soft(again._tag === "Left" ? again.left._tag : "ran again").toBe("TurnAlreadyCommitted")
          expect((yield* record(thread)).turns).toBe(committed.turns)
        })))
  })
}
