/**
 * The driver SPI: what a provider driver declares and the two functions it implements.
 * Exported so third-party drivers can be written against it and checked with the
 * conformance suite of `@tether/testing`.
 *
 * A driver is data (`name`, `capabilities`, `layout`) plus `prepare` (request → invocation,
 * no I/O but reading the execution clone) and `parse` (the provider's official stdout
 * protocol → typed outputs). Core spawns the invocation, stamps the outputs into `Event`s
 * and builds the `Result` from the terminal output.
 *
 * @since 0.1.0
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import type { ProfileLayout } from "@tether/profile/ProfileLayout"
import type * as Effect from "effect/Effect"
import type * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import type * as Approval from "./Approval.js"
import * as LineParser from "./internal/lineParser.js"
import type { Usage } from "./Result.js"

/**
 * Sandbox levels a turn may ask for, from the most to the least restrictive.
 *
 * @since 0.1.0
 * @category models
 */
export type SandboxLevel = "readOnly" | "workspaceWrite" | "unrestricted"

/**
 * MCP transports an external source may use.
 *
 * @since 0.1.0
 * @category models
 */
export type McpTransport = "stdio" | "http" | "sse"

/**
 * How a driver gets structured output (`runAs`) from its provider:
 * - `native`: the provider takes the turn's JSON Schema itself (`InvocationRequest.outputSchema`)
 *   and the parser reports what it returned for it (`Terminal.structuredOutput`);
 * - `instruction`: core adds an instruction with the JSON Schema to the prompt and extracts the
 *   JSON value from the final answer's text; the driver does nothing for it.
 *
 * Either way core validates the value against the Schema; a repair turn needs `resume`.
 *
 * @since 0.2.0
 * @category models
 */
export type StructuredOutputSupport = "native" | "instruction"

/**
 * How a `runAs` attempt on a live thread (one whose turns run on a warm process, `Driver.live`)
 * gets structured output:
 * - `native`: the live protocol takes the turn's JSON Schema (`LiveTurn.outputSchema`, e.g. Codex
 *   `turn/start.outputSchema`), and the attempt and its repair turns run on the warm process;
 * - `instruction`: an instruction driver's attempt is a plain live turn carrying the instruction,
 *   on the warm process, as are its repair turns;
 * - `oneShot`: the live protocol has no per-turn schema (Claude Code's stream-json input takes one
 *   per process): a native attempt runs one-shot (`prepare` with `outputSchema`), resuming the
 *   thread's checkpoint, and the thread's next turn goes on live.
 *
 * @since 0.3.0
 * @category models
 */
export type LiveStructuredOutputSupport = "native" | "instruction" | "oneShot"

/**
 * What a driver can honour. Asking for anything else fails before spawn with
 * `UnsupportedCapability`; nothing is silently dropped.
 *
 * @since 0.1.0
 * @category models
 */
export interface Capabilities {
  readonly resume: boolean
  readonly fork: boolean
  /** Transports of MCP sources it can declare (the hosted tools always use `http`). */
  readonly mcpTransports: ReadonlyArray<McpTransport>
  /** Can append the agent's instructions to the provider's system prompt. */
  readonly instructions: boolean
  /** Can project skills natively into the clone (an optimization; `read_skill` always works). */
  readonly skillsProjection: boolean
  readonly sandbox: ReadonlyArray<SandboxLevel>
  /** Can restrict the tools a turn may use (allow-list flag or per-turn config). */
  readonly toolAllowList: boolean
  /** Accepts input during a running turn (live `steer`). */
  readonly streamingInput: boolean
  /** How the driver gets structured output (see `StructuredOutputSupport`). */
  readonly structuredOutput: StructuredOutputSupport
  /**
   * How a `runAs` attempt on a live thread gets it (see `LiveStructuredOutputSupport`). Absent:
   * `oneShot` for a `native` driver, `instruction` for an `instruction` one. Only `native` sends
   * the JSON Schema into a live turn; a `native` driver whose live session cannot take it says
   * `oneShot`.
   */
  readonly liveStructuredOutput?: LiveStructuredOutputSupport
  /** Offers a live protocol (`Driver.live`): one warm process serves many turns. */
  readonly persistentProcess: boolean
  /**
   * Which lists of a turn's built-in tool policy (`InvocationRequest.builtinTools`) the driver maps
   * to the CLI. Absent: none.
   */
  readonly builtinToolPolicy?: ReadonlyArray<"allow" | "deny">
}

