/**
 * Threads: a host-keyed conversation that continues a provider session from turn to turn.
 *
 * `agent.thread(key, options)` opens one. The key is the host's own opaque string (any Unicode,
 * NUL included), stored and compared as given. A thread is the session: `run` / `stream` a turn,
 * `snapshot` its checkpoint, watch `events`, `fork` it, `close` it (the agent stays open).
 *
 * - Every turn says how it opened the provider session, in a `ThreadOpened` event right after
 *   `RunStarted` (before the provider process starts) and in `Result.thread`: `started` (no
 *   checkpoint yet), `resumed`, `forked`, or `restarted` with the reason (`Incompatible` naming
 *   the fingerprint components that differ, or `ResumeRejected` with the provider's text).
 * - Continue-or-start (default): a turn resumes the committed checkpoint when it is compatible
 *   (same provider, same compatibility fingerprint). When it is not, or when the provider rejects
 *   the resume, `onUnresumable` decides: `restart` (default) starts a fresh session (after a
 *   rejection: exactly one fresh attempt under the same lease; a resuming turn's events are held
 *   back until the provider shows it took the session, with its first output, a live process
 *   attached to it, or the run's end, so a rejected attempt is never seen: the turn is one run
 *   whose `ThreadOpened` says `restarted`; a rejection after that is not retried and fails the
 *   turn as it is) and its commit replaces the
 *   record, which is kept in the key's history (`history`) until the host prunes it (`prune`,
 *   `Agent.pruneThreads`) or deletes the thread (`delete`); `fail` fails the turn with
 *   `ThreadIncompatible` (before any process starts) or `ResumeRejected`, and keeps the record.
 * - `resumeOnly`: also fails with `ThreadNotFound` when no record exists (implies `fail`).
 * - One run per thread at a time: a second concurrent run fails fast with `ThreadBusy` (a store
 *   lease, renewed while the run lasts, held across processes by a SQL store). A lost lease
 *   persists nothing. A turn's result does not wait for its CLI to exit, but the next turn on the
 *   key (through any handle of the agent) starts only once that CLI is gone.
 * - A checkpoint is committed only from a clean run with the provider's official terminal
 *   record, once the provider process has exited (it may still write the session after that
 *   record; bounded by the agent's `processes.exitGrace`) and the session's files are saved in
 *   the session store, before its `RunFinished` is published: a thread turn's result waits for
 *   its CLI's exit. A host that dies between the save and the commit keeps the previous record.
 *   Failures, non-zero exits and cancellations never overwrite a healthy record. A commit that
 *   fails (lease lost, store failure, session store failure) fails the run with `RunError`
 *   reason `CheckpointFailed`.
 * - Live (DESIGN §12): with a driver that has a live protocol (unless `Agent.Options.live.threads`
 *   is `false`), a thread's turns run on one warm provider process, reused while the turn's
 *   fingerprint, effective tools, model and built-in tool policy are unchanged and the process carries the committed
 *   session; otherwise a fresh one resumes the checkpoint. The checkpoint is then committed right
 *   after the turn's terminal record and the session's save (the process does not exit). An
 *   interrupted live turn ends `RunFinished(canceled)` and keeps the process; a process that dies
 *   mid-turn fails the turn with `RunError` and the next turn starts fresh from the checkpoint.
 *   `send` steers the running turn. Closing or deleting the thread shuts its process down (unless
 *   a turn of another handle of the thread runs on it: that turn keeps it until it ends).
 * - Every tool of the agent needs a `revision` (the catalog fingerprint cannot see a handler's
 *   code): `ToolRevisionMissing` before any driver starts.
 *
 * @since 0.1.0
 */
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Stream from "effect/Stream"
import type * as Agent from "./Agent.js"
import type {
  AgentClosed,
  ApprovalAlreadyResolved,
  ApprovalNotFound,
  InvalidTurn,
  RunError,
  UnsupportedCapability
} from "./AgentError.js"
import type * as Approval from "./Approval.js"
import type { ProtocolError } from "./Driver.js"
import type * as Event from "./Event.js"
import { Result } from "./Result.js"
import type * as StructuredOutput from "./StructuredOutput.js"
import type { LeaseLost, SupersededRecord, ThreadAlreadyExists, ThreadBusy, ThreadStoreError } from "./ThreadStore.js"
import { ThreadRecord } from "./ThreadStore.js"

