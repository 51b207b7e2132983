/**
 * The frames of `codex app-server` (Codex 0.171.0, stdio): JSON-RPC lines without a `"jsonrpc"`
 * field, and the mapping of a turn's notifications to the same outputs as the `exec --json`
 * parser. App-server items are camelCase views of the items `exec --json` prints in snake_case:
 * they are translated to that shape and given to the one-shot parser's item mapping, so both
 * modes yield the same `ToolCall`, `Message`, `ReasoningDelta` and `Notice` outputs.
 *
 * @internal
 */
import * as Driver from "@tether/core/Driver"
import type { Usage } from "@tether/core/Result"
import * as Stream from "effect/Stream"
import * as parser from "./codexParse.js"
import type * as Protocol from "./codexProtocol/index.js"
import { isBlank, none, notice, parseLines } from "./lines.js"

type Json = { readonly [key: string]: unknown }
type Output = Driver.Output

const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
const str = (u: unknown): string | undefined => typeof u === "string" ? u : undefined
const num = (u: unknown): number | undefined => typeof u === "number" && Number.isFinite(u) ? u : undefined
const isRequestId = (u: unknown): u is Protocol.RequestId => typeof u === "string" || num(u) !== undefined

/**
 * One line of the app-server's stdout.
 *
 * @internal
 */
export type Frame =
  | { readonly _tag: "Response"; readonly id: Protocol.RequestId; readonly result: unknown }
  | {
    readonly _tag: "Failure"
    readonly id: Protocol.RequestId | undefined
    readonly code: number | undefined
    readonly message: string
    readonly raw: unknown
  }
  | { readonly _tag: "Request"; readonly id: Protocol.RequestId; readonly method: string; readonly params: unknown }
  | { readonly _tag: "Notification"; readonly method: string; readonly params: unknown }
  | { readonly _tag: "Malformed"; readonly reason: string; readonly raw: unknown }

/**
 * Classifies one stdout line; `undefined` for a blank line.
 *
 * @internal
 */
export const decode = (line: string): Frame | undefined => {
  if (isBlank(line)) return undefined
  const delta = plainDelta(line)
  if (delta !== undefined) return { _tag: "Notification", method: agentDelta, params: delta }
  const value = jsonOf(line)
  return value === notJson ? notJsonFrame(line) : frameOf(value)
}

const agentDelta = "item/agentMessage/delta"

/**
 * An `item/agentMessage/delta` notification written exactly as `codex app-server` writes one,
 * with no escape, quote or control character in its strings (so each string's text is its
 * value): its params' `threadId`, `turnId`, `itemId` and `delta` are groups 1 to 4.
 */
const plainDeltaLine =
  /^\{"method":"item\/agentMessage\/delta","params":\{"threadId":"([^"\\\x00-\x1f]*)","turnId":"([^"\\\x00-\x1f]*)","itemId":"([^"\\\x00-\x1f]*)","delta":"([^"\\\x00-\x1f]*)"\}(?:,"emittedAtMs":(?:0|[1-9][0-9]*))?\}$/

/**
 * The params of a line `plainDeltaLine` matches, read without `JSON.parse` (which reads the same
 * object from it: the same keys in the same order); `undefined` for any other line, which is
 * parsed. Text deltas are the bulk of a turn's notifications (P3 in docs/contributing.md).
 */
const plainDelta = (line: string): Json | undefined => {
  const match = plainDeltaLine.exec(line)
  return match === null
    ? undefined
    : { threadId: match[1]!, turnId: match[2]!, itemId: match[3]!, delta: match[4]! }
}

/** What `jsonOf` answers for a line that is not JSON (no JSON value is this symbol). */
const notJson: unique symbol = Symbol("not JSON")

/** A line's JSON value, or `notJson`. */
const jsonOf = (line: string): unknown => {
  try {
    return JSON.parse(line)
  } catch {
    return notJson
  }
}

const notJsonFrame = (line: string): Frame => ({
  _tag: "Malformed",
  reason: "a stdout line is not JSON",
  raw: line.slice(0, 4096)
})

/** Classifies one parsed stdout line. */
const frameOf = (value: unknown): Frame => {
  if (!isRecord(value)) return { _tag: "Malformed", reason: "a stdout line is not a JSON object", raw: value }
  const method = str(value["method"])
  const id = value["id"]
  if (method !== undefined) {
    return isRequestId(id)
      ? { _tag: "Request", id, method, params: value["params"] }
      : { _tag: "Notification", method, params: value["params"] }
  }
  if (isRecord(value["error"])) {
    const error = value["error"]
    return {
      _tag: "Failure",
      id: isRequestId(id) ? id : undefined,
      code: num(error["code"]),
      message: str(error["message"]) ?? "Codex answered with an error without a message",
      raw: value
    }
  }
  if (isRequestId(id) && "result" in value) return { _tag: "Response", id, result: value["result"] }
  return { _tag: "Malformed", reason: "a JSON object that is no JSON-RPC message", raw: value }
}

