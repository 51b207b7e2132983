/**
 * The typed events of a run. Every event carries the `runId`, a library-assigned `sequence`
 * (strictly increasing within a run, from 0) and `time` (epoch milliseconds).
 *
 * Exactly one `RunStarted` opens and one `RunFinished` closes every admitted run;
 * `RunFinished` is published after the result (and, on a thread, after the commit).
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import * as Approval from "./Approval.js"
import * as Result from "./Result.js"

const base = {
  runId: Schema.String,
  sequence: Schema.Number,
  time: Schema.Number
}

/**
 * The first event of every run, exactly once: the provider, the model, the thread key (for a
 * thread turn), the tools this turn may use and the instructions sent.
 *
 * @since 0.1.0
 * @category events
 */
export class RunStarted extends Schema.TaggedClass<RunStarted>()("RunStarted", {
  ...base,
  provider: Schema.String,
  model: Schema.optional(Schema.String),
  /** The thread's key when the run is a thread's turn (absent for `agent.run` / `agent.stream`). */
  threadKey: Schema.optional(Schema.String),
  /** The tool names this turn may use (definition ∩ policy). */
  effectiveTools: Schema.Array(Schema.String),
  /** The instructions sent to the provider for this turn. */
  instructions: Schema.String
}) {}

/**
 * A thread turn's provider session: resumed, started, forked or restarted (with the reason).
 * Published right after `RunStarted`, before the provider process starts, so a host learns that
 * a turn will not continue the conversation before any of it runs.
 *
 * @since 0.1.0
 * @category events
 */
export class ThreadOpened extends Schema.TaggedClass<ThreadOpened>()("ThreadOpened", {
  ...base,
  opening: Result.ThreadOpening
}) {}

/**
 * The provider reported its session (the checkpoint a later turn resumes).
 *
 * @since 0.1.0
 * @category events
 */
export class SessionStarted extends Schema.TaggedClass<SessionStarted>()("SessionStarted", {
  ...base,
  sessionId: Schema.String,
  model: Schema.optional(Schema.String),
  resumed: Schema.Boolean
}) {}

/**
 * A piece of the model's answer text as it streams. Droppable under backpressure (counted by
 * `Dropped`); the complete text is in the `Message` and the `Result`. The pieces are not always
 * the CLI's own: where one ends with what could be the start of a live credential, that end is
 * held back and begins the next piece (their text joined is the same, but for a live token's
 * characters, which go out as the redaction marker's; docs/security.md says exactly what holds).
 *
 * @since 0.1.0
 * @category events
 */
export class TextDelta extends Schema.TaggedClass<TextDelta>()("TextDelta", {
  ...base,
  text: Schema.String
}) {}

/**
 * A piece of the model's reasoning, when the provider streams it. Droppable under backpressure
 * like `TextDelta`.
 *
 * @since 0.1.0
 * @category events
 */
export class ReasoningDelta extends Schema.TaggedClass<ReasoningDelta>()("ReasoningDelta", {
  ...base,
  text: Schema.String
}) {}

/**
 * A complete message of the conversation.
 *
 * @since 0.1.0
 * @category events
 */
export class Message extends Schema.TaggedClass<Message>()("Message", {
  ...base,
  role: Schema.Literal("assistant", "user"),
  text: Schema.String
}) {}

/**
 * Where a tool lives: a host tool served by the gateway, a tool of an external MCP source,
 * or a tool built into the provider CLI.
 *
 * @since 0.1.0
 * @category models
 */
export const ToolSource = Schema.Literal("host", "mcp", "builtin")

/**
 * A tool call as the provider reported it: `start` with the input, `end` with the output.
 *
 * @since 0.1.0
 * @category events
 */
export class ToolCall extends Schema.TaggedClass<ToolCall>()("ToolCall", {
  ...base,
  phase: Schema.Literal("start", "end"),
  callId: Schema.String,
  /** The tool's own name (for host tools, the catalog name, without the provider's prefix). */
  name: Schema.String,
  source: ToolSource,
  input: Schema.optional(Schema.Unknown),
  output: Schema.optional(Schema.Unknown),
  isError: Schema.optional(Schema.Boolean)
}) {}

/**
 * The provider reported token usage (`usage` is the same `Result.Usage` the result carries).
 *
 * @since 0.1.0
 * @category events
 */
export class Usage extends Schema.TaggedClass<Usage>()("Usage", {
  ...base,
  usage: Result.Usage
}) {}

/**
 * Something the provider said that is not content: a retry, an unknown record kind, a warning.
 *
 * @since 0.1.0
 * @category events
 */
