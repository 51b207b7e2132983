/**
 * Claude Code's stream-json protocol to driver outputs. Other CLIs that speak the same protocol
 * (CodeBuddy Code) reuse the record mapping through `parseWith` and a `Dialect` of their own.
 *
 * @internal
 */
import * as Driver from "@tether/core/Driver"
import type { Usage } from "@tether/core/Result"
import * as Stream from "effect/Stream"
import {
  isBlank,
  type LineOutputs,
  type LineResult,
  none,
  notice,
  RecentMap,
  splitMcpName,
  textOf,
  usageFrom
} from "./lines.js"

/** @internal */
export type Json = { readonly [key: string]: unknown }
type Output = Driver.Output

/** @internal */
export const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
/** @internal */
export const str = (u: unknown): string | undefined => typeof u === "string" ? u : undefined
const num = (u: unknown): number | undefined => typeof u === "number" && Number.isFinite(u) ? u : undefined
/** @internal */
export const blocks = (u: unknown): ReadonlyArray<Json> => Array.isArray(u) ? u.filter(isRecord) : []

/** Mutable per-run parser state (one per `parse` call, one per turn of a live session). @internal */
export interface State {
  model: string | undefined
  /** The session the CLI reported in `system/init`. */
  sessionId: string | undefined
  sawPartial: boolean
  readonly tools: RecentMap<{ readonly name: string; readonly source: "host" | "mcp" | "builtin" }>
}

/**
 * What differs between CLIs speaking Claude Code's stream-json.
 *
 * @internal
 */
export interface Dialect {
  /** The CLI's name in notices and errors, e.g. `Claude Code`. */
  readonly product: string
  /**
   * Built once per run: reads the records the CLI adds or writes differently before the shared
   * mapping; `undefined` leaves the record to the shared mapping. A text delta read without
   * `JSON.parse` (`plainTextDelta`) does not reach it.
   */
  readonly records?: () => (record: Json, state: State, context: Driver.ParseContext) => LineResult<Output> | undefined
  /** A tool result's output from the text of its content (default: the text as it is). */
  readonly toolOutput?: (text: string) => unknown
  /**
   * `usage.input_tokens` already counts the cache reads (an OpenAI-style `prompt_tokens` copied
   * as it is); by default it is Anthropic's uncached part, to which the cache's reads are added.
   */
  readonly inputIncludesCacheReads?: boolean
}

/** @internal */
export const claude: Dialect = { product: "Claude Code" }

/**
 * An MCP tool's name as Claude Code (and CodeBuddy Code) name it: every character outside
 * `[A-Za-z0-9_-]` becomes `_` (a catalog name may hold `.`).
 *
 * @internal
 */
export const toolName = (name: string): string => name.replace(/[^A-Za-z0-9_-]/g, "_")

/**
 * The `--allowedTools` rules of the hosted tools, `mcp__<key>__<tool>` as the CLI names them, or
 * the first two catalog names it would name alike (`a.b` and `a_b`), which it cannot tell apart.
 *
 * @internal
 */
export const hostedRules = (
  key: string,
  tools: ReadonlyArray<string>
): { readonly rules: ReadonlyArray<string> } | { readonly clash: readonly [string, string] } => {
  const seen = new Map<string, string>()
  for (const tool of tools) {
    const named = toolName(tool)
    const other = seen.get(named)
    if (other !== undefined) return { clash: [other, tool] }
    seen.set(named, tool)
  }
  return { rules: [...seen.keys()].map((named) => `mcp__${toolName(key)}__${named}`) }
}

/** Why a definition's hosted tools cannot run on the CLI, `undefined` when they can. @internal */
export const clashOf = (product: string, key: string, tools: ReadonlyArray<string>): string | undefined => {
  const rules = hostedRules(key, tools)
  return "clash" in rules
    ? `${product} names the hosted tools ${JSON.stringify(rules.clash[0])} and ${
      JSON.stringify(rules.clash[1])
    } alike (mcp__${toolName(key)}__${
      toolName(rules.clash[0])
    }: each character outside [A-Za-z0-9_-] becomes _), so it cannot tell them apart: rename one`
    : undefined
}