/**
 * An MCP source declared beside the hosted tools.
 *
 * @since 0.1.0
 * @category models
 */
export type McpServer =
  | {
    readonly _tag: "stdio"
    readonly key: string
    readonly command: string
    readonly args: ReadonlyArray<string>
    readonly env: { readonly [name: string]: string }
  }
  | {
    readonly _tag: "http" | "sse"
    readonly key: string
    readonly url: string
    readonly headers: { readonly [name: string]: string }
    /** Name of an environment variable whose value is sent as `Authorization: Bearer …`. */
    readonly bearerTokenEnv: string | undefined
  }

/**
 * A skill as the driver may project it: its name and the directory holding `SKILL.md`.
 *
 * @since 0.1.0
 * @category models
 */
export interface SkillFiles {
  readonly name: string
  readonly description: string
  /**
   * Absolute directory in the execution clone holding the skill's snapshot (`SKILL.md` and its
   * other files), written by core for directory and inline skills alike.
   */
  readonly dir: string
  /**
   * The same snapshot as data (`/`-separated paths relative to the skill's root, UTF-8 text),
   * so a driver can project the skill natively by returning materialized files. It is exactly
   * what the `read_skill` tool serves.
   */
  readonly files: ReadonlyArray<{ readonly path: string; readonly content: string }>
}

/**
 * How this run relates to a provider session.
 *
 * @since 0.1.0
 * @category models
 */
export type SessionRequest =
  | { readonly _tag: "New"; readonly id: string }
  | { readonly _tag: "Resume"; readonly id: string }
  | { readonly _tag: "Fork"; readonly from: string; readonly id: string }

/**
 * Everything a driver needs to build one invocation. It never contains the token: only the
 * name of the environment variable that core will set to it.
 *
 * @since 0.1.0
 * @category models
 */
export interface InvocationRequest {
  readonly runId: string
  readonly prompt: string
  readonly model: string | undefined
  /** Absolute path of the execution clone (the provider's config directory for this run). */
  readonly profileDir: string
  /** Absolute paths of the clone's sibling directories declared by the layout (e.g. `home`, `tmp`). */
  readonly siblings: { readonly [name: string]: string }
  /** Absolute working directory of the provider process. */
  readonly workspace: string
  readonly hosted: {
    /** The reserved MCP server key of the hosted tools. */
    readonly key: string
    readonly url: string
    readonly tokenVariable: string
    /** Catalog names this turn may use (definition ∩ policy), sorted. */
    readonly tools: ReadonlyArray<string>
  }
  readonly instructions: string
  readonly skills: ReadonlyArray<SkillFiles>
  readonly mcp: ReadonlyArray<McpServer>
  readonly session: SessionRequest
  readonly sandbox: SandboxLevel | undefined
  /** The host environment the driver may pick allow-listed variables from. */
  readonly hostEnv: { readonly [name: string]: string | undefined }
  /**
   * Present when the agent has approvals and the driver has an approver tool
   * (`Driver.approvals.tool`): the MCP server that serves it for this run. Its token travels like
   * the hosted tools' (in `tokenVariable`, minted per process); it is not one of the hosted tools
   * and is never listed with them. The driver declares the server and points the CLI's permission
   * prompt at `tool`.
   */
  readonly builtinTools?: {
    /** Only these built-ins are offered (absent: the CLI's set). */
    readonly allow?: ReadonlyArray<string>
    /** Never these built-ins. */
    readonly deny?: ReadonlyArray<string>
  }
  readonly approvals?: {
    readonly key: string
    readonly url: string
    readonly tokenVariable: string
    /** The approver tool's name on that server. */
    readonly tool: string
  }
  /**
   * A `runAs` turn of a `native` driver: the JSON Schema (Draft 2020-12, an object schema) the
   * final answer must match, for the provider's own structured output. Absent: a plain turn (and
   * always for an `instruction` driver).
   */
  readonly outputSchema?: JsonSchema | undefined
  /**
   * `true` when a live process (`Live.open`) is opened for an agent with approvals: its session
   * asks each of the CLI's approval requests through `LiveContext.approve`, and `open` turns the
   * CLI's own prompt on (Claude Code: `--permission-prompt-tool stdio`). Absent otherwise.
   */
  readonly liveApprovals?: boolean
}

