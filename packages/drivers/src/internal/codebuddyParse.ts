/**
 * CodeBuddy Code's stream-json: Claude Code's records (mapped by the shared Claude parser) plus
 * what CodeBuddy Code 2.117.0 adds or writes differently.
 *
 * @internal
 */
import * as Driver from "@tether/core/Driver"
import type * as Stream from "effect/Stream"
import * as Http from "node:http"
import * as claude from "./claudeParse.js"
import { type LineResult, notice } from "./lines.js"

type Output = Driver.Output

const missingSession = /No conversation found with session ID/

/**
 * How CodeBuddy Code reports a failed model request: an assistant message whose text is
 * `<status> <message> [(target: <url>)] (<request id>/<session id>)`. A model cannot produce the
 * trailer: it names the CLI's own request id and this session.
 */
const isErrorReport = (text: string, sessionId: string | undefined, message: claude.Json): boolean => {
  if (sessionId === undefined || !/^\d{3} /.test(text)) return false
  if (isBareStatus(text) && readNothing(message["usage"])) return true
  const trailer = /\(([0-9a-f]{32})\/([^()\s]+)\)$/.exec(text)
  return trailer !== null && trailer[2] === sessionId
}

/**
 * A 401 is reported as the bare status line, `401 Unauthorized`, without the trailer: a message
 * that is exactly an HTTP error status and its standard reason, and that read and wrote nothing.
 */
const isBareStatus = (text: string): boolean => {
  const status = /^([45]\d\d) (.+)$/.exec(text)
  return status !== null && Http.STATUS_CODES[status[1]!] === status[2]
}

/** All-zero usage: the CLI's own reports (a model's message wrote something). */
const readNothing = (usage: unknown): boolean =>
  claude.isRecord(usage) && usage["input_tokens"] === 0 && usage["output_tokens"] === 0

/**
 * CodeBuddy Code retries a request that failed below HTTP (connection refused or reset, DNS,
 * TLS) once more and, when that fails too, stops without a `result` record and without exiting
 * (2.117.0). The second error report in a row therefore ends the turn.
 */
const errorReportsBeforeStall = 2

/**
 * How CodeBuddy Code reports a model's call of a tool it does not have: an assistant message whose
 * whole text is the `ModelBehaviorError` `Tool <name> not found in agent <agent>.` (2.117.0). Two
 * calls of one response that share an id (a server giving every call the same id) end here too:
 * the CLI drops an id it has already seen in the response (servers that repeat a call's id on each
 * of its chunks), so the second call's deltas extend the first call and its name is both names
 * joined. Calls of successive responses may share an id: each response is read on its own.
 */
const toolNotFound = /^Tool .+ not found in agent [^\s.]+\.$/s
const isToolNotFound = (text: string): boolean => text.startsWith("Tool ") && toolNotFound.test(text)

/**
 * CodeBuddy Code prompts the model again after a call of a tool it does not have, twice, and the
 * third time stops without a `result` record and without exiting (2.117.0): the third report in a
 * row ends the turn.
 */
const toolNotFoundBeforeStall = 3

/**
 * A tool result's text is the JSON of the MCP result's `content` array
 * (`[{"type":"text","text":"…"}]`): its text parts are the output. Anything else stays as it is.
 */
const toolOutput = (text: string): unknown => {
  if (!text.startsWith("[")) return text
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return text
  }
  if (!Array.isArray(parsed) || parsed.length === 0) return text
  const parts: Array<string> = []
  for (const part of parsed) {
    if (!claude.isRecord(part) || part["type"] !== "text" || typeof part["text"] !== "string") return text
    parts.push(part["text"])
  }
  return parts.join("\n")
}

/** The failed terminal of a turn the CLI ended (or stopped) without a `result` record. */
const failed = (state: claude.State, error: string, record: claude.Json): Output => ({
  _tag: "Terminal",
  ok: false,
  text: undefined,
  usage: undefined,
  model: state.model,
  session: state.sessionId,
  error,
  raw: record
})

const records = () => {
  // Error reports, and reports of a tool the CLI does not have, since the last model output.
  let errorReports = 0
  let missingTools = 0
  return (record: claude.Json, state: claude.State, context: Driver.ParseContext): LineResult<Output> | undefined => {
    switch (record["type"]) {
      case "file-history-snapshot":
        // The CLI's bookkeeping of file backups for its own undo: nothing happened to report.
        return []
      case "system":
        if (
          record["subtype"] === "init" &&
          !claude.blocks(record["mcp_servers"]).some((s) => s["name"] === context.hostedKey)
        ) {
          // The CLI waits for its MCP servers before `system/init` and lists only the connected
          // ones (all as `connected`): a hosted-tools server missing from the list failed.
          return new Driver.ProtocolError({
            reason: "HostedToolsUnavailable",
            detail: `CodeBuddy Code did not connect to the hosted tools server "${context.hostedKey}"`
          })
        }
        // `system/status` with no status precedes every turn and says nothing.
        return record["subtype"] === "status" && record["status"] === null ? [] : undefined
      case "error": {
        const error = claude.str(record["error"]) ?? "CodeBuddy Code reported an error"
        if (context.session._tag !== "New" && missingSession.test(error)) {
          return new Driver.ProtocolError({ reason: "ResumeRejected", detail: error })
        }
        // Printed instead of a `result` record, and the CLI exits: it ends the turn.
        return [failed(state, error, record)]
      }
      case "assistant": {
        const message = claude.isRecord(record["message"]) ? record["message"] : {}
        const text = claude.textOfContent(message["content"])
        if (isToolNotFound(text)) {
          errorReports = 0
          missingTools++
          const report = notice("error", "tool_not_found", text, record)
          if (missingTools < toolNotFoundBeforeStall) return [report]
          return [
            report,
            failed(
              state,
              `${text} (CodeBuddy Code gave up after the model called a tool it does not have ${missingTools} times)`,
              record
            )
          ]
        }
        missingTools = 0
        if (!isErrorReport(text, state.sessionId, message)) {
          errorReports = 0
          return undefined
        }
        errorReports++
        const report = notice("error", "api_error", text, record)
        if (errorReports < errorReportsBeforeStall) return [report]
        return [
          report,
          failed(state, `${text} (CodeBuddy Code gave up after ${errorReports} failed model requests)`, record)
        ]
      }
      default:
        return undefined
    }
  }
}

/** @internal */
export const dialect: claude.Dialect = {
  product: "CodeBuddy Code",
  records,
  toolOutput,
  // The endpoint speaks Chat Completions: `prompt_tokens` (copied as `input_tokens`) includes the
  // cached tokens the CLI also reports as `cache_read_input_tokens`.
  inputIncludesCacheReads: true
}

/** @internal */
export const parse: (
  lines: Stream.Stream<string>,
  context: Driver.ParseContext
) => Stream.Stream<Output, Driver.ProtocolError> = claude.parseWith(dialect)