const toolOf = (providerName: string, hostedKey: string, hostedTools: ReadonlyArray<string> | undefined) => {
  const hosted = `mcp__${hostedKey}__`
  if (providerName.startsWith(hosted)) {
    const name = providerName.slice(hosted.length)
    // The CLI names a tool as `toolName` rewrites it: the catalog's name is the one rewritten so.
    const catalogName = hostedTools === undefined || hostedTools.includes(name)
      ? name
      : hostedTools.find((tool) => toolName(tool) === name)
    // Not one of the run's hosted tools: a server of the copied profile named like the hosted key
    // and `__` (`tether__x`) names its tools `mcp__tether__x__<tool>` too.
    if (catalogName !== undefined) return { name: catalogName, source: "host" as const }
  }
  const mcp = splitMcpName(providerName)
  return mcp === undefined
    ? { name: providerName, source: "builtin" as const }
    : { name: mcp.tool, source: "mcp" as const }
}

/**
 * Builds a `Usage` from a result record; absent fields stay absent (not reported). Anthropic
 * reports uncached, cache-read and cache-write input apart; `inputTokens` is their sum (all
 * input the model read, as the other providers report it), `cachedInputTokens` the cache reads.
 */
const usageOf = (record: Json, dialect: Dialect): Usage | undefined => {
  const usage = isRecord(record["usage"]) ? record["usage"] : undefined
  const cost = num(record["total_cost_usd"])
  if (usage === undefined && cost === undefined) return undefined
  const uncached = num(usage?.["input_tokens"])
  const read = num(usage?.["cache_read_input_tokens"])
  const written = num(usage?.["cache_creation_input_tokens"])
  const input = uncached === undefined && read === undefined && written === undefined
    ? undefined
    : (uncached ?? 0) + (dialect.inputIncludesCacheReads === true ? 0 : read ?? 0) + (written ?? 0)
  // Every field comes from `num` (a finite number), the input a sum of them.
  return usageFrom(input, num(usage?.["output_tokens"]), read, undefined, cost)
}

/** The text parts of a message content (a string as it is). @internal */
export const textOfContent = (content: unknown): string => {
  if (typeof content === "string") return content
  return blocks(content).map((b) => str(b["text"]) ?? "").join("")
}

const onSystem = (
  record: Json,
  state: State,
  context: Driver.ParseContext,
  dialect: Dialect
): Array<Output> | Driver.ProtocolError => {
  const subtype = str(record["subtype"]) ?? ""
  if (subtype === "init") {
    const sessionId = str(record["session_id"])
    const servers = blocks(record["mcp_servers"])
    const hosted = servers.find((s) => s["name"] === context.hostedKey)
    const status = str(hosted?.["status"])
    if (status === "failed" || status === "needs-auth" || status === "pending") {
      return new Driver.ProtocolError({
        reason: "HostedToolsUnavailable",
        detail: `${dialect.product} reported the hosted tools server "${context.hostedKey}" as ${status}` +
          (status === "pending" ? " (still connecting when the CLI stopped waiting for it)" : "")
      })
    }
    const expected = context.session._tag === "Resume" || context.session._tag === "Fork"
      ? context.session.id
      : undefined
    if (expected !== undefined && sessionId !== undefined && sessionId !== expected) {
      return new Driver.ProtocolError({
        reason: "ResumeRejected",
        detail: `${dialect.product} started session ${sessionId} instead of ${expected}`
      })
    }
    state.model = str(record["model"])
    state.sessionId = sessionId
    const out: Array<Output> = []
    if (sessionId !== undefined) out.push({ _tag: "SessionStarted", sessionId, model: state.model })
    for (const server of servers) {
      const s = str(server["status"])
      if (s !== "connected") {
        out.push(notice("warning", "mcp_server", `MCP server "${textOf(server["name"])}" is ${String(s)}`, server))
      }
    }
    return out
  }
  if (subtype === "api_retry") {
    const message = `model API retry ${textOf(record["attempt"])}/${textOf(record["max_retries"])} after ${
      textOf(record["error_status"] ?? record["error"])
    }`
    return [notice("warning", "api_retry", message, record)]
  }
  return [notice("info", `system/${subtype}`, str(record["status"]) ?? subtype, record)]
}

