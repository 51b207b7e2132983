/**
 * An agent: one driver, one frozen definition (instructions, skills, tools, MCP sources), one
 * gateway registration and one execution clone, admitting runs until it closes.
 *
 * A run: `RunStarted` → the driver's `prepare` (with the clone directory, the gateway URL, the
 * token variable name and the reserved `hostedKey`) → its files are written into the clone →
 * the process is spawned with exactly the invocation's env plus the token variable (set to a
 * gateway credential minted for this process) and the agent's marker → stdout lines go through
 * the driver's `parse` → the result is ready at the driver's `Terminal` output (the process's
 * credential is revoked then; a CLI still exiting is reaped in the background, its files in the
 * clone scrubbed of the token and its session saved) → `RunFinished`. Everything a run emits
 * (events, `Result`, `RunError`, log lines) has live token values replaced by
 * `Gateway.redactionMarker`: a CLI hands its environment to every child, so a model can make a
 * shell print its token.
 *
 * @example
 * ```ts
 * // An end-to-end test of a driver through Agent.make (what drivers' tests provide):
 * import { it } from "@effect/vitest"
 * import { Agent } from "@tether/core"
 * import { Harness, Reference } from "@tether/testing"
 * import { Tool, Toolkit } from "@tether/tool"
 * import { Effect, Schema } from "effect"
 *
 * const LookupIssue = Tool.make("lookup_issue", {
 *   description: "Look up one issue by key.",
 *   input: { key: Schema.String },
 *   output: Schema.Struct({ title: Schema.String })
 * })
 * const IssueTools = Toolkit.make(LookupIssue)
 * const IssueToolsLive = IssueTools.toLayer({ lookup_issue: ({ key }) => Effect.succeed({ title: key }) })
 *
 * it.live("answers", () =>
 *   Effect.gen(function*() {
 *     const sandbox = yield* Harness.sandbox // temp source profile, clone root, workspace
 *     const agent = yield* Agent.make({
 *       driver: Reference.driver(), // your driver here
 *       definition: { instructions: "", skills: [], tools: IssueTools },
 *       workspace: sandbox.workspace,
 *       profile: sandbox.selection, // Profile.cloneFrom(source, root)
 *       env: { PATH: process.env.PATH } // what the driver's `prepare` may pick from
 *     })
 *     const result = yield* agent.run("hello")
 *   }).pipe(
 *     Effect.scoped, // closing the scope closes the agent
 *     Effect.provide([IssueToolsLive, Harness.layer]) // handlers + Gateway + NodeContext
 *   ))
 * ```
 *
 * @since 0.1.0
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import type * as Gateway from "@tether/gateway/Gateway"
import type * as Profile from "@tether/profile/Profile"
import type * as Catalog from "@tether/tool/Catalog"
import type * as Toolkit from "@tether/tool/Toolkit"
import type * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import type {
  AgentClosed,
  AgentConfigError,
  ApprovalAlreadyResolved,
  ApprovalNotFound,
  CloseTimeout,
  InvalidTurn,
  RunError,
  UnsupportedCapability
} from "./AgentError.js"
import type * as Approval from "./Approval.js"
import type * as Driver from "./Driver.js"
import type * as Event from "./Event.js"
import * as internal from "./internal/agent.js"
import type * as Mcp from "./Mcp.js"
import type { Result } from "./Result.js"
import type * as Skill from "./Skill.js"
import type * as StructuredOutput from "./StructuredOutput.js"
import type * as Thread from "./Thread.js"
import type { ThreadStoreError } from "./ThreadStore.js"
import type * as ToolPolicy from "./ToolPolicy.js"

/**
 * Who the agent acts as. It keys the execution clone and enters the fingerprint; it is never
 * an authorization decision and never reaches tool handlers.
 *
 * @since 0.1.0
 * @category models
 */
export interface Identity {
  readonly id: string
  readonly tenant?: string
  readonly name?: string
}

/**
 * What the agent is, fixed at construction (to change any of it, build a new agent):
 * instructions appended to the provider's system prompt, skills served by the reserved hosted
 * tool `read_skill`, the direct tools, and external MCP sources declared beside the hosted
 * tools. Validated, snapshotted and frozen deep by `make` before any provider I/O.
 *
 * @since 0.1.0
 * @category models
 */
