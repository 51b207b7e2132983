/**
 * The typed failures of an agent: construction, admission, capability checks, runs and close.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { Result } from "./Result.js"

/**
 * The agent is closing or closed: no new run or thread is admitted.
 *
 * @since 0.1.0
 * @category errors
 */
export class AgentClosed extends Schema.TaggedError<AgentClosed>("@tether/core/AgentClosed")("AgentClosed", {
  agent: Schema.String
}) {
  override get message(): string {
    return `agent ${this.agent} is closed`
  }
}

/**
 * A turn asked for something the agent cannot do as asked. Raised before the run is admitted;
 * nothing was spawned.
 *
 * - `UnknownTool`: a tool policy names a tool that is not in the definition (a misspelled `deny`
 *   must never leave a tool allowed);
 * - `UnsupportedCapability`: the turn asks for something the driver cannot do (e.g. a built-in
 *   tool policy);
 * - `InvalidStructuredOutput`: a `runAs` Schema that cannot be expressed as JSON Schema or that
 *   no value satisfies (`Schema.Never`, at its root or in a required field or tuple element), or a
 *   `repairs` option that is not a non-negative integer;
 * - `PolicyWidened`: a turn's policy asks for more than the agent's (a built-in tool policy's
 *   `sandbox` wider than the agent's `policy.sandbox`).
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidTurn extends Schema.TaggedError<InvalidTurn>("@tether/core/InvalidTurn")("InvalidTurn", {
  reason: Schema.Literal("UnknownTool", "UnsupportedCapability", "InvalidStructuredOutput", "PolicyWidened"),
  detail: Schema.String
}) {
  override get message(): string {
    return `${this.reason}: ${this.detail}`
  }
}

/**
 * The agent could not be built: an invalid definition, a tool definition error, the gateway
 * registration or the execution clone failed. Raised before any provider process starts.
 *
 * @since 0.1.0
 * @category errors
 */
export class AgentConfigError
  extends Schema.TaggedError<AgentConfigError>("@tether/core/AgentConfigError")("AgentConfigError", {
    reason: Schema.Literal("InvalidDefinition", "InvalidOptions", "Registration", "Profile"),
    detail: Schema.String,
    cause: Schema.optional(Schema.Defect)
  })
{
  override get message(): string {
    return `${this.reason}: ${this.detail}`
  }
}

/**
 * The driver cannot honour what was asked (a sandbox level, resume, skills, an MCP transport…).
 * Raised before spawn; nothing is silently dropped.
 *
 * @since 0.1.0
 * @category errors
 */
export class UnsupportedCapability
  extends Schema.TaggedError<UnsupportedCapability>("@tether/core/UnsupportedCapability")("UnsupportedCapability", {
    driver: Schema.String,
    capability: Schema.String,
    detail: Schema.String
  })
{
  override get message(): string {
    return `driver ${this.driver} does not support ${this.capability}: ${this.detail}`
  }
}

/**
 * Why an admitted run failed.
 *
 * - `PrepareFailed`: the driver could not build the invocation or its files could not be written;
 * - `SpawnFailed`: the provider process could not start;
 * - `ProtocolError`: the driver detected a protocol-level failure (see `Driver.ProtocolError`);
 * - `ProviderFailed`: the terminal record reported a failure;
 * - `ExitedWithoutResult`: the process ended (crash, exit before output) before its terminal record;
 * - `OutputLimit`: a stdout line exceeded the line bound;
 * - `Canceled`: the run was interrupted (by its consumer, the caller or the agent's close);
 * - `CheckpointFailed`: a thread's clean run could not commit its checkpoint (lease lost, store
 *   failure); nothing was persisted.
 *
 * @since 0.1.0
 * @category models
 */
export const RunErrorReason = Schema.Literal(
  "PrepareFailed",
  "SpawnFailed",
  "ProtocolError",
  "ProviderFailed",
  "ExitedWithoutResult",
  "OutputLimit",
  "Canceled",
  "CheckpointFailed"
)

/**
 * @since 0.1.0
 * @category models
 */
export type RunErrorReason = typeof RunErrorReason.Type

/**
 * An admitted run failed after the driver was entered. `result` is the partial result observed
 * until the failure (raw output included); `cause` is the underlying failure, when there is one.
 *
 * @since 0.1.0
 * @category errors
 */
export class RunError extends Schema.TaggedError<RunError>("@tether/core/RunError")("RunError", {
  reason: RunErrorReason,
  detail: Schema.String,
  result: Result,
  exitCode: Schema.optional(Schema.Number),
  signal: Schema.optional(Schema.String),
  cause: Schema.optional(Schema.Defect)
}) {
  override get message(): string {
    return `run ${this.result.runId} failed (${this.reason}): ${this.detail}`
  }
}

/**
 * A close deadline expired. The steps listed in `pending` did not complete; calling `close`
 * again continues from the first of them.
 *
 * @since 0.1.0
 * @category errors
 */
export class CloseTimeout extends Schema.TaggedError<CloseTimeout>("@tether/core/CloseTimeout")("CloseTimeout", {
  agent: Schema.String,
  pending: Schema.Array(Schema.String)
}) {
  override get message(): string {
    return `agent ${this.agent} close timed out; pending steps: ${this.pending.join(", ")}`
  }
}

/**
 * `approve` named an approval id this agent (or this thread) never asked: no run of it is
 * waiting for that answer.
 *
 * @since 0.3.0
 * @category errors
 */
export class ApprovalNotFound
  extends Schema.TaggedError<ApprovalNotFound>("@tether/core/ApprovalNotFound")("ApprovalNotFound", {
    id: Schema.String
  })
{
  override get message(): string {
    return `no pending approval ${this.id}`
  }
}

/**
 * `approve` came after the request was already answered (by the handler, the host, the deadline,
 * a cancel or the close): the first answer won and stays.
 *
 * @since 0.3.0
 * @category errors
 */
export class ApprovalAlreadyResolved
  extends Schema.TaggedError<ApprovalAlreadyResolved>("@tether/core/ApprovalAlreadyResolved")(
    "ApprovalAlreadyResolved",
    {
      id: Schema.String,
      by: Schema.Literal("handler", "host", "deadline", "cancel", "close")
    }
  )
{
  override get message(): string {
    return `approval ${this.id} was already answered (by ${this.by})`
  }
}
