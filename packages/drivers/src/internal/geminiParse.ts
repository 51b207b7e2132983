/** @internal */
import * as Driver from "@tether/core/Driver"
import type { Usage } from "@tether/core/Result"
import { isBlank, none, notice, RecentMap, textOf, turnEnd, usageFrom } from "./lines.js"

type Json = { readonly [key: string]: unknown }
type Identity = { readonly name: string; readonly source: "host" | "mcp" | "builtin" }

const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
const str = (u: unknown): string | undefined => typeof u === "string" ? u : undefined
const num = (u: unknown): number | undefined => typeof u === "number" && Number.isFinite(u) ? u : undefined

/**
 * The state of one run, updated in place by `step`: a run reads its lines one after the other,
 * and copying the state per line (or returning it in a tuple) costs more than the line's own
 * reading of its record.
 */
interface State {
  sessionId: string | undefined
  model: string | undefined
  /** Assistant text since the last tool call (the candidate final text). */
  segment: string
  /** The last completed assistant segment (kept when a tool call closes a segment). */
  finalText: string | undefined
  /** Tool names by call id, to name the `end` phase. */
  readonly calls: RecentMap<Identity>
  /** The last tool name read and its identity (compared by `===`: a fresh string's lookup hashes it). */
  lastToolName: string | undefined
  lastIdentity: Identity | undefined
  done: boolean
}

/** The state a run starts from (with its own map of calls). */
const initial = (): State => ({
  sessionId: undefined,
  model: undefined,
  segment: "",
  finalText: undefined,
  calls: new RecentMap(),
  lastToolName: undefined,
  lastIdentity: undefined,
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

/**
 * Closes the current assistant segment: it becomes the final text, and its `Message` is returned
 * (`undefined` when the segment is empty). The callers put it in arrays of their exact length:
 * `push` onto an empty array allocates room for 16.
 */
const takeMessage = (state: State): Driver.Output | undefined => {
  if (state.segment.length === 0) return undefined
  const message: Driver.Output = { _tag: "Message", role: "assistant", text: state.segment }
  state.finalText = state.segment
  state.segment = ""
  return message
}

/** `stats` of a `result` record → `Usage` (fields absent from the record stay undefined). */
const usageOf = (stats: unknown): Usage | undefined => {
  if (!isRecord(stats)) return undefined
  const inputTokens = num(stats["input_tokens"])
  const outputTokens = num(stats["output_tokens"])
  const cachedInputTokens = num(stats["cached"])
  if (inputTokens === undefined && outputTokens === undefined && cachedInputTokens === undefined) return undefined
  // Every field comes from `num` (a finite number).
  return usageFrom(inputTokens, outputTokens, cachedInputTokens)
}

const modelOfStats = (stats: unknown): string | undefined => {
  if (!isRecord(stats) || !isRecord(stats["models"])) return undefined
  const names = Object.keys(stats["models"])
  return names.length === 1 ? names[0] : undefined
}

/** Identities by hosted key and tool name: a run names the same few tools again and again. */
const identities = new Map<string, Map<string, ReturnType<typeof toolIdentity>>>()

const identityOf = (toolName: string, hostedKey: string): ReturnType<typeof toolIdentity> => {
  let byName = identities.get(hostedKey)
  if (byName === undefined) {
    byName = new Map()
    identities.set(hostedKey, byName)
  }
  let identity = byName.get(toolName)
  if (identity === undefined) {
    identity = toolIdentity(toolName, hostedKey)
    // Bounded: tool names come from the CLI's output, one entry per distinct name.
    if (byName.size < 1024) byName.set(toolName, identity)
  }
  return identity
}

/** One stdout line → outputs (the state is updated in place); fails only on a protocol violation. @internal */
export const step = (
  state: State,
  line: string,
  context: Driver.ParseContext
): Driver.Output | ReadonlyArray<Driver.Output> | Driver.ProtocolError => {
  if (isBlank(line)) return none
  let record: unknown
  try {
    record = JSON.parse(line)
  } catch {
    return notice("warning", "gemini.non_json", line.slice(0, 2048))
  }
  if (!isRecord(record) || typeof record["type"] !== "string") {
    return notice("warning", "gemini.unknown", "a JSON line without a record type", record)
  }
  if (state.done) return notice("info", `gemini.${record["type"]}`, "a record after the terminal record", record)
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
      state.sessionId = sessionId
      state.model = model
      return { _tag: "SessionStarted", sessionId, model }
    }
    case "message": {
      const content = str(record["content"]) ?? ""
      if (record["role"] === "assistant") {
        state.segment += content
        if (record["delta"] === true) return content.length > 0 ? { _tag: "TextDelta", text: content } : none
        return takeMessage(state) ?? none
      }
      if (record["role"] === "user") return { _tag: "Message", role: "user", text: content }
      return notice("info", "gemini.message", `message with role ${textOf(record["role"])}`, record)
    }
    case "tool_use": {
      const callId = str(record["tool_id"]) ?? ""
      const toolName = str(record["tool_name"]) ?? ""
      let identity = state.lastIdentity
      if (identity === undefined || toolName !== state.lastToolName) {
        identity = identityOf(toolName, context.hostedKey)
        state.lastToolName = toolName
        state.lastIdentity = identity
      }
      state.calls.set(callId, identity)
      const call: Driver.Output = {
        _tag: "ToolCall",
        phase: "start",
        callId,
        name: identity.name,
        source: identity.source,
        input: record["parameters"]
      }
      const message = takeMessage(state)
      return message === undefined ? call : [message, call]
    }
    case "tool_result": {
      const callId = str(record["tool_id"]) ?? ""
      const identity = state.calls.get(callId)
      const isError = record["status"] !== "success"
      const error = isRecord(record["error"]) ? str(record["error"]["message"]) : undefined
      return {
        _tag: "ToolCall",
        phase: "end",
        callId,
        name: identity?.name ?? "",
        source: identity?.source ?? "builtin",
        output: record["output"] ?? error,
        isError
      }
    }
    case "error": {
      const severity = record["severity"] === "warning" ? "warning" : "error"
      return notice(severity, "gemini.error", str(record["message"]) ?? "", record)
    }
    case "result": {
      const message = takeMessage(state)
      const usage = usageOf(record["stats"])
      const ok = record["status"] === "success"
      const error = isRecord(record["error"]) ? str(record["error"]["message"]) : undefined
      const terminal: Driver.Output = {
        _tag: "Terminal",
        ok,
        text: state.finalText,
        usage,
        model: modelOfStats(record["stats"]) ?? state.model,
        session: state.sessionId,
        error: ok ? undefined : error ?? `the CLI reported status ${textOf(record["status"])}`,
        raw: record
      }
      state.done = true
      return turnEnd(message, usage, terminal)
    }
    default:
      return notice("info", `gemini.${record["type"]}`, "an unknown record kind", record)
  }
}

/** @internal */
export const parse: Driver.Driver["parse"] = Driver.parseFromLines((context) => {
  const state = initial()
  return (line) => step(state, line, context)
})