export {
  /**
   * @since 0.1.0
   * @category models
   */
  Incompatible,
  /**
   * @since 0.1.0
   * @category models
   */
  Rejected,
  /**
   * @since 0.1.0
   * @category models
   */
  RestartReason,
  /**
   * @since 0.1.0
   * @category models
   */
  ThreadOpening
} from "./Result.js"

/**
 * - `resumeOnly`: never start a fresh session; fail instead, also when nothing is committed.
 * - `onUnresumable`: what a turn does when the committed checkpoint cannot be resumed (the record
 *   is incompatible with the agent, or the provider rejects the resume): `restart` (default) a
 *   fresh session, announced with its reason, the replaced record kept in the history; or `fail`
 *   with `ThreadIncompatible` / `ResumeRejected`, nothing started, the record kept.
 *
 * - `onCommit`: runs right after each turn of this handle commits its checkpoint (before
 *   `RunFinished`, while the turn still holds the thread's lease), for what must be recorded with
 *   the commit: e.g. a cluster saves the turn's answer there, for a second delivery of the same
 *   turn. The commit itself is interruptible (an agent's close never waits on a store); once it
 *   has happened, `onCommit` runs uninterruptibly, even if the turn is being canceled. Its
 *   failure is logged; the commit stands.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly resumeOnly?: boolean
  readonly onUnresumable?: "restart" | "fail"
  readonly onCommit?: (committed: {
    readonly record: ThreadRecord
    readonly result: Result
  }) => Effect.Effect<void>
}

/**
 * Which superseded records `prune` removes: those replaced more than `olderThan` ago (absent:
 * all of them).
 *
 * @since 0.1.0
 * @category models
 */
export interface PruneOptions {
  readonly olderThan?: Duration.DurationInput
}

/**
 * No checkpoint is committed under the key (`resumeOnly`, or the source of a fork).
 *
 * @since 0.1.0
 * @category errors
 */
export class ThreadNotFound
  extends Schema.TaggedError<ThreadNotFound>("@tether/core/ThreadNotFound")("ThreadNotFound", {
    key: Schema.String
  })
{
  override get message(): string {
    return "no thread is committed under this key"
  }
}

/**
 * The committed checkpoint cannot be resumed by this agent: another provider made it, or the
 * agent's compatibility fingerprint differs. `components` names the parts that differ (see
 * `Incompatible`).
 *
 * @since 0.1.0
 * @category errors
 */
export class ThreadIncompatible
  extends Schema.TaggedError<ThreadIncompatible>("@tether/core/ThreadIncompatible")("ThreadIncompatible", {
    key: Schema.String,
    reason: Schema.Literal("Provider", "Fingerprint"),
    components: Schema.Array(Schema.String)
  })
{
  override get message(): string {
    return `the thread's checkpoint is incompatible with this agent (${this.reason}: ${this.components.join(", ")})`
  }
}

/**
 * The provider rejected the resume of a `resumeOnly` (or `onUnresumable: "fail"`) thread; the
 * record is kept. `result` is the rejected run's partial result.
 *
 * @since 0.1.0
 * @category errors
 */
