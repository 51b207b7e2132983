/**
 * What a turn that never ran, a fork closed in its first turn, an interrupted wait and a deleted
 * thread leave in the store and its leases (the key free for the next turn, nothing committed that
 * should not be); turn ids on forks and after delete; `thread.events` across turns. Each case on
 * the memory and the SQLite store.
 */
import { describe, expect, it } from "@effect/vitest"
import { FakeCli } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Threads from "./fixtures/threads.js"
import { record, startTurn, text, watch, withThreads } from "./fixtures/threadTest.js"

for (const [name, store] of Threads.stores) {
  describe(`thread leases and records (${name} store)`, () => {
    it.live("a turn refused InvalidTurn (unknown tool in its policy) leaves the key free: the next turn runs at once", () =>
      withThreads(store, ({ agent }) =>
        Effect.gen(function*() {
          const t = yield* agent.thread("k")
          yield* t.run(text("one"))
          const refused = yield* Effect.flip(t.run({ input: text("x"), toolPolicy: { allow: ["nope"] } }))
          expect(refused).toMatchObject({ _tag: "InvalidTurn" })
          const next = yield* t.run(text("two")).pipe(Effect.timeout("10 seconds"))
          expect(next.thread).toMatchObject({ mode: "resumed", fromTurns: 1 })
          expect((yield* record(t)).turns).toBe(2)
        })))

    it.live("closing a fork handle during its first turn releases the source's lease", () =>
      withThreads(store, ({ agent }) =>
        Effect.gen(function*() {
          const a = yield* agent.thread("src")
          yield* a.run(text("one"))
          const f = yield* a.fork("copy")
          const fiber = yield* startTurn(
            f.stream(FakeCli.script({ op: "text", text: "x" }, { op: "sleep", ms: 5_000 }))
          )
          yield* f.close
          const outcome = yield* Fiber.join(fiber)
          expect(outcome._tag).toBe("Left")
          const again = yield* a.run(text("two")).pipe(Effect.timeout("10 seconds"))
          expect(again.thread).toMatchObject({ mode: "resumed", fromTurns: 1 })
          expect(Option.isNone(yield* f.snapshot)).toBe(true)
          // A second handle of the fork target can run (its lease is free too).
          const g = yield* a.fork("copy")
          const forked = yield* g.run(text("branch")).pipe(Effect.timeout("10 seconds"))
          expect(forked.thread).toMatchObject({ mode: "forked", fromTurns: 2 })
        })))

    it.live(
      "a turn interrupted while it waits for the previous CLI's exit frees the key",
      () =>
        withThreads(store, ({ agent }) =>
          Effect.gen(function*() {
            const t = yield* agent.thread("k")
            yield* t.run(text("one"))
            // Canceled at its first answer; its CLI ignores SIGTERM: it goes at the kill grace, in the background.
            yield* t.stream(FakeCli.script({ op: "text", text: "x" }, { op: "hang" })).pipe(
              Stream.takeUntil((event) => event._tag === "TextDelta"),
              Stream.runDrain
            )
            const waiting = yield* Effect.fork(t.run(text("two")))
            yield* Effect.sleep("100 millis")
            const exit = yield* Fiber.interrupt(waiting)
            const next = yield* t.run(text("three")).pipe(Effect.timeout("10 seconds"))
            // The waiting turn either ran (it finished within the wait) or was cut, committing nothing.
            expect(next.thread).toMatchObject({ mode: "resumed", fromTurns: exit._tag === "Success" ? 2 : 1 })
          })),
      { timeout: 30_000 }
    )

    it.live("a fork's first turn with an id: delivered again on the fork, TurnAlreadyCommitted; the source is not touched", () =>
      withThreads(store, ({ agent }) =>
        Effect.gen(function*() {
          const a = yield* agent.thread("src")
          yield* a.run({ input: text("one"), id: "t-1" })
          const f = yield* a.fork("copy")
          yield* f.run({ input: text("branch"), id: "t-1" })
          expect(yield* Effect.flip(f.run({ input: text("again"), id: "t-1" }))).toMatchObject({
            _tag: "TurnAlreadyCommitted",
            key: "copy"
          })
          expect(yield* Effect.flip(a.run({ input: text("again"), id: "t-1" }))).toMatchObject({
            _tag: "TurnAlreadyCommitted",
            key: "src"
          })
          expect((yield* record(a)).turns).toBe(1)
          expect((yield* record(f)).turns).toBe(2)
        })))

    it.live("after delete, a turn id committed before runs again on the fresh thread; history is empty", () =>
      withThreads(store, ({ agent }) =>
        Effect.gen(function*() {
          const t = yield* agent.thread("k")
          yield* t.run({ input: text("one"), id: "t-1" })
          const removed = yield* t.delete
          expect(removed.length).toBe(1)
          const fresh = yield* t.run({ input: text("one again"), id: "t-1" })
          expect(fresh.thread?.mode).toBe("started")
          expect(yield* t.history).toEqual([])
        })))

    it.live("events across turns: every turn (a failed one too) shows one RunStarted and one RunFinished", () =>
      withThreads(store, ({ agent }) =>
        Effect.gen(function*() {
          const t = yield* agent.thread("k")
          const evs = yield* watch(t.events)
          yield* t.run(text("one"))
          yield* Effect.flip(t.run(FakeCli.script({ op: "text", text: "x" }, { op: "crash" })))
          yield* t.run(text("two"))
          yield* t.close
          const events = yield* Fiber.join(evs)
          expect(events.filter((e) => e._tag === "RunStarted")).toHaveLength(3)
          expect(events.filter((e) => e._tag === "RunFinished").map((e) => (e as any).outcome)).toEqual([
            "success",
            "failure",
            "success"
          ])
          expect(
            events.filter((e) => e._tag === "ThreadOpened").map((e) => (e as any).opening?.mode ?? (e as any).mode)
          )
            .toHaveLength(3)
        })))
  })
}
