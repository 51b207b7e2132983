/**
 * Threads as `@effect/cluster` entities: one entity per thread key, sharded across the runner
 * processes of a fleet (see `Runner` for the transports).
 *
 * - The entity is the thread's single writer: one turn at a time, run by an agent the entity
 *   builds on its runner from the layer's `Agent.Options` and closes when it stops (idle, shard
 *   moved, `close`). A turn (or `Delete`) sent while another turn runs fails fast with
 *   `ThreadBusy`; sent while that turn has not started yet (its agent or thread still opening, or
 *   waiting out a previous runner's lease) it waits for it, up to `takeover.timeout`: it is
 *   admitted if that turn ends first (its caller's timeout or interrupt), fails with `ThreadBusy`
 *   once it starts, with `ThreadClosed` on a `Close`. Each runner owns its gateway, clones and
 *   CLIs; nothing of them crosses runners.
 * - Turns stay fenced by the `ThreadStore` lease and guarded commit, because a turn is delivered
 *   at least once: a turn in flight on a runner that dies is delivered again to the survivor
 *   that takes the thread over. The survivor waits out the dead runner's lease (up to
 *   `takeover.timeout`), resumes the last committed checkpoint, and commits once. A turn that had
 *   committed before its runner died is not run again (`TurnAlreadyCommitted`: each turn carries
 *   an id, see `Agent.Turn.id`).
 * - Each runner reaps what dead runners on its machine left (their CLI processes, found by
 *   marker, and their clones under the profile's clone root), at start and every `reap.interval`.
 * - Keys are the host's opaque strings; entity ids are derived from them (any key fits).
 *
 * @example
 * ```ts
 * import * as NodeContext from "@effect/platform-node/NodeContext"
 * import { PgClient } from "@effect/sql-pg"
 * import { Runner, ThreadEntity } from "@tether/cluster"
 * import * as SqlThreadStore from "@tether/core/SqlThreadStore"
 * import { Claude } from "@tether/drivers"
 * import { Gateway } from "@tether/gateway"
 * import { Profile } from "@tether/profile"
 * import { Toolkit } from "@tether/tool"
 * import { Config, Effect, Layer } from "effect"
 *
 * const Database = PgClient.layerConfig({ url: Config.redacted("DATABASE_URL") })
 *
 * // On each runner (the same agent options everywhere, so a thread resumes on any of them):
 * const RunnerLive = ThreadEntity.layer({
 *   agent: {
 *     driver: Claude.driver(),
 *     definition: { instructions: "You triage issues.", tools: Toolkit.empty },
 *     workspace: "/srv/repo",
 *     profile: Profile.cloneFrom("/srv/profiles/claude", "/var/tmp/clones", { sessions: "/shared/sessions" })
 *   }
 * }).pipe(
 *   Layer.provide(Runner.layerSocket({ address: { host: "10.0.0.7", port: 34431 } })),
 *   Layer.provide(SqlThreadStore.layer),
 *   Layer.provide([Gateway.layer(), NodeContext.layer]),
 *   Layer.provide(Database)
 * )
 *
 * // On any member (a runner, or a host with Runner.layerClient):
 * const triage = Effect.gen(function*() {
 *   const threads = yield* ThreadEntity.client()
 *   return yield* threads.thread("tenant-42/issue-123").run("Triage ISSUE-42.")
 * })
 * ```
 *
 * @since 0.1.0
 */
import type { AlreadyProcessingMessage, MailboxFull, PersistenceError } from "@effect/cluster/ClusterError"
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as Entity from "@effect/cluster/Entity"
import type * as Sharding from "@effect/cluster/Sharding"
import * as Rpc from "@effect/rpc/Rpc"
import type * as Agent from "@tether/core/Agent"
import {
  AgentClosed,
  AgentConfigError,
  ApprovalAlreadyResolved,
  ApprovalNotFound,
  InvalidTurn,
  RunError,
  UnsupportedCapability
} from "@tether/core/AgentError"
import * as Approval from "@tether/core/Approval"
import { ProtocolError } from "@tether/core/Driver"
import * as Event from "@tether/core/Event"
import { Result } from "@tether/core/Result"
import {
  ResumeRejected,
  ThreadClosed,
  ThreadIncompatible,
  ThreadNotFound,
  ToolRevisionMissing,
  TurnAlreadyCommitted
} from "@tether/core/Thread"
import { LeaseLost, ThreadAlreadyExists, ThreadBusy, ThreadRecord, ThreadStoreError } from "@tether/core/ThreadStore"
import type * as ThreadStore from "@tether/core/ThreadStore"
import type * as Toolkit from "@tether/tool/Toolkit"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import * as internalClient from "./internal/client.js"
import * as internal from "./internal/entity.js"
import * as entityId from "./internal/entityId.js"

