/**
 * Tether events → AG-UI events (`@ag-ui/core` types).
 *
 * @internal
 */
import type {
  BaseEvent,
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
  ToolCallStartEvent
} from "@ag-ui/core"
import { EventType } from "@ag-ui/core"
import type * as Event from "@tether/core/Event"
import { randomUUID } from "node:crypto"

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

/** @internal */
export const makeMapper = (ids: { readonly threadId: string; readonly runId: string }): Mapper => {
  let started = false
  let ended = false
  let message: string | undefined
  let finished: Event.RunFinished | undefined
  const calls = new Set<string>()

  const closeMessage = (timestamp: number): Array<BaseEvent> => {
    if (message === undefined) return []
    const end: TextMessageEndEvent = { type: EventType.TEXT_MESSAGE_END, messageId: message, timestamp }
    message = undefined
    return [end]
  }

  const startCall = (event: Event.ToolCall): Array<BaseEvent> => {
    calls.add(event.callId)
    const start: ToolCallStartEvent = {
      type: EventType.TOOL_CALL_START,
      toolCallId: event.callId,
      toolCallName: event.name,
      timestamp: event.time
    }
    const args: ToolCallArgsEvent = {
      type: EventType.TOOL_CALL_ARGS,
      toolCallId: event.callId,
      delta: text(event.input ?? {}),
      timestamp: event.time
    }
    const end: ToolCallEndEvent = { type: EventType.TOOL_CALL_END, toolCallId: event.callId, timestamp: event.time }
    return [start, args, end]
  }

  const onEvent = (event: Event.Event): ReadonlyArray<BaseEvent> => {
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
          message = randomUUID()
          const start: TextMessageStartEvent = {
            type: EventType.TEXT_MESSAGE_START,
            messageId: message,
            role: "assistant",
            timestamp: event.time
          }
          out.push(start)
        }
        const content: TextMessageContentEvent = {
          type: EventType.TEXT_MESSAGE_CONTENT,
          messageId: message,
          delta: event.text,
          timestamp: event.time
        }
        out.push(content)
        return out
      }
      case "Message": {
        if (event.role !== "assistant") return []
        // Streamed as deltas: the message ends here. Otherwise it arrives whole.
        if (message !== undefined) return closeMessage(event.time)
        if (event.text === "") return []
        const messageId = randomUUID()
        return [
          { type: EventType.TEXT_MESSAGE_START, messageId, role: "assistant", timestamp: event.time },
          { type: EventType.TEXT_MESSAGE_CONTENT, messageId, delta: event.text, timestamp: event.time },
          { type: EventType.TEXT_MESSAGE_END, messageId, timestamp: event.time }
        ] satisfies [TextMessageStartEvent, TextMessageContentEvent, TextMessageEndEvent]
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
          toolCallId: event.callId,
          content: text(event.output),
          role: "tool",
          timestamp: event.time,
          ...(event.isError === true ? { metadata: { tether: { isError: true } } } : {})
        }
        out.push(result)
        return out
      }
      case "RunFinished": {
        finished = event
        return closeMessage(event.time)
      }
      default:
        return []
    }
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
