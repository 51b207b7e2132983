/**
 * The parser of `codex exec --json` (Codex 0.171.0): one JSON record per stdout line.
 *
 * @internal
 */
import * as Driver from "@tether/core/Driver"
import type { Usage } from "@tether/core/Result"
import { isBlank, none, notice, RecentMap, textOf, usageFrom } from "./lines.js"
import * as StrictSchema from "./strictSchema.js"

type Json = { readonly [key: string]: unknown }
type Output = Driver.Output

const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
const str = (u: unknown): string | undefined => typeof u === "string" ? u : undefined
const num = (u: unknown): number | undefined => typeof u === "number" && Number.isFinite(u) ? u : undefined

/**
 * Mutable per-run parser state (one per `parse` call; one per turn of a live session).
 *
 * @internal
 */
export interface State {
  reconnects: number
  thread: string | undefined
  lastMessage: string | undefined
  /** Item ids whose `ToolCall` start was already emitted. */
  readonly started: RecentMap<true>
}

/**
 * The names Codex gives a usage's four counts: `exec --json` in snake_case, the app-server in
 * camelCase.
 *
 * @internal
 */
export type UsageKeys = readonly [input: string, output: string, cached: string, reasoning: string]

const execUsageKeys: UsageKeys = ["input_tokens", "output_tokens", "cached_input_tokens", "reasoning_output_tokens"]

/**
 * A usage record's counts under `keys` (each read with `num`: a finite number, or absent).
 *
 * @internal
 */
export const usageOf = (usage: unknown, keys: UsageKeys = execUsageKeys): Usage | undefined =>
  isRecord(usage)
    ? usageFrom(num(usage[keys[0]]), num(usage[keys[1]]), num(usage[keys[2]]), num(usage[keys[3]]))
    : undefined

/** The text parts of an MCP result joined, or its structured content when it has one. */
const mcpOutput = (result: unknown): unknown => {
  if (!isRecord(result)) return undefined
  if (isRecord(result["structured_content"])) return result["structured_content"]
  const content = Array.isArray(result["content"]) ? result["content"] : []
  return content.map((part) => isRecord(part) ? str(part["text"]) ?? "" : "").join("")
}

/** A tool call item's input (Codex's own kinds: the fields a caller reads as the call's input). */
const toolInput = (item: Json): unknown => {
  switch (item["type"]) {
    case "mcp_tool_call":
      return item["arguments"]
    case "command_execution":
      return { command: item["command"] }
    case "file_change":
      return { changes: item["changes"] }
    default:
      return { query: item["query"], ...(item["action"] === undefined ? {} : { action: item["action"] }) }
  }
}

/** The `end` of a finished tool call item. */
const toolEnd = (item: Json, callId: string, name: string, source: Source): Output => {
  const status = str(item["status"])
  let output: unknown
  let isError: boolean
  switch (item["type"]) {
    case "mcp_tool_call": {
      const error = isRecord(item["error"]) ? str(item["error"]["message"]) ?? "the tool call failed" : undefined
      output = error ?? mcpOutput(item["result"])
      isError = status === "failed" || error !== undefined
      break
    }
    case "command_execution": {
      const exitCode = num(item["exit_code"])
      output = { output: item["aggregated_output"], exitCode: item["exit_code"] ?? null }
      isError = status === "failed" || status === "declined" || (exitCode !== undefined && exitCode !== 0)
      break
    }
    case "file_change":
      output = { status: item["status"] }
      // A patch the approval refused is `declined`, as a refused command is.
      isError = status === "failed" || status === "declined"
      break
    default:
      output = { query: item["query"] }
      isError = status === "failed"
  }
  return { _tag: "ToolCall", phase: "end", callId, name, source, output, isError }
}

type Source = "host" | "mcp" | "builtin"

/**
 * A tool call item's outputs (its `start` the first time its id is seen, its `end` once it is
 * finished), built at once: no view of the item in between (a run reads one per tool call line);
 * `undefined` for every kind that is not a tool call.
 */
