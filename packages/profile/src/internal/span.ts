/**
 * The profile's spans as Tether's other spans end (docs/tracing.md): a failed span carries the
 * error's tag and reason only, never its message, which names the files of a clone or a session
 * (a home directory, a path under it). Core's tracing does the same for its spans; this package
 * depends on no other of Tether's.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as Option from "effect/Option"

const contentFree = (exit: Exit.Exit<unknown, unknown>): Exit.Exit<unknown, unknown> => {
  if (Exit.isSuccess(exit)) return Exit.void
  if (Cause.isInterruptedOnly(exit.cause)) return Exit.interrupt(FiberId.none)
  const failure: unknown = Option.getOrUndefined(Cause.failureOption(exit.cause))
  if (failure === undefined) return Exit.fail(new Error("failed: Defect"))
  const { _tag, reason } = (typeof failure === "object" && failure !== null ? failure : {}) as {
    readonly _tag?: unknown
    readonly reason?: unknown
  }
  const name = [_tag, reason].filter((part): part is string => typeof part === "string").join(" ")
  return Exit.fail(new Error(`failed: ${name === "" ? "Error" : name}`))
}

/** `Effect.withSpan(name)`, the span ended content-free. @internal */
export const withSpan = (name: string) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.acquireUseRelease(
    Effect.makeSpan(name, { captureStackTrace: false }),
    (span) => Effect.withParentSpan(self, span),
    (span, exit) => Effect.flatMap(Clock.currentTimeNanos, (now) => Effect.sync(() => span.end(now, contentFree(exit))))
  )
