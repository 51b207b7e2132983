/**
 * Threads: a host-keyed conversation that continues a provider session from turn to turn.
 *
 * `agent.thread(key, options)` opens one. The key is the host's own opaque string (any Unicode,
 * NUL included), stored and compared as given. A thread is the session: `run` / `stream` a turn,
 * `snapshot` its checkpoint, watch `events`, `fork` it, `close` it (the agent stays open).
 *
 * - Continue-or-start (default): a turn resumes the committed checkpoint when it is compatible
 *   (same provider, same compatibility fingerprint) and starts a fresh session otherwise. A
 *   resume the provider rejects makes exactly one fresh attempt under the same lease; its
 *   successful commit atomically replaces the record.
 * - `resumeOnly`: fails with `ThreadNotFound` (no record), `ThreadIncompatible` (the record was
 *   made by another provider or an agent with another fingerprint) or `ResumeRejected` (the
 *   provider refused the resume); the healthy record is kept.
 * - One run per thread at a time: a second concurrent run fails fast with `ThreadBusy` (a store
 *   lease, renewed while the run lasts, held across processes by a SQL store). A lost lease
 *   persists nothing. A turn's result does not wait for its CLI to exit, but the next turn on the
 *   key (through any handle of the agent) starts only once that CLI is gone.
 * - A checkpoint is committed only from a clean run with the provider's official terminal
 *   record, before its `RunFinished` is published; failures, non-zero exits and cancellations
 *   never overwrite a healthy record. A commit that fails (lease lost, store failure) fails the
 *   run with `RunError` reason `CheckpointFailed`.
 * - Every tool of the agent needs a `revision` (the catalog fingerprint cannot see a handler's
 *   code): `ToolRevisionMissing` before any driver starts.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Stream from "effect/Stream"
import type * as Agent from "./Agent.js"
import type { AgentClosed, InvalidTurn, RunError, UnsupportedCapability } from "./AgentError.js"
import type * as Event from "./Event.js"
import { Result } from "./Result.js"
import type { ThreadAlreadyExists, ThreadBusy, ThreadStoreError } from "./ThreadStore.js"
import { ThreadRecord } from "./ThreadStore.js"

/**
 * `resumeOnly`: never start a fresh session; fail instead (see the module documentation).
 *
 * `onCommit`: runs right after each turn of this handle commits its checkpoint, in the same
 * uninterruptible step (before `RunFinished`, while the turn still holds the thread's lease), for
 * what must be recorded with the commit: e.g. a cluster saves the turn's answer there, for a
 * second delivery of the same turn. Its failure is logged; the commit stands.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly resumeOnly?: boolean
  readonly onCommit?: (committed: {
    readonly record: ThreadRecord
    readonly result: Result
  }) => Effect.Effect<void>
}

/**
 * No checkpoint is committed under the key (`resumeOnly`, or the source of a fork).
 *
 * @since 0.1.0
 * @category errors
 */
export class ThreadNotFound extends Schema.TaggedError<ThreadNotFound>()("ThreadNotFound", {
  key: Schema.String
}) {
  override get message(): string {
    return "no thread is committed under this key"
  }
}

/**
 * The committed checkpoint cannot be resumed by this agent: another provider made it, or the
 * agent's compatibility fingerprint differs (driver or its session config, model, workspace,
 * instructions, skills, MCP declarations, tool catalog, policy, profile).
 *
 * @since 0.1.0
 * @category errors
 */
export class ThreadIncompatible extends Schema.TaggedError<ThreadIncompatible>()("ThreadIncompatible", {
  key: Schema.String,
  reason: Schema.Literal("Provider", "Fingerprint")
}) {
  override get message(): string {
    return `the thread's checkpoint is incompatible with this agent (${this.reason})`
  }
}

/**
 * The provider rejected the resume of a `resumeOnly` thread; the record is kept. `result` is
 * the rejected run's partial result.
 *
 * @since 0.1.0
 * @category errors
 */
