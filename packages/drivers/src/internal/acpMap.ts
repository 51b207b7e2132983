/**
 * ACP `session/update` notifications and `session/prompt` results → the typed outputs every
 * driver yields, with the same shape as the one-shot parsers: text and reasoning deltas, the
 * assistant text closed into a `Message` at each tool call and at the end, tool calls as start
 * and end, usage, and one `Terminal` per turn. Pure and synchronous: the live session feeds it
 * line by line, and a recorded transcript can be replayed through it (`parse`).
 *
 * @internal
 */
import * as Driver from "@tether/core/Driver"
import type { Usage } from "@tether/core/Result"
import type * as Stream from "effect/Stream"
import { isBlank, none, notice, RecentMap, splitMcpName, textOf, turnEnd, usageFrom } from "./lines.js"

type Json = { readonly [key: string]: unknown }

const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
const str = (u: unknown): string | undefined => typeof u === "string" ? u : undefined
const num = (u: unknown): number | undefined => typeof u === "number" && Number.isFinite(u) ? u : undefined

/** What a tool call is, as `ToolCall` outputs name it. @internal */
export interface ToolIdentity {
  readonly name: string
  readonly source: "host" | "mcp" | "builtin"
  /**
   * The call's `rawInput` is codex-acp's MCP wrapper `{server, tool, arguments}` and its
   * `rawOutput` the MCP `CallToolResult`: the events carry the tool's own arguments and output.
   */
  readonly wrapped?: true
}

/** What an agent tells of a tool call when the client first sees it. @internal */
export interface ToolCallInfo {
  readonly toolCallId: string
  /** ACP's optional programmatic name of the tool. */
  readonly name: string | undefined
  readonly title: string | undefined
  readonly kind: string | undefined
  /** The agent's own `_meta` of the update (claude-agent-acp puts the tool's name there). */
  readonly meta: unknown
  /** The call's `rawInput` as the agent sent it (codex-acp names MCP calls there). */
  readonly input: unknown
}

/** How an agent's tool calls map back to tool names and sources (agents name them differently). @internal */
export type Naming = (call: ToolCallInfo, hostedKey: string) => ToolIdentity

/**
 * Names for agents that follow no known convention: ACP's `name`; a name `mcp__<server>__<tool>`
 * is an MCP tool, the hosted tools' when the server is the hosted key. A call without a `name` is
 * built in, named by its title: a title is display text (often the command itself, which the
 * model chooses), so it never makes a call a hosted one, whose permission requests are allowed.
 *
 * @internal
 */
export const genericNaming: Naming = (call, hostedKey) =>
  call.name === undefined ? { name: call.title ?? "", source: "builtin" } : identityOf(call.name, hostedKey)

/**
 * codex-acp: an MCP call's `rawInput` is `{server, tool, arguments}` (its title `Tool: <server>/<tool>`
 * is for display); other calls are named as {@link genericNaming} names them.
 *
 * @internal
 */
export const codexNaming: Naming = (call, hostedKey) => {
  const input = call.input
  if (isRecord(input) && typeof input["server"] === "string" && typeof input["tool"] === "string") {
    return input["server"] === hostedKey
      ? { name: input["tool"], source: "host", wrapped: true }
      : { name: `mcp__${input["server"]}__${input["tool"]}`, source: "mcp", wrapped: true }
  }
  return genericNaming(call, hostedKey)
}

/** A tool name in Claude's convention: `mcp__<server>__<tool>` is an MCP tool. @internal */
export const identityOf = (name: string, hostedKey: string): ToolIdentity => {
  const mcp = splitMcpName(name)
  if (mcp === undefined) return { name, source: "builtin" }
  return mcp.server === hostedKey ? { name: mcp.tool, source: "host" } : { name, source: "mcp" }
}

/**
 * claude-agent-acp: the Claude Code tool name is in `_meta.claudeCode.toolName` (the title of a
 * built-in call is for display: `Terminal`, then the command), in Claude's MCP convention.
 *
 * @internal
 */
