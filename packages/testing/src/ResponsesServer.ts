/**
 * A scripted OpenAI Responses API server on `127.0.0.1:0` for running the real Codex CLI
 * offline. It answers `POST /v1/responses` with the server-sent events the API streams
 * (`response.created`, `response.output_item.added` / `.done`, `response.output_text.delta`,
 * function-call items, `response.completed` with usage) and records every request: those to
 * `POST /v1/responses` in `requests`, every other one (answered 404) in `otherRequests`.
 *
 * Codex offers MCP tools as a `namespace` tool (`mcp__<server>`) and expects a call to name
 * both the namespace and the tool: use {@link mcpTool}. Use an unknown model slug (the default
 * `fake-model`) so Codex lists MCP tools directly instead of deferring them behind `tool_search`.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import type * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as inspect from "./internal/responsesInspect.js"
import * as internal from "./internal/responsesServer.js"

/**
 * Token counts reported in `response.completed` (defaults: 10 in, 5 out, 0 cached, 0 reasoning).
 *
 * @since 0.1.0
 * @category models
 */
export interface UsageSpec {
  readonly inputTokens?: number
  readonly outputTokens?: number
  readonly cachedInputTokens?: number
  readonly reasoningTokens?: number
}

/**
 * One scripted answer: assistant text, a function call, or an HTTP failure.
 *
 * @since 0.1.0
 * @category models
 */
export type Step =
  | {
    readonly _tag: "Text"
    readonly text: string
    /** Emitted first as a `reasoning` item with this summary text. */
    readonly reasoning: string | undefined
    readonly usage: UsageSpec | undefined
  }
  | {
    /** Raw output items, each sent as `output_item.added` + `output_item.done`. */
    readonly _tag: "Items"
    readonly items: ReadonlyArray<{ readonly [key: string]: unknown }>
    readonly usage: UsageSpec | undefined
  }
  | {
    readonly _tag: "ToolCall"
    readonly name: string
    readonly namespace: string | undefined
    readonly input: unknown
    readonly callId: string | undefined
    readonly usage: UsageSpec | undefined
  }
  | { readonly _tag: "Fail"; readonly status: number; readonly message: string }
  | { readonly _tag: "Delayed"; readonly millis: number; readonly step: Step }

/**
 * A request as received: `body` is the parsed JSON (`undefined` when it did not parse).
 *
 * @since 0.1.0
 * @category models
 */
export interface RecordedRequest {
  /** 0 for the first `POST /v1/responses`, then 1, 2, … */
  readonly index: number
  readonly method: string
  readonly path: string
  readonly headers: { readonly [name: string]: string }
  readonly body: unknown
  /** Epoch milliseconds. */
  readonly receivedAt: number
}

/**
 * A request to any other path than `POST /v1/responses` (answered 404, e.g. `GET /v1/models`).
 *
 * @since 0.4.0
 * @category models
 */
export interface OtherRequest {
  readonly method: string
  readonly path: string
  readonly headers: { readonly [name: string]: string }
}

/**
 * Chooses the answer to each request. A script that throws answers 500.
 *
 * @since 0.1.0
 * @category models
 */
export type Script = (request: RecordedRequest) => Step

/**
 * The output of a tool call as Codex sent it back (`text` joins the text parts).
 *
 * @since 0.1.0
 * @category models
 */
export interface FunctionCallOutput {
  readonly callId: string
  readonly output: unknown
  readonly text: string
}

/**
 * The server's script, the model slug it reports, and the API key it requires (then requests
 * without it get 401).
 *
 * @since 0.1.0
 * @category models
 */
export interface ResponsesServerOptions {
  /** Default: every request is answered with the text `ok`. */
  readonly script?: Script
  /** Model slug reported in the events (default `fake-model`). */
  readonly model?: string
  /** When set, requests without `Authorization: Bearer <apiKey>` get 401 (still recorded). */
  readonly apiKey?: Redacted.Redacted<string>
}

/**
 * A running server. `baseUrl` ends in `/v1` (Codex appends `/responses`).
 *
 * @since 0.1.0
 * @category models
 */