/**
 * A JSON-RPC error answer as a typed failure: an unknown thread is `ResumeRejected` and a
 * required MCP server that failed to start is `HostedToolsUnavailable`, exactly as the one-shot
 * exit classifier reads the same messages on stderr; anything else is `ProviderError`.
 *
 * @internal
 */
export const failureOf = (
  method: string,
  message: string,
  session: Driver.SessionRequest
): Driver.ProtocolError =>
  parser.classifyExit({ exitCode: undefined, stderr: message, terminal: undefined, session }) ??
    new Driver.ProtocolError({ reason: "ProviderError", detail: `Codex rejected ${method}: ${message}` })

/**
 * The thread of a `thread/start`, `thread/resume` or `thread/fork` answer.
 *
 * @internal
 */
export const threadOf = (result: unknown): { readonly id: string; readonly model: string | undefined } | undefined => {
  if (!isRecord(result) || !isRecord(result["thread"])) return undefined
  const id = str(result["thread"]["id"])
  return id === undefined ? undefined : { id, model: str(result["model"]) }
}

/**
 * The turn id of a `turn/start` answer.
 *
 * @internal
 */
export const turnIdOf = (result: unknown): string | undefined =>
  isRecord(result) && isRecord(result["turn"]) ? str(result["turn"]["id"]) : undefined

/**
 * Per-turn state: the one-shot parser's state (last message, started tool calls, reconnection
 * attempts), the turn's id once `turn/start` answered, and its latest token usage.
 *
 * @internal
 */
export interface TurnState {
  readonly exec: parser.State
  turnId: string | undefined
  usage: Usage | undefined
}

/** @internal */
export const makeTurn = (thread: string): TurnState => {
  const exec = parser.makeState()
  exec.thread = thread
  return { exec, turnId: undefined, usage: undefined }
}

/**
 * Codex reports the thread's running totals (`exec --json` prints the same totals in
 * `turn.completed`), so the usage of a turn is the total after it.
 */
const usageOf = (breakdown: unknown): Usage | undefined => parser.usageOf(breakdown, liveUsageKeys)

const liveUsageKeys: parser.UsageKeys = ["inputTokens", "outputTokens", "cachedInputTokens", "reasoningOutputTokens"]

const joined = (parts: unknown): string | undefined => {
  if (!Array.isArray(parts)) return undefined
  const text = parts.filter((part): part is string => typeof part === "string").join("\n")
  return text.length === 0 ? undefined : text
}

/**
 * An app-server item (`Protocol.ThreadItem`, camelCase) in the shape `exec --json` prints it;
 * `undefined` for the user's own messages, which `exec --json` never prints.
 */
const execItem = (item: Json): Json | undefined => {
  const id = item["id"]
  switch (item["type"]) {
    case "userMessage":
    case "hookPrompt":
      return undefined
    case "agentMessage":
      return { id, type: "agent_message", text: item["text"] }
    case "reasoning":
      return { id, type: "reasoning", text: joined(item["summary"]) ?? joined(item["content"]) }
    case "commandExecution":
      return {
        id,
        type: "command_execution",
        command: item["command"],
        aggregated_output: item["aggregatedOutput"],
        exit_code: item["exitCode"],
        status: item["status"]
      }
    case "fileChange": {
      const changes = Array.isArray(item["changes"]) ? item["changes"].filter(isRecord) : []
      return {
        id,
        type: "file_change",
        changes: changes.map((change) => ({
          path: change["path"],
          kind: isRecord(change["kind"]) ? change["kind"]["type"] : change["kind"]
        })),
        status: item["status"]
      }
    }
    case "mcpToolCall": {
      const result = isRecord(item["result"])
        ? { content: item["result"]["content"], structured_content: item["result"]["structuredContent"] }
        : undefined
      return {
        id,
        type: "mcp_tool_call",
        server: item["server"],
        tool: item["tool"],
        arguments: item["arguments"],
        result,
        error: item["error"],
        status: item["status"]
      }
    }
    case "webSearch":
      return { id, type: "web_search", query: item["query"], action: item["action"] ?? undefined }
    default:
      return { ...item, type: str(item["type"]) ?? "unknown" }
  }
}

