/**
 * An agent: one driver, one frozen definition (instructions, skills, tools, MCP sources), one
 * gateway registration and one execution clone, admitting runs until it closes.
 *
 * A run: `RunStarted` → the driver's `prepare` (with the clone directory, the gateway URL, the
 * token variable name and the reserved `hostedKey`) → its files are written into the clone →
 * the process is spawned with exactly the invocation's env plus the token variable and the
 * agent's marker → stdout lines go through the driver's `parse` → the result is ready at the
 * driver's `Terminal` output (a CLI still exiting is reaped in the background) → `RunFinished`.
 *
 * @example
 * ```ts
 * // An end-to-end test of a driver through Agent.make (what drivers' tests provide):
 * import { Agent } from "@tether/core"
 * import { Harness } from "@tether/testing"
 *
 * it.live("answers", () =>
 *   Effect.gen(function*() {
 *     const sandbox = yield* Harness.sandbox           // temp source profile, clone root, workspace
 *     const agent = yield* Agent.make({
 *       driver: MyDriver.driver({ model: "m" }),
 *       definition: { instructions: "", skills: [], tools: IssueTools },
 *       workspace: sandbox.workspace,
 *       profile: sandbox.selection,                     // Profile.cloneFrom(source, root)
 *       env: { PATH: process.env.PATH, MY_BASE_URL: server.url } // what `prepare` may pick from
 *     })
 *     const result = yield* agent.run("hello")
 *   }).pipe(
 *     Effect.scoped,                                    // closing the scope closes the agent
 *     Effect.provide([IssueToolsLive, Harness.layer])  // handlers + Gateway + NodeContext
 *   ))
 * ```
 *
 * @since 0.1.0
 */
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import type * as Gateway from "@tether/gateway/Gateway"
import type * as Profile from "@tether/profile/Profile"
import type * as Catalog from "@tether/tool/Catalog"
import type * as Tool from "@tether/tool/Tool"
import * as Toolkit from "@tether/tool/Toolkit"
import type * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import type { AgentClosed, CloseTimeout, InvalidTurn, RunError, UnsupportedCapability } from "./AgentError.js"
import { AgentConfigError } from "./AgentError.js"
import type * as Driver from "./Driver.js"
import type * as Event from "./Event.js"
import * as internal from "./internal/agent.js"
import * as DefinitionInternal from "./internal/definition.js"
import * as internalProcess from "./internal/process.js"
import type * as Mcp from "./Mcp.js"
import type { Result } from "./Result.js"
import type * as Skill from "./Skill.js"
import type * as Thread from "./Thread.js"
import type * as ToolPolicy from "./ToolPolicy.js"

/**
 * The reserved MCP server key of the hosted tools. Drivers declare the gateway under this key
 * and render host tool names from it (e.g. `mcp__tether__<tool>`); a source profile entry using
 * it is rejected before launch.
 *
 * @since 0.1.0
 * @category constants
 */
export const hostedKey: string = internal.hostedKey

/**
 * The environment variable every provider process (and, by inheritance, its descendants) carries
 * with the agent's `marker`, so leftovers can be found and reaped.
 *
 * @since 0.1.0
 * @category constants
 */
export const markerVariable: string = internalProcess.markerVariable

/**
 * SIGKILLs the processes left by a host that died without closing its agents (found by the
 * marker every provider process carries; the marker names its host's pid). Runs once per host
 * process at the first `make`; hosts may also run it at start. Returns the pids signalled.
 *
 * @since 0.1.0
 * @category lifecycle
 */
export const reapOrphans: Effect.Effect<ReadonlyArray<number>> = internalProcess.reapOrphans

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
 * @since 0.1.0
 * @category models
 */
