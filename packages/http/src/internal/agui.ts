/**
 * Tether events → AG-UI events (`@ag-ui/core` types).
 *
 * @internal
 */
import type {
  AssistantMessage,
  BaseEvent,
  CustomEvent,
  Message,
  MessagesSnapshotEvent,
  RunErrorEvent,
  RunFinishedEvent,
  RunStartedEvent,
  TextMessageContentEvent,
  TextMessageEndEvent,
  TextMessageStartEvent,
  TokenUsage,
  ToolCallArgsEvent,
  ToolCallEndEvent,
  ToolCallResultEvent,
  ToolCallStartEvent,
  ToolMessage
} from "@ag-ui/core"
import { EventType } from "@ag-ui/core"
import type * as Event from "@tether/core/Event"
import { randomUUID } from "node:crypto"
import * as Wire from "./wire.js"

/** @internal */
export interface Mapper {
  readonly onEvent: (event: Event.Event) => ReadonlyArray<BaseEvent>
  /** The run's last event: `RUN_FINISHED`, or `RUN_ERROR` when the run failed or never finished. */
  readonly onEnd: () => ReadonlyArray<BaseEvent>
}

// Fixed texts: a provider's or a handler's error text never reaches the client.
const errorMessages: { readonly [reason: string]: string } = {
  PrepareFailed: "The agent could not prepare the run.",
  SpawnFailed: "The agent's process could not start.",
  ProtocolError: "The agent's process broke its protocol.",
  ProviderFailed: "The model provider reported a failure.",
  ExitedWithoutResult: "The agent's process ended without a result.",
  OutputLimit: "The agent's output exceeded its limit.",
  CheckpointFailed: "The thread's checkpoint could not be saved."
}

const text = (value: unknown): string => {
  if (typeof value === "string") return value
  try {
    return JSON.stringify(value) ?? ""
  } catch {
    return ""
  }
}

/**
 * The client's conversation copied for `makeConversation`, or `undefined` when it cannot be (a
 * value nested past the call stack, which `structuredClone` throws on): a text to correct then
 * follows as a new message, as when the client sent no conversation.
 */
const conversationOf = (input: ReadonlyArray<Message>): ReturnType<typeof makeConversation> | undefined => {
  try {
    return makeConversation(input)
  } catch {
    return undefined
  }
}

/**
 * The conversation as an AG-UI client assembles it from the events it is sent (as
 * `@ag-ui/client`'s `defaultApplyEvents` does for the events a mapper sends): what a
 * `MESSAGES_SNAPSHOT` must restate, since a client drops the messages a snapshot leaves out.
 */
const makeConversation = (initial: ReadonlyArray<Message>) => {
  const messages: Array<Message> = initial.map((message) => structuredClone(message))
  // The run's text messages by id (their ids are fresh UUIDs: none is among the client's).
  const texts = new Map<string, { content: string }>()
  const apply = (event: BaseEvent): void => {
    switch (event.type) {
      case EventType.TEXT_MESSAGE_START: {
        const { messageId } = event as TextMessageStartEvent
        const message = { id: messageId, role: "assistant" as const, content: "" }
        texts.set(messageId, message)
        messages.push(message)
        return
      }
      case EventType.TEXT_MESSAGE_CONTENT: {
        const { delta, messageId } = event as TextMessageContentEvent
        const message = texts.get(messageId)
        if (message !== undefined) message.content += delta
        return
      }
      case EventType.TOOL_CALL_START: {
        const { toolCallId, toolCallName } = event as ToolCallStartEvent
        if (callOf(toolCallId) !== undefined) return
        const message: AssistantMessage = {
          id: toolCallId,
          role: "assistant",
          toolCalls: [{ id: toolCallId, type: "function", function: { name: toolCallName, arguments: "" } }]
        }
        messages.push(message)
        return
      }
      case EventType.TOOL_CALL_ARGS: {
        const { delta, toolCallId } = event as ToolCallArgsEvent
        const call = callOf(toolCallId)
        if (call !== undefined) call.function.arguments += delta
        return
      }
      case EventType.TOOL_CALL_RESULT: {
        const result = event as ToolCallResultEvent
        const message: ToolMessage = {
          id: result.messageId,
          toolCallId: result.toolCallId,
          role: "tool",
          content: result.content,
          ...(result.metadata === undefined ? {} : { metadata: structuredClone(result.metadata) })
        }
        // After the assistant message that made the call and the tool messages already there.
        const at = messages.findIndex((candidate) =>
          candidate.role === "assistant" && candidate.toolCalls?.some((call) => call.id === result.toolCallId) === true
        )
        if (at === -1) {
          messages.push(message)
          return
        }
        let index = at + 1
        while (index < messages.length && messages[index]!.role === "tool") index++
        messages.splice(index, 0, message)
        return
      }
    }
  }
  const callOf = (id: string) => {
    for (const message of messages) {
      if (message.role !== "assistant") continue
      const call = message.toolCalls?.find((candidate) => candidate.id === id)
      if (call !== undefined) return call
    }
    return undefined
  }
  /** The conversation with the text message `id` set to `text`, as a snapshot event. */
  const snapshot = (id: string, text: string, timestamp: number): MessagesSnapshotEvent => {
    const message = texts.get(id)
    if (message !== undefined) message.content = text
    return { type: EventType.MESSAGES_SNAPSHOT, messages: structuredClone(messages), timestamp }
  }
  return { apply, snapshot }
}

