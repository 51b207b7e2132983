/** @internal */
import * as Driver from "@tether/core/Driver"
import type { Usage } from "@tether/core/Result"
import { isBlank, makeUsage, notice, type UsageFields } from "./lines.js"

type Json = { readonly [key: string]: unknown }
type Source = "host" | "mcp" | "builtin"

const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
const str = (u: unknown): string | undefined => typeof u === "string" ? u : undefined
const num = (u: unknown): number | undefined => typeof u === "number" && Number.isFinite(u) ? u : undefined

interface State {
  sessionId: string | undefined
  model: string | undefined
  /** The last assistant message (the final text when no tool call follows it). */
  lastText: string | undefined
  done: boolean
}

/** A run's state, updated in place by `step` (a copy per line costs more than the line's reading). */
const initial = (): State => ({ sessionId: undefined, model: undefined, lastText: undefined, done: false })

/** The text of a `message.content` (string or text blocks). */
const contentText = (message: unknown): string => {
  if (!isRecord(message)) return ""
  const content = message["content"]
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return ""
  // A loop, not flatMap + join: a message is read per line, and most have one text block.
  let text = ""
  for (const block of content) {
    if (isRecord(block) && block["type"] === "text" && typeof block["text"] === "string") text += block["text"]
  }
  return text
}

/** The one `<kind>ToolCall` entry of a `tool_call` record. @internal */
export const toolCallOf = (
  record: Json,
  hostedKey: string
): { readonly name: string; readonly source: Source; readonly args: unknown; readonly result: unknown } | undefined => {
  const call = record["tool_call"]
  if (!isRecord(call)) return undefined
  // The first key (as `Object.keys(call)[0]`), without listing them all.
  let kind: string | undefined
  for (const key in call) {
    if (Object.hasOwn(call, key)) {
      kind = key
      break
    }
  }
  if (kind === undefined) return undefined
  const body = call[kind]
  const args = isRecord(body) ? body["args"] : undefined
  const result = isRecord(body) ? body["result"] : undefined
  if (kind === "mcpToolCall" && isRecord(args)) {
    const provider = str(args["providerIdentifier"])
    const tool = str(args["toolName"])
    const input = args["args"]
    if (provider === hostedKey && tool !== undefined) return { name: tool, source: "host", args: input, result }
    return { name: str(args["name"]) ?? `${provider ?? ""}-${tool ?? ""}`, source: "mcp", args: input, result }
  }
  if (kind === "function" && isRecord(body)) {
    return { name: str(body["name"]) ?? "function", source: "builtin", args: body["arguments"], result }
  }
  return { name: kind.endsWith("ToolCall") ? kind.slice(0, -8) : kind, source: "builtin", args, result }
}

/** A tool result → `[output, isError]`: MCP content texts joined, else the result itself. */
const resultOf = (result: unknown): readonly [unknown, boolean] => {
  if (!isRecord(result)) return [result, false]
  const success = result["success"]
  if (isRecord(success)) {
    const content = success["content"]
    if (Array.isArray(content)) {
      const texts = content.flatMap((c: unknown) =>
        isRecord(c) && isRecord(c["text"]) && typeof c["text"]["text"] === "string" ? [c["text"]["text"]] : []
      )
      return [texts.length === content.length ? texts.join("\n") : content, success["isError"] === true]
    }
    return [success, success["isError"] === true]
  }
  const failure = result["error"] ?? result["failure"] ?? result["rejected"]
  if (failure !== undefined) {
    const message = isRecord(failure) ? str(failure["error"]) ?? str(failure["message"]) : str(failure)
    return [message ?? failure, true]
  }
  return [result, false]
}

const usageOf = (usage: unknown): Usage | undefined => {
  if (!isRecord(usage)) return undefined
  const inputTokens = num(usage["inputTokens"]) ?? num(usage["input_tokens"])
  const outputTokens = num(usage["outputTokens"]) ?? num(usage["output_tokens"])
  const cachedInputTokens = num(usage["cacheReadTokens"]) ?? num(usage["cached_input_tokens"])
  if (inputTokens === undefined && outputTokens === undefined && cachedInputTokens === undefined) return undefined
  const fields: UsageFields = {}
  if (inputTokens !== undefined) fields.inputTokens = inputTokens
  if (outputTokens !== undefined) fields.outputTokens = outputTokens
  if (cachedInputTokens !== undefined) fields.cachedInputTokens = cachedInputTokens
  // Every field comes from `num` (a finite number).
  return makeUsage(fields)
}