export interface Definition<Tools extends Toolkit.Any> {
  readonly instructions: string
  readonly skills?: ReadonlyArray<Skill.Skill>
  readonly tools: Tools
  readonly mcp?: ReadonlyArray<Mcp.Source>
}

/**
 * The deep-frozen read-only view of a definition: deep-equal to what was passed to `make`
 * (later changes to the caller's objects never reach it), plus the catalog the gateway serves.
 *
 * @since 0.1.0
 * @category models
 */
export interface FrozenDefinition {
  readonly instructions: string
  readonly skills: ReadonlyArray<Skill.Skill>
  readonly tools: Toolkit.Any
  readonly mcp: ReadonlyArray<Mcp.Source>
  /** The served catalog: the direct tools, plus `read_skill` when skills are attached. */
  readonly catalog: Catalog.Catalog
}

/**
 * A basic execution policy, checked against the driver's capabilities at construction.
 *
 * @since 0.1.0
 * @category models
 */
export interface Policy {
  readonly sandbox?: Driver.SandboxLevel
}

/**
 * Everything `make` / `layer` need: the driver, the frozen definition, the working directory, and
 * optional identity, profile, model, policy, environment, event buffering, output limits, process
 * graces and close deadline. Invalid values fail `make` with `AgentConfigError` before any
 * provider I/O.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<Tools extends Toolkit.Any, R = never> {
  readonly driver: Driver.Driver
  readonly definition: Definition<Tools>
  /** Absolute working directory of the provider processes. */
  readonly workspace: string
  readonly identity?: Identity
  /** The source profile and where its execution clones go (default `Profile.native()`). */
  readonly profile?: Profile.Selection
  /** Default model of every turn (a turn's `model` wins; `undefined`: the driver's default). */
  readonly model?: string
  readonly policy?: Policy
  /** The host environment drivers pick allow-listed variables from (default `process.env`). */
  readonly env?: { readonly [name: string]: string | undefined }
  readonly events?: {
    /** Queued event batches per run before deltas are dropped (default 256). */
    readonly buffer?: number
    /**
     * Never drop: a slow consumer slows the provider down instead (default `false`). Either way a
     * consumer that stops reading holds its run, but not a canceled one (the turn's `cancel`, a
     * thread's or the agent's close): a canceled run's last events go past the buffer, so a
     * consumer can never hold a close.
     */
    readonly blocking?: boolean
  }
  readonly limits?: {
    /** A longer stdout line fails the run with `OutputLimit` (default 16 MiB). */
    readonly maxLineBytes?: number
    /** The tail of stdout / stderr kept in `Result.raw` (default 1 MiB each). */
    readonly maxRawBytes?: number
  }
  readonly processes?: {
    /**
     * How long a process may take to exit on its own after its terminal record (default 5 s),
     * also at close: such a process is signalled only once this grace has passed.
     */
    readonly exitGrace?: Duration.DurationInput
    /** SIGTERM → SIGKILL grace of the process group (default 2 s). */
    readonly killGrace?: Duration.DurationInput
  }
  /**
   * Deadline of the close run by the scope's finalizer and of `close()` (default 30 s). Leaving
   * the scope never takes longer; what the deadline cut stays pending (see `Agent.close`).
   */
  readonly closeTimeout?: Duration.DurationInput
  /**
   * Approvals of the CLI's built-in tools (see `Approval`): every request is answered by
   * `approvals.handler`, or, without one, by the host through `approve` after an
   * `ApprovalRequested` event. The handler's requirements are required by `make`. A driver
   * without an approval mechanism fails `make` with `UnsupportedCapability`.
   */
  readonly approvals?: Approval.Options<R>
  readonly threads?: {
    /**
     * A thread turn's lease duration, renewed every third of it while the turn runs; a host
     * that dies holding one blocks the thread at most this long (default 30 s).
     */
    readonly leaseTtl?: Duration.DurationInput
  }
  /**
   * Live threads (DESIGN §12), for a driver with a live protocol (`Driver.live`): a thread's
   * turns run on one warm provider process, started by its first turn and reused by the next
   * ones while the turn's compatibility fingerprint, effective tools and model are unchanged
   * (otherwise it is shut down and a fresh one resumes the checkpoint). Each live process runs
   * on gateway credentials of its own, revoked when it ends; the agent's close shuts it down
   * gracefully, then kills its process group. `agent.run` / `agent.stream` stay one-shot.
   */
  readonly live?: {
    /** Threads go live when the driver can (default `true`); `false`: every turn is one-shot. */
    readonly threads?: boolean
    /** A live process idle this long is shut down (default 5 minutes). */
    readonly idleTimeout?: Duration.DurationInput
    /**
     * At most this many live processes per agent (default 8): opening one more shuts down the
     * least recently used idle one first. A process running a turn is never shut down for room:
     * while every process is busy the count may exceed the cap, and it is restored as turns end.
     */
    readonly maxProcesses?: number
  }
}