/**
 * A JSON Schema document (Draft 2020-12).
 *
 * @since 0.2.0
 * @category models
 */
export type JsonSchema = { readonly [key: string]: unknown }

/**
 * A file the driver materializes into the execution clone (path relative to the clone).
 *
 * @since 0.1.0
 * @category models
 */
export interface MaterializedFile {
  readonly path: string
  readonly content: string
  readonly mode?: number
}

/**
 * A process to spawn. `env` is complete: nothing of the host's environment is inherited; core
 * adds only the token variable (`hosted.tokenVariable`, set to a credential minted for this
 * process and revoked when it ends) and the agent's marker (`Unstable.markerVariable`). The
 * process runs in its own process group; `files` are written into
 * the execution clone (relative to `profileDir`) before it starts.
 *
 * @since 0.1.0
 * @category models
 */
export interface Invocation {
  readonly command: string
  /**
   * How `command` was chosen and what was tried before it (e.g. "`claude` on the PATH given to
   * the process, after trying: …"). A `SpawnFailed` run error quotes it.
   */
  readonly commandSource?: string
  readonly args: ReadonlyArray<string>
  readonly env: { readonly [name: string]: string }
  readonly cwd: string
  /** `undefined`: stdin is closed at once; a string: written, then stdin is closed. */
  readonly stdin: string | undefined
  readonly files: ReadonlyArray<MaterializedFile>
}

/**
 * The official terminal record of a turn, as the driver read it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Terminal {
  readonly _tag: "Terminal"
  /** `true` when the provider reported success. */
  readonly ok: boolean
  /** The final assistant text, when the record carries it. */
  readonly text: string | undefined
  readonly usage: Usage | undefined
  readonly model: string | undefined
  /** The provider session id a later turn resumes (the checkpoint). */
  readonly session: string | undefined
  readonly error: string | undefined
  readonly raw: unknown
  /**
   * A turn that asked for native structured output (`ParseContext.outputSchema`): what the
   * provider returned for it. Absent: it returned none (the model never produced it). Core
   * validates a `Value` against the turn's Schema; the driver does not.
   */
  readonly structuredOutput?: StructuredOutput | undefined
}

/**
 * What a provider returned for a turn's native structured output:
 * - `Value`: the JSON value it gave (parsed, not validated by Tether yet);
 * - `GaveUp`: the provider validated the model's attempts itself and stopped after its own
 *   retries (`detail` says why, e.g. its last validation message); the terminal then reports a
 *   failure.
 *
 * @since 0.2.0
 * @category models
 */
export type StructuredOutput =
  | { readonly _tag: "Value"; readonly value: unknown }
  | { readonly _tag: "GaveUp"; readonly detail: string }

/**
 * What a parser yields for each stdout line: zero or more of these, in order.
 *
 * @since 0.1.0
 * @category models
 */
export type Output =
  | { readonly _tag: "SessionStarted"; readonly sessionId: string; readonly model: string | undefined }
  | { readonly _tag: "TextDelta"; readonly text: string }
  | { readonly _tag: "ReasoningDelta"; readonly text: string }
  | { readonly _tag: "Message"; readonly role: "assistant" | "user"; readonly text: string }
  | {
    readonly _tag: "ToolCall"
    readonly phase: "start" | "end"
    readonly callId: string
    readonly name: string
    readonly source: "host" | "mcp" | "builtin"
    readonly input?: unknown
    readonly output?: unknown
    readonly isError?: boolean
  }
  | { readonly _tag: "Usage"; readonly usage: Usage }
  | {
    readonly _tag: "Notice"
    readonly level: "info" | "warning" | "error"
    readonly kind: string
    readonly message: string
    readonly raw?: unknown
  }
  | Terminal