const none: Array<Driver.Output> = []

/** One stdout line → outputs (the state is updated in place). @internal */
export const step = (
  state: State,
  line: string,
  context: Driver.ParseContext
): Driver.Output | Array<Driver.Output> | Driver.ProtocolError => {
  if (isBlank(line)) return none
  let record: unknown
  try {
    record = JSON.parse(line)
  } catch {
    return notice("warning", "cursor.non_json", line.slice(0, 2048))
  }
  if (!isRecord(record) || typeof record["type"] !== "string") {
    return notice("warning", "cursor.unknown", "a JSON line without a record type", record)
  }
  const type = record["type"]
  const subtype = str(record["subtype"])
  if (state.done) {
    return notice("info", `cursor.${type}`, "a record after the terminal record", record)
  }
  switch (type) {
    case "system": {
      if (subtype !== "init") {
        return notice("info", `cursor.system.${subtype ?? "unknown"}`, "a system record", record)
      }
      const sessionId = str(record["session_id"])
      if (sessionId === undefined) {
        return new Driver.ProtocolError({ reason: "MalformedOutput", detail: "system/init without session_id" })
      }
      if (context.session._tag === "Resume" && context.session.id !== sessionId) {
        return new Driver.ProtocolError({
          reason: "ResumeRejected",
          detail: `asked to resume ${context.session.id}, the CLI started ${sessionId}`
        })
      }
      const model = str(record["model"])
      state.sessionId = sessionId
      state.model = model
      return { _tag: "SessionStarted", sessionId, model }
    }
    case "user":
      return { _tag: "Message", role: "user", text: contentText(record["message"]) }
    case "assistant": {
      const text = contentText(record["message"])
      state.lastText = text
      return { _tag: "Message", role: "assistant", text }
    }
    case "thinking": {
      const text = str(record["text"])
      return subtype === "delta" && text ? { _tag: "ReasoningDelta", text } : none
    }
    case "tool_call": {
      const callId = str(record["call_id"]) ?? ""
      const call = toolCallOf(record, context.hostedKey)
      if (call === undefined) {
        return notice("warning", "cursor.tool_call", "a tool_call record without a tool", record)
      }
      if (subtype === "started") {
        // A tool call closes the assistant text before it: it is not the final text.
        state.lastText = undefined
        return {
          _tag: "ToolCall",
          phase: "start",
          callId,
          name: call.name,
          source: call.source,
          input: call.args
        }
      }
      if (subtype === "completed") {
        const [output, isError] = resultOf(call.result)
        return {
          _tag: "ToolCall",
          phase: "end",
          callId,
          name: call.name,
          source: call.source,
          input: call.args,
          output,
          isError
        }
      }
      return notice("info", `cursor.tool_call.${subtype ?? "unknown"}`, "a tool_call record", record)
    }
    case "result": {
      const ok = subtype === "success" && record["is_error"] !== true
      const usage = usageOf(record["usage"])
      const out: Array<Driver.Output> = []
      if (usage !== undefined) out.push({ _tag: "Usage", usage })
      const result = str(record["result"])
      out.push({
        _tag: "Terminal",
        ok,
        text: ok ? state.lastText ?? result : state.lastText,
        usage,
        model: state.model,
        session: str(record["session_id"]) ?? state.sessionId,
        error: ok ? undefined : str(record["error"]) ?? result ?? `the CLI reported ${subtype ?? "an error"}`,
        raw: record
      })
      state.done = true
      return out
    }
    default:
      return notice("info", `cursor.${type}`, "an unknown record kind", record)
  }
}

/** @internal */
export const parse: Driver.Driver["parse"] = Driver.parseFromLines((context) => {
  const state = initial()
  return (line) => step(state, line, context)
})
