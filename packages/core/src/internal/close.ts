/**
 * The ordered close (DESIGN §6): named steps run in order, in the calling fiber, all of them
 * within the call's deadline. A deadline that expires interrupts the step in progress, leaves
 * it and every later step pending and fails with `CloseTimeout` naming them; a later call
 * continues from the first pending step. Calls are serialized (waiting for the previous call
 * counts against the deadline), so concurrent calls are safe and a completed close is a no-op.
 *
 * Every step must be interruptible at once (waits, signals, sweeps). A step whose work must
 * never be cut (closing a scope: its remaining finalizers would be skipped) goes through
 * `once`: the work runs to its end on its own, and callers only wait for it.
 *
 * @internal
 */
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import { CloseTimeout } from "../AgentError.js"

/** @internal */
export interface Step {
  readonly name: string
  readonly run: Effect.Effect<void>
}

/** @internal */
export interface Closer {
  readonly close: (deadline: Duration.DurationInput) => Effect.Effect<void, CloseTimeout>
  readonly done: () => boolean
}

/**
 * `work`, started by the first caller and then run to its end whatever happens to the callers
 * (it is work that must never be cut, such as closing a scope: an interruption would skip its
 * remaining finalizers, or abort a removal that has its own bound); every call, the first
 * included, waits for that one run and can be interrupted while waiting. The work runs in a
 * fiber of its own, which no caller interrupts; it ends with the work.
 *
 * @internal
 */
export const once = (work: Effect.Effect<void>): Effect.Effect<Effect.Effect<void>> =>
  Effect.sync(() => {
    // Made by the first caller: an agent that never closes (a host killed) makes none, and a
    // Deferred costs about a kilobyte.
    let done: Deferred.Deferred<void> | undefined
    const start = Effect.suspend(() => {
      if (done !== undefined) return Effect.succeed(done)
      const made = Deferred.unsafeMake<void>(FiberId.none)
      done = made
      return Effect.as(Effect.forkDaemon(Effect.intoDeferred(work, made)), made)
    })
    return Effect.flatMap(Effect.uninterruptible(start), Deferred.await)
  })

/** @internal */
export const make = (agent: string, steps: ReadonlyArray<Step>): Effect.Effect<Closer> =>
  Effect.map(Effect.makeSemaphore(1), (lock) => {
    let next = 0
    const pending = () => new CloseTimeout({ agent, pending: steps.slice(next).map((step) => step.name) })
    const run = Effect.suspend(function loop(): Effect.Effect<void> {
      const step = steps[next]
      if (step === undefined) return Effect.void
      return step.run.pipe(
        Effect.zipRight(Effect.sync(() => next++)),
        Effect.zipRight(Effect.suspend(loop))
      )
    })
    // Interruptible, so the timeout works also inside a finalizer (where everything else is
    // uninterruptible); the timeout is on the Clock, so a TestClock drives it.
    const close = (deadline: Duration.DurationInput) =>
      lock.withPermits(1)(run).pipe(
        Effect.interruptible,
        Effect.timeoutFail({ duration: deadline, onTimeout: pending })
      )
    return { close, done: () => next >= steps.length }
  })