const toolOutputs = (
  item: Json,
  id: string,
  finished: boolean,
  state: State,
  context: Driver.ParseContext
): Outputs | undefined => {
  let name: string
  let source: Source = "builtin"
  switch (item["type"]) {
    case "mcp_tool_call":
      name = str(item["tool"]) ?? ""
      source = (str(item["server"]) ?? "") === context.hostedKey ? "host" : "mcp"
      break
    case "command_execution":
    case "file_change":
    case "web_search":
      name = item["type"]
      break
    default:
      return undefined
  }
  const end = finished ? toolEnd(item, id, name, source) : undefined
  if (state.started.has(id)) return end ?? none
  state.started.set(id, true)
  const start: Output = { _tag: "ToolCall", phase: "start", callId: id, name, source, input: toolInput(item) }
  return end === undefined ? start : [start, end]
}

/**
 * An item's (or a line's) outputs: one output as it is (most lines have exactly one, and
 * no array is allocated around it), or an array of them.
 *
 * @internal
 */
export type Outputs = Output | ReadonlyArray<Output>

/**
 * An `agent_message` item's outputs (the live driver reads app-server messages straight to it).
 *
 * @internal
 */
export const onAgentMessage = (text: string | undefined, finished: boolean, state: State): Outputs => {
  if (!finished || text === undefined) return none
  state.lastMessage = text
  return { _tag: "Message", role: "assistant", text }
}

/**
 * A `reasoning` item's outputs (the live driver reads app-server reasoning straight to it).
 *
 * @internal
 */
export const onReasoning = (text: string | undefined, finished: boolean): Outputs =>
  finished && text !== undefined ? { _tag: "ReasoningDelta", text } : none

/**
 * The outputs of one `exec --json` item (`item.started` / `.updated` / `.completed`). The live
 * driver maps app-server items to this shape and shares it.
 *
 * @internal
 */
export const onItem = (
  phase: "started" | "updated" | "completed",
  item: Json,
  state: State,
  context: Driver.ParseContext
): Outputs => {
  const id = str(item["id"]) ?? ""
  const kind = str(item["type"]) ?? "unknown"
  const finished = phase === "completed"
  const tool = toolOutputs(item, id, finished, state, context)
  if (tool !== undefined) return tool
  switch (kind) {
    case "agent_message":
      return onAgentMessage(str(item["text"]), finished, state)
    case "reasoning":
      return onReasoning(str(item["text"]), finished)
    case "todo_list": {
      const items = Array.isArray(item["items"]) ? item["items"].filter(isRecord) : []
      const done = items.filter((entry) => entry["completed"] === true).length
      return notice("info", "todo_list", `plan ${phase}: ${done}/${items.length} done`, item)
    }
    case "error":
      // Codex reports recoverable conditions as error items (e.g. missing model metadata).
      return notice("warning", "error", str(item["message"]) ?? "Codex reported an error item", item)
    default:
      return notice("info", `item/${kind}`, `unknown Codex item kind "${kind}" (${phase})`, item)
  }
}

/** @internal */
export interface ParseOptions {
  /** Fail once Codex reported this many more reconnection attempts (`Reconnecting...`). */
  readonly maxReconnects?: number | undefined
}

const reconnecting = /^Reconnecting\.\.\./

/**
 * An `--output-schema` (or `turn/start.outputSchema`) turn's value: the final agent message is
 * the JSON text the model was constrained to by the strict form of `schema` (Codex does not
 * validate it), read back as a value of `schema`; absent when there is no message or it is not
 * JSON.
 *
 * @internal
 */
export const structuredOf = (
  message: string | undefined,
  schema: Driver.JsonSchema
): Driver.StructuredOutput | undefined => {
  if (message === undefined) return undefined
  let value: unknown
  try {
    value = JSON.parse(message)
  } catch {
    return undefined
  }
  return { _tag: "Value", value: StrictSchema.unstrict(schema, value) }
}

/**
 * The outputs of one `exec --json` record (the live driver shares its `error` handling).
 *
 * @internal
 */
