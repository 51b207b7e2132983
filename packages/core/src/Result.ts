/**
 * The result of a run: what the provider answered, what it cost, the checkpoint a later turn
 * resumes, and the raw output kept (bounded) for diagnosis.
 *
 * `agent.run` is `agent.stream` drained: the `Result` it returns is the one carried by the
 * run's `RunFinished` event, field for field.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import * as Approval from "./Approval.js"

/**
 * Token usage. A field that is `undefined` was not reported; `0` was observed as zero.
 *
 * - `inputTokens`: every input token the model read, cached or not (a provider that reports
 *   uncached, cache-read and cache-write input apart, as Anthropic does, has them summed).
 * - `cachedInputTokens`: the part of `inputTokens` read from the provider's prompt cache.
 * - `reasoningTokens`: thinking tokens, where the provider reports them apart.
 *
 * Most drivers report the turn's own usage; Codex reports the thread's running total (see the
 * drivers guide).
 *
 * @since 0.1.0
 * @category models
 */
export class Usage extends Schema.Class<Usage>("@tether/core/Usage")({
  inputTokens: Schema.optional(Schema.Number),
  outputTokens: Schema.optional(Schema.Number),
  cachedInputTokens: Schema.optional(Schema.Number),
  reasoningTokens: Schema.optional(Schema.Number),
  costUsd: Schema.optional(Schema.Number)
}) {}

/**
 * A complete message of the run's conversation.
 *
 * @since 0.1.0
 * @category models
 */
export class TranscriptMessage extends Schema.TaggedClass<TranscriptMessage>()("Message", {
  role: Schema.Literal("assistant", "user"),
  text: Schema.String
}) {}

/**
 * A finished (or, in a partial result, started) tool call of the run.
 *
 * @since 0.1.0
 * @category models
 */
export class TranscriptToolCall extends Schema.TaggedClass<TranscriptToolCall>()("ToolCall", {
  callId: Schema.String,
  name: Schema.String,
  source: Schema.Literal("host", "mcp", "builtin"),
  input: Schema.optional(Schema.Unknown),
  output: Schema.optional(Schema.Unknown),
  isError: Schema.optional(Schema.Boolean)
}) {}

/**
/**
 * An approval the run asked for (`request`) and, once answered, the decision and who made it.
 *
 * @since 0.3.0
 * @category models
 */
export class TranscriptApproval extends Schema.TaggedClass<TranscriptApproval>()("Approval", {
  request: Approval.ApprovalRequest,
  decision: Schema.optional(Approval.Decision),
  by: Schema.optional(Approval.DecidedBy)
}) {}

/**
 * The Schema of one entry of a run's transcript: a message, a tool call or an approval, in the
 * order they happened.
 *
 * @since 0.1.0
 * @category models
 */
export const TranscriptEntry = Schema.Union(TranscriptMessage, TranscriptToolCall, TranscriptApproval)

/**
 * @since 0.1.0
 * @category models
 */
export type TranscriptEntry = typeof TranscriptEntry.Type

/**
 * The provider's raw output, bounded: the last `maxRawBytes` of each stream are kept;
 * `stdoutBytes` / `stderrBytes` count everything that was read.
 *
 * @since 0.1.0
 * @category models
 */
export class Raw extends Schema.Class<Raw>("@tether/core/Raw")({
  stdout: Schema.String,
  stderr: Schema.String,
  stdoutBytes: Schema.Number,
  stderrBytes: Schema.Number,
  /** The driver's terminal record, as the provider wrote it; `undefined` when none arrived. */
  terminal: Schema.optional(Schema.Unknown)
}) {}

/**
 * Why a thread turn started a fresh provider session instead of resuming its checkpoint: the
 * record is incompatible with the agent (`components` names each part of the compatibility
 * fingerprint that differs: `driver`, `driverConfig`, `model`, `workspace`, `instructions`,
 * `skills`, `mcp`, `tools`, `policy`, `profile`, `profileSettings`, `identity`; only
 * `fingerprint` when the record carries no per-component digests).
 *
 * @since 0.1.0
 * @category models
 */
export class Incompatible extends Schema.TaggedClass<Incompatible>()("Incompatible", {
  components: Schema.Array(Schema.String)
}) {}

/**
 * Why a thread turn started a fresh provider session: the provider rejected the resume
 * (`detail` is its rejection text).
 *
 * @since 0.1.0
 * @category models
 */
export class Rejected extends Schema.TaggedClass<Rejected>()("ResumeRejected", {
  detail: Schema.String
}) {}

/**
 * The Schema of why a thread turn started a fresh session instead of resuming: the checkpoint was
 * `Incompatible` with this agent, or the provider `Rejected` the resume.
 *
 * @since 0.1.0
 * @category models
 */
export const RestartReason = Schema.Union(Incompatible, Rejected)

/**
 * @since 0.1.0
 * @category models
 */
export type RestartReason = typeof RestartReason.Type

/**
 * How a thread turn opened its provider session:
 * - `started`: no checkpoint was committed under the key; a fresh session;
 * - `resumed`: the committed checkpoint's session (`from`) continues;
 * - `forked`: the first turn of a fork branches `from` (the source thread's checkpoint);
 * - `restarted`: a fresh session replaces `from`, for `reason`. `from` is not lost: once the
 *   turn commits it is in the key's history (`thread.history`) until the host prunes it.
 *
 * @since 0.1.0
 * @category models
 */
export class ThreadOpening extends Schema.Class<ThreadOpening>("@tether/core/ThreadOpening")({
  key: Schema.String,
  mode: Schema.Literal("started", "resumed", "forked", "restarted"),
  /** The provider session of the checkpoint the turn resumes, forks or replaces. */
  from: Schema.optional(Schema.String),
  /** Committed turns of that checkpoint. */
  fromTurns: Schema.optional(Schema.Number),
  reason: Schema.optional(RestartReason)
}) {}

/**
 * The result of one run. In a `RunError` it is the partial result observed until the failure.
 *
 * @since 0.1.0
 * @category models
 */
export class Result extends Schema.Class<Result>("@tether/core/Result")({
  runId: Schema.String,
  /** The driver's name. */
  provider: Schema.String,
  model: Schema.optional(Schema.String),
  /** The final assistant text only (not the deltas, not earlier messages). */
  text: Schema.String,
  usage: Schema.optional(Usage),
  /** The opaque provider session handle a later turn resumes (the checkpoint). */
  session: Schema.optional(Schema.String),
  transcript: Schema.Array(TranscriptEntry),
  raw: Raw,
  /** The tool names this turn could use (definition ∩ policy), sorted. */
  effectiveTools: Schema.Array(Schema.String),
  /** The instructions actually sent to the provider. */
  instructions: Schema.String,
  /** On a thread: how this turn opened its provider session (`undefined` for a plain run). */
  thread: Schema.optional(ThreadOpening)
}) {}
