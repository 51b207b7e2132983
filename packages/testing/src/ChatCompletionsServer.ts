/**
 * A scripted OpenAI Chat Completions server on `127.0.0.1:0` for running any Chat Completions
 * client offline (e.g. the CodeBuddy Code CLI). `POST /v1/chat/completions` (also accepted
 * without the `/v1` prefix) answers with the next scripted step: streamed as the API streams it
 * when the request has `stream: true` (`chat.completion.chunk` events, `data: [DONE]` last, a
 * usage chunk with empty `choices` when `stream_options.include_usage` is set), else one
 * `chat.completion` JSON object. Tool calls use the OpenAI chat format (`tool_calls` with
 * `function.name` / `function.arguments`, `finish_reason: "tool_calls"`); reasoning is sent as
 * `reasoning_content` deltas. `GET /v1/models` lists the model; other paths get 404.
 *
 * The script sees every completion request as it arrived and decides the answer: a tool round
 * trip looks at the last message (`role: "tool"` after a tool call; see {@link roundTrip}).
 * Every request is recorded.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as inspect from "./internal/chatCompletionsInspect.js"
import * as internal from "./internal/chatCompletionsServer.js"

/**
 * Token counts a scripted answer reports (defaults: 10 prompt, 5 completion, 0 cached, 0 reasoning).
 *
 * @since 0.1.0
 * @category models
 */
export interface UsageSpec {
  readonly promptTokens?: number
  readonly completionTokens?: number
  readonly cachedTokens?: number
  readonly reasoningTokens?: number
}

/**
 * One tool call of a scripted answer. A `name` that is not among the request's tools and has
 * no `mcp__` prefix is resolved to the offered `mcp__<server>__<name>` with a single server
 * segment (so `lookup` calls `mcp__<server>__lookup`, never `mcp__<server>__issue__lookup`),
 * the name written as CodeBuddy Code writes tool names (`issue.lookup` calls
 * `mcp__<server>__issue_lookup`); a name several offered tools match is a scripting error,
 * answered 500 with a message. `id`
 * defaults to `call_<request>_<n>`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolCallSpec {
  readonly name: string
  readonly input: unknown
  readonly id?: string | undefined
}

/**
 * One scripted answer.
 *
 * - `Text`: assistant text (streamed in a few `content` deltas), `finish_reason: "stop"`,
 *   optionally preceded by `reasoning_content` deltas.
 * - `ToolCalls`: optional text, then one or more tool calls (arguments streamed in pieces),
 *   `finish_reason: "tool_calls"`.
 * - `Fail`: the HTTP status with the API's error body `{"error":{message,type,code,param}}`.
 * - `Delayed`: `step`, answered after `millis` (real time; the wait ends when the client leaves).
 *
 * @since 0.1.0
 * @category models
 */
export type Step =
  | {
    readonly _tag: "Text"
    readonly text: string
    readonly reasoning: string | undefined
    readonly usage: UsageSpec | undefined
  }
  | {
    readonly _tag: "ToolCalls"
    readonly calls: ReadonlyArray<ToolCallSpec>
    readonly text: string | undefined
    readonly usage: UsageSpec | undefined
  }
  | { readonly _tag: "Fail"; readonly status: number; readonly message: string }
  | { readonly _tag: "Delayed"; readonly millis: number; readonly step: Step }

/**
 * A completion request as received: `body` is the parsed JSON (`undefined` when it did not parse).
 *
 * @since 0.1.0
 * @category models
 */
export interface RecordedRequest {
  /** 0 for the first completion request, then 1, 2, … */
  readonly index: number
  readonly method: string
  readonly path: string
  /** Lower-cased header names. */
  readonly headers: { readonly [name: string]: string }
  readonly body: unknown
  /** Epoch milliseconds. */
  readonly receivedAt: number
}

/**
 * A request to any other path (answered 404, or the model list).
 *
 * @since 0.1.0
 * @category models
 */
export interface OtherRequest {
  readonly method: string
  readonly path: string
  readonly headers: { readonly [name: string]: string }
}

/**
 * Chooses the answer to each completion request. A script that throws answers 500.
 *
 * @since 0.1.0
 * @category models
 */
export type Script = (request: RecordedRequest) => Step

/**
 * A message of a request, as the helpers read it: `text` joins the text parts of `content`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Message {
  readonly role: string
  readonly text: string
  /** The `tool_calls` of an assistant message (name and parsed arguments). */
  readonly toolCalls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly input: unknown }>
  /** The `tool_call_id` of a `tool` message. */
  readonly toolCallId: string | undefined
}