/** The delta a `stream_event` record carries, if any (most records of a turn are these). */
const streamEventOf = (record: Json, state: State): Output | undefined => {
  const event = isRecord(record["event"]) ? record["event"] : undefined
  if (event?.["type"] !== "content_block_delta" || !isRecord(event["delta"])) return undefined
  const delta = event["delta"]
  if (delta["type"] === "text_delta" && typeof delta["text"] === "string") {
    state.sawPartial = true
    return { _tag: "TextDelta", text: delta["text"] }
  }
  if (delta["type"] === "thinking_delta" && typeof delta["thinking"] === "string") {
    state.sawPartial = true
    return { _tag: "ReasoningDelta", text: delta["thinking"] }
  }
  return undefined
}

/**
 * A text delta written exactly as Claude Code (and CodeBuddy Code) write one, with no escape,
 * quote or control character in its strings (so each string's text is its value): the
 * `stream_event` of a `content_block_delta` whose delta is a `text_delta`, then only members
 * whose values are such strings or `null` under other keys than `type` and `event` (the session,
 * the parent tool call, the uuid; CodeBuddy's timestamp and request id). The text is group 1.
 */
const plainTextDelta =
  /^\{"type":"stream_event","event":\{"type":"content_block_delta","index":(?:0|[1-9][0-9]*),"delta":\{"type":"text_delta","text":"([^"\\\x00-\x1f]*)"\}\}(?:,"(?!type"|event")[A-Za-z_]+":(?:null|"[^"\\\x00-\x1f]*"))*\}$/

/**
 * A `stream_event` with nothing to report written exactly as Claude Code (and CodeBuddy Code)
 * write one, with the same members after the event as `plainTextDelta`: a block's or the
 * message's stop, or the start of a text block (its text comes in the deltas). They are a third
 * of a turn's stream events; `streamEventOf` maps each to no output.
 */
const quietStreamEvent =
  /^\{"type":"stream_event","event":\{"type":"(?:content_block_stop","index":(?:0|[1-9][0-9]*)|message_stop"|content_block_start","index":(?:0|[1-9][0-9]*),"content_block":\{"type":"text","text":"[^"\\\x00-\x1f]*"\})\}(?:,"(?!type"|event")[A-Za-z_]+":(?:null|"[^"\\\x00-\x1f]*"))*\}$/

/**
 * The text of a line `plainTextDelta` matches, read without `JSON.parse` (which reads the same
 * record from it and maps it to the same `TextDelta`); `undefined` for any other line, which is
 * parsed. Deltas are the bulk of a turn's records, and `JSON.parse` building each one's nested
 * objects costs several times the match (P3 in docs/contributing.md).
 */
const plainText = (line: string): string | undefined => {
  const match = plainTextDelta.exec(line)
  return match === null ? undefined : match[1]
}

const onStreamEvent = (record: Json, state: State): ReadonlyArray<Output> => {
  const output = streamEventOf(record, state)
  return output === undefined ? none : [output]
}

/**
 * Outputs gathered one by one: the first kept as it is, an array made only for a second (most
 * records have one block, and `push` onto an empty array allocates room for 16).
 */
class Gathered {
  first: Output | undefined = undefined
  all: Array<Output> | undefined = undefined
  add(output: Output): void {
    if (this.first === undefined) this.first = output
    else if (this.all === undefined) this.all = [this.first, output]
    else this.all.push(output)
  }
  get outputs(): LineOutputs<Output> {
    return this.all ?? this.first ?? none
  }
}