export const claudeNaming: Naming = (call, hostedKey) => {
  const meta = isRecord(call.meta) && isRecord(call.meta["claudeCode"]) ? call.meta["claudeCode"] : undefined
  const toolName = meta === undefined ? undefined : str(meta["toolName"])
  return toolName === undefined ? genericNaming(call, hostedKey) : identityOf(toolName, hostedKey)
}

/** What the naming of a tool call is given, from an update. @internal */
export const infoOf = (update: Json, toolCallId: string): ToolCallInfo => ({
  toolCallId,
  name: str(update["name"]),
  title: str(update["title"]),
  kind: str(update["kind"]),
  meta: update["_meta"],
  input: update["rawInput"]
})

const isEmptyInput = (input: unknown): boolean =>
  input === undefined || (isRecord(input) && Object.keys(input).length === 0)

/** A held announcement with the fields of the update that follows it (the update wins where it has them). */
const merged = (announced: Json, update: Json): Json => {
  const out: { [key: string]: unknown } = { ...announced }
  for (const [key, value] of Object.entries(update)) if (value !== undefined && value !== null) out[key] = value
  if (isEmptyInput(update["rawInput"])) out["rawInput"] = announced["rawInput"]
  return out
}

/** The live session's view of the turns of one ACP session. @internal */
export interface Mapper {
  /** The session the updates must belong to (`undefined` until known: any). */
  session: string | undefined
  /** The model the agent reported at session creation, for the terminal. */
  model: string | undefined
  /** Starts a turn: the per-turn state (assistant text, tool calls) is reset. */
  readonly begin: () => void
  /**
   * The params of one `session/update` notification → outputs: one output as it is (most updates
   * have exactly one, and no array is allocated around it), or an array of them.
   */
  readonly update: (params: unknown) => Driver.Output | ReadonlyArray<Driver.Output>
  /**
   * A text `agent_message_chunk` update of session `sessionId` (what `update` makes of it), for a
   * chunk read without `JSON.parse` (`classify`'s `chunk`).
   */
  readonly messageChunk: (sessionId: string, text: string) => Driver.Output | ReadonlyArray<Driver.Output>
  /** The result of the turn's `session/prompt` → the rest of the turn, ending with its `Terminal`. */
  readonly finish: (result: unknown) => Array<Driver.Output>
  /**
   * The agent's error answer to the turn's `session/prompt` (`error`: what it said, `raw` the
   * answer) → the rest of the turn, ending with a failed `Terminal`: the provider failed the turn
   * (a model endpoint refusing the key, a limit), as a one-shot CLI's failed result says.
   */
  readonly failed: (error: string, raw: unknown) => Array<Driver.Output>
  /** What a tool call of the running turn is, by its id (named from everything seen of it so far). */
  readonly identity: (callId: string) => ToolIdentity | undefined
  /**
   * A call the host refused in a permission request (`toolCall`, the request's own) → its start
   * and its failed end (`output`: what the model was told), when the agent reported nothing of it
   * (Gemini CLI sends a call it asks about only in the request, and nothing once refused); none
   * when the agent announced it (its own update ends it). Later updates of it are dropped.
   */
  readonly refused: (toolCall: unknown, output: string) => ReadonlyArray<Driver.Output>
}

const chunkText = (update: Json): string | undefined =>
  isRecord(update["content"]) && update["content"]["type"] === "text" ? str(update["content"]["text"]) : undefined

/** The text of a tool call's `content` blocks (`{type:"content",content:{type:"text",text}}`). */
/** A tool call's content whose text is a JSON object, as that object; else `undefined`. */
const jsonRecord = (content: unknown): Json | undefined => {
  const text = contentText(content)
  if (text === undefined || !text.startsWith("{")) return undefined
  try {
    const value: unknown = JSON.parse(text)
    return isRecord(value) ? value : undefined
  } catch {
    return undefined
  }
}