/**
 * One turn of a run. A plain string is `{ input }`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Turn {
  readonly input: string
  /** This turn's model (default: the agent's `model`, then the driver's default). */
  readonly model?: string
  /**
   * This turn's tools: `definition.tools ∩ toolPolicy`, enforced by the gateway (list and call)
   * and given to the driver's allow-list, for this turn only (see `ToolPolicy`).
   */
  readonly toolPolicy?: ToolPolicy.ToolPolicy
  /**
   * This turn's policy over the CLI's built-in tools (see `ToolPolicy.BuiltinToolPolicy`); a driver
   * that cannot map it fails the turn with `InvalidTurn` (`UnsupportedCapability`) before it starts.
   */
  readonly builtinTools?: ToolPolicy.BuiltinToolPolicy
  /**
   * A thread turn's idempotency key, for hosts that may deliver one turn twice (a cluster
   * redelivers a turn whose runner died before replying). The checkpoint commit records it
   * (`ThreadRecord.turn`), and a turn whose `id` is the one the committed record carries fails with
   * `TurnAlreadyCommitted` before anything starts: a redelivered turn never commits twice. Only the
   * last committed turn is remembered. `agent.run` / `agent.stream` (no thread) ignore it.
   */
  readonly id?: string
  /**
   * Cancels the run when it completes, while the consumer keeps reading: the run ends with
   * `RunFinished(canceled)` and then fails with `RunError` reason `Canceled`, as when the
   * consumer stops (e.g. a server cancelling a run whose events it still forwards).
   */
  readonly cancel?: Effect.Effect<void>
}

/**
 * What a run takes: a prompt (`"fix the bug"` is `{ input: "fix the bug" }`) or a full `Turn`.
 *
 * @since 0.1.0
 * @category models
 */
export type Input = string | Turn

/**
 * The deadline of one `close()` call (default: the agent's `closeTimeout`). What the deadline cut
 * stays pending and the call fails with `CloseTimeout`.
 *
 * @since 0.1.0
 * @category models
 */
export interface CloseOptions {
  readonly timeout?: Duration.DurationInput
}

/**
 * A live agent.
 *
 * - `stream(turn)`: the run's events; exactly one `RunStarted` first and one `RunFinished`
 *   last (it carries the `Result`); fails with `RunError` (after `RunFinished`) or, before
 *   admission, `AgentClosed`. A consumer that stops early cancels the run.
 * - `run(turn)`: the same run as `stream`'s without its events (none is built); returns the
 *   result its `RunFinished` would carry, and fails as `stream` does.
 * - `runAs(schema, turn)` / `streamAs(schema, turn)`: a turn whose answer is a value of
 *   `schema`, decoded and validated (see `StructuredOutput`).
 * - `close(options?)`: the ordered close of DESIGN §6; idempotent and safe to call concurrently
 *   (also from inside a stream consumer); fails with `CloseTimeout` when its deadline expires,
 *   naming the steps left pending (the clone is not removed and the token not revoked while a
 *   run is undrained), and a later call continues from there.
 *
 * @since 0.1.0
 * @category models
 */