const onAssistant = (record: Json, state: State, context: Driver.ParseContext): LineOutputs<Output> => {
  const message = isRecord(record["message"]) ? record["message"] : {}
  // An API failure is reported as a synthetic assistant message carrying `error`.
  if (record["error"] !== undefined && message["model"] === "<synthetic>") {
    return notice("error", "api_error", textOfContent(message["content"]), record)
  }
  const out = new Gathered()
  const content = message["content"]
  // The blocks read in place (no filtered copy of them per record).
  const count = Array.isArray(content) ? content.length : 0
  for (let i = 0; i < count; i++) {
    const block: unknown = (content as ReadonlyArray<unknown>)[i]
    if (!isRecord(block)) continue
    if (block["type"] === "text" && typeof block["text"] === "string") {
      out.add({ _tag: "Message", role: "assistant", text: block["text"] })
    } else if (block["type"] === "thinking" && typeof block["thinking"] === "string" && !state.sawPartial) {
      out.add({ _tag: "ReasoningDelta", text: block["thinking"] })
    } else if (block["type"] === "tool_use") {
      const callId = str(block["id"]) ?? ""
      const tool = toolOf(str(block["name"]) ?? "", context.hostedKey, context.hostedTools)
      state.tools.set(callId, tool)
      out.add({
        _tag: "ToolCall",
        phase: "start",
        callId,
        name: tool.name,
        source: tool.source,
        input: block["input"]
      })
    }
  }
  return out.outputs
}

const isToolResult = (block: unknown): block is Json => isRecord(block) && block["type"] === "tool_result"

const onUser = (record: Json, state: State, dialect: Dialect): LineOutputs<Output> => {
  const message = isRecord(record["message"]) ? record["message"] : {}
  if (typeof message["content"] === "string") return { _tag: "Message", role: "user", text: message["content"] }
  const extra = isRecord(record["tool_use_result"]) ? record["tool_use_result"] : undefined
  const out = new Gathered()
  const content = message["content"]
  // The blocks read in place (no filtered copies of them per record).
  const count = Array.isArray(content) ? content.length : 0
  let results = 0
  for (let i = 0; i < count; i++) if (isToolResult((content as ReadonlyArray<unknown>)[i])) results++
  for (let i = 0; i < count; i++) {
    const block: unknown = (content as ReadonlyArray<unknown>)[i]
    if (!isToolResult(block)) continue
    const callId = str(block["tool_use_id"]) ?? ""
    const tool = state.tools.get(callId) ?? { name: "", source: "builtin" as const }
    const structured = results === 1 && extra !== undefined && isRecord(extra["structuredContent"])
      ? extra["structuredContent"]
      : undefined
    out.add({
      _tag: "ToolCall",
      phase: "end",
      callId,
      name: tool.name,
      source: tool.source,
      output: structured ??
        (dialect.toolOutput === undefined
          ? textOfContent(block["content"])
          : dialect.toolOutput(textOfContent(block["content"]))),
      isError: block["is_error"] === true
    })
  }
  return out.outputs
}

const missingSession = /No conversation found with session ID/

/**
 * What Claude Code returned for a `--json-schema` turn: the value the model's valid
 * `StructuredOutput` call gave; `GaveUp` once the CLI's own retries of invalid calls ran out;
 * absent when the model never called it (the result is then a `success` without the field).
 */
const structuredOf = (record: Json, errors: ReadonlyArray<string>): Driver.StructuredOutput | undefined => {
  if (Object.hasOwn(record, "structured_output")) return { _tag: "Value", value: record["structured_output"] }
  if (record["subtype"] === "error_max_structured_output_retries") {
    return { _tag: "GaveUp", detail: errors.length > 0 ? errors.join("\n") : "error_max_structured_output_retries" }
  }
  return undefined
}

const onResult = (
  record: Json,
  state: State,
  context: Driver.ParseContext,
  dialect: Dialect
): Array<Output> | Driver.ProtocolError => {
  const usage = usageOf(record, dialect)
  const isError = record["is_error"] === true || record["subtype"] !== "success"
  const text = str(record["result"])
  const errors = Array.isArray(record["errors"])
    ? record["errors"].map((error) => textOf(error, "(an error that is not text)"))
    : []
  if (isError && context.session._tag !== "New" && errors.some((e) => missingSession.test(e))) {
    return new Driver.ProtocolError({ reason: "ResumeRejected", detail: errors.join("\n") })
  }
  const modelUsage = isRecord(record["modelUsage"]) ? Object.keys(record["modelUsage"]) : []
  const terminal: Driver.Terminal = {
    _tag: "Terminal",
    ok: !isError,
    // A failed turn's `result` is the CLI's own error text ("API Error: 500 …"), not the model's.
    text: isError ? undefined : text,
    usage,
    model: modelUsage[0] ?? state.model,
    session: str(record["session_id"]),
    error: isError
      ? (errors.length > 0 ? errors.join("\n") : text ?? `${dialect.product} ended with ${textOf(record["subtype"])}`)
      : undefined,
    raw: record
  }
  const structured = context.outputSchema === undefined ? undefined : structuredOf(record, errors)
  const withStructured: Driver.Terminal = structured === undefined
    ? terminal
    : { ...terminal, structuredOutput: structured }
  return usage === undefined ? [withStructured] : [{ _tag: "Usage", usage }, withStructured]
}

