/** @internal */
import * as Driver from "@tether/core/Driver"
import { Usage } from "@tether/core/Result"
import * as Stream from "effect/Stream"
import { isBlank, notice, parseLines, textOf } from "./lines.js"

type Json = { readonly [key: string]: unknown }

const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
const str = (u: unknown): string | undefined => typeof u === "string" ? u : undefined
const num = (u: unknown): number | undefined => typeof u === "number" && Number.isFinite(u) ? u : undefined

interface State {
  readonly sessionId: string | undefined
  readonly model: string | undefined
  /** Assistant text since the last tool call (the candidate final text). */
  readonly segment: string
  /** The last completed assistant segment (kept when a tool call closes a segment). */
  readonly finalText: string | undefined
  /**
   * Tool names by call id, to name the `end` phase. One map per run, updated in place: copying it
   * per line would make each line cost as much as the run so far.
   */
  readonly calls: Map<string, { readonly name: string; readonly source: "host" | "mcp" | "builtin" }>
  readonly done: boolean
}

/** The state a run starts from (with its own map of calls). */
const initial = (): State => ({
  sessionId: undefined,
  model: undefined,
  segment: "",
  finalText: undefined,
  calls: new Map(),
  done: false
})

/** The CLI's sanitization of an MCP server name inside a tool name. */
const sanitize = (name: string): string => name.replace(/[^a-zA-Z0-9_\-.:]/g, "_")

/** @internal */
export const toolIdentity = (
  toolName: string,
  hostedKey: string
): { readonly name: string; readonly source: "host" | "mcp" | "builtin" } => {
  const hostedPrefix = `mcp_${sanitize(hostedKey)}_`
  if (toolName.startsWith(hostedPrefix)) return { name: toolName.slice(hostedPrefix.length), source: "host" }
  if (toolName.startsWith("mcp_")) return { name: toolName, source: "mcp" }
  return { name: toolName, source: "builtin" }
}

const flush = (state: State): readonly [State, Array<Driver.Output>] =>
  state.segment.length === 0
    ? [state, []]
    : [
      { ...state, segment: "", finalText: state.segment },
      [{ _tag: "Message", role: "assistant", text: state.segment }]
    ]

/** `stats` of a `result` record → `Usage` (fields absent from the record stay undefined). */
const usageOf = (stats: unknown): Usage | undefined => {
  if (!isRecord(stats)) return undefined
  const inputTokens = num(stats["input_tokens"])
  const outputTokens = num(stats["output_tokens"])
  const cachedInputTokens = num(stats["cached"])
  if (inputTokens === undefined && outputTokens === undefined && cachedInputTokens === undefined) return undefined
  return new Usage({
    ...(inputTokens !== undefined ? { inputTokens } : {}),
    ...(outputTokens !== undefined ? { outputTokens } : {}),
    ...(cachedInputTokens !== undefined ? { cachedInputTokens } : {})
  })
}

const modelOfStats = (stats: unknown): string | undefined => {
  if (!isRecord(stats) || !isRecord(stats["models"])) return undefined
  const names = Object.keys(stats["models"])
  return names.length === 1 ? names[0] : undefined
}

/** One stdout line → outputs; fails only on a protocol violation. @internal */
export const step = (
  state: State,
  line: string,
  context: Driver.ParseContext
): readonly [State, Array<Driver.Output>] | Driver.ProtocolError => {
  if (isBlank(line)) return [state, []]
  let record: unknown
  try {
    record = JSON.parse(line)
  } catch {
    return [state, [notice("warning", "gemini.non_json", line.slice(0, 2048))]]
  }
  if (!isRecord(record) || typeof record["type"] !== "string") {
    return [state, [notice("warning", "gemini.unknown", "a JSON line without a record type", record)]]
  }
  if (state.done) {
    return [state, [
      notice("info", `gemini.${record["type"]}`, "a record after the terminal record", record)
    ]]
  }
  switch (record["type"]) {
    case "init": {
      const sessionId = str(record["session_id"])
      if (sessionId === undefined) {
        return new Driver.ProtocolError({ reason: "MalformedOutput", detail: "init without session_id" })
      }
      const requested = context.session._tag === "Resume" ? context.session.id : undefined
      if (requested !== undefined && requested !== sessionId) {
        return new Driver.ProtocolError({
          reason: "ResumeRejected",
          detail: `asked to resume ${requested}, the CLI started ${sessionId}`
        })
      }
      const model = str(record["model"])
      return [{ ...state, sessionId, model }, [{ _tag: "SessionStarted", sessionId, model }]]
    }
    case "message": {
      const content = str(record["content"]) ?? ""
      if (record["role"] === "assistant") {
        if (record["delta"] === true) {
          return [
            { ...state, segment: state.segment + content },
            content.length > 0 ? [{ _tag: "TextDelta", text: content }] : []
          ]
        }
        const [flushed, out] = flush({ ...state, segment: state.segment + content })
        return [flushed, out]
      }
      if (record["role"] === "user") {
        return [state, [{ _tag: "Message", role: "user", text: content }]]
      }
      return [state, [
        notice("info", "gemini.message", `message with role ${textOf(record["role"])}`, record)
      ]]
    }
    case "tool_use": {
      const callId = str(record["tool_id"]) ?? ""
      const identity = toolIdentity(str(record["tool_name"]) ?? "", context.hostedKey)
      const [flushed, out] = flush(state)
      flushed.calls.set(callId, identity)
      out.push({ _tag: "ToolCall", phase: "start", callId, ...identity, input: record["parameters"] })
      return [flushed, out]
    }
    case "tool_result": {
      const callId = str(record["tool_id"]) ?? ""
      const identity = state.calls.get(callId) ?? { name: "", source: "builtin" as const }
      const isError = record["status"] !== "success"
      const error = isRecord(record["error"]) ? str(record["error"]["message"]) : undefined
      return [state, [{
        _tag: "ToolCall",
        phase: "end",
        callId,
        ...identity,
        output: record["output"] ?? error,
        isError
      }]]
    }
    case "error": {
      const severity = record["severity"] === "warning" ? "warning" : "error"
      return [state, [notice(severity, "gemini.error", str(record["message"]) ?? "", record)]]
    }
    case "result": {
      const [flushed, out] = flush(state)
      const usage = usageOf(record["stats"])
      if (usage !== undefined) out.push({ _tag: "Usage", usage })
      const ok = record["status"] === "success"
      const error = isRecord(record["error"]) ? str(record["error"]["message"]) : undefined
      out.push({
        _tag: "Terminal",
        ok,
        text: flushed.finalText,
        usage,
        model: modelOfStats(record["stats"]) ?? flushed.model,
        session: flushed.sessionId,
        error: ok ? undefined : error ?? `the CLI reported status ${textOf(record["status"])}`,
        raw: record
      })
      return [{ ...flushed, done: true }, out]
    }
    default:
      return [state, [notice("info", `gemini.${record["type"]}`, "an unknown record kind", record)]]
  }
}

/** @internal */
export const parse = (
  lines: Stream.Stream<string>,
  context: Driver.ParseContext
): Stream.Stream<Driver.Output, Driver.ProtocolError> =>
  parseLines(lines, () => {
    let state = initial()
    return (line) => {
      const result = step(state, line, context)
      if (result instanceof Driver.ProtocolError) return result
      state = result[0]
      return result[1]
    }
  })