export interface Agent {
  /** Random per agent instance. */
  readonly id: string
  /** The value of `Unstable.markerVariable` in every process of this agent (`<host pid>-<host start time>-<id>`). */
  readonly marker: string
  readonly provider: string
  readonly identity: Identity | undefined
  readonly definition: FrozenDefinition
  /**
   * The compatibility fingerprint (DESIGN §10) every thread checkpoint of this agent carries.
   * Ephemeral details (gateway URL and port, token, its variable, the clone directory, linked
   * auth) are not part of it: an agent rebuilt after a restart has the same one.
   */
  readonly fingerprint: string
  /**
   * Opens the thread under `key` (continue-or-start, or `resumeOnly`), see `Thread`. The store is
   * the `ThreadStore` service when the context has one, else an in-memory store of this agent.
   *
   * @example
   * ```ts
   * import { Agent } from "@tether/core"
   * import { Effect } from "effect"
   *
   * declare const agent: Agent.Agent
   *
   * const program = Effect.gen(function*() {
   *   const thread = yield* agent.thread("customer-42") // continues the conversation under this key, or starts it
   *   yield* thread.run("My order has not arrived.")
   *   const answer = yield* thread.run("It was order 1234.") // the same provider session, resumed
   *   return answer.text
   * })
   * ```
   */
  readonly thread: (key: string, options?: Thread.Options) => Effect.Effect<Thread.Thread, Thread.OpenFailure>
  /**
   * Retention by age over the thread store and this identity's session store: removes the
   * checkpoints a restart replaced more than `olderThan` ago (every key) with their provider
   * sessions, then the session-store entries of any session that no record of the thread store
   * (current or superseded) refers to and that were last saved more than `olderThan` ago, and
   * more than the lease's time to live (`threads.leaseTtl`) ago: left by a host killed between a
   * save and its commit, never a turn between the two. Current checkpoints are never touched (delete a
   * thread with `thread.delete`). Use the thread store every agent of this identity uses: an agent
   * on its own in-memory store (none in its context) skips that last sweep, since another agent's
   * checkpoint may point into the identity's session store.
   */
  readonly pruneThreads: (
    options: { readonly olderThan: Duration.DurationInput }
  ) => Effect.Effect<Thread.PruneReport, ThreadStoreError | AgentClosed>
  /**
   * Runs one turn and returns its `Result` once the provider's process has given its terminal
   * record; fails with `RunError` (the run failed: see its `reason`), `AgentClosed` or
   * `InvalidTurn`.
   *
   * @example
   * ```ts
   * import { Agent } from "@tether/core"
   * import { Effect } from "effect"
   *
   * declare const agent: Agent.Agent
   *
   * const program = Effect.gen(function*() {
   *   const result = yield* agent.run({ input: "Fix the failing test.", model: "claude-opus-4-1" })
   *   return result.text
   * }).pipe(
   *   Effect.catchTag("RunError", (error) => Effect.succeed(`the run failed (${error.reason}): ${error.detail}`))
   * )
   * ```
   */
  readonly run: (turn: Input) => Effect.Effect<Result, RunError | AgentClosed | InvalidTurn>
  /**
   * Runs one turn as a stream of its events: exactly one `RunStarted` first and one
   * `RunFinished` last (it carries the `Result`). A failed run still ends with `RunFinished`,
   * then the stream fails with `RunError`.
   *
   * @example
   * ```ts
   * import { Agent } from "@tether/core"
   * import { Console, Effect, Stream } from "effect"
   *
   * declare const agent: Agent.Agent
   *
   * const program = agent.stream("Summarize the open issues.").pipe(
   *   Stream.runForEach((event) => {
   *     switch (event._tag) {
   *       case "TextDelta":
   *         return Console.log(event.text)
   *       case "ToolCall":
   *         return Console.log(`tool ${event.name}`)
   *       default:
   *         return Effect.void
   *     }
   *   })
   * )
   * ```
   */
  readonly stream: (turn: Input) => Stream.Stream<Event.Event, RunError | AgentClosed | InvalidTurn>
  /**
   * Answers an approval a run of this agent asked for (`ApprovalRequested`): the first answer
   * wins. `ApprovalNotFound` for an id no run is waiting on, `ApprovalAlreadyResolved` once it was
   * answered (by the handler, the host, the deadline, a cancel or the close).
   */
  readonly approve: (
    id: string,
    decision: Approval.Decision
  ) => Effect.Effect<void, ApprovalNotFound | ApprovalAlreadyResolved>
  /**
   * Runs a turn whose answer is a value of `schema` (see `StructuredOutput`): returns it decoded,
   * with the `Result` of the turn that gave it. An answer that does not decode after the repair
   * turns fails with `StructuredOutputError`; a Schema that cannot be expressed as JSON Schema, or
   * that no value satisfies (`Schema.Never` in a required place), fails with `InvalidTurn` and a repair turn the driver cannot run (it cannot resume) with
   * `UnsupportedCapability`, both before anything runs.
   */
  readonly runAs: <A, I>(
    schema: Schema.Schema<A, I>,
    turn: Input,
    options?: StructuredOutput.Options
  ) => Effect.Effect<StructuredOutput.Decoded<A>, StructuredFailure>
  /**
   * `runAs` as a stream: the events of every attempt (each its own run, from `RunStarted` to
   * `RunFinished`), then the `Decoded` value as the last element.
   */
  readonly streamAs: <A, I>(
    schema: Schema.Schema<A, I>,
    turn: Input,
    options?: StructuredOutput.Options
  ) => Stream.Stream<Event.Event | StructuredOutput.Decoded<A>, StructuredFailure>
  readonly close: (options?: CloseOptions) => Effect.Effect<void, CloseTimeout>
}