export const onRecord = (
  record: Json,
  state: State,
  context: Driver.ParseContext,
  options: ParseOptions
): Outputs | Driver.ProtocolError => {
  switch (record["type"]) {
    case "thread.started": {
      const thread = str(record["thread_id"])
      if (thread === undefined) {
        return notice("warning", "malformed", "thread.started without a thread_id", record)
      }
      if (context.session._tag === "Resume" && thread !== context.session.id) {
        return new Driver.ProtocolError({
          reason: "ResumeRejected",
          detail: `Codex started thread ${thread} instead of resuming ${context.session.id}`
        })
      }
      state.thread = thread
      return { _tag: "SessionStarted", sessionId: thread, model: undefined }
    }
    case "turn.started":
      return none
    case "item.started":
    case "item.updated":
    case "item.completed": {
      const item = record["item"]
      if (!isRecord(item)) {
        return notice("warning", "malformed", `${record["type"]} without an item`, record)
      }
      const phase = record["type"] === "item.started"
        ? "started"
        : record["type"] === "item.updated"
        ? "updated"
        : "completed"
      return onItem(phase, item, state, context)
    }
    case "turn.completed": {
      const usage = usageOf(record["usage"])
      const structured = context.outputSchema === undefined
        ? undefined
        : structuredOf(state.lastMessage, context.outputSchema)
      const terminal: Driver.Terminal = {
        _tag: "Terminal",
        ok: true,
        text: state.lastMessage,
        usage,
        model: undefined,
        session: state.thread,
        error: undefined,
        raw: record,
        ...(structured === undefined ? {} : { structuredOutput: structured })
      }
      return usage === undefined ? terminal : [{ _tag: "Usage", usage }, terminal]
    }
    case "turn.failed": {
      const error = isRecord(record["error"]) ? str(record["error"]["message"]) : undefined
      return {
        _tag: "Terminal",
        ok: false,
        text: state.lastMessage,
        usage: undefined,
        model: undefined,
        session: state.thread,
        error: error ?? "Codex reported a failed turn",
        raw: record
      }
    }
    case "error": {
      // Not terminal: Codex also reports reconnection attempts this way; `turn.failed` ends the turn.
      const message = str(record["message"]) ?? "Codex reported an error"
      if (reconnecting.test(message) && options.maxReconnects !== undefined) {
        state.reconnects += 1
        if (state.reconnects > options.maxReconnects) {
          return new Driver.ProtocolError({
            reason: "ProviderError",
            detail: `Codex cannot reach the model endpoint (${state.reconnects} reconnection attempts): ${message}`
          })
        }
      }
      return notice("error", "error", message, record)
    }
    default:
      return notice("info", `unknown/${textOf(record["type"])}`, "unknown Codex record", record)
  }
}

const onLine = (
  line: string,
  state: State,
  context: Driver.ParseContext,
  options: ParseOptions
): Outputs | Driver.ProtocolError => {
  if (isBlank(line)) return none
  let record: unknown
  try {
    record = JSON.parse(line)
  } catch {
    return notice("warning", "malformed", "a stdout line is not JSON", line.slice(0, 4096))
  }
  if (!isRecord(record)) {
    return notice("warning", "malformed", "a stdout line is not a JSON object", record)
  }
  return onRecord(record, state, context, options)
}

/** A fresh per-run state. @internal */
export const makeState = (): State => ({
  reconnects: 0,
  thread: undefined,
  lastMessage: undefined,
  started: new RecentMap()
})

/** @internal */
export const parseWith = (options: ParseOptions = {}): Driver.Driver["parse"] =>
  Driver.parseFromLines((context) => {
    const state = makeState()
    return (line) => onLine(line, state, context, options)
  })

/** @internal */
export const parse: Driver.Driver["parse"] = parseWith()

const unknownThread = /no rollout found for thread id|thread\/resume failed|thread\/fork failed|no thread found/i
const hostedFailed = /required MCP servers failed to initialize/

/** @internal */
export const classifyExit = (info: Driver.ExitInfo): Driver.ProtocolError | undefined => {
  if (info.session._tag !== "New" && unknownThread.test(info.stderr)) {
    const id = info.session._tag === "Fork" ? info.session.from : info.session.id
    return new Driver.ProtocolError({ reason: "ResumeRejected", detail: `Codex has no thread ${id}` })
  }
  if (hostedFailed.test(info.stderr)) {
    return new Driver.ProtocolError({
      reason: "HostedToolsUnavailable",
      detail: "Codex could not initialize a required MCP server (the hosted tools or a declared source)"
    })
  }
  return undefined
}