/** A fresh per-run state. @internal */
export const makeState = (): State => ({
  model: undefined,
  sessionId: undefined,
  sawPartial: false,
  tools: new RecentMap()
})

/**
 * The outputs of one stdout line, a single one as it is (`parseLines` takes both).
 *
 * @internal
 */
const lineOutputs = (
  line: string,
  state: State,
  context: Driver.ParseContext,
  dialect: Dialect,
  records?: (record: Json, state: State, context: Driver.ParseContext) => LineResult<Output> | undefined
): LineOutputs<Output> => {
  if (isBlank(line)) return none
  const text = plainText(line)
  if (text !== undefined) {
    state.sawPartial = true
    return { _tag: "TextDelta", text }
  }
  if (quietStreamEvent.test(line)) return none
  let record: unknown
  try {
    record = JSON.parse(line)
  } catch {
    return [notice("warning", "malformed", "a stdout line is not JSON", line.slice(0, 4096))]
  }
  if (!isRecord(record)) {
    return [notice("warning", "malformed", "a stdout line is not a JSON object", record)]
  }
  const own = records?.(record, state, context)
  if (own !== undefined) return own
  // The bulk of a turn, read as `onRecord` reads it, its one output without an array around it.
  if (record["type"] === "stream_event") return streamEventOf(record, state) ?? none
  return recordOutputs(record, state, context, dialect)
}

/**
 * The outputs of one stdout line. The live session (`claudeLive.ts`) decodes each line itself to
 * route it, then hands protocol records to `onRecord`; both paths map records the same way.
 *
 * @internal
 */
export const onLine = (
  line: string,
  state: State,
  context: Driver.ParseContext,
  dialect: Dialect = claude,
  records?: (record: Json, state: State, context: Driver.ParseContext) => LineResult<Output> | undefined
): LineResult<Output> => asLineResult(lineOutputs(line, state, context, dialect, records))

/** One output in an array; an array or a protocol error as it is. */
const asLineResult = (result: LineOutputs<Output>): LineResult<Output> =>
  Array.isArray(result) || result instanceof Driver.ProtocolError ? result : [result as Output]

/** The outputs of one decoded stdout record (the live session routes records itself). @internal */
export const onRecord = (
  record: Json,
  state: State,
  context: Driver.ParseContext,
  dialect: Dialect = claude
): LineResult<Output> => asLineResult(recordOutputs(record, state, context, dialect))

/** `onRecord`'s outputs, one output as it is (no array around it). */
const recordOutputs = (
  record: Json,
  state: State,
  context: Driver.ParseContext,
  dialect: Dialect
): LineOutputs<Output> => {
  switch (record["type"]) {
    case "system":
      return onSystem(record, state, context, dialect)
    case "stream_event":
      return onStreamEvent(record, state)
    case "assistant":
      return onAssistant(record, state, context)
    case "user":
      return onUser(record, state, dialect)
    case "result":
      return onResult(record, state, context, dialect)
    default:
      return [notice("info", `unknown/${textOf(record["type"])}`, `unknown ${dialect.product} record`, record)]
  }
}

/**
 * The parser of a CLI speaking Claude Code's stream-json in `dialect`.
 *
 * @internal
 */
export const parseWith = (dialect: Dialect): Driver.Driver["parse"] =>
  Driver.parseFromLines((context) => {
    const state = makeState()
    const records = dialect.records?.()
    return (line) => lineOutputs(line, state, context, dialect, records)
  })

/** @internal */
export const parse: (
  lines: Stream.Stream<string>,
  context: Driver.ParseContext
) => Stream.Stream<Output, Driver.ProtocolError> = parseWith(claude)
