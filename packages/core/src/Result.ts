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

/**
 * Token usage. A field that is `undefined` was not reported; `0` was observed as zero.
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
 * @since 0.1.0
 * @category models
 */
export const TranscriptEntry = Schema.Union(TranscriptMessage, TranscriptToolCall)

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
  instructions: Schema.String
}) {}