/**
 * A tool result sent back to the model (a `role: "tool"` message).
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolResult {
  readonly toolCallId: string
  readonly text: string
}

/**
 * The server's script, the model name it reports, and the API key it requires (then requests
 * without it get 401).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Default: every request is answered with the text `ok`. */
  readonly script?: Script
  /** Model name reported in the answers and `/v1/models` (default: the request's `model`, else `fake-model`). */
  readonly model?: string
  /** When set, requests without `Authorization: Bearer <apiKey>` get 401 (still recorded). */
  readonly apiKey?: Redacted.Redacted<string>
}

/**
 * A running server. `baseUrl` ends in `/v1` (clients append `/chat/completions`).
 *
 * @since 0.1.0
 * @category models
 */
export interface ChatCompletionsServer {
  readonly port: number
  readonly baseUrl: string
  /** Every completion request received so far, in order. */
  readonly requests: Effect.Effect<ReadonlyArray<RecordedRequest>>
  /** Every other request received so far, in order. */
  readonly otherRequests: Effect.Effect<ReadonlyArray<OtherRequest>>
  /** Replaces the script for the following requests. */
  readonly setScript: (script: Script) => Effect.Effect<void>
}

/**
 * The listener could not be started.
 *
 * @since 0.1.0
 * @category errors
 */
export class ChatCompletionsServerError
  extends Schema.TaggedError<ChatCompletionsServerError>("@tether/testing/ChatCompletionsServerError")(
    "ChatCompletionsServerError",
    { detail: Schema.String }
  )
{
  override get message(): string {
    return `the scripted Chat Completions server could not start: ${this.detail}`
  }
}

/**
 * Starts a server on `127.0.0.1:0`; it stops (connections closed, pending delays cancelled)
 * when the scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (
  options?: Options
) => Effect.Effect<ChatCompletionsServer, ChatCompletionsServerError, Scope.Scope> = internal.make

/**
 * Answer with assistant text, optionally preceded by reasoning (`reasoning_content`).
 *
 * @since 0.1.0
 * @category steps
 */
export const text: (
  text: string,
  options?: { readonly reasoning?: string | undefined; readonly usage?: UsageSpec | undefined }
) => Step = internal.text

/**
 * Answer with one tool call (see {@link ToolCallSpec} for how `name` is resolved).
 *
 * @since 0.1.0
 * @category steps
 */
export const callTool: (
  name: string,
  input: unknown,
  options?: { readonly id?: string | undefined; readonly text?: string | undefined; readonly usage?: UsageSpec }
) => Step = internal.callTool

/**
 * Answer with several tool calls in one message (parallel tool calls).
 *
 * @since 0.1.0
 * @category steps
 */
export const callTools: (
  calls: ReadonlyArray<ToolCallSpec>,
  options?: { readonly text?: string | undefined; readonly usage?: UsageSpec }
) => Step = internal.callTools

/**
 * Answer with HTTP `status` and an OpenAI-shaped error body.
 *
 * @since 0.1.0
 * @category steps
 */
export const fail: (status: number, message?: string) => Step = internal.fail

/**
 * Answer with `step` after `millis` milliseconds.
 *
 * @since 0.1.0
 * @category steps
 */
export const delayed: (millis: number, step: Step) => Step = internal.delayed

/**
 * A script answering completion request `i` with `steps[i]` (500 once the steps run out).
 *
 * @since 0.1.0
 * @category scripts
 */
export const sequence: (...steps: ReadonlyArray<Step>) => Script = internal.sequence

/**
 * A script for the common tool round trip: when the request ends with tool results (the last
 * message has `role: "tool"`) answer `after(results, request)`, else `first(request)`.
 *
 * @since 0.1.0
 * @category scripts
 */
export const roundTrip: (
  first: (request: RecordedRequest) => Step,
  after: (results: ReadonlyArray<ToolResult>, request: RecordedRequest) => Step
) => Script = internal.roundTrip

/**
 * The messages of a request, in order.
 *
 * @since 0.1.0
 * @category requests
 */
export const messages: (request: RecordedRequest) => ReadonlyArray<Message> = inspect.messages

/**
 * The tool results the request ends with: the trailing `role: "tool"` messages (empty when
 * the last message is not a tool result).
 *
 * @since 0.1.0
 * @category requests
 */
export const lastToolResults: (request: RecordedRequest) => ReadonlyArray<ToolResult> = inspect.lastToolResults

/**
 * Every tool result of a request, in order.
 *
 * @since 0.1.0
 * @category requests
 */
export const toolResults: (request: RecordedRequest) => ReadonlyArray<ToolResult> = inspect.toolResults

/**
 * The texts of the messages with `role`, in order.
 *
 * @since 0.1.0
 * @category requests
 */
export const texts: (request: RecordedRequest, role: string) => ReadonlyArray<string> = inspect.texts

/**
 * The names of the function tools offered in a request.
 *
 * @since 0.1.0
 * @category requests
 */
export const toolNames: (request: RecordedRequest) => ReadonlyArray<string> = inspect.toolNames