/**
 * A protocol-level failure the driver detected (e.g. the hosted-tools MCP server failed to
 * connect, the provider rejected the resume). `NoActiveTurn` is a live session's `steer` finding
 * no running turn (see `LiveSession.steer`).
 *
 * @since 0.1.0
 * @category errors
 */
export class ProtocolError extends Schema.TaggedError<ProtocolError>("@tether/core/ProtocolError")("ProtocolError", {
  reason: Schema.Literal(
    "HostedToolsUnavailable",
    "ResumeRejected",
    "MalformedOutput",
    "ProviderError",
    "NoActiveTurn"
  ),
  detail: Schema.String
}) {
  override get message(): string {
    return `${this.reason}: ${this.detail}`
  }
}

/**
 * What the driver knows about the `hosted` MCP server name it must map tool names back from.
 *
 * @since 0.1.0
 * @category models
 */
export interface ParseContext {
  readonly hostedKey: string
  readonly session: SessionRequest
  /**
   * The JSON Schema of a native structured-output turn (the request's `outputSchema`): the
   * parser reports what the provider returned for it in `Terminal.structuredOutput`.
   */
  readonly outputSchema?: JsonSchema | undefined
  /**
   * The hosted tools the process may call, by their catalog names: a driver whose CLI rewrites
   * tool names (Claude Code turns each character outside `[A-Za-z0-9_-]` into `_`) maps what the
   * CLI reports back to them.
   */
  readonly hostedTools?: ReadonlyArray<string> | undefined
}

/**
 * After the process ended: lets the driver turn stderr and the exit code into a typed
 * failure (e.g. "session not found" → `ResumeRejected`). `undefined` keeps core's default.
 *
 * @since 0.1.0
 * @category models
 */
export interface ExitInfo {
  readonly exitCode: number | undefined
  readonly stderr: string
  readonly terminal: Terminal | undefined
  readonly session: SessionRequest
}

/**
 * A provider adapter: its name and capabilities, and the pure functions the agent calls around one
 * CLI process: `prepare` (turn → invocation: argv, env allow-list, files), `parse` (stdout lines →
 * events and the terminal record) and the optional session hooks. A driver performs no I/O of its
 * own: the agent spawns, writes files and cleans up, so every driver gets the same isolation,
 * redaction and close guarantees. Conformance is checked by `@tether/testing`'s `Conformance.clauses`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Driver {
  readonly name: string
  readonly capabilities: Capabilities
  /**
   * The driver's session-relevant configuration (never a secret, never a closure): it enters
   * threads' compatibility fingerprint, so a checkpoint made under another configuration is
   * not resumed. Optional: absent means no configuration beyond `name`.
   */
  readonly sessionConfig?: unknown
  readonly layout: ProfileLayout
  readonly prepare: (
    request: InvocationRequest
  ) => Effect.Effect<Invocation, ProtocolError, FileSystem.FileSystem | Path.Path>
  /** Turns each stdout line into outputs; a line that is not the protocol becomes a `Notice`. */
  readonly parse: (
    lines: Stream.Stream<string>,
    context: ParseContext
  ) => Stream.Stream<Output, ProtocolError>
  readonly classifyExit?: (info: ExitInfo) => ProtocolError | undefined
  /**
   * Argument keys the CLI adds to every MCP tool call on its own (Gemini CLI 0.61 adds
   * `wait_for_previous`). The process's gateway credential removes them before a call's input
   * is decoded, unless the tool's input schema declares the key: handlers never see them.
   */
  readonly injectedArguments?: ReadonlyArray<string>
  /**
   * For a `native` driver: why its provider would refuse a `runAs` JSON Schema natively (e.g.
   * OpenAI's strict structured outputs, which Codex always uses, refuse an open object such as a
   * `Schema.Record`), or `undefined` when it takes it. Core asks for a refused Schema by
   * instruction instead, as for an `instruction` driver (validated alike): the call works, and no
   * turn is spent on a request the provider would reject. Absent: every JSON Schema is taken.
   *
   * @since 0.4.0
   */
  readonly outputSchemaRefusal?: (jsonSchema: JsonSchema) => string | undefined
  /**
   * How to install the CLI, quoted by the error of a spawn that failed (e.g.
   * `npm install @anthropic-ai/claude-code`).
   */
  readonly install?: string
  /**
   * The live protocol (DESIGN §12), when the CLI offers one: one long-lived process serves many
   * turns of one thread, accepts input during a turn and is interrupted without being killed.
   * Absent: every turn is one-shot (`prepare` → spawn → `parse` → exit).
   */
  readonly live?: Live
  /**
   * How the CLI asks the host before it runs a built-in tool (DESIGN §13). Absent: an agent
   * configured with approvals fails before spawn with `UnsupportedCapability`.
   */
  readonly approvals?: Approvals
}