const contentText = (content: unknown): string | undefined => {
  if (!Array.isArray(content)) return undefined
  const texts: Array<string> = []
  for (const block of content) {
    if (isRecord(block) && block["type"] === "content" && isRecord(block["content"])) {
      const text = str(block["content"]["text"])
      if (text !== undefined) texts.push(text)
    }
  }
  return texts.length === 0 ? undefined : texts.join("\n")
}

/** A `Usage` of the fields read (each from `num`, a finite number); none when neither token count is. */
const usageFields = (
  input: number | undefined,
  output: number | undefined,
  cached?: number,
  reasoning?: number
): Usage | undefined =>
  input === undefined && output === undefined ? undefined : usageFrom(input, output, cached, reasoning)

/**
 * ACP's `usage` (unstable in v1), else Gemini CLI's `_meta.quota.token_count`. ACP leaves open
 * whether `inputTokens` counts the cache's reads and writes; an agent whose `totalTokens` is the
 * sum of every count reports them apart (claude-agent-acp does), and they are added to the input.
 */
const usageOf = (result: Json): Usage | undefined => {
  const usage = result["usage"]
  if (isRecord(usage)) {
    const input = num(usage["inputTokens"])
    const output = num(usage["outputTokens"])
    const read = num(usage["cachedReadTokens"])
    const written = num(usage["cachedWriteTokens"])
    const thought = num(usage["thoughtTokens"])
    const cache = (read ?? 0) + (written ?? 0)
    const apart = input !== undefined && cache > 0 &&
      num(usage["totalTokens"]) === input + (output ?? 0) + (thought ?? 0) + cache
    return usageFields(apart ? input + cache : input, output, read, thought)
  }
  const meta = result["_meta"]
  const quota = isRecord(meta) && isRecord(meta["quota"]) ? meta["quota"] : undefined
  const count = quota !== undefined && isRecord(quota["token_count"]) ? quota["token_count"] : undefined
  return count === undefined ? undefined : usageFields(num(count["input_tokens"]), num(count["output_tokens"]))
}

/** The one model Gemini CLI reports in `_meta.quota.model_usage`, if exactly one. */
const modelOf = (result: Json): string | undefined => {
  const meta = result["_meta"]
  const quota = isRecord(meta) && isRecord(meta["quota"]) ? meta["quota"] : undefined
  const models = quota !== undefined && Array.isArray(quota["model_usage"]) ? quota["model_usage"] : []
  return models.length === 1 && isRecord(models[0]) ? str(models[0]["model"]) : undefined
}

/** Updates that describe the session, not the turn: nothing to report. */
const quiet = new Set([
  "available_commands_update",
  "current_mode_update",
  "config_option_update",
  "session_info_update",
  "usage_update"
])

/**
 * `naming` held to the process's hosted tools (when known): a call named as a hosted tool is the
 * host's only when it is one of them, by its catalog name or by the name the agent's CLI gives it
 * (Claude Code, under claude-agent-acp, turns each character outside `[A-Za-z0-9_-]` into `_`);
 * else it is another server's (one of the agent's own configuration named like the hosted key).
 *
 * @internal
 */
export const hostedNaming = (naming: Naming, hostedTools: ReadonlyArray<string> | undefined): Naming =>
  hostedTools === undefined ? naming : (call, hostedKey) => {
    const identity = naming(call, hostedKey)
    if (identity.source !== "host" || hostedTools.includes(identity.name)) return identity
    const catalogName = hostedTools.find((tool) => tool.replace(/[^A-Za-z0-9_-]/g, "_") === identity.name)
    return catalogName !== undefined
      ? { ...identity, name: catalogName }
      : { ...identity, name: call.name ?? identity.name, source: "mcp" }
  }

/**
 * An MCP `CallToolResult` as the other drivers report a tool's output: its structured content,
 * else the text the model read.
 */
