/**
 * A scripted Anthropic Messages API server on `127.0.0.1:0` for offline tests of Claude-based
 * CLIs. `POST /v1/messages` answers with the next scripted step, streamed as Server-Sent Events
 * exactly as the API sends them (`message_start`, `ping`, `content_block_start` /
 * `content_block_delta` / `content_block_stop` per block, `message_delta` with usage,
 * `message_stop`), or as the API's JSON error body with the scripted status. `HEAD /` (the
 * CLI's connectivity probe) is answered; other paths get 404. Every request is recorded.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as internal from "./internal/anthropicServer.js"

/**
 * Token usage a scripted reply reports.
 *
 * @since 0.1.0
 * @category models
 */
export interface StepUsage {
  /** Input tokens outside the prompt cache (the API's `input_tokens`). */
  readonly inputTokens: number
  readonly outputTokens: number
  /** Input tokens read from the prompt cache (`cache_read_input_tokens`); 0 when absent. */
  readonly cacheReadInputTokens?: number
  /** Input tokens written to the prompt cache (`cache_creation_input_tokens`); 0 when absent. */
  readonly cacheCreationInputTokens?: number
}

/**
 * One scripted model reply.
 *
 * - `Text`: an assistant message with one text block (streamed in several deltas), `end_turn`.
 * - `ToolUse`: an optional text block, then a `tool_use` block (input streamed as
 *   `input_json_delta`), `stop_reason: "tool_use"`. A `name` without the `mcp__` prefix is
 *   resolved against the request's `tools`: a tool named exactly so, else
 *   `mcp__<server>__<name>` with a single server segment, `name` written as Claude writes tool
 *   names (each character outside `[A-Za-z0-9_-]` becomes `_`): `callTool("lookup")` calls
 *   `mcp__tether__lookup`, `callTool("ns__tool")` `mcp__tether__ns__tool`,
 *   `callTool("issue.lookup")` `mcp__tether__issue_lookup`. A name several tools match is a
 *   scripting error, answered 500 with a message, as is a `respond` that throws.
 * - `Fail`: the HTTP status with the API's error body `{"type":"error","error":{type,message}}`.
 * - `Delayed`: `step`, answered after `millis` (real time) — a model that keeps a turn busy.
 * - `Pieces`: an assistant message with one text block streamed as one delta per piece,
 *   `between` running before every piece after the first (a sleep, or a gate the test opens):
 *   the response is written piece by piece, so a consumer can prove it sees deltas early.
 *
 * @since 0.1.0
 * @category models
 */
export type Step =
  | { readonly _tag: "Text"; readonly text: string; readonly usage: StepUsage | undefined }
  | {
    readonly _tag: "ToolUse"
    readonly name: string
    readonly input: unknown
    readonly id: string | undefined
    readonly text: string | undefined
    readonly usage: StepUsage | undefined
  }
  | { readonly _tag: "Fail"; readonly status: number; readonly message: string }
  | { readonly _tag: "Delayed"; readonly millis: number; readonly step: Step }
  | {
    readonly _tag: "Pieces"
    readonly pieces: ReadonlyArray<string>
    readonly between: Effect.Effect<void>
    readonly usage: StepUsage | undefined
  }

/**
 * Reply with `text`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const reply = (text: string, options?: { readonly usage?: StepUsage }): Step => ({
  _tag: "Text",
  text,
  usage: options?.usage
})

/**
 * Reply with the text `pieces.join("")`, streamed one delta per piece; `between` runs before
 * every piece after the first (e.g. `Effect.sleep("50 millis")` or `Deferred.await(gate)`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const replyInPieces = (
  pieces: ReadonlyArray<string>,
  options: { readonly between: Effect.Effect<void>; readonly usage?: StepUsage }
): Step => ({ _tag: "Pieces", pieces, between: options.between, usage: options.usage })

/**
 * Call tool `name` with `input` (see `Step` for how the name is resolved).
 *
 * @since 0.1.0
 * @category constructors
 */
export const callTool = (
  name: string,
  input: unknown,
  options?: { readonly id?: string; readonly text?: string; readonly usage?: StepUsage }
): Step => ({
  _tag: "ToolUse",
  name,
  input,
  id: options?.id,
  text: options?.text,
  usage: options?.usage
})

