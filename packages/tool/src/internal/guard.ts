/**
 * Runs an effect in its own fiber and answers with the first of: its exit, a deadline, an
 * abort signal. Whoever ends the wait (deadline, signal, or the caller's interruption), the
 * answer comes at once and the fiber is interrupted in the background: work that ignores
 * interruption cannot hold the answer back, and its finalizers still run.
 *
 * One fiber for the work; waiting is a plain callback registration, not a race of fibers.
 * The deadline is a timer of the live clock, or, under any other `Clock` (e.g. `TestClock`),
 * a fiber sleeping on that clock so that it drives the deadline.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as DefaultServices from "effect/DefaultServices"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"

/** @internal */
export type Ending<A> =
  | { readonly _tag: "Exit"; readonly exit: Exit.Exit<A> }
  | { readonly _tag: "Deadline" }
  | { readonly _tag: "Aborted" }

const deadlineEnding: Ending<never> = { _tag: "Deadline" }
const abortedEnding: Ending<never> = { _tag: "Aborted" }

const liveClock = Context.get(DefaultServices.liveServices, Clock.Clock)

// Live clock: a plain timer, cleared when the wait ends. Never beyond setTimeout's range.
const maxTimerMillis = 2 ** 31 - 1

type Deadline =
  | { readonly _tag: "Timer"; readonly millis: number }
  | { readonly _tag: "Sleeper"; readonly fiber: Fiber.RuntimeFiber<void> }

const wait = <A>(
  work: Fiber.RuntimeFiber<A>,
  deadline: Deadline | undefined,
  signal: AbortSignal | undefined
): Effect.Effect<Ending<A>> =>
  Effect.async<Ending<A>>((resume) => {
    let settled = false
    let timer: ReturnType<typeof setTimeout> | undefined
    const settle = (ending: Ending<A>) => {
      if (settled) return
      settled = true
      cleanup()
      resume(Effect.succeed(ending))
    }
    const onExit = (exit: Exit.Exit<A>) => settle({ _tag: "Exit", exit })
    const onDeadline = (exit: Exit.Exit<void>) => {
      // The sleeper is interrupted when the wait ends some other way; only a completed sleep is the deadline.
      if (exit._tag === "Success") settle(deadlineEnding)
    }
    const onAbort = () => settle(abortedEnding)
    const cleanup = () => {
      work.removeObserver(onExit)
      if (deadline?._tag === "Sleeper") deadline.fiber.removeObserver(onDeadline)
      if (timer !== undefined) clearTimeout(timer)
      signal?.removeEventListener("abort", onAbort)
    }
    work.addObserver(onExit)
    if (deadline?._tag === "Sleeper") deadline.fiber.addObserver(onDeadline)
    if (deadline?._tag === "Timer" && deadline.millis <= maxTimerMillis) {
      timer = setTimeout(() => settle(deadlineEnding), deadline.millis)
    }
    signal?.addEventListener("abort", onAbort, { once: true })
    if (signal?.aborted === true) onAbort()
    return Effect.sync(() => {
      settled = true
      cleanup()
    })
  })

const startDeadline = (duration: Duration.Duration | undefined): Effect.Effect<Deadline | undefined> =>
  duration === undefined ? Effect.succeed(undefined) : Effect.clockWith((clock) =>
    clock === liveClock
      ? Effect.succeed<Deadline>({ _tag: "Timer", millis: Duration.toMillis(duration) })
      // The sleeper is forked inside `uninterruptibleMask`: without `interruptible` it would
      // inherit the mask, ignore its interruption and keep its timer alive until it fires.
      : Effect.map(Effect.forkDaemon(Effect.interruptible(Effect.sleep(duration))), (fiber): Deadline => ({
        _tag: "Sleeper",
        fiber
      }))
  )

/** @internal */
export const guard = <A>(
  work: Effect.Effect<A>,
  options: { readonly deadline: Duration.Duration | undefined; readonly signal: AbortSignal | undefined }
): Effect.Effect<Ending<A>> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.fiberIdWith((self) =>
      Effect.flatMap(
        Effect.forkDaemon(restore(work)),
        (fiber) =>
          Effect.flatMap(startDeadline(options.deadline), (deadline) => {
            const release = Effect.sync(() => {
              if (deadline?._tag === "Sleeper") deadline.fiber.unsafeInterruptAsFork(self)
              if (fiber.unsafePoll() === null) fiber.unsafeInterruptAsFork(self)
            })
            return Effect.ensuring(restore(wait(fiber, deadline, options.signal)), release)
          })
      )
    )
  )
