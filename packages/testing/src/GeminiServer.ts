/**
 * A scripted Gemini API server on `127.0.0.1:0` for offline tests of the Gemini CLI.
 * `POST /v1beta/models/<model>:streamGenerateContent?alt=sse` answers with the next scripted
 * step as Server-Sent Events exactly as the API sends them (`data: <GenerateContentResponse>`
 * chunks: text parts split over several chunks, `functionCall` parts, the last chunk with
 * `finishReason` and `usageMetadata`), or with the API's JSON error body and the scripted
 * status. `:generateContent` (the CLI's model router, used only with model `auto`) answers
 * the same step as one JSON response. Other paths get 404. Every request is recorded.
 *
 * Script errors with 4xx statuses: the CLI retries 5xx with back-off for minutes.
 *
 * @since 0.1.0
 */
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as internal from "./internal/geminiServer.js"

/**
 * Token usage a scripted reply reports (`usageMetadata`).
 *
 * @since 0.1.0
 * @category models
 */
export interface StepUsage {
  readonly inputTokens: number
  readonly outputTokens: number
}

/**
 * One scripted model reply.
 *
 * - `Text`: a model content with text parts (streamed over several chunks), `finishReason: "STOP"`.
 * - `FunctionCall`: optional text, then a `functionCall` part. A `name` is resolved against
 *   the request's `functionDeclarations`: a declaration named exactly so, else
 *   `mcp_<server>_<name>` with a single server segment (so `callTool("lookup")` calls
 *   `mcp_tether_lookup`, not `mcp_tether_issue_lookup`), else one ending in `_<name>`. A name
 *   several declarations match at the same step is a scripting error: answered 400 with a message
 *   (as is a `respond` that throws; the CLI would retry a 5xx, calling `respond` again).
 * - `Fail`: the HTTP status with the API's error body `{"error":{code,message,status}}`.
 *
 * A `delay` (milliseconds) holds the answer back that long, as a slow model does; a client that
 * gives up first (an interrupted turn) gets nothing.
 *
 * @since 0.1.0
 * @category models
 */
export type Step =
  | {
    readonly _tag: "Text"
    readonly text: string
    readonly usage: StepUsage | undefined
    readonly delay?: number | undefined
  }
  | {
    readonly _tag: "FunctionCall"
    readonly name: string
    readonly args: unknown
    readonly text: string | undefined
    readonly usage: StepUsage | undefined
    readonly delay?: number | undefined
  }
  | { readonly _tag: "Fail"; readonly status: number; readonly message: string }

/**
 * Reply with `text`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const reply = (text: string, options?: { readonly usage?: StepUsage; readonly delay?: number }): Step => ({
  _tag: "Text",
  text,
  usage: options?.usage,
  ...(options?.delay === undefined ? {} : { delay: options.delay })
})

/**
 * Call tool `name` with `args` (see `Step` for how the name is resolved).
 *
 * @since 0.1.0
 * @category constructors
 */