/** @internal */
export const makeMapper = (
  ids: { readonly threadId: string; readonly runId: string },
  /** The conversation the client sent: given, a text that needs correcting is restated by a snapshot. */
  input?: ReadonlyArray<Message>
): Mapper => {
  let started = false
  let ended = false
  /** The text message being streamed: its id and the text sent for it so far. */
  let message: { readonly id: string; text: string } | undefined
  let finished: Event.RunFinished | undefined
  const calls = new Set<string>()
  const conversation = input === undefined ? undefined : conversationOf(input)
  // A client applies tool calls by id, and holds the earlier turns' calls: a CLI that numbers its
  // calls per process (`codex exec --json`: `item_1` again on every turn) would have its call
  // appended to an old one's arguments. A call whose id the client holds gets a fresh AG-UI id.
  const held = new Set<string>()
  for (const known of input ?? []) {
    if (known.role === "assistant") { for (const call of known.toolCalls ?? []) held.add(call.id) }
    if (known.role === "tool") held.add(known.toolCallId)
  }
  const toolCallIds = new Map<string, string>()
  const toolCallIdOf = (callId: string): string => {
    let id = toolCallIds.get(callId)
    if (id === undefined) {
      id = held.has(callId) ? `${callId}-${randomUUID()}` : callId
      toolCallIds.set(callId, id)
    }
    return id
  }

  const closeMessage = (timestamp: number): Array<BaseEvent> => {
    if (message === undefined) return []
    const end: TextMessageEndEvent = { type: EventType.TEXT_MESSAGE_END, messageId: message.id, timestamp }
    message = undefined
    return [end]
  }

  /** A whole text message: start, content, end. */
  const wholeMessage = (text: string, timestamp: number): Array<BaseEvent> => {
    const messageId = randomUUID()
    return [
      { type: EventType.TEXT_MESSAGE_START, messageId, role: "assistant", timestamp },
      { type: EventType.TEXT_MESSAGE_CONTENT, messageId, delta: text, timestamp },
      { type: EventType.TEXT_MESSAGE_END, messageId, timestamp }
    ] satisfies [TextMessageStartEvent, TextMessageContentEvent, TextMessageEndEvent]
  }

  /**
   * The streamed message's end, given its complete text: the missing rest when what was streamed
   * is a beginning of it (deltas dropped at the end), else a correction — a snapshot of the
   * conversation with the complete text (or, without the conversation, the text again as a new
   * message).
   */
  const completeMessage = (open: { readonly id: string; readonly text: string }, text: string, timestamp: number) => {
    if (text.startsWith(open.text)) {
      const rest = text.slice(open.text.length)
      const content: Array<BaseEvent> = rest === ""
        ? []
        : [
          {
            type: EventType.TEXT_MESSAGE_CONTENT,
            messageId: open.id,
            delta: rest,
            timestamp
          } satisfies TextMessageContentEvent
        ]
      return [...content, ...closeMessage(timestamp)]
    }
    const end = closeMessage(timestamp)
    if (conversation === undefined) return [...end, ...wholeMessage(text, timestamp)]
    return [...end, conversation.snapshot(open.id, text, timestamp)]
  }

  const startCall = (event: Event.ToolCall): Array<BaseEvent> => {
    calls.add(event.callId)
    const toolCallId = toolCallIdOf(event.callId)
    const start: ToolCallStartEvent = {
      type: EventType.TOOL_CALL_START,
      toolCallId,
      toolCallName: event.name,
      timestamp: event.time
    }
    const args: ToolCallArgsEvent = {
      type: EventType.TOOL_CALL_ARGS,
      toolCallId,
      delta: text(event.input ?? {}),
      timestamp: event.time
    }
    const end: ToolCallEndEvent = { type: EventType.TOOL_CALL_END, toolCallId, timestamp: event.time }
    return [start, args, end]
  }

  const map = (event: Event.Event): ReadonlyArray<BaseEvent> => {
    if (ended) return []
    switch (event._tag) {
      case "RunStarted": {
        // A rejected resume retried fresh is the same AG-UI run.
        if (started) return []
        started = true
        const runStarted: RunStartedEvent = {
          type: EventType.RUN_STARTED,
          threadId: ids.threadId,
          runId: ids.runId,
          timestamp: event.time
        }
        return [runStarted]
      }
      case "TextDelta": {
        if (event.text === "") return []
        const out: Array<BaseEvent> = []
        if (message === undefined) {
          message = { id: randomUUID(), text: "" }
          const start: TextMessageStartEvent = {
            type: EventType.TEXT_MESSAGE_START,
            messageId: message.id,
            role: "assistant",
            timestamp: event.time
          }
          out.push(start)
        }
        message.text += event.text
        const content: TextMessageContentEvent = {
          type: EventType.TEXT_MESSAGE_CONTENT,
          messageId: message.id,
          delta: event.text,
          timestamp: event.time
        }
        out.push(content)
        return out
      }
      case "Message": {
        if (event.role !== "assistant") return []
        // Streamed as deltas: the message ends here, completed (or corrected) by its whole text,
        // which counts, not the deltas (some may have been dropped on the way: `Dropped`).
        if (message !== undefined) return completeMessage(message, event.text, event.time)
        // Otherwise it arrives whole.
        return event.text === "" ? [] : wholeMessage(event.text, event.time)
      }
      case "ToolCall": {
        const out: Array<BaseEvent> = closeMessage(event.time)
        if (event.phase === "start") {
          if (!calls.has(event.callId)) out.push(...startCall(event))
          return out
        }
        if (!calls.has(event.callId)) out.push(...startCall(event))
        const result: ToolCallResultEvent = {
          type: EventType.TOOL_CALL_RESULT,
          messageId: randomUUID(),
          toolCallId: toolCallIdOf(event.callId),
          content: text(event.output),
          role: "tool",
          timestamp: event.time,
          ...(event.isError === true ? { metadata: { tether: { isError: true } } } : {})
        }
        out.push(result)
        return out
      }
      case "ApprovalRequested":
      case "ApprovalResolved": {
        // AG-UI has no approvals of its own: a `CUSTOM` event named `tether.<tag>` carries the
        // event's wire form (the request's `id` and `runId`: the client answers at
        // `POST /threads/:key/runs/:runId/approvals/:id`).
        const custom: CustomEvent = {
          type: EventType.CUSTOM,
          name: `tether.${event._tag}`,
          value: Wire.toWire(event),
          timestamp: event.time
        }
        return [custom]
      }
      case "RunFinished": {
        finished = event
        return closeMessage(event.time)
      }
      default:
        return []
    }
  }

  // The conversation follows what is sent (a snapshot is built from it, never applied to it).
  const onEvent = conversation === undefined ? map : (event: Event.Event): ReadonlyArray<BaseEvent> => {
    const out = map(event)
    for (const sent of out) if (sent.type !== EventType.MESSAGES_SNAPSHOT) conversation.apply(sent)
    return out
  }

  const onEnd = (): ReadonlyArray<BaseEvent> => {
    if (ended) return []
    ended = true
    const out: Array<BaseEvent> = closeMessage(finished?.time ?? Date.now())
    if (!started) {
      const runStarted: RunStartedEvent = { type: EventType.RUN_STARTED, threadId: ids.threadId, runId: ids.runId }
      out.push(runStarted)
    }
    if (finished === undefined || finished.outcome === "failure") {
      const reason = finished?.reason
      const error: RunErrorEvent = {
        type: EventType.RUN_ERROR,
        message: (reason === undefined ? undefined : errorMessages[reason]) ?? "The run failed.",
        code: reason ?? "internal_error",
        ...(finished === undefined ? {} : { timestamp: finished.time })
      }
      out.push(error)
      return out
    }
    const usage = finished.result.usage
    const tokens: TokenUsage = {
      provider: finished.result.provider,
      ...(finished.result.model === undefined ? {} : { model: finished.result.model }),
      ...(usage?.inputTokens === undefined ? {} : { inputTokens: usage.inputTokens }),
      ...(usage?.outputTokens === undefined ? {} : { outputTokens: usage.outputTokens }),
      ...(usage?.reasoningTokens === undefined ? {} : { reasoningTokens: usage.reasoningTokens })
    }
    const runFinished: RunFinishedEvent = {
      type: EventType.RUN_FINISHED,
      threadId: ids.threadId,
      runId: ids.runId,
      timestamp: finished.time,
      ...(finished.outcome === "canceled"
        ? { outcome: { type: "cancelled" } }
        : { outcome: { type: "success" }, result: finished.result.text }),
      ...(usage === undefined ? {} : { usage: [tokens] })
    }
    out.push(runFinished)
    return out
  }

  return { onEvent, onEnd }
}
