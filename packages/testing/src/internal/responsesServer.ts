/**
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Http from "node:http"
import type * as Net from "node:net"
import type {
  OtherRequest,
  RecordedRequest,
  ResponsesServer,
  ResponsesServerOptions,
  Script,
  Step,
  UsageSpec
} from "../ResponsesServer.js"
import { ResponsesServerError } from "../ResponsesServer.js"
import { headersOf, listen, openAiErrorBody as errorBody, readBody, record, type Waits } from "./scriptedHttp.js"

/** @internal */
export const text = (
  text: string,
  options?: { readonly usage?: UsageSpec | undefined; readonly reasoning?: string | undefined }
): Step => ({
  _tag: "Text",
  text,
  reasoning: options?.reasoning,
  usage: options?.usage
})

/** @internal */
export const items = (
  items: ReadonlyArray<{ readonly [key: string]: unknown }>,
  options?: { readonly usage?: UsageSpec | undefined }
): Step => ({
  _tag: "Items",
  items,
  usage: options?.usage
})

/** @internal */
export const callTool = (options: {
  readonly name: string
  readonly namespace?: string | undefined
  readonly input: unknown
  readonly callId?: string | undefined
  readonly usage?: UsageSpec | undefined
}): Step => ({
  _tag: "ToolCall",
  name: options.name,
  namespace: options.namespace,
  input: options.input,
  callId: options.callId,
  usage: options.usage
})

/** @internal */
export const mcpTool = (server: string, tool: string, input: unknown, callId?: string): Step =>
  callTool({ namespace: `mcp__${server}`, name: tool, input, callId })

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

const usageOf = (spec: UsageSpec | undefined) => {
  const input = spec?.inputTokens ?? 10
  const output = spec?.outputTokens ?? 5
  const cached = spec?.cachedInputTokens ?? 0
  const reasoning = spec?.reasoningTokens ?? 0
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: reasoning },
    total_tokens: input + output
  }
}

/** Splits text in about three chunks, as the API streams it, so deltas are exercised. */
const chunks = (text: string): Array<string> => {
  const size = Math.max(1, Math.ceil(text.length / 3))
  const out: Array<string> = []
  for (let at = 0; at < text.length; at += size) out.push(text.slice(at, at + size))
  return out
}

const inProgress = (item: Record<string, unknown>): Record<string, unknown> => {
  switch (item["type"]) {
    case "message":
      return { ...item, status: "in_progress", content: [] }
    case "function_call":
      return { ...item, status: "in_progress", arguments: "" }
    case "reasoning":
      return { ...item, summary: [] }
    default:
      return { ...item, status: "in_progress" }
  }
}