const callToolOutput = (result: Json): unknown => {
  if (isRecord(result["structuredContent"])) return result["structuredContent"]
  const parts = result["content"] as ReadonlyArray<unknown>
  return parts.map((part) => isRecord(part) ? str(part["text"]) ?? "" : "").join("")
}

/** A fresh mapper for one session. @internal */
export const makeMapper = (hostedKey: string, naming: Naming): Mapper => {
  // Per turn; mutated in place (a copy per update would cost as much as the turn so far).
  let segment = ""
  let finalText: string | undefined = undefined
  const calls = new RecentMap<ToolIdentity>()

  /** The assistant text so far as its `Message` (then the final text so far), if there is any. */
  const takeMessage = (): Driver.Output | undefined => {
    if (segment.length === 0) return undefined
    const message: Driver.Output = { _tag: "Message", role: "assistant", text: segment }
    finalText = segment
    segment = ""
    return message
  }

  /** A text chunk of the assistant's message. */
  const messageText = (text: string): Driver.Output | ReadonlyArray<Driver.Output> => {
    segment += text
    return text.length > 0 ? { _tag: "TextDelta", text } : none
  }

  const flush = (out: Array<Driver.Output>): void => {
    const message = takeMessage()
    if (message !== undefined) out.push(message)
  }

  /**
   * Calls announced `pending` with an empty input (claude-agent-acp announces each call before it
   * has the input, then sends it in an update): the start waits for the call's next update.
   */
  const held = new Map<string, Json>()

  const start = (update: Json, callId: string, out: Array<Driver.Output>): ToolIdentity => {
    const identity = naming(infoOf(update, callId), hostedKey)
    calls.set(callId, identity)
    flush(out)
    // Gemini CLI sends no rawInput: an MCP tool call's arguments are its content's JSON text.
    const input = update["rawInput"] ?? (identity.source === "builtin" ? undefined : jsonRecord(update["content"]))
    out.push({
      _tag: "ToolCall",
      phase: "start",
      callId,
      name: identity.name,
      source: identity.source,
      ...(input === undefined ? {} : { input: identity.wrapped && isRecord(input) ? input["arguments"] : input })
    })
    return identity
  }

  const end = (update: Json, callId: string, identity: ToolIdentity, out: Array<Driver.Output>): void => {
    const raw = update["rawOutput"]
    const output = raw === undefined
      ? contentText(update["content"])
      : identity.wrapped && isRecord(raw) && Array.isArray(raw["content"])
      ? callToolOutput(raw)
      : raw
    out.push({
      _tag: "ToolCall",
      phase: "end",
      callId,
      name: identity.name,
      source: identity.source,
      ...(output === undefined ? {} : { output }),
      isError: update["status"] === "failed"
    })
  }

  /** Calls reported by `refused`: the agent's own later updates of them are dropped. */
  const refusedIds = new Set<string>()

  const mapper: Mapper = {
    session: undefined,
    model: undefined,
    refused: (toolCall, output) => {
      if (!isRecord(toolCall)) return none
      const callId = str(toolCall["toolCallId"])
      if (callId === undefined || calls.get(callId) !== undefined || held.has(callId)) return none
      refusedIds.add(callId)
      const out: Array<Driver.Output> = []
      const identity = start(toolCall, callId, out)
      out.push({
        _tag: "ToolCall",
        phase: "end",
        callId,
        name: identity.name,
        source: identity.source,
        output,
        isError: true
      })
      return out
    },
    identity: (callId) => {
      const known = calls.get(callId)
      if (known !== undefined) return known
      const announced = held.get(callId)
      return announced === undefined ? undefined : naming(infoOf(announced, callId), hostedKey)
    },
    begin: () => {
      segment = ""
      finalText = undefined
      // `clear` allocates a new table even for an empty map, and most turns hold no call.
      calls.clear()
      if (held.size > 0) held.clear()
      if (refusedIds.size > 0) refusedIds.clear()
    },
    messageChunk: (sessionId, text) =>
      mapper.session !== undefined && sessionId !== mapper.session ? none : messageText(text),
    update: (params) => {
      if (!isRecord(params) || !isRecord(params["update"])) {
        return notice("warning", "acp.session_update", "a session/update without an update", params)
      }
      if (mapper.session !== undefined && params["sessionId"] !== mapper.session) return none
      const update = params["update"]
      const kind = str(update["sessionUpdate"])
      switch (kind) {
        case "agent_message_chunk": {
          const text = chunkText(update)
          if (text === undefined) return notice("info", "acp.agent_message_chunk", "a non-text message chunk", update)
          return messageText(text)
        }
        case "agent_thought_chunk": {
          const text = chunkText(update)
          if (text === undefined) return notice("info", "acp.agent_thought_chunk", "a non-text thought chunk", update)
          return text.length > 0 ? { _tag: "ReasoningDelta", text } : none
        }
        case "user_message_chunk": {
          const text = chunkText(update)
          if (text === undefined) return notice("info", "acp.user_message_chunk", "a non-text user chunk", update)
          return { _tag: "Message", role: "user", text }
        }
        case "tool_call":
        case "tool_call_update": {
          const callId = str(update["toolCallId"])
          if (callId === undefined) return notice("warning", `acp.${kind}`, "a tool call without toolCallId", update)
          if (refusedIds.size > 0 && refusedIds.has(callId)) return none
          const known = calls.get(callId)
          if (
            known === undefined && update["status"] === "pending" && isRecord(update["rawInput"]) &&
            isEmptyInput(update["rawInput"])
          ) {
            held.set(callId, { ...held.get(callId), ...update })
            return none
          }
          // Most turns hold no call back: an empty map is not asked (the lookup hashes the id).
          const announced = held.size === 0 ? undefined : held.get(callId)
          if (announced !== undefined) held.delete(callId)
          const out: Array<Driver.Output> = []
          // An agent may report a call first in its final state (Gemini does after a permission).
          const identity = known ?? start(announced === undefined ? update : merged(announced, update), callId, out)
          if (update["status"] === "completed" || update["status"] === "failed") end(update, callId, identity, out)
          return out
        }
        case "plan":
          return notice("info", "acp.plan", "the agent's plan", update["entries"])
        case "notice": {
          const level = update["severity"] === "error" ? "error" : update["severity"] === "warning" ? "warning" : "info"
          return notice(level, "acp.notice", str(update["title"]) ?? "", update)
        }
        default:
          return kind !== undefined && quiet.has(kind)
            ? none
            : notice("info", `acp.${textOf(kind, "update")}`, "an update the client does not map", update)
      }
    },
    finish: (result) => {
      const record = isRecord(result) ? result : {}
      const stopReason = str(record["stopReason"])
      const ok = stopReason === "end_turn"
      return endTurn(
        ok,
        ok
          ? undefined
          : stopReason === "cancelled"
          ? "the turn was cancelled"
          : `the agent stopped the turn: ${stopReason ?? "no stopReason"}`,
        record,
        result
      )
    },
    failed: (error, raw) => endTurn(false, error, {}, raw)
  }
  const endTurn = (
    ok: boolean,
    error: string | undefined,
    record: Json,
    raw: unknown
  ): Array<Driver.Output> => {
    // A call announced and never heard of again still started. (`clear` allocates a new table
    // even for an empty map, and most turns end holding no call.)
    let out: Array<Driver.Output> | undefined
    if (held.size > 0) {
      out = []
      for (const [callId, announced] of held) start(announced, callId, out)
      held.clear()
    }
    const message = takeMessage()
    const usage = usageOf(record)
    const terminal: Driver.Output = {
      _tag: "Terminal",
      ok,
      text: finalText,
      usage,
      model: modelOf(record) ?? mapper.model,
      session: mapper.session,
      error,
      raw
    }
    const ended = turnEnd(message, usage, terminal)
    return out === undefined ? ended : [...out, ...ended]
  }
  return mapper
}

