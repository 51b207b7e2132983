/**
 * What other Tether packages and operational tools need from core's internals, with no
 * stability promise: anything here may change or go in any release, patch releases included.
 * It is only at its own entry point, `@tether/core/Unstable`, and is not re-exported from
 * `@tether/core`.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import type * as Stream from "effect/Stream"
import * as internalProcess from "./internal/process.js"
import * as internalTracing from "./internal/tracing.js"

/**
 * The environment variable every provider process (and, by inheritance, its descendants)
 * carries with its agent's `marker`, so leftovers can be found and reaped (e.g. by
 * `@tether/testing`'s `Harness.markedProcesses`).
 *
 * @since 0.1.0
 * @category unstable
 */
export const markerVariable: string = internalProcess.markerVariable

/**
 * SIGKILLs the processes left by a host that died without closing its agents (found by the
 * marker every provider process carries; the marker names its host by pid and process start
 * time, so a pid reused by another process does not hide them). `Agent.make` runs it once per
 * host process, and then also removes the clones such hosts left, in every clone root they
 * recorded in the per-user state directory (`$XDG_STATE_HOME/tether`, else
 * `~/.local/state/tether`); a host may also run it at start. Linux `/proc` only: elsewhere
 * nothing is found. Returns the pids signalled.
 *
 * @since 0.1.0
 * @category unstable
 */
export const reapOrphans: Effect.Effect<ReadonlyArray<number>> = internalProcess.reapOrphans

/**
 * A thread key as traces carry it (`thread.key_hash`): HMAC-SHA-256 under a key random per host
 * process, 32 hex digits. It correlates a thread's spans within the process and cannot be checked
 * against a guessed key.
 *
 * @since 0.4.0
 * @category unstable
 */
export const threadKeyHash: (key: string) => string = internalTracing.threadKeyHash

/**
 * `Effect.withSpan` as Tether's spans use it: the span ends with a content-free exit (a failure
 * as its `_tag` and `reason` only, a defect as `Defect`), because a tracer records the message of
 * the exit a span ends with, and an error's message may quote a provider's error text, a model's
 * answer or a thread key.
 *
 * @since 0.4.0
 * @category unstable
 */
export const withSpan: (
  name: string,
  options?: { readonly attributes?: Record<string, unknown> }
) => <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R> = internalTracing.withSpan

/**
 * The exit Tether's spans end with in place of their own: without content (a success as void, a
 * failure as its `_tag` and `reason` only, a defect as `Defect`, an interruption stays one). For
 * a span another library makes and ends with its call's exit (`@tether/cluster`'s RPC client
 * spans), whose message may quote a provider's text.
 *
 * @since 0.4.0
 * @category unstable
 */
export const contentFreeExit: (exit: Exit.Exit<unknown, unknown>) => Exit.Exit<unknown, unknown> =
  internalTracing.contentFree

/**
 * `Stream.withSpan` as Tether's spans use it, ended as `withSpan`'s.
 *
 * @since 0.4.0
 * @category unstable
 */
export const withStreamSpan: (
  name: string,
  options?: { readonly attributes?: Record<string, unknown> }
) => <A, E, R>(self: Stream.Stream<A, E, R>) => Stream.Stream<A, E, R> = internalTracing.withStreamSpan
