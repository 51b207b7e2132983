/**
 * A commit interrupted in flight (the turn canceled, or a fleet runner's entity ended when its
 * shards moved) may have landed in the store all the same. What goes with a commit (`onCommit`:
 * a fleet saves the turn's answer there, for a second delivery of the same turn) must then still
 * happen: a second delivery finds the turn committed and answers what `onCommit` kept.
 */
import { describe, expect, it } from "@effect/vitest"
import { ThreadStore } from "@tether/core"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Threads from "./fixtures/threads.js"
import { text, withThreads } from "./fixtures/threadTest.js"

/**
 * `inner`, except that a commit, once the store took it, never returns while `stuck.on`, and
 * neither does a read while `stuck.reads`.
 */
const landsThenHangs = (
  inner: () => Layer.Layer<ThreadStore.ThreadStore>,
  stuck: { on: boolean; reads?: boolean }
) =>
() =>
  Layer.effect(
    ThreadStore.ThreadStore,
    Effect.map(ThreadStore.ThreadStore, (store) => ({
      ...store,
      commit: (lease, record, mode) =>
        Effect.zipRight(store.commit(lease, record, mode), stuck.on ? Effect.never : Effect.void),
      get: (key) => Effect.zipRight(stuck.reads === true ? Effect.never : Effect.void, store.get(key))
    }))
  ).pipe(Layer.provide(inner()))

for (const [name, storeLayer] of Threads.stores) {
  describe(`a commit interrupted after the store took it (${name} store)`, () => {
    it.live("onCommit still runs, once, and a second delivery finds the turn committed", () => {
      const stuck = { on: true }
      return withThreads(landsThenHangs(storeLayer, stuck), ({ agent }) =>
        Effect.gen(function*() {
          const seen: Array<string> = []
          const thread = yield* agent.thread("k", {
            onCommit: ({ record, result }) => Effect.sync(() => seen.push(`${record.turn}:${result.text}`))
          })
          const turn = yield* Effect.fork(thread.run({ input: text("one"), id: "t1" }))
          // The store holds the turn; its commit call has not returned.
          for (;;) {
            const current = yield* Effect.orDie(thread.snapshot)
            if (Option.isSome(current) && current.value.turn === "t1") break
            yield* Effect.sleep("10 millis")
          }
          yield* Fiber.interrupt(turn)
          expect(seen).toEqual(["t1:one"])
          // A second delivery of the turn finds it committed.
          stuck.on = false
          expect(yield* Effect.flip(thread.run({ input: text("one"), id: "t1" }))).toMatchObject({
            _tag: "TurnAlreadyCommitted"
          })
          yield* thread.run({ input: text("two"), id: "t2" })
          expect(seen).toEqual(["t1:one", "t2:two"])
        }))
    })
  })

  describe(`a store that stops answering during an interrupted commit (${name} store)`, () => {
    it.live("the turn's interruption still ends: the store is asked within its bound, not waited for", () => {
      const stuck = { on: true, reads: false }
      return withThreads(landsThenHangs(storeLayer, stuck), ({ agent }) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("k")
          const turn = yield* Effect.fork(thread.run({ input: text("one"), id: "t1" }))
          for (;;) {
            const current = yield* Effect.orDie(thread.snapshot)
            if (Option.isSome(current) && current.value.turn === "t1") break
            yield* Effect.sleep("10 millis")
          }
          stuck.reads = true
          const ended = yield* Fiber.interrupt(turn).pipe(Effect.timeout("20 seconds"), Effect.option)
          stuck.on = false
          stuck.reads = false
          expect(Option.isSome(ended)).toBe(true)
        }))
    }, 30_000)
  })
}