export const callTool = (
  name: string,
  args: unknown,
  options?: { readonly text?: string; readonly usage?: StepUsage; readonly delay?: number }
): Step => ({
  _tag: "FunctionCall",
  name,
  args,
  text: options?.text,
  usage: options?.usage,
  ...(options?.delay === undefined ? {} : { delay: options.delay })
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
 * A request the server received, as it arrived.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecordedRequest {
  readonly method: string
  /** The request target, query string included. */
  readonly url: string
  /** Lower-cased header names. */
  readonly headers: { readonly [name: string]: string | ReadonlyArray<string> | undefined }
  readonly body: string
  /** The body parsed as JSON, `undefined` when empty or not JSON. */
  readonly json: unknown
  /** The step it was answered with (`undefined`: not a generate request, or the script was exhausted). */
  readonly step: Step | undefined
}

/**
 * A part of a Gemini content.
 *
 * @since 0.1.0
 * @category models
 */
export interface Part {
  readonly text?: string
  readonly thought?: boolean
  readonly functionCall?: { readonly name: string; readonly args?: unknown; readonly id?: string }
  readonly functionResponse?: { readonly name: string; readonly id?: string; readonly response?: unknown }
}

/**
 * The part of a `GenerateContentRequest` body the helpers look at, plus the model from the path.
 *
 * @since 0.1.0
 * @category models
 */
export interface GenerateRequest {
  /** The model named in the request path. */
  readonly model: string
  readonly contents: ReadonlyArray<{ readonly role: string; readonly parts: ReadonlyArray<Part> }>
  readonly systemInstruction?: { readonly parts?: ReadonlyArray<Part> }
  readonly tools?: ReadonlyArray<{ readonly functionDeclarations?: ReadonlyArray<{ readonly name: string }> }>
}

/**
 * Decides the reply from the request when the queued script is empty.
 *
 * @since 0.1.0
 * @category models
 */
export type Responder = (request: GenerateRequest) => Step

/**
 * The server's script: steps answered in order, then `respond` (or 400 when the script is
 * exhausted).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Steps answered in order, one per generate request. */
  readonly script?: ReadonlyArray<Step>
  /** Used once the script is exhausted; without it an exhausted script answers 400. */
  readonly respond?: Responder
}

/**
 * A running server.
 *
 * @since 0.1.0
 * @category models
 */
export interface GeminiServer {
  /** `http://127.0.0.1:<port>` (no `/v1beta`: what `GOOGLE_GEMINI_BASE_URL` expects). */
  readonly url: string
  readonly port: number
  /** Appends steps to the script. */
  readonly enqueue: (...steps: ReadonlyArray<Step>) => Effect.Effect<void>
  /** Every request so far, in arrival order. */
  readonly requests: Effect.Effect<ReadonlyArray<RecordedRequest>>
  /** The parsed generate requests so far (streaming and router requests). */
  readonly generations: Effect.Effect<ReadonlyArray<GenerateRequest>>
}

/**
 * The server could not listen.
 *
 * @since 0.1.0
 * @category errors
 */
export class GeminiServerError
  extends Schema.TaggedError<GeminiServerError>("@tether/testing/GeminiServerError")("GeminiServerError", {
    detail: Schema.String
  })
{
  override get message(): string {
    return `GeminiServer: ${this.detail}`
  }
}

/**
 * Starts a server on `127.0.0.1:0`; it stops (connections closed) when the scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (options?: Options) => Effect.Effect<GeminiServer, GeminiServerError, Scope.Scope> = internal.make

/**
 * The `functionResponse` parts of a request's last content, in order, with the text of their
 * `response.output` (or the JSON of the whole response when there is no string output).
 *
 * @since 0.1.0
 * @category helpers
 */
export const functionResponses: (
  request: GenerateRequest
) => ReadonlyArray<{ readonly name: string; readonly id: string | undefined; readonly output: string }> =
  internal.functionResponses

/**
 * The conversation: `[role, text]` per content, text parts joined (thoughts excluded).
 *
 * @since 0.1.0
 * @category helpers
 */
export const transcript: (request: GenerateRequest) => ReadonlyArray<readonly [role: string, text: string]> =
  internal.transcript

/**
 * The text of the request's `systemInstruction`.
 *
 * @since 0.1.0
 * @category helpers
 */
export const systemText: (request: GenerateRequest) => string = internal.systemText

/**
 * The names of the request's function declarations.
 *
 * @since 0.1.0
 * @category helpers
 */
export const declaredTools: (request: GenerateRequest) => ReadonlyArray<string> = internal.declaredTools

/**
 * A responder for the common tool round trip: when the last content carries function
 * responses answer `after(responses)`, else `first(request)`.
 *
 * @since 0.1.0
 * @category helpers
 */
export const roundTrip: (
  first: (request: GenerateRequest) => Step,
  after: (
    responses: ReadonlyArray<{ readonly name: string; readonly id: string | undefined; readonly output: string }>
  ) => Step
) => Responder = internal.roundTrip