/**
 * `send` found no running turn on the thread.
 *
 * @since 0.1.0
 * @category errors
 */
export class NoActiveTurn extends Schema.TaggedError<NoActiveTurn>("@tether/cluster/NoActiveTurn")("NoActiveTurn", {
  key: Schema.String
}) {
  override get message(): string {
    return "the thread has no running turn"
  }
}

/**
 * A call to a thread got no answer within its timeout (e.g. its runner died and no survivor has
 * taken the thread over yet). The call was canceled: a canceled turn commits nothing.
 *
 * @since 0.1.0
 * @category errors
 */
export class ThreadCallTimeout
  extends Schema.TaggedError<ThreadCallTimeout>("@tether/cluster/ThreadCallTimeout")("ThreadCallTimeout", {
    key: Schema.String,
    operation: Schema.Literal("run", "stream", "send", "cancel", "approve", "snapshot", "delete", "close"),
    millis: Schema.Number
  })
{
  override get message(): string {
    return `${this.operation} on the thread got no answer within ${this.millis} ms`
  }
}

/**
 * What `send` did with the input: `injected` into the running turn, or `queued` for after it.
 *
 * @since 0.1.0
 * @category models
 */
export class Delivery extends Schema.Class<Delivery>("@tether/cluster/Delivery")({
  runId: Schema.String,
  mode: Schema.Literal("injected", "queued")
}) {}

/**
 * Why a turn failed on its runner: every failure of `agent.thread(key)` and `thread.run`, and
 * `AgentConfigError` when the runner could not build the thread's agent.
 *
 * @since 0.1.0
 * @category models
 */
export const TurnFailure = Schema.Union(
  RunError,
  AgentClosed,
  AgentConfigError,
  InvalidTurn,
  UnsupportedCapability,
  ToolRevisionMissing,
  ThreadBusy,
  ThreadNotFound,
  ThreadIncompatible,
  ThreadAlreadyExists,
  ResumeRejected,
  ThreadClosed,
  TurnAlreadyCommitted,
  ThreadStoreError
)

/**
 * @since 0.1.0
 * @category models
 */
export type TurnFailure = typeof TurnFailure.Type

/**
 * Why a call did not reach its thread or got no answer: its timeout, or `@effect/cluster`'s own
 * failures (the entity's mailbox is full, the message is a duplicate in flight, the message
 * storage failed).
 *
 * @since 0.1.0
 * @category models
 */
export type CallFailure = ThreadCallTimeout | MailboxFull | AlreadyProcessingMessage | PersistenceError

const ToolPolicy = Schema.Struct({
  allow: Schema.optionalWith(Schema.Array(Schema.String), { exact: true }),
  deny: Schema.optionalWith(Schema.Array(Schema.String), { exact: true })
})

const BuiltinToolPolicy = Schema.Struct({
  allow: Schema.optionalWith(Schema.Array(Schema.String), { exact: true }),
  deny: Schema.optionalWith(Schema.Array(Schema.String), { exact: true }),
  sandbox: Schema.optionalWith(Schema.Literal("readOnly", "workspaceWrite", "unrestricted"), { exact: true })
})

/**
 * One turn on the wire: the thread's key, the turn's id (its idempotency key), the turn.
 *
 * @since 0.1.0
 * @category protocol
 */
export const TurnRequest = Schema.Struct({
  key: Schema.String,
  id: Schema.String,
  input: Schema.String,
  model: Schema.optionalWith(Schema.String, { exact: true }),
  toolPolicy: Schema.optionalWith(ToolPolicy, { exact: true }),
  builtinTools: Schema.optionalWith(BuiltinToolPolicy, { exact: true }),
  resumeOnly: Schema.optionalWith(Schema.Boolean, { exact: true })
})

/**
 * Runs a turn and returns its `Result`. Persisted: stored before it is delivered, so a survivor
 * runs it when the thread's runner dies before answering.
 *
 * @since 0.1.0
 * @category protocol
 */
export const Run = Rpc.make("Run", { payload: TurnRequest, success: Result, error: TurnFailure }).annotate(
  ClusterSchema.Persisted,
  true
)

/**
 * Runs a turn and streams its events. Not persisted: when the runner dies the call is sent again
 * to the thread's next runner, so the stream carries the dead runner's partial run (no
 * `RunFinished`) followed by the survivor's complete one, each with its own `runId`. So it is when
 * the runner stops (SIGTERM) or its shard moves to a runner that joined: the client sends the
 * call again; when the stopping runner finished and committed the turn meanwhile, the stream ends
 * with `TurnAlreadyCommitted` after its partial run, and `run` with the same turn id answers what
 * the turn answered.
 *
 * @since 0.1.0
 * @category protocol
 */
