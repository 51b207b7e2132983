/**
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Http from "node:http"
import type * as Net from "node:net"
import type {
  ChatCompletionsServer,
  Options,
  OtherRequest,
  RecordedRequest,
  Script,
  Step,
  ToolCallSpec,
  ToolResult,
  UsageSpec
} from "../ChatCompletionsServer.js"
import { ChatCompletionsServerError } from "../ChatCompletionsServer.js"
import { lastToolResults, toolNames } from "./chatCompletionsInspect.js"
import {
  headersOf,
  listen,
  mcpToolsNamed,
  openAiErrorBody as errorBody,
  readBody,
  record,
  type Waits
} from "./scriptedHttp.js"

type Json = Record<string, unknown>
type Answer = Exclude<Step, { readonly _tag: "Fail" } | { readonly _tag: "Delayed" }>

/** @internal */
export const text = (
  text: string,
  options?: { readonly reasoning?: string | undefined; readonly usage?: UsageSpec | undefined }
): Step => ({ _tag: "Text", text, reasoning: options?.reasoning, usage: options?.usage })

/** @internal */
export const callTools = (
  calls: ReadonlyArray<ToolCallSpec>,
  options?: { readonly text?: string | undefined; readonly usage?: UsageSpec }
): Step => ({ _tag: "ToolCalls", calls, text: options?.text, usage: options?.usage })

/** @internal */
export const callTool = (
  name: string,
  input: unknown,
  options?: { readonly id?: string | undefined; readonly text?: string | undefined; readonly usage?: UsageSpec }
): Step => callTools([{ name, input, id: options?.id }], options)

/** @internal */
export const fail = (status: number, message?: string): Step => ({
  _tag: "Fail",
  status,
  message: message ?? `scripted failure ${status}`
})

/** @internal */
export const delayed = (millis: number, step: Step): Step => ({ _tag: "Delayed", millis, step })

/** @internal */
export const sequence = (...steps: ReadonlyArray<Step>): Script => (request) =>
  steps[request.index] ?? fail(500, `the script has no step for request ${request.index}`)

/** @internal */
export const roundTrip = (
  first: (request: RecordedRequest) => Step,
  after: (results: ReadonlyArray<ToolResult>, request: RecordedRequest) => Step
): Script =>
(request) => {
  const results = lastToolResults(request)
  return results.length > 0 ? after(results, request) : first(request)
}

const usageOf = (spec: UsageSpec | undefined): Json => {
  const prompt = spec?.promptTokens ?? 10
  const completion = spec?.completionTokens ?? 5
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: spec?.cachedTokens ?? 0 },
    completion_tokens_details: { reasoning_tokens: spec?.reasoningTokens ?? 0 }
  }
}

/** Splits text in about three pieces, as the API streams it, so deltas are exercised. */
const pieces = (text: string): Array<string> => {
  const size = Math.max(1, Math.ceil(text.length / 3))
  const out: Array<string> = []
  for (let at = 0; at < text.length; at += size) out.push(text.slice(at, at + size))
  return out
}

/** A scripted call whose name several offered tools match: answered 500 with its message. */
class AmbiguousName extends Error {}

/**
 * The tool a scripted call names: itself when a tool is named so or it has the `mcp__` prefix,
 * else the `mcp__<server>__<name>` with a single server segment (never a longer name ending in
 * it); several → `AmbiguousName`.
 */
const resolveName = (name: string, offered: ReadonlyArray<string>): string => {
  if (offered.includes(name) || name.startsWith("mcp__")) return name
  const matches = mcpToolsNamed(name, offered)
  if (matches.length > 1) {
    throw new AmbiguousName(`ChatCompletionsServer: the tool name ${name} is ambiguous: ${matches.join(", ")}`)
  }
  return matches[0] ?? name
}

interface Rendered {
  readonly deltas: ReadonlyArray<Json>
  readonly message: Json
  readonly finishReason: "stop" | "tool_calls"
}

/** The deltas of a streamed answer and the message of a whole one, from the same step. */
const render = (step: Answer, request: RecordedRequest): Rendered => {
  const deltas: Array<Json> = [{ role: "assistant", content: "" }]
  const message: Json = { role: "assistant", content: null }
  const reasoning = step._tag === "Text" ? step.reasoning : undefined
  if (reasoning !== undefined) {
    for (const piece of pieces(reasoning)) deltas.push({ reasoning_content: piece })
    message["reasoning_content"] = reasoning
  }
  const content = step.text
  if (content !== undefined && content.length > 0) {
    for (const piece of pieces(content)) deltas.push({ content: piece })
    message["content"] = content
  }
  if (step._tag === "Text") return { deltas, message, finishReason: "stop" }
  const offered = toolNames(request)
  const calls = step.calls.map((call, n) => ({
    id: call.id ?? `call_${request.index}_${n}`,
    type: "function",
    function: { name: resolveName(call.name, offered), arguments: JSON.stringify(call.input ?? {}) }
  }))
  calls.forEach((call, n) => {
    const args = call.function.arguments
    const half = Math.ceil(args.length / 2)
    deltas.push({
      tool_calls: [{ index: n, id: call.id, type: "function", function: { name: call.function.name, arguments: "" } }]
    })
    for (const piece of [args.slice(0, half), args.slice(half)]) {
      if (piece.length > 0) deltas.push({ tool_calls: [{ index: n, function: { arguments: piece } }] })
    }
  })
  message["tool_calls"] = calls
  return { deltas, message, finishReason: "tool_calls" }
}

