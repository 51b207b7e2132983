/**
 * Approvals of the CLI's built-in tools (DESIGN §13): what the provider asks before it runs a
 * shell command, writes a file or calls a tool, and the host's decision.
 *
 * An agent configured with `approvals` answers every request exactly once, either through its
 * handler (an Effect whose requirements come from the host's layers, like tool handlers) or, in
 * event mode, through the host: the run emits `ApprovalRequested` and the host calls
 * `thread.approve(id, decision)` / `agent.approve(id, decision)`. The first answer wins; a deadline
 * answers with the fallback decision; a canceled run or a closing agent answers deny. The run
 * then emits `ApprovalResolved` (who decided) and the transcript keeps both.
 *
 * @since 0.3.0
 */
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/**
 * What kind of action is asked for: a shell command, a change of files, a tool call (an MCP
 * tool or another built-in), or something the provider does not classify.
 *
 * @since 0.3.0
 * @category models
 */
export const Kind = Schema.Literal("command", "fileChange", "tool", "other")

/**
 * @since 0.3.0
 * @category models
 */
export type Kind = typeof Kind.Type

/**
 * An option the provider offers for this request (e.g. ACP's `allow_once`, Codex's
 * `acceptForSession`), as the provider named it.
 *
 * @since 0.3.0
 * @category models
 */
export class OfferedOption extends Schema.Class<OfferedOption>("@tether/core/Approval/OfferedOption")({
  id: Schema.String,
  kind: Schema.optional(Schema.String),
  label: Schema.optional(Schema.String)
}) {}

/**
 * One request of the provider to run a built-in tool. `id` is Tether's (unique per agent); the
 * details are what the provider gave: the command and its working directory, the diff, the paths.
 *
 * @since 0.3.0
 * @category models
 */
export class ApprovalRequest extends Schema.TaggedClass<ApprovalRequest>("@tether/core/ApprovalRequest")(
  "ApprovalRequest",
  {
    id: Schema.String,
    runId: Schema.String,
    /** The provider's name of the tool (e.g. `Bash`, `Write`, `exec_command`). */
    toolName: Schema.String,
    kind: Kind,
    /** The tool's input as the provider sent it. */
    input: Schema.Unknown,
    /** The provider's own id of the call, when it gave one (e.g. Claude's `tool_use_id`). */
    callId: Schema.optional(Schema.String),
    command: Schema.optional(Schema.String),
    cwd: Schema.optional(Schema.String),
    diff: Schema.optional(Schema.String),
    paths: Schema.optional(Schema.Array(Schema.String)),
    options: Schema.optional(Schema.Array(OfferedOption))
  }
) {}

/**
 * Allow this call.
 *
 * @since 0.3.0
 * @category models
 */
export class Allow extends Schema.TaggedClass<Allow>("@tether/core/Approval/Allow")("Allow", {}) {}

/**
 * Allow this call and, where the provider supports it, the same kind of call for the rest of the
 * provider session (a provider without that notion allows this call only, and so does a driver
 * whose CLI would grant more than the same kind of call: docs/approvals.md has each CLI's rule).
 *
 * @since 0.3.0
 * @category models
 */
export class AllowForSession
  extends Schema.TaggedClass<AllowForSession>("@tether/core/Approval/AllowForSession")("AllowForSession", {})
{}

/**
 * Refuse the call; `message` is what the model is told.
 *
 * @since 0.3.0
 * @category models
 */
export class Deny extends Schema.TaggedClass<Deny>("@tether/core/Approval/Deny")("Deny", {
  message: Schema.String
}) {}

/**
 * The Schema of a decision: `Allow`, `AllowForSession` or `Deny`, a union on `_tag` (the first
 * answer to a request; see {@link Options}).
 *
 * @since 0.3.0
 * @category models
 */
export const Decision = Schema.Union(Allow, AllowForSession, Deny)

/**
 * @since 0.3.0
 * @category models
 */
export type Decision = typeof Decision.Type

/**
 * Allow this call.
 *
 * @since 0.3.0
 * @category constructors
 */
export const allow: Decision = new Allow()

/**
 * Allow this call and, where the provider supports it, the same kind of call for the rest of its
 * session.
 *
 * @since 0.3.0
 * @category constructors
 */
export const allowForSession: Decision = new AllowForSession()

/**
 * Refuse the call; the model is told `message`.
 *
 * @since 0.3.0
 * @category constructors
 */
export const deny = (message: string): Decision => new Deny({ message })

/**
 * Who answered a request: the agent's `handler`, the `host` (`approve`), the `deadline` (the
 * fallback decision), or deny because the run was canceled (`cancel`) or the agent closed (`close`).
 *
 * @since 0.3.0
 * @category models
 */
export const DecidedBy = Schema.Literal("handler", "host", "deadline", "cancel", "close")

/**
 * @since 0.3.0
 * @category models
 */
export type DecidedBy = typeof DecidedBy.Type

/**
 * The decision a canceled run or a closing agent answers with.
 *
 * @since 0.3.0
 * @category constants
 */
export const canceledDecision: Decision = deny("The run was canceled before this action was approved.")

/**
 * The default fallback of a request the deadline answered.
 *
 * @since 0.3.0
 * @category constants
 */
export const timedOutDecision: Decision = deny("No approval arrived in time; the action was not run.")

/**
 * An agent's approvals.
 *
 * - `handler`: answers each request (its requirements come from the host's layers, provided
 *   where the agent is made). A handler that dies (or throws before returning its Effect) answers deny (the defect is logged). Absent:
 *   event mode, the host answers with `approve`.
 * - `deadline`: a request still unanswered then is answered with `fallback` (default 60 seconds;
 *   a request served through the gateway, as Claude Code's one-shot approver tool is, is also
 *   bounded by the gateway's `handlerDeadline`, 2 minutes by default: keep it below that).
 * - `fallback`: default {@link timedOutDecision} (deny).
 *
 * @since 0.3.0
 * @category models
 */
export interface Options<R = never> {
  readonly handler?: (request: ApprovalRequest) => Effect.Effect<Decision, never, R>
  readonly deadline?: Duration.DurationInput
  readonly fallback?: Decision
}
