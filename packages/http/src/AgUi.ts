/**
 * Tether events as AG-UI events (the official `@ag-ui/core` types), as `AgentHttp`'s `POST /agui`
 * sends them:
 *
 * - the first `RunStarted` → `RUN_STARTED` (with the AG-UI thread and run ids);
 * - `TextDelta`s → `TEXT_MESSAGE_START`, `TEXT_MESSAGE_CONTENT` per delta, and the assistant
 *   `Message` that completes them → `TEXT_MESSAGE_END` (a message that arrives whole gets all three).
 *   The `Message`'s text is the message's text, whatever deltas were dropped on the way (under the
 *   agent's default event policy a slow consumer loses deltas, counted by `Dropped`, which has no
 *   AG-UI counterpart): when the streamed text is its beginning, the rest follows as one more
 *   `TEXT_MESSAGE_CONTENT` before `TEXT_MESSAGE_END`; otherwise `TEXT_MESSAGE_END` is followed by a
 *   `MESSAGES_SNAPSHOT` of the conversation (the client's messages, see `Options.messages`, then
 *   this run's) with the complete text, which an AG-UI client applies by message id;
 * - `ToolCall` start → `TOOL_CALL_START`, `TOOL_CALL_ARGS` (the input as JSON), `TOOL_CALL_END`;
 *   its end → `TOOL_CALL_RESULT` (the output as text; a rejection or error carries
 *   `metadata.tether.isError`). The `toolCallId` is the call's id, or a fresh one when one of the
 *   client's messages already holds that id (a CLI that numbers its calls per process);
 * - `ApprovalRequested` / `ApprovalResolved` → `CUSTOM` named `tether.ApprovalRequested` /
 *   `tether.ApprovalResolved`, `value` the event's wire form (`AgentHttp.toWire`): AG-UI has no
 *   approvals, and a client answers at `AgentHttp`'s approvals route with the request's `runId`
 *   and `id`;
 * - the last `RunFinished` → `RUN_FINISHED` (outcome `success` with the final text as `result`
 *   and the token usage, or `cancelled`), or `RUN_ERROR` (code: the `RunError` reason, a fixed
 *   message) when the run failed or its stream ended without one.
 *
 * Other events (sessions, processes, usage, notices, reasoning, `Dropped`) have no AG-UI
 * counterpart here.
 *
 * @since 0.1.0
 */
import type { BaseEvent, Message } from "@ag-ui/core"
import type * as Event from "@tether/core/Event"
import * as Stream from "effect/Stream"
import * as internal from "./internal/agui.js"

/**
 * The AG-UI ids a run is reported under (the ones the AG-UI client sent).
 *
 * @since 0.1.0
 * @category models
 */
export interface Ids {
  readonly threadId: string
  readonly runId: string
}

/**
 * What else `fromEvents` needs to know of the client.
 *
 * @since 0.4.0
 * @category models
 */
export interface Options {
  /**
   * The conversation the client sent (its `RunAgentInput.messages`, as sent): a correction
   * `MESSAGES_SNAPSHOT` restates it before this run's messages, since an AG-UI client drops the
   * messages a snapshot leaves out. Without it, a streamed text that needs correcting is ended and
   * followed by its complete text as a new assistant message.
   */
  readonly messages?: ReadonlyArray<Message>
}

/**
 * A run's Tether events as AG-UI events. A failure of the source ends the stream with
 * `RUN_ERROR` (or, after a `RunFinished`, with what that `RunFinished` said); it never fails.
 *
 * @since 0.1.0
 * @category conversions
 */
export const fromEvents =
  (ids: Ids, options?: Options) =>
  <E, R>(events: Stream.Stream<Event.Event, E, R>): Stream.Stream<BaseEvent, never, R> =>
    Stream.suspend(() => {
      const mapper = internal.makeMapper(ids, options?.messages)
      return events.pipe(
        Stream.mapConcat(mapper.onEvent),
        Stream.catchAllCause(() => Stream.empty),
        Stream.concat(Stream.suspend(() => Stream.fromIterable(mapper.onEnd())))
      )
    })
