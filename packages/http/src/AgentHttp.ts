/**
 * An agent served over HTTP: an `@effect/platform` `HttpRouter` the host mounts in its own
 * router (e.g. `HttpRouter.mount("/agent", router)`), with the host's authorization first.
 *
 * Routes (relative to where the router is mounted; `:key` is the host's thread key, not empty,
 * percent-encoded as one path segment, e.g. with `encodeURIComponent`; the router sets no length
 * limit on it, only the server's limit on a request's head applies):
 *
 * - `POST /threads/:key/turns`, body `{ "input": string, "resumeOnly"?: boolean, "id"?: string }` as
 *   `application/json`: runs a turn on the thread and answers `200 text/event-stream`, one SSE
 *   event per Tether event: `id` the event's `sequence`, `event` its `_tag`, `data` its JSON wire
 *   form (see `toWire`). Comments (`: heartbeat`) keep an idle stream alive. The stream ends after
 *   the run's `RunFinished` (a rejected resume retried fresh carries two runs; the second's ids
 *   continue after the first's). A reader that falls behind is never dropped: the run waits for
 *   it instead (see `Options.replay`). The run belongs to the router, not to the connection: a client
 *   that disconnects may reconnect within the grace; once no client has been reading for
 *   `reconnectGrace`, the run is canceled as by `DELETE`. The client that started the run counts
 *   as its reader from the start: the grace begins only when its response stops being read (or
 *   the request ends before it was), so even a grace of `0` never cancels a turn its requester
 *   reads. `id` (1–128 printable ASCII characters, no space) is the client's id of the turn, and
 *   its `Agent.Turn.id` unless `Options.turn` gives one: the same request sent again (a browser
 *   resends a POST whose reused connection dropped before any answer) reads the turn the first
 *   one started, from its first event (as a reconnect without `Last-Event-ID`), while the router
 *   keeps its run (`Options.retention` after its end), or gets why it did not start; with another
 *   `input` or `resumeOnly`, `409 turn_id_reused`. Past that, the thread's record still carries the
 *   last committed turn's id: `409 turn_committed` (`TurnAlreadyCommitted`). A turn that did not
 *   start is forgotten: sent again, it runs. A request with an `id` that ends before its turn
 *   started leaves the turn to the reconnect grace (without one the turn is canceled then), and a
 *   request sent again that waits for the start is the turn's reader.
 * - `GET /threads/:key/runs/:run/events` with `Last-Event-ID`: the same stream again, replaying
 *   the events after that id from the run's bounded buffer (`replay` events), then live.
 *   Answers `410` when some of the missed events were already evicted (when they are evicted
 *   between that answer and the stream's start, the stream is one `error` event
 *   `events_expired`); works until `retention` after the run's end. Without `Last-Event-ID`, the
 *   same from the run's first event (`410` once it left the buffer).
 * - `DELETE /threads/:key/runs/:run`: cancels the run; answers `204` once it has ended (its
 *   readers get `RunFinished` with outcome `canceled`).
 * - `POST /threads/:key/runs/:run/input`, body `{ "input": string }`: delivers the input into the
 *   running turn `:run` (`thread.send`: steering a live thread) and answers `200 { "delivery":
 *   "Injected" | "Queued" }`; the run's stream shows it as `InputDelivered`. `409 no_active_turn`
 *   when that run is not running (it ended, or its turn ended before the input reached it), `409
 *   input_unsupported` when the agent's turns cannot take input (a driver without a live protocol,
 *   or live threads turned off), `502 input_refused` when the provider refused it (logged).
 * - `POST /threads/:key/runs/:run/approvals/:id`, body `{ "decision": "allow" | "allowForSession" }` or
 *   `{ "decision": "deny", "message": string }`: answers the approval `:id` (an `ApprovalRequested`
 *   event of the run `:run`) and answers `204`; `404 not_found` for an id that run did not ask for
 *   (another run's, even of the same thread), `409 approval_resolved` when it was already answered
 *   (the first answer stays).
 * - `GET /threads/:key`: the thread's snapshot `{ key, provider?, turns, updatedAt?, run? }`
 *   (`run`: the id of its running turn, for a client that reconnects after a reload).
 * - `POST /agui`: the AG-UI protocol (`RunAgentInput` in, AG-UI events out as SSE, encoded
 *   with `@ag-ui/encoder`); `threadId` is the thread key, the last message (the user's) is the
 *   turn's input, its text or text parts (one with an image, audio or other part is refused, `400
 *   invalid_request`, rather than run without it; the thread holds the earlier ones; `state`,
 *   `context` and `forwardedProps` are not used). A run that offers the client's own `tools` is refused (`400
 *   client_tools_unsupported`): the agent's tools are the host's. See `AgUi` for the mapping.
 *
 * The turns of a thread key run on one thread handle the router keeps open while the key is in
 * use and for `threads.idleTimeout` after (see `Options.threads`): with a live driver, the
 * thread's warm process serves its next turn. Snapshots, input and approvals use the same handle.
 *
 * Every route runs `authorize` first. Failures are JSON `{ "error": { "code", "message" } }` with
 * fixed texts (never an echo of the request): `401 unauthorized`; `404 not_found` for a thread the
 * principal may not use, exactly as for a missing thread or run, and for a path under `/threads`
 * that is no route; `400 invalid_json` / `invalid_request` / `invalid_last_event_id` /
 * `client_tools_unsupported` / `invalid_path` (a path segment that is not valid percent-encoding); `413 body_too_large` (see
 * `Options.maxBodyBytes`); `415 unsupported_media_type`
 * (a body that is not `application/json`, which also keeps cross-site form posts out); `409
 * thread_busy` (a turn already runs on the thread: `ThreadBusy`), `thread_incompatible`, `turn_committed`,
 * `turn_id_reused`, `no_active_turn`, `input_unsupported` or `approval_resolved`; `410 events_expired`; `502 input_refused`; `503 agent_closed`; `500 internal_error` (logged, nothing else said).
 *
 * @since 0.1.0
 */