export class Notice extends Schema.TaggedClass<Notice>()("Notice", {
  ...base,
  level: Schema.Literal("info", "warning", "error"),
  kind: Schema.String,
  message: Schema.String,
  raw: Schema.optional(Schema.Unknown)
}) {}

/**
 * A provider process was spawned for this run: its pid and the command (argv joined, token values
 * redacted).
 *
 * @since 0.1.0
 * @category events
 */
export class ProcessStarted extends Schema.TaggedClass<ProcessStarted>()("ProcessStarted", {
  ...base,
  pid: Schema.Number,
  command: Schema.String,
  /**
   * `true` when the turn runs on a thread's warm live process started by an earlier turn (the
   * same `pid` as that turn's); absent when the process was started for this turn.
   */
  reused: Schema.optional(Schema.Boolean)
}) {}

/**
 * Input the host sent into the running turn with `thread.send`, and what the provider did with
 * it: `Injected` into the running turn, or `Queued` to be answered after the turn's own answer
 * (still within the turn). Also in the turn's transcript, as a user message.
 *
 * @since 0.3.0
 * @category events
 */
export class InputDelivered extends Schema.TaggedClass<InputDelivered>()("InputDelivered", {
  ...base,
  text: Schema.String,
  delivery: Schema.Literal("Injected", "Queued")
}) {}

/**
 * A provider process of this run exited: its exit code, or the signal that ended it.
 *
 * @since 0.1.0
 * @category events
 */
export class ProcessExited extends Schema.TaggedClass<ProcessExited>()("ProcessExited", {
  ...base,
  pid: Schema.Number,
  exitCode: Schema.optional(Schema.Number),
  signal: Schema.optional(Schema.String)
}) {}

/**
 * Content deltas or raw output dropped under backpressure since the previous critical event. On a
 * thread's `events`, also what a subscriber that stopped reading had no room for once a close
 * started (any kind, named in `kinds`), before the end of its stream.
 *
 * @since 0.1.0
 * @category events
 */
export class Dropped extends Schema.TaggedClass<Dropped>()("Dropped", {
  ...base,
  count: Schema.Number,
  kinds: Schema.Array(Schema.String)
}) {}

/**
 * The last event of every admitted run. It carries the result, so a consumer of the stream
 * gets exactly what `agent.run` returns.
 *
 * @since 0.1.0
 * @category events
 */
export class RunFinished extends Schema.TaggedClass<RunFinished>()("RunFinished", {
  ...base,
  outcome: Schema.Literal("success", "failure", "canceled"),
  durationMs: Schema.Number,
  /**
   * The `RunError` reason when the outcome is not `success`; `Defect` when the run died of a bug
   * (in a driver or in core): the stream then dies with that defect, not with a `RunError`.
   */
  reason: Schema.optional(Schema.String),
  /** The run's result: complete on `success`, partial otherwise (the same as the `RunError`'s). */
  result: Result.Result
}) {}

/**
 * The provider asks to run a built-in tool. With an approvals handler the handler answers; in
 * event mode the host answers with `thread.approve` / `agent.approve` using `request.id`.
 *
 * @since 0.3.0
 * @category models
 */
export class ApprovalRequested extends Schema.TaggedClass<ApprovalRequested>()("ApprovalRequested", {
  ...base,
  request: Approval.ApprovalRequest
}) {}

/**
 * The one answer of an approval request and who gave it; published once per request, before
 * the run's `RunFinished`.
 *
 * @since 0.3.0
 * @category models
 */
export class ApprovalResolved extends Schema.TaggedClass<ApprovalResolved>()("ApprovalResolved", {
  ...base,
  approvalId: Schema.String,
  decision: Approval.Decision,
  by: Approval.DecidedBy
}) {}

/**
 * The Schema of every event a run streams (`agent.stream`, `thread.stream`), a union on `_tag`:
 * decode and encode events that cross a process boundary with it.
 *
 * @since 0.1.0
 * @category models
 */
export const Event = Schema.Union(
  RunStarted,
  ThreadOpened,
  SessionStarted,
  TextDelta,
  ReasoningDelta,
  Message,
  ToolCall,
  Usage,
  Notice,
  ProcessStarted,
  ProcessExited,
  InputDelivered,
  Dropped,
  ApprovalRequested,
  ApprovalResolved,
  RunFinished
)

/**
 * @since 0.1.0
 * @category models
 */
export type Event = typeof Event.Type

/**
 * The events that may be dropped under backpressure (content deltas; everything else is critical).
 *
 * @since 0.1.0
 * @category predicates
 */
export const isDroppable = (event: Event): boolean => event._tag === "TextDelta" || event._tag === "ReasoningDelta"