/**
 * What a driver's line function gives for one stdout line: its outputs (an array, or the one
 * output as it is), or the `ProtocolError` that ends the run.
 *
 * @since 0.3.0
 * @category parsing
 */
export type LineOutputs = Output | ReadonlyArray<Output> | ProtocolError

/**
 * Maps every line through a per-line function, chunk by chunk in a plain loop (no effect per
 * line). On a `ProtocolError` the outputs of the lines before it are emitted, then the stream
 * fails with it: no later line is given to the function. `make` is called once per run of the
 * stream and builds that run's function (which keeps the run's own state).
 *
 * @since 0.3.0
 * @category parsing
 */
export const parseLines: <O>(
  lines: Stream.Stream<string>,
  make: () => (line: string) => O | ReadonlyArray<O> | ProtocolError
) => Stream.Stream<O, ProtocolError> = LineParser.parseLines

/**
 * A driver's `parse` built from a line function: `make` is called once per run with the run's
 * context and returns that run's function of a line. As a `Stream` it is `parseLines`; a one-shot
 * run of a driver whose `parse` is this very function reads the process's lines with the line
 * function directly, without a `Stream` per run (a driver that wraps it in a `parse` of its own
 * is read through its own). The built-in drivers' parsers are built so.
 *
 * @since 0.3.0
 * @category parsing
 */
export const parseFromLines: (
  make: (context: ParseContext) => (line: string) => LineOutputs
) => Driver["parse"] = LineParser.fromLines

/**
 * The duplex channel core gives a live session over its process: stdin lines out, stdout
 * lines in. Core owns the process (spawn, process group, kill escalation, stderr, markers);
 * the session owns the protocol (frames, request ids, correlation).
 *
 * @since 0.1.0
 * @category live
 */
export interface Channel {
  /**
   * Writes one protocol frame (a newline is appended). Fails once stdin is closed. A
   * `SecretFrame` is written with its secrets in place, and kept (recorded, logged, shown)
   * only as its `text`.
   */
  readonly write: (line: string | SecretFrame) => Effect.Effect<void, ProtocolError>
  /** Every stdout line of the process, in order, until it exits. Read by the session alone. */
  readonly lines: Stream.Stream<string>
  /** Closes the process's stdin (a graceful end for CLIs that exit at EOF). */
  readonly closeInput: Effect.Effect<void>
}

/**
 * A frame that must carry a secret to the process (an ACP agent takes the hosted tools' bearer
 * token inside `session/new`, not from its environment). `text` holds each secret as its
 * `placeholder`; the channel puts the values in only when it writes to stdin, so the secret stays
 * `Redacted` up to the syscall. Whatever keeps, logs or shows frames keeps `text`: the frame is
 * never kept raw. The driver picks placeholders that cannot occur elsewhere in the frame and
 * values that need no escaping where they go.
 *
 * @since 0.1.0
 * @category live
 */