/**
 * A JSON-RPC error answer of an agent as text: its message, the cause it put in `data.message`
 * (codex-acp does: "Internal error" with the cause there), its code. @internal
 */
export const errorText = (error: { readonly [key: string]: unknown }): string => {
  const message = textOf(error["message"], "an error")
  const data = error["data"]
  const said = isRecord(data) && typeof data["message"] === "string" && !message.includes(data["message"])
    ? `: ${data["message"]}`
    : ""
  return `${message}${said} (code ${textOf(error["code"], "none")})`
}

/** What an agent's error answer to `session/prompt` says, as the failed turn's error. @internal */
export const promptError = (error: { readonly [key: string]: unknown }): string =>
  `the agent answered the prompt with an error: ${errorText(error)}`

/** `session/new`'s (or `session/load`'s) current model, when the agent reports one (Gemini does). @internal */
export const currentModel = (result: unknown): string | undefined =>
  isRecord(result) && isRecord(result["models"]) ? str(result["models"]["currentModelId"]) : undefined

/**
 * What to do with each kind of stdout line of an ACP agent (`classify` calls exactly one): a
 * blank line, a line that is not a JSON object (as its `Notice`), a text `agent_message_chunk`
 * notification read without `JSON.parse` (its session and text), the params of any other
 * `session/update` notification, any other JSON-RPC message.
 *
 * @internal
 */
