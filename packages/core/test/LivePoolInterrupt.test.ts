// A live turn interrupted while its freshly opened process waits for room in the pool (the least
// recently used idle process being shut down for `live.maxProcesses`) leaves that process in the
// pool, released: the idle timeout ends it. Before, it stayed outside the pool, busy, until the
// agent closed: neither the idle timeout nor the cap ever ended it.
import { describe, expect, it } from "@effect/vitest"
import { ThreadStore } from "@tether/core"
import { Harness, Reference } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { withThreads } from "./fixtures/threadTest.js"

describe("the live pool", () => {
  it.live("a turn interrupted while its new process waits for room leaves no live process behind", () => {
    const driver = Reference.driver({
      live: true,
      // "slow-exit": answers, then its CLI ignores the end of stdin and SIGTERM (a CLI slow to shut
      // down), so shutting it down for room takes the kill grace twice.
      respond: (prompt) =>
        prompt === "slow-exit" ? [...Reference.answer(prompt), { _tag: "$hang" }] : Reference.answer(prompt)
    })
    return withThreads(() => ThreadStore.layerMemory, ({ make }) =>
      Effect.gen(function*() {
        const agent = yield* make(driver, {
          live: { maxProcesses: 1, idleTimeout: "1 second" },
          processes: { killGrace: "1 second" }
        })
        const a = yield* agent.thread("a")
        yield* a.run("slow-exit")
        const [slow] = yield* Harness.markedProcesses(agent.marker)
        expect(slow).toBeDefined()
        const b = yield* agent.thread("b")
        // b's first turn opens a second process; adding it shuts a's (idle) one down for room.
        const turn = yield* Effect.fork(Effect.either(b.run("hello")))
        while ((yield* Harness.markedProcesses(agent.marker)).length < 2) yield* Effect.sleep("20 millis")
        yield* Effect.sleep("300 millis")
        // a's process is still being shut down (SIGTERM ignored): b's turn waits for room.
        expect(yield* Harness.markedProcesses(agent.marker)).toHaveLength(2)
        yield* Fiber.interrupt(turn)
        // a's process is gone once killed; b's is released to the pool, and its idle timeout (1 s)
        // ends it: with every turn ended, nothing live is left well within 8 s.
        for (let i = 0; i < 80 && (yield* Harness.markedProcesses(agent.marker)).length > 0; i++) {
          yield* Effect.sleep("100 millis")
        }
        expect(yield* Harness.isAlive(slow!)).toBe(false)
        expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
      }))
  }, 60_000)
})