export interface SecretFrame {
  readonly _tag: "SecretFrame"
  readonly text: string
  readonly secrets: ReadonlyArray<{ readonly placeholder: string; readonly value: Redacted.Redacted<string> }>
}

/**
 * What `Live.attach` is given besides the channel: the parse context, the request `open` built
 * the process from (the same object), the process's hosted-tools credential and a signal from
 * the gateway. A driver whose protocol declares MCP servers at session creation (ACP's
 * `session/new`) needs the workspace, the MCP sources and the token itself, not the name of an
 * environment variable.
 *
 * @since 0.1.0
 * @category live
 */
export interface LiveContext extends ParseContext {
  readonly request: InvocationRequest
  /**
   * The token the session declares for the hosted tools (ACP: in `session/new`). It belongs to a
   * credential of the session's own, not the one whose token the process's environment carries
   * (`hosted.tokenVariable`): an agent's native configuration may connect with that one when
   * the process starts, and that listing must not count as the session's.
   */
  readonly hostedToken: Redacted.Redacted<string>
  /**
   * Completes once the gateway has received a `tools/list` made with `hostedToken` (core passes
   * that credential's `listed`): the session's MCP client reached the hosted tools. It never fails;
   * a driver that waits on it bounds the wait itself (an agent handed a wrong token drops the
   * server silently, and then this never completes).
   */
  readonly hostedToolsListed: Effect.Effect<void>
  /**
   * Present when the agent has approvals (and `request.liveApprovals` is `true`): asks the host
   * about one of the CLI's approval requests on behalf of the turn running on this process, and
   * resolves with the one decision (the handler's, the host's, the deadline's fallback, or a deny
   * when the turn is canceled or the agent closes; a deny when no turn runs). Never fails. The
   * driver correlates the request and answers the CLI in its own protocol.
   */
  readonly approve?: (ask: ApprovalAsk) => Effect.Effect<Approval.Decision>
}

/**
 * One turn of a live session.
 *
 * @since 0.1.0
 * @category live
 */
export interface LiveTurn {
  readonly runId: string
  readonly prompt: string
  /**
   * A `runAs` attempt of a driver whose `capabilities.liveStructuredOutput` is `native`: the JSON
   * Schema (as `InvocationRequest.outputSchema`) this turn's final answer must match. The session
   * sends it with this turn only and reports what the provider returned for it in the turn's
   * `Terminal.structuredOutput`. Absent: a plain turn.
   */
  readonly outputSchema?: JsonSchema | undefined
}

/**
 * What the provider did with input sent during a running turn: `Injected` into the running
 * turn (the model sees it before the turn ends), or `Queued` to be answered after the turn's own
 * answer (still within the same turn: see `LiveSession.turn`).
 *
 * @since 0.1.0
 * @category live
 */
export type Delivery =
  | { readonly _tag: "Injected" }
  | { readonly _tag: "Queued" }

/**
 * A live session attached to one process. Turns are serialized by core: `turn` is never
 * called while another turn's stream is open.
 *
 * @since 0.1.0
 * @category live
 */