export class ResumeRejected extends Schema.TaggedError<ResumeRejected>()("ResumeRejected", {
  key: Schema.String,
  detail: Schema.String,
  result: Result
}) {
  override get message(): string {
    return `the provider rejected the resume: ${this.detail}`
  }
}

/**
 * The thread was closed: it admits no run and its running turns were canceled.
 *
 * @since 0.1.0
 * @category errors
 */
export class ThreadClosed extends Schema.TaggedError<ThreadClosed>()("ThreadClosed", {
  key: Schema.String
}) {
  override get message(): string {
    return "the thread is closed"
  }
}

/**
 * The turn's `id` is the one the thread's committed record carries: that turn was already
 * committed (e.g. by a runner that died before replying), so it is not run again. Nothing was
 * started; `record` is the committed checkpoint.
 *
 * @since 0.1.0
 * @category errors
 */
export class TurnAlreadyCommitted extends Schema.TaggedError<TurnAlreadyCommitted>()("TurnAlreadyCommitted", {
  key: Schema.String,
  turn: Schema.String,
  record: ThreadRecord
}) {
  override get message(): string {
    return `turn ${this.turn} of this thread is already committed`
  }
}

/**
 * Tools without a `revision` cannot be used on a thread: a resumed session would silently
 * meet changed tool behaviour. Raised before any driver starts.
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolRevisionMissing extends Schema.TaggedError<ToolRevisionMissing>()("ToolRevisionMissing", {
  tools: Schema.Array(Schema.String)
}) {
  override get message(): string {
    return `every tool used by a thread needs a revision; missing: ${this.tools.join(", ")}`
  }
}

/**
 * Why a thread turn failed before or during its run.
 *
 * @since 0.1.0
 * @category models
 */
export type RunFailure =
  | RunError
  | AgentClosed
  | InvalidTurn
  | ThreadBusy
  | ThreadNotFound
  | ThreadIncompatible
  | ThreadAlreadyExists
  | ResumeRejected
  | ThreadClosed
  | TurnAlreadyCommitted
  | ThreadStoreError

/**
 * Why opening (or forking) a thread failed. `UnsupportedCapability`: the driver cannot resume
 * (or fork), refused before any process starts.
 *
 * @since 0.1.0
 * @category models
 */
export type OpenFailure =
  | AgentClosed
  | UnsupportedCapability
  | ToolRevisionMissing
  | ThreadNotFound
  | ThreadIncompatible
  | ThreadAlreadyExists
  | ThreadClosed
  | ThreadStoreError

/**
 * A thread of an agent.
 *
 * - `stream(turn)` / `run(turn)`: as the agent's, on this thread's session (see the module
 *   documentation); a turn's `toolPolicy` applies to that turn only. When a rejected resume is
 *   retried fresh, the stream carries both runs (the rejected one ends with a failed
 *   `RunFinished`) and `run` returns the fresh run's result.
 * - `fork(key)`: a new thread whose first turn forks this thread's committed session; the target
 *   must be absent (`ThreadAlreadyExists`, checked again under the target's lease and by an
 *   insert-only commit); `UnsupportedCapability` before spawn when the driver cannot fork.
 * - `snapshot`: the committed checkpoint (opaque, serializable), if any.
 * - `events`: every event of every turn on this thread while subscribed; ends when the thread
 *   or the agent closes.
 * - `close`: cancels the thread's running turns (they fail with `ThreadClosed`), ends `events`,
 *   and refuses further turns. Idempotent; the agent and the committed record stay.
 *
 * @since 0.1.0
 * @category models
 */
export interface Thread {
  readonly key: string
  readonly run: (turn: Agent.Input) => Effect.Effect<Result, RunFailure>
  readonly stream: (turn: Agent.Input) => Stream.Stream<Event.Event, RunFailure>
  readonly fork: (key: string, options?: Options) => Effect.Effect<Thread, OpenFailure>
  readonly snapshot: Effect.Effect<Option.Option<ThreadRecord>, ThreadStoreError>
  readonly events: Stream.Stream<Event.Event>
  readonly close: Effect.Effect<void>
}