export const RunStream = Rpc.make("RunStream", {
  payload: TurnRequest,
  success: Event.Event,
  error: TurnFailure,
  stream: true
})

/**
 * Delivers input into the thread's running turn on its runner (`thread.send` there) and says
 * what the provider did with it, with the turn's `runId`. It never starts a turn: with none
 * running (or one that ends, or is closed, before the input reaches it) it fails with
 * `NoActiveTurn`; during a turn whose driver cannot take input (no live protocol, or one
 * without input during a turn) with `UnsupportedCapability`; `ProtocolError` when the provider
 * refused the input. Not persisted: a runner that dies takes its turn's input with it.
 *
 * @since 0.1.0
 * @category protocol
 */
export const Send = Rpc.make("Send", {
  payload: { key: Schema.String, input: Schema.String },
  success: Delivery,
  error: Schema.Union(NoActiveTurn, UnsupportedCapability, ProtocolError)
})

/**
 * Cancels the thread's running turn on its runner (`Agent.Turn.cancel` there), or only the run
 * `runId` when given, and answers the canceled run's id once the cancel is asked for: the turn
 * ends with `RunFinished(canceled)` and its `Run` / `RunStream` then fail with `RunError` reason
 * `Canceled`; nothing is committed, and a live thread's warm process serves its next turn.
 * `NoActiveTurn` when no turn (or not that run) is running, also for a turn still waiting out
 * another runner's lease (it has not started).
 *
 * @since 0.3.0
 * @category protocol
 */
export const Cancel = Rpc.make("Cancel", {
  payload: Schema.Struct({ key: Schema.String, runId: Schema.optionalWith(Schema.String, { exact: true }) }),
  success: Schema.String,
  error: NoActiveTurn
})

/**
 * Answers an approval the thread's running turn asked for (an `ApprovalRequested` event of its
 * `RunStream`) on its runner (`agent.approve` there): the first answer wins. `ApprovalNotFound`
 * for an id no turn of the thread is waiting on (its runner answers only its own turns' requests),
 * `ApprovalAlreadyResolved` when it was answered already.
 *
 * @since 0.3.0
 * @category protocol
 */
export const Approve = Rpc.make("Approve", {
  payload: { key: Schema.String, id: Schema.String, decision: Approval.Decision },
  error: Schema.Union(ApprovalNotFound, ApprovalAlreadyResolved)
})

/**
 * The committed checkpoint, if any (read from the `ThreadStore`).
 *
 * @since 0.1.0
 * @category protocol
 */
export const Snapshot = Rpc.make("Snapshot", {
  payload: { key: Schema.String },
  success: Schema.Option(ThreadRecord),
  error: ThreadStoreError
})

/**
 * Cancels the running turn (it fails with `ThreadClosed`) and closes the thread's agent on its
 * runner (processes, clone, gateway registration). The record stays; a later turn starts again.
 *
 * @since 0.1.0
 * @category protocol
 */
export const Close = Rpc.make("Close", { payload: { key: Schema.String } })

/**
 * Why `Delete` failed: a turn runs on the thread (`ThreadBusy`, nothing removed), its lease was
 * lost midway (`LeaseLost`), the store failed, or the runner could not build the thread's agent or
 * open the thread (closed meanwhile by `Close`).
 *
 * @since 0.3.0
 * @category models
 */
export const DeleteFailure = Schema.Union(
  ThreadBusy,
  LeaseLost,
  ThreadStoreError,
  ThreadClosed,
  AgentClosed,
  AgentConfigError,
  UnsupportedCapability,
  ToolRevisionMissing
)

/**
 * @since 0.3.0
 * @category models
 */
export type DeleteFailure = typeof DeleteFailure.Type

/**
 * Removes the thread's committed checkpoint, its history and their provider sessions (from the
 * profile's session store), on the thread's runner (`thread.delete` there): its warm process, if
 * any, is shut down first. Returns what was removed; a later turn starts a fresh session. Fails
 * with `ThreadBusy` while a turn runs on the thread (and a turn sent during the delete fails so).
 *
 * @since 0.3.0
 * @category protocol
 */
export const Delete = Rpc.make("Delete", {
  payload: { key: Schema.String },
  success: Schema.Array(ThreadRecord),
  error: DeleteFailure
})

/**
 * The entity: one per thread key.
 *
 * @since 0.1.0
 * @category protocol
 */
export const Thread = Entity.make("tether/Thread", [Run, RunStream, Send, Cancel, Approve, Snapshot, Delete, Close])

/**
 * The entity id of a thread key: the key itself, JSON-escaped (no NUL, no lone surrogate), or
 * a digest of it when that would not fit the cluster's 255-character ids. Distinct keys never
 * share an id.
 *
 * @since 0.1.0
 * @category protocol
 */
