/**
 * The span of each run: what it ran on and how it ended, never content (no prompt, text, tool
 * argument, token or thread key).
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as FiberRef from "effect/FiberRef"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Tracer from "effect/Tracer"
import { createHmac, randomBytes } from "node:crypto"
import type { RunError } from "../AgentError.js"
import type { Result } from "../Result.js"

// Keyed per host process: a hash correlates a thread's runs in traces, but cannot be checked
// against a guessed key outside the process.
const secret = randomBytes(32)

/** A thread key as a span attribute: HMAC-SHA-256 under a per-process key, 32 hex digits. @internal */
export const threadKeyHash = (key: string): string =>
  // UTF-16 code units: distinct keys (lone surrogates included) never collide by encoding.
  createHmac("sha256", secret).update(Buffer.from(key, "utf16le")).digest("hex").slice(0, 32)

/** @internal */
export const startRun = (attributes: {
  readonly runId: string
  readonly provider: string
  readonly model: string | undefined
  readonly threadKey: string | undefined
}): Effect.Effect<Tracer.Span> =>
  Effect.makeSpan("Run.execute", {
    kind: "internal",
    captureStackTrace: false,
    attributes: {
      "run.id": attributes.runId,
      "run.provider": attributes.provider,
      ...(attributes.model === undefined ? {} : { "run.model": attributes.model }),
      ...(attributes.threadKey === undefined ? {} : { "thread.key_hash": threadKeyHash(attributes.threadKey) })
    }
  })

/**
 * Ends the run's span with its outcome, reported model and token counts. The span's own exit is
 * content-free: a failure carries only the `RunError` reason (a provider's error text stays out of
 * traces), a cancellation is an interruption.
 *
 * @internal
 */
export const endRun = (
  span: Tracer.Span,
  exit: Exit.Exit<Result, RunError | { readonly _tag: string }>
): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeNanos, (now) =>
    Effect.sync(() => {
      let outcome: "success" | "failure" | "canceled" = "success"
      let reason: string | undefined
      let result: Result | undefined
      if (Exit.isSuccess(exit)) result = exit.value
      else {
        const first = Option.getOrUndefined(Cause.failureOption(exit.cause))
        if (first !== undefined && first._tag === "RunError") {
          const runError = first as RunError
          reason = runError.reason
          result = runError.result
          outcome = reason === "Canceled" ? "canceled" : "failure"
        } else if (first !== undefined) {
          reason = first._tag
          outcome = "failure"
        } else if (Cause.isDie(exit.cause)) {
          // A bug in a driver or in core (the run's RunFinished says `Defect`).
          reason = "Defect"
          outcome = "failure"
        } else outcome = "canceled"
      }
      span.attribute("run.outcome", outcome)
      if (reason !== undefined) span.attribute("run.reason", reason)
      if (result?.model !== undefined) span.attribute("run.model", result.model)
      const usage = result?.usage
      if (usage?.inputTokens !== undefined) span.attribute("run.usage.input_tokens", usage.inputTokens)
      if (usage?.outputTokens !== undefined) span.attribute("run.usage.output_tokens", usage.outputTokens)
      if (usage?.cachedInputTokens !== undefined) {
        span.attribute("run.usage.cached_input_tokens", usage.cachedInputTokens)
      }
      if (usage?.reasoningTokens !== undefined) span.attribute("run.usage.reasoning_tokens", usage.reasoningTokens)
      span.end(
        now,
        outcome === "success"
          ? Exit.void
          : outcome === "canceled"
          ? Exit.interrupt(FiberId.none)
          : Exit.fail(new Error(`run failed: ${reason}`))
      )
    }))

/**
 * A span's exit without content: a failure is its `_tag` (and `reason`) only, a defect is
 * `Defect`, an interruption stays one. An error's message may quote a provider's error text, a
 * model's answer or a key, and a tracer records the message of the exit a span ends with.
 * @internal
 */
export const contentFree = (exit: Exit.Exit<unknown, unknown>): Exit.Exit<unknown, unknown> => {
  if (Exit.isSuccess(exit)) return Exit.void
  if (Cause.isInterruptedOnly(exit.cause)) return Exit.interrupt(FiberId.none)
  const failure = Option.getOrUndefined(Cause.failureOption(exit.cause))
  if (failure === undefined) return Exit.fail(new Error("failed: Defect"))
  const { _tag, reason } = (typeof failure === "object" && failure !== null ? failure : {}) as {
    readonly _tag?: unknown
    readonly reason?: unknown
  }
  const name = [_tag, reason].filter((part): part is string => typeof part === "string").join(" ")
  return Exit.fail(new Error(`failed: ${name === "" ? "Error" : name}`))
}

const endSpan = (span: Tracer.Span, exit: Exit.Exit<unknown, unknown>) =>
  Effect.flatMap(Clock.currentTimeNanos, (now) => Effect.sync(() => span.end(now, contentFree(exit))))

/**
 * `Effect.withSpan` for Tether's own spans: the span ends with a content-free exit (see
 * `contentFree`), never the failure's message. @internal
 */
export const withSpan =
  (name: string, options?: { readonly attributes?: Record<string, unknown> }) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.acquireUseRelease(
      Effect.makeSpan(name, { captureStackTrace: false, ...options }),
      (span) => Effect.withParentSpan(self, span),
      endSpan
    )

/** `Stream.withSpan` for Tether's own spans, ended as `withSpan`'s. @internal */
export const withStreamSpan =
  (name: string, options?: { readonly attributes?: Record<string, unknown> }) =>
  <A, E, R>(self: Stream.Stream<A, E, R>): Stream.Stream<A, E, R> =>
    Stream.unwrapScoped(
      Effect.map(
        Effect.acquireRelease(Effect.makeSpan(name, { captureStackTrace: false, ...options }), endSpan),
        (span) => Stream.provideService(self, Tracer.ParentSpan, span)
      )
    )

/**
 * `self` with no current span: what it logs is no event of the span around it. Effect's tracer
 * logger records a log line's cause, whose text may quote a tool's arguments, a provider's output
 * or a model's answer (docs/tracing.md keeps them off spans). @internal
 */
export const offSpan = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.locallyWith(self, FiberRef.currentContext, Context.omit(Tracer.ParentSpan))