export interface LineHandlers<R> {
  readonly blank: () => R
  readonly foreign: (output: Driver.Output) => R
  readonly chunk: (sessionId: string, text: string) => R
  readonly update: (params: unknown) => R
  readonly message: (message: Json) => R
}

/**
 * A text `agent_message_chunk` notification written exactly as Gemini CLI (and any agent on ACP's
 * TypeScript SDK building its update the same way) writes one, with no escape, quote or control
 * character in its strings (so each string's text is its value): the session is group 1, the text
 * group 2.
 */
const plainChunk =
  /^\{"jsonrpc":"2\.0","method":"session\/update","params":\{"sessionId":"([^"\\\x00-\x1f]*)","update":\{"sessionUpdate":"agent_message_chunk","content":\{"type":"text","text":"([^"\\\x00-\x1f]*)"\}\}\}\}$/

/**
 * Classifies one line and hands it to its handler: `session/update` notifications are mapped by
 * the client itself (in line order), other JSON objects are JSON-RPC messages for the SDK,
 * anything else is a `Notice`. (Handlers, not a tagged value: no object per line.)
 *
 * @internal
 */
export const classify = <R>(line: string, on: LineHandlers<R>): R => {
  if (isBlank(line)) return on.blank()
  // Message chunks are most of a turn's lines, and `JSON.parse` building each one's five nested
  // objects to read two strings costs several times the match (P3 in docs/contributing.md); the
  // anchored pattern turns any other line away at its first differing character.
  const chunk = plainChunk.exec(line)
  if (chunk !== null) return on.chunk(chunk[1]!, chunk[2]!)
  let message: unknown
  try {
    message = JSON.parse(line)
  } catch {
    return on.foreign(notice("warning", "acp.non_json", line.slice(0, 2048)))
  }
  if (!isRecord(message)) {
    return on.foreign(notice("warning", "acp.unknown", "a JSON line that is not an object", message))
  }
  if (message["method"] === "session/update" && !("id" in message)) return on.update(message["params"])
  return on.message(message)
}

/**
 * The line the one-shot turn runner prints, among the agent's relayed lines, once a loaded
 * session's replay has ended (the agent was quiet, see `acp.ts`), before it sends the prompt. A
 * method no agent sends (`_`-prefixed names are extensions in ACP).
 *
 * @internal
 */
export const replayedMarker = { jsonrpc: "2.0", method: "_tether/replayed" } as const