/** Whether a notification's outputs end the turn (hold its `Terminal`). */
const endsTurn = (outputs: parser.Outputs | Driver.ProtocolError): boolean =>
  Array.isArray(outputs)
    ? outputs.some((output: Output) => output._tag === "Terminal")
    : (outputs as { readonly _tag: string })._tag === "Terminal"

/**
 * Notifications that carry nothing a turn reports (status, read state, progress, rate limits). A
 * `switch`, not a `Set`: every line asks, and a `Set` hashes the method string `JSON.parse` has
 * just made (3 ms of a 60 ms parse of the P3 transcript); the cases compare it by length first.
 */
const isSilent = (method: string): boolean => {
  switch (method) {
    case "thread/started":
    case "thread/status/changed":
    case "thread/readState/changed":
    case "thread/settings/updated":
    case "thread/goal/updated":
    case "thread/goal/cleared":
    case "thread/name/updated":
    case "turn/started":
    case "turn/diff/updated":
    case "account/rateLimits/updated":
    case "remoteControl/status/changed":
    case "serverRequest/resolved":
    case "item/reasoning/summaryTextDelta":
    case "item/reasoning/summaryPartAdded":
    case "item/reasoning/textDelta":
    case "item/plan/delta":
    case "item/commandExecution/outputDelta":
    case "item/commandExecution/terminalInteraction":
    case "item/fileChange/outputDelta":
    case "item/fileChange/patchUpdated":
    case "item/mcpToolCall/progress":
    case "hook/started":
    case "hook/completed":
    case "skills/changed":
    case "configWarning":
    case "deprecationNotice":
      return true
    default:
      return false
  }
}

/** Whether a notification names a turn other than this one (a late frame of an earlier turn). */
const otherTurn = (params: Json, turn: TurnState): boolean => {
  const id = str(params["turnId"]) ?? (isRecord(params["turn"]) ? str(params["turn"]["id"]) : undefined)
  return id !== undefined && turn.turnId !== undefined && id !== turn.turnId
}

/**
 * The outputs of one notification of a running turn. `turn/completed` yields the turn's
 * `Usage` (when Codex reported one) and its `Terminal`, `ok` only for status `completed`.
 *
 * @internal
 */
export const onNotification = (
  method: string,
  params: unknown,
  turn: TurnState,
  context: Driver.ParseContext,
  options: parser.ParseOptions
): parser.Outputs | Driver.ProtocolError => {
  if (isSilent(method)) return none
  if (!isRecord(params)) return notice("warning", "malformed", `${method} without params`, params)
  if (otherTurn(params, turn)) return none
  switch (method) {
    case "item/started":
    case "item/completed": {
      const raw = params["item"]
      if (!isRecord(raw)) return notice("warning", "malformed", `${method} without an item`, params)
      const finished = method === "item/completed"
      // Messages and reasoning go straight to their outputs: no `exec --json` item in between.
      switch (raw["type"]) {
        case "agentMessage":
          return parser.onAgentMessage(str(raw["text"]), finished, turn.exec)
        case "reasoning":
          return parser.onReasoning(joined(raw["summary"]) ?? joined(raw["content"]), finished)
      }
      const item = execItem(raw)
      return item === undefined ? none : parser.onItem(finished ? "completed" : "started", item, turn.exec, context)
    }
    case "item/agentMessage/delta": {
      const delta = str(params["delta"])
      return delta === undefined || delta.length === 0 ? none : { _tag: "TextDelta", text: delta }
    }
    case "turn/plan/updated": {
      const plan = Array.isArray(params["plan"]) ? params["plan"].filter(isRecord) : []
      const items = plan.map((step) => ({ text: step["step"], completed: step["status"] === "completed" }))
      return parser.onItem("updated", { id: `plan-${turn.turnId ?? ""}`, type: "todo_list", items }, turn.exec, context)
    }
    case "thread/tokenUsage/updated": {
      // Usage restored by a resume names an earlier turn; before `turn/start` answered no
      // request of this turn reached the model yet.
      if (turn.turnId === undefined || str(params["turnId"]) !== turn.turnId) return none
      const usage = isRecord(params["tokenUsage"]) ? usageOf(params["tokenUsage"]["total"]) : undefined
      if (usage !== undefined) turn.usage = usage
      return none
    }
    case "warning":
      // `exec --json` prints these (e.g. missing model metadata) as `error` items.
      return parser.onItem(
        "completed",
        {
          id: "warning",
          type: "error",
          message: str(params["message"]) ?? "Codex reported a warning"
        },
        turn.exec,
        context
      )
    case "error": {
      const error = isRecord(params["error"]) ? params["error"] : {}
      return parser.onRecord(
        { type: "error", message: str(error["message"]) ?? "Codex reported an error", ...params },
        turn.exec,
        context,
        options
      )
    }
    case "mcpServer/startupStatus/updated":
      return params["status"] === "failed"
        ? notice(
          "warning",
          "mcp_startup",
          `the MCP server "${str(params["name"]) ?? "?"}" failed to start: ${str(params["error"]) ?? "no detail"}`,
          params
        )
        : none
    case "model/rerouted":
      return notice("info", "model_rerouted", "Codex rerouted the turn to another model", params)
    case "turn/completed": {
      const record = isRecord(params["turn"]) ? params["turn"] : {}
      const status = str(record["status"])
      const error = isRecord(record["error"]) ? str(record["error"]["message"]) : undefined
      // A turn started with an `outputSchema` (the context of that turn carries it).
      const structured = context.outputSchema === undefined || status !== "completed"
        ? undefined
        : parser.structuredOf(turn.exec.lastMessage, context.outputSchema)
      const terminal: Driver.Terminal = {
        _tag: "Terminal",
        ok: status === "completed",
        text: turn.exec.lastMessage,
        usage: turn.usage,
        model: undefined,
        session: turn.exec.thread,
        error: status === "completed"
          ? undefined
          : status === "interrupted"
          ? error ?? "the turn was interrupted"
          : error ?? `Codex ended the turn with status ${status ?? "unknown"}`,
        raw: params,
        ...(structured === undefined ? {} : { structuredOutput: structured })
      }
      return turn.usage === undefined ? terminal : [{ _tag: "Usage", usage: turn.usage }, terminal]
    }
    default:
      return notice("info", `unknown/${method}`, "unknown Codex app-server notification", params)
  }
}

