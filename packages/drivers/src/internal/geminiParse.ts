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
  /** The run's hosted tools Gemini renamed (looked up before the cache of identities). */
  readonly renamed: Renamed
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
  /** The last error record's message: an invalid stream's reason comes before a `result` without `error`. */
  lastError: string | undefined
  done: boolean
}

/** The state a run starts from (with its own map of calls). */
const initial = (renamed: Renamed): State => ({
  renamed,
  sessionId: undefined,
  model: undefined,
  segment: "",
  finalText: undefined,
  calls: new RecentMap(),
  lastToolName: undefined,
  lastIdentity: undefined,
  lastError: undefined,
  done: false
})

/**
 * The argument Gemini CLI 0.61 adds to every tool call on its own (see `Gemini.ts`): not the
 * tool's, so not in its events and transcript either (the gateway strips it for the handler).
 *
 * @internal
 */
export const injectedArgument = "wait_for_previous"

const withoutInjected = (parameters: unknown): unknown => {
  if (!isRecord(parameters) || !Object.hasOwn(parameters, injectedArgument)) return parameters
  const own: Record<string, unknown> = {}
  for (const key of Object.keys(parameters)) {
    if (key !== injectedArgument) {
      Object.defineProperty(own, key, { value: parameters[key], enumerable: true, writable: true, configurable: true })
    }
  }
  return own
}

/** The CLI's sanitization of an MCP server name inside a tool name. */
const sanitize = (name: string): string => name.replace(/[^a-zA-Z0-9_\-.:]/g, "_")

/**
 * The run's hosted tools Gemini names otherwise than `mcp_<key>_<tool>` (it shortens a long name):
 * Gemini's name → the catalog's (see `renaming`).
 *
 * @internal
 */
export type Renamed = ReadonlyMap<string, string>

const noneRenamed: Renamed = new Map()

/**
 * The name Gemini CLI 0.61 gives tool `tool` of MCP server `server`, as its model and its policy
 * engine see it (`generateValidName` in its core's `tools/mcp-tool.js`): `mcp_<server>_<tool>`,
 * characters outside `[a-zA-Z0-9_\-.:]` replaced by `_`, and a name over 63 characters shortened
 * to its first 30 and last 30 characters around `...`. A catalog name (`[A-Za-z0-9_.-]`, up to 128
 * characters) is shortened from 53 characters on under the `tether` key.
 *
 * @internal
 */
export const geminiToolName = (server: string, tool: string): string => {
  const joined = `${server}_${tool}`
  let name = (joined.startsWith("mcp_") ? joined : `mcp_${joined}`).replace(/[^a-zA-Z0-9_\-.:]/g, "_")
  if (/^[^a-zA-Z_]/.test(name)) name = `_${name}`
  return name.length > 63 ? `${name.slice(0, 30)}...${name.slice(-30)}` : name
}

type HostedTools = { readonly key: string; readonly tools: ReadonlyArray<string> }

/**
 * The tools of `hosted` Gemini CLI names otherwise than `mcp_<key>_<tool>` (Gemini's name → the
 * catalog's), or the `HostedToolsUnavailable` error when two would reach it under one name.
 *
 * @internal
 */
export const renaming = (hosted: HostedTools): ReadonlyMap<string, string> | Driver.ProtocolError => {
  const byGeminiName = new Map<string, string>()
  const renamed = new Map<string, string>()
  for (const tool of hosted.tools) {
    const name = geminiToolName(hosted.key, tool)
    const other = byGeminiName.get(name)
    if (other !== undefined && other !== tool) {
      return new Driver.ProtocolError({
        reason: "HostedToolsUnavailable",
        detail: `hosted tools "${other}" and "${tool}" would both reach Gemini CLI as "${name}" ` +
          `(it shortens a tool name over 63 characters, "mcp_${hosted.key}_" included, to its first and last 30): ` +
          `give one of them a shorter or more distinct name, or leave one out of the turn's tools`
      })
    }
    byGeminiName.set(name, tool)
    if (name !== `mcp_${hosted.key}_${tool}`) renamed.set(name, tool)
  }
  return renamed
}