export interface Options<Tools extends Toolkit.Any> {
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
    /** Never drop: a slow consumer slows the provider down instead (default `false`). */
    readonly blocking?: boolean
  }
  readonly limits?: {
    /** A longer stdout line fails the run with `OutputLimit` (default 16 MiB). */
    readonly maxLineBytes?: number
    /** The tail of stdout / stderr kept in `Result.raw` (default 1 MiB each). */
    readonly maxRawBytes?: number
  }
  readonly processes?: {
    /** How long a process may take to exit on its own after its terminal record (default 5 s). */
    readonly exitGrace?: Duration.DurationInput
    /** SIGTERM → SIGKILL grace of the process group (default 2 s). */
    readonly killGrace?: Duration.DurationInput
  }
  /** Deadline of the close run by the scope's finalizer and of `close()` (default 30 s). */
  readonly closeTimeout?: Duration.DurationInput
  readonly threads?: {
    /**
     * A thread turn's lease duration, renewed every third of it while the turn runs; a host
     * that dies holding one blocks the thread at most this long (default 30 s).
     */
    readonly leaseTtl?: Duration.DurationInput
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
   * Cancels the run when it completes, while the consumer keeps reading: the run ends with
   * `RunFinished(canceled)` and then fails with `RunError` reason `Canceled`, as when the
   * consumer stops (e.g. a server cancelling a run whose events it still forwards).
   */
  readonly cancel?: Effect.Effect<void>
}

/**
 * @since 0.1.0
 * @category models
 */
export type Input = string | Turn

/**
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
 * - `run(turn)`: `stream` drained; returns the `RunFinished` result.
 * - `close(options?)`: the ordered close of DESIGN §6; idempotent and safe to call concurrently;
 *   fails with `CloseTimeout` when its deadline expires, and a later call continues.
 *
 * @since 0.1.0
 * @category models
 */
export interface Agent {
  /** Random per agent instance. */
  readonly id: string
  /** The value of `markerVariable` in every process of this agent (`<host pid>-<id>`). */
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
   */
  readonly thread: (key: string, options?: Thread.Options) => Effect.Effect<Thread.Thread, Thread.OpenFailure>
  readonly run: (turn: Input) => Effect.Effect<Result, RunError | AgentClosed | InvalidTurn>
  readonly stream: (turn: Input) => Stream.Stream<Event.Event, RunError | AgentClosed | InvalidTurn>
  readonly close: (options?: CloseOptions) => Effect.Effect<void, CloseTimeout>
}

/**
 * What `make` needs from its context besides the tool handlers.
 *
 * @since 0.1.0
 * @category models
 */
export type Requirements =
  | Scope.Scope
  | Gateway.Gateway
  | CommandExecutor.CommandExecutor
  | FileSystem.FileSystem
  | Path.Path

/**
 * Builds an agent. The definition is validated and frozen first (no provider I/O); then the
 * tools are registered with the gateway and the execution clone is acquired. The agent's close
 * is the scope's finalizer.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <Tools extends Toolkit.Any>(
  options: Options<Tools>
): Effect.Effect<
  Agent,
  AgentConfigError | UnsupportedCapability,
  Requirements | Toolkit.HandlerServices<Tools>
> =>
  Effect.gen(function*() {
    const untyped = options as unknown as Options<never>
    yield* internal.validate(untyped)
    yield* Effect.annotateCurrentSpan("agent.provider", options.driver.name)
    const validated = yield* DefinitionInternal.validate(options.definition, {
      driver: options.driver.name,
      capabilities: options.driver.capabilities,
      hostedKey: internal.hostedKey,
      reservedVariable: (name) => name === internalProcess.markerVariable
    })
    const executor = yield* (DefinitionInternal.executor(validated) as Effect.Effect<
      Catalog.Executor,
      Tool.ToolDefinitionError,
      Toolkit.HandlerServices<Tools>
    >).pipe(
      Effect.mapError((error) =>
        new AgentConfigError({ reason: "InvalidDefinition", detail: error.message, cause: error })
      )
    )
    return yield* internal.make(untyped, executor, validated)
  }).pipe(Effect.withSpan("Agent.make"))

/**
 * The same agent as a scoped Layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <I, Tools extends Toolkit.Any>(
  tag: Context.Tag<I, Agent>,
  options: Options<Tools>
): Layer.Layer<
  I,
  AgentConfigError | UnsupportedCapability,
  Exclude<Requirements, Scope.Scope> | Toolkit.HandlerServices<Tools>
> => Layer.scoped(tag, make(options))