export interface LiveSession {
  /**
   * Runs one turn. The stream yields the same `Output`s as the one-shot parser (the first turn
   * of a session starts with `SessionStarted`) and ends right after the turn's `Terminal`.
   * An interrupted turn still ends with its `Terminal` (`ok: false`).
   *
   * Input steered into the turn belongs to it, however the provider delivered it: when the
   * provider answers a `Queued` input after the turn's own answer, the stream goes on with that
   * answer and the one `Terminal` comes after it (its `text` is the last answer, its `usage`
   * covers both). The provider's end of a queued answer is never the end of a later turn. A
   * turn whose predecessor still has work in the process (its stream was closed early) starts
   * once that work is over.
   */
  readonly turn: (turn: LiveTurn) => Stream.Stream<Output, ProtocolError>
  /**
   * Delivers input into the running turn. Only called while a turn runs as core sees it; when the
   * provider has no running turn (it ended, even if core has not read its `Terminal` yet, or the
   * provider refused the input for that reason) it fails with `ProtocolError` reason
   * `NoActiveTurn`, which `thread.send` answers as `NoActiveTurn`; any other failure is the
   * protocol's. Resolves once the protocol shows what the provider did with the input,
   * which may be after the write (Claude Code decides at its next tool boundary or when its
   * reply ends). A driver whose protocol cannot steer leaves `steer` out
   * (`capabilities.streamingInput` is then `false`).
   */
  readonly steer?: (input: string) => Effect.Effect<Delivery, ProtocolError>
  /**
   * Asks the provider to stop the running turn, and the input queued behind it; the process
   * stays up for the next turn. Resolves when the provider acknowledged the request (the turn's
   * stream then ends with its `Terminal`); harmless when no turn runs.
   */
  readonly interrupt: Effect.Effect<void, ProtocolError>
  /** Ends the session gracefully (e.g. closes stdin); core escalates to signals after a grace. */
  readonly shutdown: Effect.Effect<void>
}

/**
 * The live protocol of a driver.
 *
 * @since 0.1.0
 * @category live
 */
export interface Live {
  /**
   * The long-lived process for a thread: like `prepare`, but for a session that will receive
   * its turns over the channel (`request.prompt` is empty; `request.session` says whether the
   * session is new, resumed or forked).
   */
  readonly open: (
    request: InvocationRequest
  ) => Effect.Effect<Invocation, ProtocolError, FileSystem.FileSystem | Path.Path>
  /**
   * Attaches to the process once spawned: any handshake (initialize, session creation or
   * resume) happens here. The session lives in the given scope.
   */
  readonly attach: (
    channel: Channel,
    context: LiveContext
  ) => Effect.Effect<LiveSession, ProtocolError, Scope.Scope>
}

/**
 * What the provider asked, as the driver read it: everything of an `ApprovalRequest` but the
 * ids core assigns.
 *
 * @since 0.3.0
 * @category approvals
 */
export interface ApprovalAsk {
  readonly toolName: string
  readonly kind: Approval.Kind
  readonly input: unknown
  readonly callId?: string
  readonly command?: string
  readonly cwd?: string
  readonly diff?: string
  readonly paths?: ReadonlyArray<string>
  readonly options?: ReadonlyArray<{ readonly id: string; readonly kind?: string; readonly label?: string }>
}

/**
 * A one-shot approval mechanism: an MCP tool the CLI calls before each built-in tool (Claude
 * Code's `--permission-prompt-tool mcp__<server>__<tool>`). Core serves it on the gateway, for one
 * run, under a server key of its own and the process's credential; the model never sees it among
 * the hosted tools.
 *
 * @since 0.3.0
 * @category approvals
 */
export interface ApproverTool {
  readonly name: string
  readonly description: string
  /** The JSON Schema of the input the CLI sends. */
  readonly inputSchema: { readonly [key: string]: unknown }
  /** Reads the CLI's call; a string is why the input is not an approval request (answered deny). */
  readonly ask: (input: unknown) => ApprovalAsk | string
  /** The decision as the CLI reads it: a JSON object, sent as the result's one text block (no structured content). */
  readonly answer: (decision: Approval.Decision, input: unknown) => { readonly [key: string]: unknown }
}

/**
 * A driver's approval mechanisms.
 *
 * @since 0.3.0
 * @category approvals
 */
export interface Approvals {
  /**
   * The one-shot mechanism (an approver tool on the gateway). Absent: a one-shot run of an agent
   * with approvals fails before spawn with `InvalidTurn("UnsupportedCapability")`.
   */
  readonly tool?: ApproverTool
  /**
   * `true` when the live session (`Driver.live`) answers the CLI's approval requests through
   * `LiveContext.approve`: threads of an agent with approvals then run live. A driver with
   * neither mechanism usable (no `tool`, and no `live` or live threads turned off) fails
   * `Agent.make` with `UnsupportedCapability("approvals")`.
   */
  readonly live?: boolean
}