/**
 * Fail with HTTP `status` and the API's error body.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fail = (status: number, message?: string): Step => ({
  _tag: "Fail",
  status,
  message: message ?? `scripted ${status}`
})

/**
 * Answer with `step` after `millis` milliseconds (real time).
 *
 * @since 0.1.0
 * @category constructors
 */
export const delayed = (millis: number, step: Step): Step => ({ _tag: "Delayed", millis, step })

/**
 * A request the server received, as it arrived.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecordedRequest {
  readonly method: string
  /** The request target, query string included (e.g. `/v1/messages?beta=true`). */
  readonly url: string
  /** Lower-cased header names. */
  readonly headers: { readonly [name: string]: string | ReadonlyArray<string> | undefined }
  readonly body: string
  /** The body parsed as JSON, `undefined` when empty or not JSON. */
  readonly json: unknown
  /** The step it was answered with (`undefined`: not a messages request, or the script was exhausted). */
  readonly step: Step | undefined
}

/**
 * The part of a Messages request body the helpers look at.
 *
 * @since 0.1.0
 * @category models
 */
export interface MessagesRequest {
  readonly model?: string
  readonly stream?: boolean
  readonly system?: unknown
  readonly messages: ReadonlyArray<{ readonly role: string; readonly content: unknown }>
  readonly tools?: ReadonlyArray<{ readonly name: string }>
}

/**
 * Decides the reply from the request when the queued script is empty.
 *
 * @since 0.1.0
 * @category models
 */
export type Responder = (request: MessagesRequest) => Step

/**
 * The server's script: steps answered in order, then `respond` (or 500 when the script is
 * exhausted), and the model name it reports.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Steps answered in order, one per `POST /v1/messages`. */
  readonly script?: ReadonlyArray<Step>
  /** Used once the script is exhausted; without it an exhausted script answers 500. */
  readonly respond?: Responder
  /** The model name reported in `message_start` (default: the request's `model`). */
  readonly model?: string
}

/**
 * A running server.
 *
 * @since 0.1.0
 * @category models
 */
export interface AnthropicServer {
  /** `http://127.0.0.1:<port>` (no `/v1`: what `ANTHROPIC_BASE_URL` expects). */
  readonly url: string
  readonly port: number
  /** Appends steps to the script. */
  readonly enqueue: (...steps: ReadonlyArray<Step>) => Effect.Effect<void>
  /** Every request so far, in arrival order. */
  readonly requests: Effect.Effect<ReadonlyArray<RecordedRequest>>
  /** The parsed bodies of the `POST /v1/messages` requests so far. */
  readonly messages: Effect.Effect<ReadonlyArray<MessagesRequest>>
}

/**
 * The server could not listen.
 *
 * @since 0.1.0
 * @category errors
 */
export class AnthropicServerError
  extends Schema.TaggedError<AnthropicServerError>("@tether/testing/AnthropicServerError")("AnthropicServerError", {
    detail: Schema.String
  })
{
  override get message(): string {
    return `AnthropicServer: ${this.detail}`
  }
}

/**
 * Starts a server on `127.0.0.1:0`; it stops (connections closed) when the scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (options?: Options) => Effect.Effect<AnthropicServer, AnthropicServerError, Scope.Scope> =
  internal.make

/**
 * The text of every `tool_result` block in a request's last user message, in order, with
 * its `tool_use_id` and `is_error`.
 *
 * @since 0.1.0
 * @category helpers
 */
export const toolResults: (
  request: MessagesRequest
) => ReadonlyArray<{ readonly toolUseId: string; readonly text: string; readonly isError: boolean }> =
  internal.toolResults

/**
 * The conversation without the CLI's `role: "system"` messages: `[role, text]` per message,
 * text blocks and tool results joined.
 *
 * @since 0.1.0
 * @category helpers
 */
export const transcript: (request: MessagesRequest) => ReadonlyArray<readonly [role: string, text: string]> =
  internal.transcript

/**
 * A responder for the common tool round trip: when the last user message carries a tool
 * result answer `after(results)`, else `first(request)`.
 *
 * @since 0.1.0
 * @category helpers
 */
export const roundTrip: (
  first: (request: MessagesRequest) => Step,
  after: (
    results: ReadonlyArray<{ readonly toolUseId: string; readonly text: string; readonly isError: boolean }>
  ) => Step
) => Responder = internal.roundTrip
