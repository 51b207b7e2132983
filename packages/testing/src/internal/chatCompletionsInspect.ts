/**
 * Reading what a client sent: the messages, tool results and offered tools of a recorded
 * Chat Completions request.
 *
 * @internal
 */
import type { Message, RecordedRequest, ToolResult } from "../ChatCompletionsServer.js"

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const contentText = (content: unknown): string => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return ""
  return content.flatMap((part) => isRecord(part) && typeof part["text"] === "string" ? [part["text"]] : []).join(
    "\n"
  )
}

const parseArguments = (text: unknown): unknown => {
  if (typeof text !== "string") return text
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const rawMessages = (request: RecordedRequest): ReadonlyArray<Record<string, unknown>> => {
  const list = isRecord(request.body) ? request.body["messages"] : undefined
  return Array.isArray(list) ? list.filter(isRecord) : []
}

const toMessage = (raw: Record<string, unknown>): Message => {
  const calls = Array.isArray(raw["tool_calls"]) ? raw["tool_calls"].filter(isRecord) : []
  return {
    role: typeof raw["role"] === "string" ? raw["role"] : "",
    text: contentText(raw["content"]),
    toolCalls: calls.map((call) => {
      const fn = isRecord(call["function"]) ? call["function"] : {}
      return {
        id: typeof call["id"] === "string" ? call["id"] : "",
        name: typeof fn["name"] === "string" ? fn["name"] : "",
        input: parseArguments(fn["arguments"])
      }
    }),
    toolCallId: typeof raw["tool_call_id"] === "string" ? raw["tool_call_id"] : undefined
  }
}

/** @internal */
export const messages = (request: RecordedRequest): ReadonlyArray<Message> => rawMessages(request).map(toMessage)

const asResult = (message: Message): ToolResult => ({ toolCallId: message.toolCallId ?? "", text: message.text })

/** @internal */
export const toolResults = (request: RecordedRequest): ReadonlyArray<ToolResult> =>
  messages(request).filter((m) => m.role === "tool").map(asResult)

/** @internal */
export const lastToolResults = (request: RecordedRequest): ReadonlyArray<ToolResult> => {
  const all = messages(request)
  let start = all.length
  while (start > 0 && all[start - 1]!.role === "tool") start--
  return all.slice(start).map(asResult)
}

/** @internal */
export const texts = (request: RecordedRequest, role: string): ReadonlyArray<string> =>
  messages(request).filter((m) => m.role === role).map((m) => m.text)

/** @internal */
export const toolNames = (request: RecordedRequest): ReadonlyArray<string> => {
  const tools = isRecord(request.body) ? request.body["tools"] : undefined
  if (!Array.isArray(tools)) return []
  return tools.flatMap((tool) => {
    if (!isRecord(tool)) return []
    const fn = isRecord(tool["function"]) ? tool["function"] : undefined
    return fn !== undefined && typeof fn["name"] === "string" ? [fn["name"]] : []
  })
}