const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

const completionPaths = new Set(["/v1/chat/completions", "/chat/completions"])
const modelPaths = new Set(["/v1/models", "/models"])

/** @internal */
export const make = (
  options?: Options
): Effect.Effect<ChatCompletionsServer, ChatCompletionsServerError, Scope.Scope> =>
  Effect.gen(function*() {
    const requests: Array<RecordedRequest> = []
    const others: Array<OtherRequest> = []
    let script: Script = options?.script ?? (() => text("ok"))
    const expectedAuth = options?.apiKey === undefined ? undefined : `Bearer ${Redacted.value(options.apiKey)}`

    const handle = async (req: Http.IncomingMessage, res: Http.ServerResponse, waits: Waits): Promise<void> => {
      const raw = await readBody(req)
      const path = (req.url ?? "/").split("?")[0] ?? "/"
      const method = req.method ?? "GET"
      if (method !== "POST" || !completionPaths.has(path)) {
        others.push({ method, path, headers: headersOf(req) })
        if (method === "GET" && modelPaths.has(path)) {
          const id = options?.model ?? "fake-model"
          res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
            object: "list",
            data: [{ id, object: "model", created: 0, owned_by: "tether-testing" }]
          }))
          return
        }
        res.writeHead(404, { "content-type": "application/json" }).end(errorBody(404, "not found"))
        return
      }
      const recorded: RecordedRequest = record(req, raw, requests.length, path)
      requests.push(recorded)
      if (expectedAuth !== undefined && req.headers.authorization !== expectedAuth) {
        res.writeHead(401, { "content-type": "application/json" }).end(errorBody(401, "Incorrect API key provided"))
        return
      }
      let step: Step
      try {
        step = script(recorded)
      } catch (error) {
        step = fail(500, `the script failed: ${String(error)}`)
      }
      while (step._tag === "Delayed") {
        if (res.destroyed) return
        await waits.wait(step.millis, res)
        step = step.step
      }
      if (res.destroyed) return
      if (step._tag === "Fail") {
        res.writeHead(step.status, { "content-type": "application/json" }).end(
          errorBody(step.status, step.message, { rateLimitCode: true })
        )
        return
      }
      const body = isRecord(recorded.body) ? recorded.body : {}
      const model = options?.model ?? (typeof body["model"] === "string" ? body["model"] : "fake-model")
      const base = { id: `chatcmpl-${recorded.index}`, created: Math.floor(Date.now() / 1000), model }
      let rendered: Rendered
      try {
        rendered = render(step, recorded)
      } catch (error) {
        if (!(error instanceof AmbiguousName)) throw error
        res.writeHead(500, { "content-type": "application/json" }).end(errorBody(500, error.message))
        return
      }
      const usage = usageOf(step.usage)
      if (body["stream"] !== true) {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
          ...base,
          object: "chat.completion",
          choices: [{ index: 0, message: rendered.message, logprobs: null, finish_reason: rendered.finishReason }],
          usage
        }))
        return
      }
      const streamOptions = isRecord(body["stream_options"]) ? body["stream_options"] : {}
      const includeUsage = streamOptions["include_usage"] === true
      const chunk = (choices: ReadonlyArray<Json>, extra: Json = {}) =>
        `data: ${
          JSON.stringify({
            ...base,
            object: "chat.completion.chunk",
            choices,
            ...(includeUsage ? { usage: null } : {}),
            ...extra
          })
        }\n\n`
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" })
      for (const delta of rendered.deltas) {
        res.write(chunk([{ index: 0, delta, logprobs: null, finish_reason: null }]))
      }
      res.write(chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: rendered.finishReason }]))
      if (includeUsage) res.write(chunk([], { usage }))
      res.end("data: [DONE]\n\n")
    }

    const server = yield* listen(handle, (detail) => new ChatCompletionsServerError({ detail }))
    const port = (server.address() as Net.AddressInfo).port
    return {
      port,
      baseUrl: `http://127.0.0.1:${port}/v1`,
      requests: Effect.sync(() => requests.slice()),
      otherRequests: Effect.sync(() => others.slice()),
      setScript: (next: Script) =>
        Effect.sync(() => {
          script = next
        })
    }
  })
