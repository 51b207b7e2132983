/** @internal */
import * as Driver from "@tether/core/Driver"
import type { Usage } from "@tether/core/Result"
import { isBlank, none, notice, usageFrom } from "./lines.js"

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

/** An object's first own key (as `Object.keys(json)[0]`), without listing them all. */
const firstKey = (json: Json): string | undefined => {
  for (const key in json) {
    if (Object.hasOwn(json, key)) return key
  }
  return undefined
}

/**
 * The `ToolCall` output of a `tool_call` record's one `<kind>ToolCall` entry (`end` with its
 * result), built at once: no view of the entry in between (a run reads one per tool call line).
 * `undefined` when the record has no entry.
 *
 * @internal
 */
export const toolCallOf = (
  record: Json,
  hostedKey: string,
  callId: string,
  phase: "start" | "end"
): Driver.Output | undefined => {
  const call = record["tool_call"]
  if (!isRecord(call)) return undefined
  const kind = firstKey(call)
  if (kind === undefined) return undefined
  const body = call[kind]
  const bodyRecord = isRecord(body) ? body : undefined
  let args = bodyRecord === undefined ? undefined : bodyRecord["args"]
  let name: string
  let source: Source = "builtin"
  if (kind === "mcpToolCall" && isRecord(args)) {
    const provider = str(args["providerIdentifier"])
    const tool = str(args["toolName"])
    if (provider === hostedKey && tool !== undefined) {
      name = tool
      source = "host"
    } else {
      name = str(args["name"]) ?? `${provider ?? ""}-${tool ?? ""}`
      source = "mcp"
    }
    args = args["args"]
  } else if (kind === "function" && bodyRecord !== undefined) {
    name = str(bodyRecord["name"]) ?? "function"
    args = bodyRecord["arguments"]
  } else {
    name = kind.endsWith("ToolCall") ? kind.slice(0, -8) : kind
  }
  if (phase === "start") return { _tag: "ToolCall", phase, callId, name, source, input: args }
  const [output, isError] = resultOf(bodyRecord === undefined ? undefined : bodyRecord["result"])
  return { _tag: "ToolCall", phase, callId, name, source, input: args, output, isError }
}

/**
 * What a tool result says happened: `result` holds one outcome, named by its key (`success`, or
 * one of Cursor's failures: `error`, `failure`, `rejected`, `timeout`, `permissionDenied`,
 * `fileNotFound`, `spawnError`, …), beside members that describe the call (a `pid`). `success` is
 * read first; else `error`, `failure` or `rejected` (their payload may be a bare string); else
 * the first member holding an object. `undefined` when there is none (the result is then read as
 * it is).
 */
const outcomeOf = (result: Json): string | undefined => {
  if (result["success"] !== undefined) return "success"
  if (result["error"] !== undefined) return "error"
  if (result["failure"] !== undefined) return "failure"
  if (result["rejected"] !== undefined) return "rejected"
  for (const key in result) {
    if (Object.hasOwn(result, key) && isRecord(result[key])) return key
  }
  return undefined
}

/**
 * Outcomes that are not failures besides `success` (which carries its own `isError`): a task
 * finished or registered, a `…Success` (a screen recording's start, save or discard), and the
 * outcomes of a call still under way (approved, running in the background). Any other outcome is a
 * failure: a result Cursor adds later is reported as failed rather than as done.
 */
const fine = (outcome: string): boolean =>
  outcome === "complete" || outcome === "registered" || outcome === "approved" || outcome === "async" ||
  outcome === "stillRunning" || outcome.endsWith("Success")

/** A failure's message: its `error`, `message` or `reason` text, or the failure itself as a string. */
const failureMessage = (failure: unknown): string | undefined => {
  if (typeof failure === "string") return failure
  if (!isRecord(failure)) return undefined
  for (const key of ["error", "message", "reason"] as const) {
    const text = failure[key]
    if (typeof text === "string" && text !== "") return text
  }
  return undefined
}

/**
 * A tool result's output and whether it failed: MCP content texts joined (or the success as it
 * is), a failure's message (else the whole result, which names the outcome), a fine outcome's
 * payload; a result without an outcome as it is, not failed.
 */
const resultOf = (result: unknown): readonly [output: unknown, isError: boolean] => {
  if (!isRecord(result)) return [result, false]
  const outcome = outcomeOf(result)
  if (outcome === undefined) return [result, false]
  const payload = result[outcome]
  if (outcome === "success") {
    if (!isRecord(payload)) return [payload, false]
    const isError = payload["isError"] === true
    const content = payload["content"]
    if (!Array.isArray(content)) return [payload, isError]
    // A loop, not flatMap + join: one result per tool call line, most with one text part.
    let text = ""
    for (let i = 0; i < content.length; i++) {
      const part: unknown = content[i]
      const inner = isRecord(part) ? part["text"] : undefined
      const partText = isRecord(inner) ? inner["text"] : undefined
      if (typeof partText !== "string") return [content, isError]
      text = i === 0 ? partText : `${text}\n${partText}`
    }
    return [text, isError]
  }
  if (fine(outcome)) return [payload, false]
  return [failureMessage(payload) ?? result, true]
}

