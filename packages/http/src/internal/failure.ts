/**
 * HTTP failures with fixed texts: nothing from the request is ever echoed.
 *
 * @internal
 */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Data from "effect/Data"

/** @internal */
export class HttpFailure extends Data.TaggedError("HttpFailure")<{
  readonly status: number
  readonly code: string
  readonly text: string
}> {}

const make = (status: number, code: string, text: string) => new HttpFailure({ status, code, text })

/** @internal */
export const unauthorized = make(401, "unauthorized", "Authentication is required.")
/** @internal */
export const notFound = make(404, "not_found", "There is no such thread or run.")
/** @internal */
export const invalidJson = make(400, "invalid_json", "The request body is not valid JSON.")
/** @internal */
export const invalidRequest = make(400, "invalid_request", "The request body does not have the expected shape.")
/** @internal */
export const clientTools = make(
  400,
  "client_tools_unsupported",
  "The agent's tools are the host's: a run cannot offer the client's own tools."
)
/** @internal */
export const invalidPath = make(400, "invalid_path", "The request path is not valid percent-encoding.")
/** @internal */
export const invalidLastEventId = make(400, "invalid_last_event_id", "Last-Event-ID must be an event id.")
/** @internal */
export const bodyTooLarge = make(413, "body_too_large", "The request body is too large.")
/** @internal */
export const unsupportedMediaType = make(415, "unsupported_media_type", "The request body must be application/json.")
/** @internal */
export const threadBusy = make(409, "thread_busy", "A turn is already running on this thread.")
/** @internal */
export const threadIncompatible = make(
  409,
  "thread_incompatible",
  "The thread's checkpoint cannot be resumed by this agent."
)
/** @internal */
export const turnCommitted = make(409, "turn_committed", "The turn with this id is already committed.")
/** @internal */
export const turnIdReused = make(409, "turn_id_reused", "This turn id was sent with another request.")
/** @internal */
export const eventsExpired = make(410, "events_expired", "The missed events are no longer buffered.")
/** @internal */
export const agentClosed = make(503, "agent_closed", "The agent is closed.")

/** @internal */
export const noActiveTurn = make(409, "no_active_turn", "The run is not running: input reaches a running turn only.")
/** @internal */
export const inputUnsupported = make(409, "input_unsupported", "This agent's turns cannot take input while they run.")
/** @internal */
export const inputRefused = make(502, "input_refused", "The provider refused the input.")

/** @internal */
export const approvalResolved = make(409, "approval_resolved", "This approval was already answered.")
/** @internal */
export const internalError = make(500, "internal_error", "The request failed.")

/** @internal */
export const body = (failure: HttpFailure) => ({ error: { code: failure.code, message: failure.text } })

/** @internal */
export const respond = (failure: HttpFailure): HttpServerResponse.HttpServerResponse =>
  // No `connection: close` on a 413: the rest of the body is drained (see `Body.readJson`), and
  // Node would reset a connection it closes with input unread, taking the answer with it.
  HttpServerResponse.unsafeJson(body(failure), { status: failure.status })