/**
 * Why an agent's `runAs` / `streamAs` failed.
 *
 * @since 0.2.0
 * @category models
 */
export type StructuredFailure =
  | RunError
  | AgentClosed
  | InvalidTurn
  | UnsupportedCapability
  | StructuredOutput.StructuredOutputError

/**
 * What `make` needs from its context besides the tool handlers.
 *
 * @since 0.1.0
 * @category models
 */
export type Requirements =
  | Scope.Scope
  | Gateway.Gateway
  | FileSystem.FileSystem
  | Path.Path

/**
 * Builds an agent. The definition is validated and frozen first (no provider I/O); then the
 * tools are registered with the gateway and the execution clone is acquired. The agent's close
 * is the scope's finalizer.
 *
 * @example
 * ```ts
 * import * as NodeContext from "@effect/platform-node/NodeContext"
 * import { Agent } from "@tether/core"
 * import { Claude } from "@tether/drivers"
 * import { Gateway } from "@tether/gateway"
 * import { Toolkit } from "@tether/tool"
 * import { Console, Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const agent = yield* Agent.make({
 *     driver: Claude.driver(),
 *     definition: { instructions: "Answer in one sentence.", tools: Toolkit.empty },
 *     workspace: process.cwd()
 *   })
 *   const result = yield* agent.run("What does this repository do?")
 *   yield* Console.log(result.text)
 * }).pipe(
 *   Effect.scoped, // leaving the scope closes the agent: processes stopped, clone removed
 *   Effect.provide([Gateway.layer(), NodeContext.layer]) // + the handler Layer of its tools
 * )
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: <Tools extends Toolkit.Any, R = never>(
  options: Options<Tools, R>
) => Effect.Effect<
  Agent,
  AgentConfigError | UnsupportedCapability,
  Requirements | Toolkit.HandlerServices<Tools> | R
> = internal.make as never

/**
 * The same agent as a scoped Layer.
 *
 * @example
 * ```ts
 * import * as NodeContext from "@effect/platform-node/NodeContext"
 * import { Agent } from "@tether/core"
 * import { Codex } from "@tether/drivers"
 * import { Gateway } from "@tether/gateway"
 * import { Toolkit } from "@tether/tool"
 * import { Context, Effect, Layer } from "effect"
 *
 * class Reviewer extends Context.Tag("app/Reviewer")<Reviewer, Agent.Agent>() {}
 *
 * const ReviewerLive = Agent.layer(Reviewer, {
 *   driver: Codex.driver({ model: "gpt-5-codex" }),
 *   definition: { instructions: "Review the diff you are given.", tools: Toolkit.empty },
 *   workspace: "/srv/repo"
 * }).pipe(Layer.provide([Gateway.layer(), NodeContext.layer]))
 *
 * const program = Effect.flatMap(Reviewer, (reviewer) => reviewer.run("Review the last commit.")).pipe(
 *   Effect.provide(ReviewerLive)
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <I, Tools extends Toolkit.Any, R = never>(
  tag: Context.Tag<I, Agent>,
  options: Options<Tools, R>
): Layer.Layer<
  I,
  AgentConfigError | UnsupportedCapability,
  Exclude<Requirements | R, Scope.Scope> | Toolkit.HandlerServices<Tools>
> => Layer.scoped(tag, make(options))
