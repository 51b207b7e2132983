/**
 * The ordered close (DESIGN §6): named steps run in order, each bounded; a deadline that
 * expires leaves the remaining steps pending and fails with `CloseTimeout`; a later call
 * continues from the first pending step. Calls are serialized, so concurrent calls are safe
 * and a completed close is a no-op.
 *
 * @internal
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { CloseTimeout } from "../AgentError.js"

/** @internal */
export interface Step {
  readonly name: string
  /** The step's own bound (it is also cut by the call's deadline). */
  readonly bound: Duration.DurationInput
  readonly run: Effect.Effect<void>
}

/** @internal */
export interface Closer {
  readonly close: (deadline: Duration.DurationInput) => Effect.Effect<void, CloseTimeout>
  readonly done: () => boolean
}

/**
 * Waits for `fiber` at most `millis`, by polling. This works where `Effect.timeout` does not:
 * in a finalizer of an interrupted fiber (an interruptible region there is cut at once, and an
 * uninterruptible wait cannot be timed out).
 *
 * @internal
 */
export const awaitBounded = (fiber: Fiber.Fiber<void>, millis: number): Effect.Effect<boolean> =>
  Effect.gen(function*() {
    const until = Date.now() + millis
    // Most steps finish within a few scheduler turns: poll eagerly first, then back off to 5 ms.
    for (let attempt = 0;; attempt++) {
      const done = yield* Fiber.poll(fiber)
      if (Option.isSome(done)) return true
      if (Date.now() >= until) return false
      if (attempt < 8) yield* Effect.yieldNow()
      else yield* Effect.sleep(Duration.millis(Math.min(5, attempt - 7)))
    }
  })

/** @internal */
export const make = (agent: string, steps: ReadonlyArray<Step>): Effect.Effect<Closer> =>
  Effect.gen(function*() {
    const lock = yield* Effect.makeSemaphore(1)
    let next = 0
    // Each step runs once, in its own fiber (never tied to a caller that may be interrupted);
    // a close that times out leaves it running and a later close awaits the same fiber, so a
    // removal is never restarted while the first one is still in progress.
    const fibers: Array<Fiber.Fiber<void> | undefined> = steps.map(() => undefined)
    const close = (deadline: Duration.DurationInput) =>
      lock.withPermits(1)(Effect.gen(function*() {
        const until = Date.now() + Duration.toMillis(deadline)
        while (next < steps.length) {
          const step = steps[next]!
          const left = Math.max(0, until - Date.now())
          const bound = Math.min(left, Duration.toMillis(step.bound))
          const fiber = fibers[next] ?? (yield* Effect.forkDaemon(Effect.interruptible(step.run)))
          fibers[next] = fiber
          const completed = yield* awaitBounded(fiber, bound)
          if (!completed) {
            if (Date.now() < until) {
              // The step's own bound expired, not the caller's deadline: move on, the later
              // steps (sweeps, removals) still do their part. The step is not retried.
              yield* Effect.logWarning(`agent ${agent}: close step ${step.name} exceeded its bound`)
              next++
              continue
            }
            return yield* new CloseTimeout({ agent, pending: steps.slice(next).map((s) => s.name) })
          }
          next++
        }
      }))
    return { close, done: () => next >= steps.length }
  })