/** Renders one scripted step as the SSE events of a streamed Responses API answer. */
const renderEvents = (
  step: Exclude<Step, { readonly _tag: "Fail" } | { readonly _tag: "Delayed" }>,
  responseId: string,
  model: string,
  callIndex: number
): Array<Record<string, unknown>> => {
  const createdAt = Math.floor(Date.now() / 1000)
  const base = { id: responseId, object: "response", created_at: createdAt, model }
  const events: Array<Record<string, unknown>> = [
    { type: "response.created", response: { ...base, status: "in_progress", output: [] } },
    { type: "response.in_progress", response: { ...base, status: "in_progress", output: [] } }
  ]
  const output: Array<Record<string, unknown>> = []
  const emit = (item: Record<string, unknown>, streamed: (index: number) => Array<Record<string, unknown>>) => {
    const index = output.length
    output.push(item)
    events.push(
      { type: "response.output_item.added", output_index: index, item: inProgress(item) },
      ...streamed(index),
      { type: "response.output_item.done", output_index: index, item }
    )
  }
  if (step._tag === "Items") {
    for (const item of step.items) emit({ ...item }, () => [])
  } else if (step._tag === "Text") {
    if (step.reasoning !== undefined) {
      const itemId = `rs_${responseId}`
      const part = { type: "summary_text", text: step.reasoning }
      emit({ id: itemId, type: "reasoning", summary: [part] }, (index) => [
        {
          type: "response.reasoning_summary_part.added",
          item_id: itemId,
          output_index: index,
          summary_index: 0,
          part: { ...part, text: "" }
        },
        ...chunks(step.reasoning ?? "").map((delta) => ({
          type: "response.reasoning_summary_text.delta",
          item_id: itemId,
          output_index: index,
          summary_index: 0,
          delta
        })),
        {
          type: "response.reasoning_summary_text.done",
          item_id: itemId,
          output_index: index,
          summary_index: 0,
          text: step.reasoning
        },
        { type: "response.reasoning_summary_part.done", item_id: itemId, output_index: index, summary_index: 0, part }
      ])
    }
    const itemId = `msg_${responseId}`
    const part = { type: "output_text", text: step.text, annotations: [] }
    emit({ id: itemId, type: "message", status: "completed", role: "assistant", content: [part] }, (index) => [
      {
        type: "response.content_part.added",
        item_id: itemId,
        output_index: index,
        content_index: 0,
        part: { ...part, text: "" }
      },
      ...chunks(step.text).map((delta) => ({
        type: "response.output_text.delta",
        item_id: itemId,
        output_index: index,
        content_index: 0,
        delta
      })),
      { type: "response.output_text.done", item_id: itemId, output_index: index, content_index: 0, text: step.text },
      { type: "response.content_part.done", item_id: itemId, output_index: index, content_index: 0, part }
    ])
  } else {
    const itemId = `fc_${responseId}`
    const args = JSON.stringify(step.input)
    emit({
      id: itemId,
      type: "function_call",
      status: "completed",
      call_id: step.callId ?? `call_${callIndex}`,
      name: step.name,
      ...(step.namespace === undefined ? {} : { namespace: step.namespace }),
      arguments: args
    }, (index) => [
      { type: "response.function_call_arguments.delta", item_id: itemId, output_index: index, delta: args },
      { type: "response.function_call_arguments.done", item_id: itemId, output_index: index, arguments: args }
    ])
  }
  events.push({
    type: "response.completed",
    response: { ...base, status: "completed", output, usage: usageOf(step.usage) }
  })
  return events.map((event, index) => ({ ...event, sequence_number: index }))
}

/** @internal */
export const make = (
  options?: ResponsesServerOptions
): Effect.Effect<ResponsesServer, ResponsesServerError, Scope.Scope> =>
  Effect.gen(function*() {
    const requests: Array<RecordedRequest> = []
    const others: Array<OtherRequest> = []
    let script: Script = options?.script ?? (() => text("ok"))
    const model = options?.model ?? "fake-model"
    const expectedAuth = options?.apiKey === undefined ? undefined : `Bearer ${Redacted.value(options.apiKey)}`

    const handle = async (req: Http.IncomingMessage, res: Http.ServerResponse, waits: Waits): Promise<void> => {
      const raw = await readBody(req)
      const path = (req.url ?? "/").split("?")[0] ?? "/"
      if (req.method !== "POST" || path !== "/v1/responses") {
        others.push({ method: req.method ?? "GET", path, headers: headersOf(req) })
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
        const { millis, step: next } = step
        await waits.wait(millis, res)
        step = next
      }
      if (res.destroyed) return
      if (step._tag === "Fail") {
        res.writeHead(step.status, { "content-type": "application/json" }).end(errorBody(step.status, step.message))
        return
      }
      const events = renderEvents(step, `resp_${recorded.index}`, model, recorded.index)
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" })
      for (const event of events) res.write(`event: ${String(event["type"])}\ndata: ${JSON.stringify(event)}\n\n`)
      res.end()
    }

    const server = yield* listen(handle, (detail) => new ResponsesServerError({ detail }))
    const port = (server.address() as Net.AddressInfo).port
    return {
      port,
      baseUrl: `http://127.0.0.1:${port}/v1`,
      model,
      requests: Effect.sync(() => requests.slice()),
      otherRequests: Effect.sync(() => others.slice()),
      setScript: (next: Script) =>
        Effect.sync(() => {
          script = next
        })
    }
  })
