import { describe, expect, it } from "@effect/vitest"
import { Tool, Toolkit } from "@tether/tool"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import { executorFrom } from "../src/internal/toolkit.js"

// A tool whose handler waits on a gate and records its finalizer, for deadline and cancel tests.
const Wait = Tool.make("wait", { description: "Waits.", input: {}, output: Schema.Null })
const waitKit = Toolkit.make(Wait)

const waiting = (options: { readonly uninterruptible: boolean }) =>
  Effect.gen(function*() {
    const started = yield* Deferred.make<void>()
    const gate = yield* Deferred.make<void>()
    const finalized = yield* Deferred.make<void>()
    const body = Effect.zipRight(Deferred.succeed(started, undefined), Deferred.await(gate)).pipe(
      Effect.as(null),
      Effect.ensuring(Deferred.succeed(finalized, undefined))
    )
    const executor = yield* executorFrom(waitKit, {
      wait: () => options.uninterruptible ? Effect.uninterruptible(body) : body
    })
    return { executor, started, gate, finalized }
  })

describe("Executor.execute deadline and cancellation", () => {
  it.effect("deadline_exceeded at the deadline; the handler is interrupted and its finalizers run", () =>
    Effect.gen(function*() {
      const { executor, finalized, started } = yield* waiting({ uninterruptible: false })
      const fiber = yield* Effect.fork(executor.execute("wait", {}, { deadline: "1 second" }))
      yield* Deferred.await(started)
      yield* TestClock.adjust("999 millis")
      expect(fiber.unsafePoll()).toBe(null)
      yield* TestClock.adjust("1 millis")
      expect(yield* Fiber.join(fiber)).toStrictEqual({
        _tag: "Failed",
        code: "deadline_exceeded",
        message: "The tool did not finish before its deadline."
      })
      yield* Deferred.await(finalized)
    }))

  it.live("a deadline that does not fire leaves no timer behind to keep the process alive", () =>
    Effect.gen(function*() {
      const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length
      const executor = yield* executorFrom(Toolkit.make(Wait), { wait: () => Effect.succeed(null) })
      const before = timers()
      for (let i = 0; i < 50; i++) {
        expect(yield* executor.execute("wait", {}, { deadline: "1 minute" })).toMatchObject({ _tag: "Success" })
      }
      // The sleepers are interrupted in the background: give them a moment.
      yield* Effect.sleep("20 millis")
      expect(timers() - before).toBeLessThan(5)
    }))

  it.live("deadline_exceeded on time even when the handler ignores interruption", () =>
    Effect.gen(function*() {
      const { executor, finalized, gate, started } = yield* waiting({ uninterruptible: true })
      // The gate never opens before the answer: if execute waited for the handler, this hangs.
      const outcome = yield* executor.execute("wait", {}, { deadline: "20 millis" })
      expect(outcome).toMatchObject({ _tag: "Failed", code: "deadline_exceeded" })
      yield* Deferred.await(started)
      expect(yield* Deferred.isDone(finalized)).toBe(false)
      yield* Deferred.succeed(gate, undefined)
      yield* Deferred.await(finalized)
    }))

  it.live("canceled when the signal aborts; the handler's finalizers run", () =>
    Effect.gen(function*() {
      const { executor, finalized, started } = yield* waiting({ uninterruptible: false })
      const controller = new AbortController()
      const fiber = yield* Effect.fork(executor.execute("wait", {}, { signal: controller.signal }))
      yield* Deferred.await(started)
      controller.abort()
      expect(yield* Fiber.join(fiber)).toStrictEqual({
        _tag: "Failed",
        code: "canceled",
        message: "The tool call was canceled."
      })
      yield* Deferred.await(finalized)
    }))

  it.effect("an already aborted signal answers canceled without running the handler", () =>
    Effect.gen(function*() {
      const { executor, started } = yield* waiting({ uninterruptible: false })
      const controller = new AbortController()
      controller.abort()
      expect(yield* executor.execute("wait", {}, { signal: controller.signal })).toMatchObject({ code: "canceled" })
      expect(yield* Deferred.isDone(started)).toBe(false)
    }))

  it.effect("interrupting execute interrupts the handler and runs its finalizers", () =>
    Effect.gen(function*() {
      const { executor, finalized, started } = yield* waiting({ uninterruptible: false })
      const fiber = yield* Effect.fork(executor.execute("wait", {}))
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      yield* Deferred.await(finalized)
    }))
})

describe("Executor.execute concurrency", () => {
  it.live("1,000 concurrent executions complete with their own results", () =>
    Effect.gen(function*() {
      const inFlight = yield* Ref.make(0)
      const peak = yield* Ref.make(0)
      const Square = Tool.make("square", {
        description: "Squares.",
        input: { id: Schema.Int, delay: Schema.Int },
        output: Schema.Struct({ id: Schema.Int, square: Schema.Int })
      })
      const executor = yield* executorFrom(Toolkit.make(Square), {
        square: ({ delay, id }) =>
          Effect.gen(function*() {
            const now = yield* Ref.updateAndGet(inFlight, (n) => n + 1)
            yield* Ref.update(peak, (p) => Math.max(p, now))
            yield* Effect.sleep(delay)
            yield* Ref.update(inFlight, (n) => n - 1)
            return { id, square: id * id }
          })
      })
      const ids = Array.from({ length: 1000 }, (_, i) => i)
      const outcomes = yield* Effect.forEach(
        ids,
        (id) => executor.execute("square", { id, delay: (id * 7919) % 13 }),
        { concurrency: "unbounded" }
      )
      expect(outcomes).toStrictEqual(
        ids.map((id) => ({
          _tag: "Success",
          structuredContent: { id, square: id * id },
          text: JSON.stringify({ id, square: id * id })
        }))
      )
      expect(yield* Ref.get(peak)).toBeGreaterThan(1)
    }), 60_000)
})