/** {@link renaming} of a tool set `prepare` or `live.open` accepted (so without a clash). @internal */
export const renamedOf = (hosted: HostedTools): Renamed => {
  const renamed = renaming(hosted)
  return renamed instanceof Driver.ProtocolError ? noneRenamed : renamed
}

/** The renamed hosted tools of a run, from the tools its parse context carries. @internal */
export const renamedInContext = (context: Driver.ParseContext): Renamed =>
  context.hostedTools === undefined ? noneRenamed : renamedOf({ key: context.hostedKey, tools: context.hostedTools })

/**
 * A tool named as a hosted one that is not one of the run's hosted tools (`hostedTools`, when
 * known) is another server's: a server of the copied profile whose name starts with the hosted
 * key and `_` (`tether_x`) names its tools `mcp_tether_x_<tool>` too.
 *
 * @internal
 */
export const onlyHosted = (
  identity: ReturnType<typeof toolIdentity>,
  toolName: string,
  hostedTools: ReadonlyArray<string> | undefined
): ReturnType<typeof toolIdentity> =>
  identity.source === "host" && hostedTools !== undefined && !hostedTools.includes(identity.name)
    ? { name: toolName, source: "mcp" }
    : identity

/** @internal */
export const toolIdentity = (
  toolName: string,
  hostedKey: string,
  renamed: Renamed = noneRenamed
): { readonly name: string; readonly source: "host" | "mcp" | "builtin" } => {
  const catalogName = renamed.size === 0 ? undefined : renamed.get(toolName)
  if (catalogName !== undefined) return { name: catalogName, source: "host" }
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

/**
 * An assistant text delta written exactly as Gemini CLI writes one, with no escape, quote or
 * control character in its strings (so each string's text is its value): the content is group 1.
 */
const plainDelta =
  /^\{"type":"message","timestamp":"[^"\\\x00-\x1f]*","role":"assistant","content":"([^"\\\x00-\x1f]*)","delta":true\}$/

/**
 * The content of a line `plainDelta` matches, read without `JSON.parse` (which reads the same
 * record from it); `undefined` for any other line, which is parsed. Deltas are most of a turn's
 * records, and `JSON.parse` building each one's object of five fields to read one costs about nine
 * times the match (P3 in docs/contributing.md); the anchored pattern turns any other line away at
 * its first differing character.
 */
const assistantDelta = (line: string): string | undefined => {
  const match = plainDelta.exec(line)
  return match === null ? undefined : match[1]
}

/** One stdout line → outputs (the state is updated in place); fails only on a protocol violation. @internal */
export const step = (
  state: State,
  line: string,
  context: Driver.ParseContext
): Driver.Output | ReadonlyArray<Driver.Output> | Driver.ProtocolError => {
  if (isBlank(line)) return none
  if (!state.done) {
    const delta = assistantDelta(line)
    if (delta !== undefined) {
      state.segment += delta
      return delta.length > 0 ? { _tag: "TextDelta", text: delta } : none
    }
  }
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
        const catalogName = state.renamed.size === 0 ? undefined : state.renamed.get(toolName)
        identity = catalogName === undefined
          ? onlyHosted(identityOf(toolName, context.hostedKey), toolName, context.hostedTools)
          : { name: catalogName, source: "host" }
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
        input: withoutInjected(record["parameters"])
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
      if (severity === "error") state.lastError = str(record["message"])
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
        error: ok ? undefined : error ?? state.lastError ?? `the CLI reported status ${textOf(record["status"])}`,
        raw: record
      }
      state.done = true
      return turnEnd(message, usage, terminal)
    }
    default:
      return notice("info", `gemini.${record["type"]}`, "an unknown record kind", record)
  }
}

/**
 * The parser of a run; its renamed hosted tools are known from its context (without the run's
 * tools in it, a shortened name is reported as Gemini gives it).
 *
 * @internal
 */
export const parse: Driver.Driver["parse"] = Driver.parseFromLines((context) => {
  const state = initial(renamedInContext(context))
  return (line) => step(state, line, context)
})