const usageOf = (usage: unknown): Usage | undefined => {
  if (!isRecord(usage)) return undefined
  const inputTokens = num(usage["inputTokens"]) ?? num(usage["input_tokens"])
  const outputTokens = num(usage["outputTokens"]) ?? num(usage["output_tokens"])
  const cachedInputTokens = num(usage["cacheReadTokens"]) ?? num(usage["cached_input_tokens"])
  if (inputTokens === undefined && outputTokens === undefined && cachedInputTokens === undefined) return undefined
  // Every field comes from `num` (a finite number).
  return usageFrom(inputTokens, outputTokens, cachedInputTokens)
}

/**
 * A message or a thinking record written exactly as Cursor's CLI writes one (the member order of
 * its stream-json output), with no escape, quote or control character in its strings, so that
 * each string's text is its value. `plainMessage`: group 1 is the role (`user` or `assistant`),
 * group 2 the text. `plainThinking`: group 1 is a delta's text, absent for `completed`.
 */
const plainMessage =
  /^\{"type":"(user|assistant)","message":\{"role":"(?:user|assistant)","content":\[\{"type":"text","text":"([^"\\\x00-\x1f]*)"\}\]\},"session_id":"[^"\\\x00-\x1f]*"(?:,"model_call_id":"[^"\\\x00-\x1f]*")?(?:,"timestamp_ms":(?:0|[1-9][0-9]*))?\}$/
const plainThinking =
  /^\{"type":"thinking","subtype":"(?:delta","text":"([^"\\\x00-\x1f]*)|completed)","session_id":"[^"\\\x00-\x1f]*","timestamp_ms":(?:0|[1-9][0-9]*)\}$/

/**
 * The outputs of a line `plainMessage` or `plainThinking` matches, read without `JSON.parse`
 * (which reads the same record from it: a property in `Cursor.test.ts` checks both against each
 * other); `undefined` for any other line, which is parsed. Messages and thinking are most of a
 * turn's lines that are not tool calls, and `JSON.parse` building their nested objects to read one
 * string costs several times the match (P3 in docs/contributing.md). Which pattern to try is told
 * by the record type's first letters: a tool call line tries none.
 */
const plainLine = (state: State, line: string): Driver.Output | ReadonlyArray<Driver.Output> | undefined => {
  // `{"type":"` is 9 characters: the type's first letter, then its second.
  const first = line.charCodeAt(9)
  if (first === 97 || first === 117) { // a, u
    const match = plainMessage.exec(line)
    if (match === null) return undefined
    const text = match[2]!
    if (match[1] === "user") return { _tag: "Message", role: "user", text }
    state.lastText = text
    return { _tag: "Message", role: "assistant", text }
  }
  if (first === 116 && line.charCodeAt(10) === 104) { // t, h
    const match = plainThinking.exec(line)
    if (match === null) return undefined
    const text = match[1]
    return text ? { _tag: "ReasoningDelta", text } : none
  }
  return undefined
}

/** One stdout line → outputs (the state is updated in place). @internal */
export const step = (
  state: State,
  line: string,
  context: Driver.ParseContext
): Driver.Output | ReadonlyArray<Driver.Output> | Driver.ProtocolError => {
  if (isBlank(line)) return none
  if (!state.done) {
    const plain = plainLine(state, line)
    if (plain !== undefined) return plain
  }
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
      if (subtype !== "started" && subtype !== "completed") {
        return isRecord(record["tool_call"]) && firstKey(record["tool_call"]) !== undefined
          ? notice("info", `cursor.tool_call.${subtype ?? "unknown"}`, "a tool_call record", record)
          : notice("warning", "cursor.tool_call", "a tool_call record without a tool", record)
      }
      const output = toolCallOf(record, context.hostedKey, callId, subtype === "started" ? "start" : "end")
      if (output === undefined) {
        return notice("warning", "cursor.tool_call", "a tool_call record without a tool", record)
      }
      // A tool call closes the assistant text before it: it is not the final text.
      if (subtype === "started") state.lastText = undefined
      return output
    }
    case "result": {
      const ok = subtype === "success" && record["is_error"] !== true
      const usage = usageOf(record["usage"])
      const result = str(record["result"])
      const terminal: Driver.Output = {
        _tag: "Terminal",
        ok,
        text: ok ? state.lastText ?? result : state.lastText,
        usage,
        model: state.model,
        session: str(record["session_id"]) ?? state.sessionId,
        error: ok ? undefined : str(record["error"]) ?? result ?? `the CLI reported ${subtype ?? "an error"}`,
        raw: record
      }
      state.done = true
      return usage === undefined ? terminal : [{ _tag: "Usage", usage }, terminal]
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