export const entityIdOf: (key: string) => string = entityId.entityIdOf

/**
 * What each runner needs to host thread entities: the options of each thread's agent (built the
 * same on every runner so threads resume anywhere) and how long a turn waits to take over a dead
 * runner's lease.
 *
 * @since 0.1.0
 * @category models
 */
export interface LayerOptions<Tools extends Toolkit.Any> {
  /**
   * Each thread's agent on its runner. The profile must be a cloning selection (a `dedicated`
   * profile serves one agent). For threads to resume on another runner, every runner must build
   * the same fingerprint (same workspace path, definition, model, profile source) and reach the
   * profile's session store (`Profile.cloneFrom(source, root, { sessions })` on shared storage).
   */
  readonly agent: Agent.Options<Tools>
  /**
   * How long a turn waits for a previous runner's lease on its thread to expire (default: the
   * lease TTL plus 5 s), and how often it tries (default: a tenth of the TTL, 100 ms to 1 s).
   */
  readonly takeover?: { readonly timeout?: Duration.DurationInput; readonly interval?: Duration.DurationInput }
  /** How often the runner reaps what dead runners on its machine left (default 1 min). */
  readonly reap?: { readonly interval?: Duration.DurationInput }
  /** An entity idle this long stops and closes its agent (default: the runner's `entityMaxIdleTime`). */
  readonly maxIdleTime?: Duration.DurationInput
}

/**
 * Registers the entity on this runner. At start it builds one agent from the options and closes
 * it (bad options fail the runner here, not at the first turn) and reaps dead runners' leftovers.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: <Tools extends Toolkit.Any>(
  options: LayerOptions<Tools>
) => Layer.Layer<
  never,
  AgentConfigError | UnsupportedCapability,
  | Sharding.Sharding
  | ThreadStore.ThreadStore
  | Exclude<Agent.Requirements, Scope.Scope>
  | Toolkit.HandlerServices<Tools>
> = internal.layer

/**
 * `run` options.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunOptions {
  /** Never start a fresh session (as `agent.thread(key, { resumeOnly: true })`). */
  readonly resumeOnly?: boolean
  /** This call's timeout (default: the client's `turnTimeout`). */
  readonly timeout?: Duration.DurationInput
}

/**
 * A thread reached through the cluster: what a host calls instead of `agent.thread(key)`.
 * `run` / `stream` take the same turns (a turn without an `id` gets a random one); `send` steers
 * the running turn, `cancel` cancels it and `approve` answers its approval requests, on the runner
 * that runs it (see `Send`, `Cancel`, `Approve`). Every call carries a timeout and fails with `ThreadCallTimeout` when it
 * expires.
 *
 * @since 0.1.0
 * @category models
 */
export interface RemoteThread {
  readonly key: string
  readonly run: (turn: Agent.Input, options?: RunOptions) => Effect.Effect<Result, TurnFailure | CallFailure>
  readonly stream: (turn: Agent.Input, options?: RunOptions) => Stream.Stream<Event.Event, TurnFailure | CallFailure>
  readonly send: (
    input: string
  ) => Effect.Effect<Delivery, NoActiveTurn | UnsupportedCapability | ProtocolError | CallFailure>
  readonly cancel: (runId?: string) => Effect.Effect<string, NoActiveTurn | CallFailure>
  readonly approve: (
    id: string,
    decision: Approval.Decision
  ) => Effect.Effect<void, ApprovalNotFound | ApprovalAlreadyResolved | CallFailure>
  readonly snapshot: Effect.Effect<Option.Option<ThreadRecord>, ThreadStoreError | CallFailure>
  readonly delete: Effect.Effect<ReadonlyArray<ThreadRecord>, DeleteFailure | CallFailure>
  readonly close: Effect.Effect<void, CallFailure>
}

/**
 * The threads of the cluster by key: `thread(key)` is a handle that routes each operation to the
 * runner owning the key's entity; building it does no I/O.
 *
 * @since 0.1.0
 * @category models
 */
export interface Client {
  readonly thread: (key: string) => RemoteThread
}

/**
 * Timeouts of the client's requests: a request that takes longer fails with a timeout error; the
 * turn itself is not cancelled on the runner.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClientOptions {
  /** Timeout of `send`, `cancel`, `approve`, `snapshot`, `delete` and `close` (default 30 s). */
  readonly timeout?: Duration.DurationInput
  /** Timeout of `run` and `stream` (default 10 min). */
  readonly turnTimeout?: Duration.DurationInput
}

/**
 * The client of the thread entities, on any member of the cluster.
 *
 * @since 0.1.0
 * @category constructors
 */
export const client: (options?: ClientOptions) => Effect.Effect<Client, never, Sharding.Sharding> = internalClient.make