/**
 * A recorded transcript of an agent's stdout replayed without a connection: `session/new`'s
 * result starts the session (`SessionStarted`; for a resume, the first result that is neither
 * `initialize`'s nor a prompt's, i.e. `session/load`'s; updates before it, and before the
 * runner's `replayedMarker` after it, are dropped: a load replays the history), `session/update`
 * notifications and
 * `session/prompt` results map as in a live session, each prompt result ends a turn, an error
 * response is an error `Notice`, the other protocol messages give nothing, and a line that is
 * not a JSON object is a `Notice`.
 *
 * @internal
 */
export const parseWith = (naming: Naming): Driver.Driver["parse"] =>
  Driver.parseFromLines((context) => {
    const mapper = makeMapper(context.hostedKey, hostedNaming(naming, context.hostedTools))
    const resumed = context.session._tag === "Resume" ? context.session.id : undefined
    // A resumed session's turn starts at the runner's `replayedMarker`: an agent may replay the
    // loaded history after its answer to the load (Gemini CLI does).
    let replayed = resumed === undefined
    /** Whether `initialize`'s answer was seen (the load's comes after it). */
    let initialized = false
    const on: LineHandlers<Driver.LineOutputs> = {
      blank: () => none,
      foreign: (output) => output,
      // Before the session is known the updates are not a turn's (a load replays history).
      chunk: (sessionId, text) =>
        mapper.session === undefined || !replayed ? none : mapper.messageChunk(sessionId, text),
      update: (params) => mapper.session === undefined || !replayed ? none : mapper.update(params),
      message: (message) => {
        if (message["method"] === replayedMarker.method) {
          replayed = true
          return none
        }
        if ("method" in message) return none
        // The SDK reads a `null` answer to `session/load` as `{}` (a live session accepts it): so
        // does the replay, for the first answer after `initialize`'s of a resume.
        const result = message["result"] === null && resumed !== undefined && mapper.session === undefined &&
            initialized
          ? {}
          : message["result"]
        if (isRecord(result) && result["protocolVersion"] !== undefined) initialized = true
        if (isRecord(result)) {
          const sessionId = str(result["sessionId"])
          if (sessionId !== undefined && mapper.session === undefined) {
            mapper.session = sessionId
            mapper.model = currentModel(result)
            return { _tag: "SessionStarted", sessionId, model: mapper.model }
          }
          // A resume: `session/load`'s result (neither `initialize`'s nor a prompt's) starts it.
          if (
            resumed !== undefined && mapper.session === undefined && result["protocolVersion"] === undefined &&
            result["stopReason"] === undefined
          ) {
            mapper.session = resumed
            mapper.model = currentModel(result)
            return { _tag: "SessionStarted", sessionId: resumed, model: mapper.model }
          }
          if (typeof result["stopReason"] === "string") {
            const out = mapper.finish(result)
            mapper.begin()
            return out
          }
          return none
        }
        if (isRecord(message["error"])) {
          // Once the session is known, the only request of the runner's left to answer is the
          // prompt: its error answer fails the turn, as the live session's does.
          if (mapper.session !== undefined && "id" in message) {
            const out = mapper.failed(promptError(message["error"]), message)
            mapper.begin()
            return out
          }
          return notice("error", "acp.error", textOf(message["error"]["message"], "an error response"), message)
        }
        return "result" in message ? none : notice("info", "acp.unknown", "a JSON object that is not ACP", message)
      }
    }
    return (line) => classify(line, on)
  })

/** `parseWith(naming)` applied to `lines`. @internal */
export const parse = (
  lines: Stream.Stream<string>,
  context: Driver.ParseContext,
  naming: Naming
): Stream.Stream<Driver.Output, Driver.ProtocolError> => parseWith(naming)(lines, context)

/** The namings a one-shot turn runner can be told about, by id. @internal */
export const namings: { readonly [id: string]: Naming } = {
  generic: genericNaming,
  claude: claudeNaming,
  codex: codexNaming
}

/** The id of a known naming (`undefined` for any other function). @internal */
export const namingId = (naming: Naming): string | undefined =>
  Object.entries(namings).find(([, known]) => known === naming)?.[0]