export interface ResponsesServer {
  readonly port: number
  readonly baseUrl: string
  readonly model: string
  /** Every `POST /v1/responses` received so far, in order. */
  readonly requests: Effect.Effect<ReadonlyArray<RecordedRequest>>
  /** Every other request received so far (answered 404), in order. */
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
export class ResponsesServerError
  extends Schema.TaggedError<ResponsesServerError>("@tether/testing/ResponsesServerError")("ResponsesServerError", {
    detail: Schema.String
  })
{
  override get message(): string {
    return `the scripted Responses server could not start: ${this.detail}`
  }
}

/**
 * Starts a server on `127.0.0.1:0`; it stops (connections closed) when the scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (
  options?: ResponsesServerOptions
) => Effect.Effect<ResponsesServer, ResponsesServerError, Scope.Scope> = internal.make

/**
 * Answer with assistant text (streamed in a few `output_text.delta` chunks), optionally
 * preceded by a reasoning item whose summary is `reasoning`.
 *
 * @since 0.1.0
 * @category steps
 */
export const text: (
  text: string,
  options?: { readonly usage?: UsageSpec | undefined; readonly reasoning?: string | undefined }
) => Step = internal.text

/**
 * Answer with raw output items (e.g. a `web_search_call`), each sent whole.
 *
 * @since 0.1.0
 * @category steps
 */
export const items: (
  items: ReadonlyArray<{ readonly [key: string]: unknown }>,
  options?: { readonly usage?: UsageSpec | undefined }
) => Step = internal.items

/**
 * Answer with a function call. `namespace` is required for MCP tools (`mcp__<server>`).
 *
 * @since 0.1.0
 * @category steps
 */
export const callTool: (options: {
  readonly name: string
  readonly namespace?: string | undefined
  readonly input: unknown
  readonly callId?: string | undefined
  readonly usage?: UsageSpec | undefined
}) => Step = internal.callTool

/**
 * Answer with a call of tool `tool` of MCP server `server` (namespace `mcp__<server>`).
 *
 * @since 0.1.0
 * @category steps
 */
export const mcpTool: (server: string, tool: string, input: unknown, callId?: string) => Step = internal.mcpTool

/**
 * Answer with HTTP `status` and an OpenAI-shaped error body.
 *
 * @since 0.1.0
 * @category steps
 */
export const fail: (status: number, message?: string) => Step = internal.fail

/**
 * Answer with `step` after `millis` milliseconds (the wait ends early when the client leaves).
 *
 * @since 0.1.0
 * @category steps
 */
export const delayed: (millis: number, step: Step) => Step = internal.delayed

/**
 * A script answering request `i` with `steps[i]` (500 once the steps run out).
 *
 * @since 0.1.0
 * @category scripts
 */
export const sequence: (...steps: ReadonlyArray<Step>) => Script = internal.sequence

/**
 * The `input` items of a request body.
 *
 * @since 0.1.0
 * @category requests
 */
export const inputItems: (request: RecordedRequest) => ReadonlyArray<{ readonly [key: string]: unknown }> =
  inspect.inputItems

/**
 * Every `function_call_output` item of a request, in order.
 *
 * @since 0.1.0
 * @category requests
 */
export const functionCallOutputs: (request: RecordedRequest) => ReadonlyArray<FunctionCallOutput> =
  inspect.functionCallOutputs

/**
 * The last input item when it is a `function_call_output` (the request that follows a tool call).
 *
 * @since 0.1.0
 * @category requests
 */
export const lastFunctionCallOutput: (request: RecordedRequest) => FunctionCallOutput | undefined =
  inspect.lastFunctionCallOutput

/**
 * The texts of the `user` messages of a request (Codex adds an `<environment_context>` one).
 *
 * @since 0.1.0
 * @category requests
 */
export const userTexts: (request: RecordedRequest) => ReadonlyArray<string> = inspect.userTexts

/**
 * The texts of the `assistant` messages of a request (earlier turns of a resumed session).
 *
 * @since 0.1.0
 * @category requests
 */
export const assistantTexts: (request: RecordedRequest) => ReadonlyArray<string> = inspect.assistantTexts

/**
 * The namespace tools offered in a request, by namespace (e.g. `{ mcp__echo: ["echo"] }`).
 *
 * @since 0.1.0
 * @category requests
 */
export const namespaceTools: (request: RecordedRequest) => { readonly [namespace: string]: ReadonlyArray<string> } =
  inspect.namespaceTools