export class ResumeRejected
  extends Schema.TaggedError<ResumeRejected>("@tether/core/ResumeRejected")("ResumeRejected", {
    key: Schema.String,
    detail: Schema.String,
    result: Result
  })
{
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
export class ThreadClosed extends Schema.TaggedError<ThreadClosed>("@tether/core/ThreadClosed")("ThreadClosed", {
  key: Schema.String
}) {
  override get message(): string {
    return "the thread is closed"
  }
}

/**
 * `thread.send` found no running turn on the thread (through this agent) to deliver its input
 * to. Nothing was written to any process; `send` never starts a turn.
 *
 * @since 0.3.0
 * @category errors
 */
export class NoActiveTurn extends Schema.TaggedError<NoActiveTurn>("@tether/core/NoActiveTurn")("NoActiveTurn", {
  key: Schema.String
}) {
  override get message(): string {
    return "no turn is running on the thread: send delivers input into a running turn only"
  }
}

/**
 * What the provider did with input sent into a running turn (`thread.send`): `Injected` into the
 * running turn (the model sees it before the turn ends) or `Queued` to be answered after the
 * turn's own answer, within the same turn.
 *
 * @since 0.3.0
 * @category models
 */
export type Delivery = "Injected" | "Queued"

/**
 * Why `thread.send` failed: no running turn, a driver that cannot steer (checked first; nothing
 * is written), the provider's protocol refused the input, or the agent is closed (also when it
 * closes while the input is on its way and the input was not injected: the close cancels the
 * turn and shuts the process down, so queued input is never answered).
 *
 * @since 0.3.0
 * @category models
 */
export type SendFailure = NoActiveTurn | UnsupportedCapability | ProtocolError | AgentClosed

/**
 * The turn's `id` is the one the thread's committed record carries: that turn was already
 * committed (e.g. by a runner that died before replying), so it is not run again. Nothing was
 * started; `record` is the committed checkpoint.
 *
 * @since 0.1.0
 * @category errors
 */
export class TurnAlreadyCommitted
  extends Schema.TaggedError<TurnAlreadyCommitted>("@tether/core/TurnAlreadyCommitted")("TurnAlreadyCommitted", {
    key: Schema.String,
    turn: Schema.String,
    record: ThreadRecord
  })
{
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
export class ToolRevisionMissing
  extends Schema.TaggedError<ToolRevisionMissing>("@tether/core/ToolRevisionMissing")("ToolRevisionMissing", {
    tools: Schema.Array(Schema.String)
  })
{
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
 * Why a thread's `runAs` / `streamAs` failed.
 *
 * @since 0.2.0
 * @category models
 */
export type StructuredFailure = RunFailure | UnsupportedCapability | StructuredOutput.StructuredOutputError

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
 * What `Agent.pruneThreads` removed: superseded checkpoints, and session-store entries
 * (relative to the provider's profile) of sessions no record refers to any more.
 *
 * @since 0.1.0
 * @category models
 */
export interface PruneReport {
  readonly records: ReadonlyArray<SupersededRecord>
  readonly sessionEntries: ReadonlyArray<string>
}

/**
 * Why deleting a thread failed: a turn holds it (`ThreadBusy`), the lease was lost midway
 * (`LeaseLost`: call again), the store failed, or the agent is closed.
 *
 * @since 0.1.0
 * @category models
 */
export type DeleteFailure = AgentClosed | ThreadBusy | LeaseLost | ThreadStoreError

/**
 * A thread of an agent.
 *
 * - `stream(turn)` / `run(turn)`: as the agent's, on this thread's session (see the module
 *   documentation); a turn's `toolPolicy` applies to that turn only. When a rejected resume is
 *   retried fresh, the retry is invisible: the stream carries one run (its `ThreadOpened` says
 *   `restarted`, with the rejection) and `run` returns the fresh run's result.
 * - `runAs(schema, turn)` / `streamAs(schema, turn)`: as the agent's (see `StructuredOutput`);
 *   each attempt is a turn of this thread, and a repair turn resumes the checkpoint the previous
 *   attempt committed.
 * - `fork(key)`: a new thread whose first turn forks this thread's committed session; the target
 *   must be absent (`ThreadAlreadyExists`, checked again under the target's lease and by an
 *   insert-only commit); `UnsupportedCapability` before spawn when the driver cannot fork. That
 *   first turn holds this thread's lease too (`ThreadBusy` naming this thread while a turn of it
 *   runs; this thread's turns are `ThreadBusy` while it runs) and forks what this thread has
 *   committed when it starts, turns committed after `fork` was called included.
 * - `snapshot`: the committed checkpoint (opaque, serializable), if any.
 * - `history`: the checkpoints a restart replaced, most recent first, until pruned.
 * - `prune(options?)`: removes superseded checkpoints of this key (all, or those replaced more
 *   than `olderThan` ago) and their provider sessions from the session store; returns them.
 *   `AgentClosed` (nothing removed) once the agent is closed.
 * - `delete`: removes the key's checkpoint and history and their provider sessions (waiting for
 *   nothing: `ThreadBusy` while a turn runs); returns what was removed. A later turn starts fresh.
 * - `events`: every event of every turn run through this handle while subscribed, including the
 *   `RunStarted` and `RunFinished` of a turn whose caller stopped reading it; under the agent's
 *   event policy (`events.buffer` per subscriber: content deltas beyond it are dropped and
 *   counted in a `Dropped`, which takes the sequence of the last event it stands for; other
 *   events wait, so a subscriber that stops pulling without ending its stream holds the turns
 *   back, as a run's own consumer does; with `events.blocking` nothing is dropped). Ends when the
 *   thread or the agent closes, after the last turn's `RunFinished`.
 * - `send(input)`: delivers input into the turn running on this thread (through this agent) and
 *   tells what the provider did with it (`Injected` / `Queued`); the turn's stream, `events` and
 *   its transcript show it as `InputDelivered`. It never starts a turn: `NoActiveTurn` when none
 *   runs; `UnsupportedCapability` (before anything is written) when the driver cannot steer (no
 *   live protocol, or one without input during a turn, such as Gemini's ACP).
 * - `approve(id, decision)`: answers an approval one of this thread's turns asked for (an
 *   `ApprovalRequested` event); `ApprovalNotFound` for an id no turn of this thread is waiting on,
 *   `ApprovalAlreadyResolved` when it was already answered (see `Approval`).
 * - `close`: cancels the thread's running turns and waits for them (each one's stream shows its
 *   `RunFinished` with outcome `canceled`, then fails with `ThreadClosed`; a turn still waiting to
 *   run fails with `ThreadClosed` at once), ends `events`, and refuses further turns. Idempotent;
 *   the agent and the committed record stay.
 *
 * @since 0.1.0
 * @category models
 */
export interface Thread {
  readonly key: string
  readonly run: (turn: Agent.Input) => Effect.Effect<Result, RunFailure>
  readonly stream: (turn: Agent.Input) => Stream.Stream<Event.Event, RunFailure>
  readonly runAs: <A, I>(
    schema: Schema.Schema<A, I>,
    turn: Agent.Input,
    options?: StructuredOutput.Options
  ) => Effect.Effect<StructuredOutput.Decoded<A>, StructuredFailure>
  readonly streamAs: <A, I>(
    schema: Schema.Schema<A, I>,
    turn: Agent.Input,
    options?: StructuredOutput.Options
  ) => Stream.Stream<Event.Event | StructuredOutput.Decoded<A>, StructuredFailure>
  readonly fork: (key: string, options?: Options) => Effect.Effect<Thread, OpenFailure>
  readonly snapshot: Effect.Effect<Option.Option<ThreadRecord>, ThreadStoreError>
  readonly history: Effect.Effect<ReadonlyArray<SupersededRecord>, ThreadStoreError>
  readonly prune: (
    options?: PruneOptions
  ) => Effect.Effect<ReadonlyArray<SupersededRecord>, ThreadStoreError | AgentClosed>
  readonly delete: Effect.Effect<ReadonlyArray<ThreadRecord>, DeleteFailure>
  readonly events: Stream.Stream<Event.Event>
  readonly send: (input: string) => Effect.Effect<Delivery, SendFailure>
  readonly approve: (
    id: string,
    decision: Approval.Decision
  ) => Effect.Effect<void, ApprovalNotFound | ApprovalAlreadyResolved>
  readonly close: Effect.Effect<void>
}