import type * as HttpRouter from "@effect/platform/HttpRouter"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type * as Agent from "@tether/core/Agent"
import type * as Event from "@tether/core/Event"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as internal from "./internal/router.js"
import * as Wire from "./internal/wire.js"

/**
 * Who is calling and which thread keys they may use. `threads` answers for the key as it appears
 * in the request (decoded); a key it refuses is answered exactly like a missing thread.
 *
 * @since 0.1.0
 * @category models
 */
export interface Access<Principal> {
  readonly principal: Principal
  readonly threads: (key: string) => boolean
}

/**
 * The request is not authenticated (answered `401`, with a fixed body).
 *
 * @since 0.1.0
 * @category errors
 */
export class Unauthorized extends Schema.TaggedError<Unauthorized>("@tether/http/Unauthorized")("Unauthorized", {}) {
  override get message(): string {
    return "authentication required"
  }
}

/**
 * What a turn is built from: the caller's access, the thread key and the input they sent.
 *
 * @since 0.1.0
 * @category models
 */
export interface TurnRequest<Principal> {
  readonly access: Access<Principal>
  readonly key: string
  readonly input: string
}

/**
 * What the HTTP routes serve: the agent, the required `authorize` (run first on every route: it
 * authenticates the request and says which thread keys its principal may use) and how a request
 * becomes a turn.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<Principal, R> {
  readonly agent: Agent.Agent
  /**
   * Required: authenticates the request and says which thread keys its principal may use. Runs
   * before anything else on every route; there is no unauthenticated default.
   */
  readonly authorize: (
    request: HttpServerRequest.HttpServerRequest
  ) => Effect.Effect<Access<Principal>, Unauthorized, R>
  /**
   * The turn run for a request (default `{ input }`): where the host sets the principal's tool
   * policy or model. Clients never choose them.
   */
  readonly turn?: (request: TurnRequest<Principal>) => Agent.Turn
  /**
   * Largest accepted request body (default 1 MiB). A larger one gets `413` as soon as it is (or is
   * declared) larger; the rest of it is then read and discarded for up to 5 seconds, so that the
   * answer is not lost to a connection reset, after which a body still arriving has its connection
   * closed.
   */
  readonly maxBodyBytes?: number
  /** How long a stream may stay silent before a heartbeat comment (default 15 seconds). */
  readonly heartbeat?: Duration.DurationInput
  /**
   * A run's event buffer, in events (default 1024): what a reconnect (`Last-Event-ID`) can get
   * back, and how far a connected reader may fall behind. An event leaves the buffer (oldest first,
   * once it holds `replay`) only when every connected reader has read it: the requester's response
   * (a reader from the run's start) and every `GET …/events` stream still open. While the slowest
   * of them is `replay` events behind, the run waits for it: under the agent's default event policy
   * its text and reasoning deltas are then dropped (counted in `Dropped`; the `Message` and the
   * result keep the complete text) and its other events wait, so set the agent's
   * `events: { blocking: true }` for streams that lose nothing. A connected reader is thus never
   * ended for being slow (and one that stops reading without disconnecting holds its run until it
   * reads again, disconnects or the run is canceled; a canceled run and a closing router wait for
   * no reader, and keep for it, past `replay`, what it has not read of the events the agent still
   * had queued: at most the agent's `events.buffer` batches and the run's last events). A reader
   * that disconnected gets, on its reconnect, what is still buffered:
   * `410 events_expired` when an event after its `Last-Event-ID` left the buffer meanwhile.
   */
  readonly replay?: number
  /**
   * How long a run outlives its last reader before it is canceled (default 5 seconds). The client
   * that started the run is its reader from the start (until its response stream ends).
   */
  readonly reconnectGrace?: Duration.DurationInput
  /** How long a finished run's events stay available for a reconnect (default 30 seconds). */
  readonly retention?: Duration.DurationInput
  /**
   * The thread handles the router keeps open: one per thread key, shared by that key's requests
   * and runs, so that a thread's warm live process (the agent's `live` option) serves its next
   * turns (closing a handle shuts the thread's warm process down). A key's handle is closed once
   * no request or run has used it for `idleTimeout` (default 5 minutes, the agent's default
   * `live.idleTimeout`: keep it at least as long as the agent's, else warm processes end sooner;
   * `0` closes a key's handle as soon as it is unused, so that every turn starts a fresh process),
   * when more than `max` keys are open (default 1024: the least recently used idle keys are closed
   * first; a key in use is never closed for room, so while every key is in use the count may
   * exceed `max`), and when the router's scope closes.
   */
  readonly threads?: {
    readonly idleTimeout?: Duration.DurationInput
    readonly max?: number
  }
}

/**
 * Builds the router. Its runs and thread handles belong to the current scope: closing the scope
 * closes the handles (shutting their warm processes down), cancels the runs and ends their event
 * streams. Build it inside the HTTP server's lifetime (after the server is acquired), so the
 * server's graceful close does not wait for streams of runs still going. Its SSE responses say
 * `Connection: close`, so neither does it wait out kept-alive connections whose streams ended.
 *
 * @since 0.1.0
 * @category constructors
 */
export const router: <Principal, R>(
  options: Options<Principal, R>
) => Effect.Effect<HttpRouter.HttpRouter<never, R>, never, Scope.Scope> = internal.make

/**
 * An event's JSON as sent to clients: the event encoded with its Schema, without what stays with
 * the host — the instructions (in `RunStarted` and the result), the provider's raw output (its
 * byte counts are kept) and notices' raw records.
 *
 * @since 0.1.0
 * @category encoding
 */
export const toWire: (event: Event.Event) => unknown = Wire.toWire