/**
 * Replays the stdout of one app-server session (for recorded sessions and the parser fuzz
 * harness): the first thread answer yields `SessionStarted`, each `turn/start` answer opens a
 * turn whose notifications map as in a live session, a JSON-RPC error answer fails the stream
 * (classified as in a live session), a server request becomes a `Notice`. Frames outside a
 * turn are dropped, as a live session drops them.
 *
 * @internal
 */
export const parse = (
  lines: Stream.Stream<string>,
  context: Driver.ParseContext,
  options: parser.ParseOptions = {}
): Stream.Stream<Output, Driver.ProtocolError> =>
  parseLines(lines, () => {
    let thread: string | undefined
    let turn: TurnState | undefined
    let pendingTurn: TurnState | undefined
    const onFrame = (frame: Frame): parser.Outputs | Driver.ProtocolError => {
      switch (frame._tag) {
        case "Malformed":
          return notice("warning", "malformed", frame.reason, frame.raw)
        case "Failure":
          return failureOf("a request", frame.message, context.session)
        case "Request":
          return notice("warning", "approval", `Codex asked ${frame.method}`, frame.params)
        case "Response": {
          const started = threadOf(frame.result)
          if (started !== undefined && thread === undefined) {
            if (context.session._tag === "Resume" && started.id !== context.session.id) {
              return new Driver.ProtocolError({
                reason: "ResumeRejected",
                detail: `Codex resumed thread ${started.id} instead of ${context.session.id}`
              })
            }
            thread = started.id
            return { _tag: "SessionStarted", sessionId: started.id, model: started.model }
          }
          const turnId = turnIdOf(frame.result)
          if (turnId !== undefined) {
            turn = pendingTurn ?? makeTurn(thread ?? "")
            turn.turnId = turnId
            pendingTurn = undefined
          }
          return none
        }
        case "Notification":
          return onTurnNotification(frame.method, frame.params)
      }
    }
    const onTurnNotification = (method: string, params: unknown): parser.Outputs | Driver.ProtocolError => {
      // Frames of a turn may precede the `turn/start` answer (e.g. a warning).
      const current = turn ?? (thread === undefined ? undefined : pendingTurn ??= makeTurn(thread))
      if (current === undefined) return none
      const outputs = onNotification(method, params, current, context, options)
      if (endsTurn(outputs)) turn = undefined
      return outputs
    }
    return (line) => {
      if (isBlank(line)) return none
      const delta = plainDelta(line)
      if (delta !== undefined) return onTurnNotification(agentDelta, delta)
      const value = jsonOf(line)
      // Most lines are notifications: read straight from the record, without a frame for them.
      if (isRecord(value)) {
        const method = value["method"]
        if (typeof method === "string" && !isRequestId(value["id"])) return onTurnNotification(method, value["params"])
      }
      return onFrame(value === notJson ? notJsonFrame(line) : frameOf(value))
    }
  })
