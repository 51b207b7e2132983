/**
 * Reading what Codex sent: the input items, tool outputs, messages and offered tools of a
 * recorded `POST /v1/responses` request.
 *
 * @internal
 */
import type { FunctionCallOutput, RecordedRequest } from "../ResponsesServer.js"

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** @internal */
export const inputItems = (request: RecordedRequest): ReadonlyArray<Record<string, unknown>> => {
  const input = isRecord(request.body) ? request.body["input"] : undefined
  return Array.isArray(input) ? input.filter(isRecord) : []
}

const outputText = (output: unknown): string => {
  if (typeof output === "string") return output
  if (Array.isArray(output)) {
    return output.map((part) => isRecord(part) && typeof part["text"] === "string" ? part["text"] : "").join("\n")
  }
  return ""
}

/** @internal */
export const functionCallOutputs = (request: RecordedRequest): ReadonlyArray<FunctionCallOutput> =>
  inputItems(request).flatMap((item) =>
    item["type"] === "function_call_output" && typeof item["call_id"] === "string"
      ? [{ callId: item["call_id"], output: item["output"], text: outputText(item["output"]) }]
      : []
  )

/** @internal */
export const lastFunctionCallOutput = (request: RecordedRequest): FunctionCallOutput | undefined => {
  const items = inputItems(request)
  const last = items[items.length - 1]
  if (last === undefined || last["type"] !== "function_call_output" || typeof last["call_id"] !== "string") {
    return undefined
  }
  return { callId: last["call_id"], output: last["output"], text: outputText(last["output"]) }
}

const messageTexts = (request: RecordedRequest, role: string): ReadonlyArray<string> =>
  inputItems(request).flatMap((item) => {
    if (item["type"] !== "message" || item["role"] !== role) return []
    const content = item["content"]
    if (typeof content === "string") return [content]
    if (!Array.isArray(content)) return []
    return content.flatMap((part) => isRecord(part) && typeof part["text"] === "string" ? [part["text"]] : [])
  })

/** @internal */
export const userTexts = (request: RecordedRequest): ReadonlyArray<string> => messageTexts(request, "user")

/** @internal */
export const assistantTexts = (request: RecordedRequest): ReadonlyArray<string> => messageTexts(request, "assistant")

/** @internal */
export const namespaceTools = (request: RecordedRequest): { readonly [namespace: string]: ReadonlyArray<string> } => {
  const tools = isRecord(request.body) ? request.body["tools"] : undefined
  const out: Record<string, ReadonlyArray<string>> = {}
  if (!Array.isArray(tools)) return out
  for (const tool of tools) {
    if (!isRecord(tool) || tool["type"] !== "namespace" || typeof tool["name"] !== "string") continue
    const inner = Array.isArray(tool["tools"]) ? tool["tools"] : []
    out[tool["name"]] = inner.flatMap((t) => isRecord(t) && typeof t["name"] === "string" ? [t["name"]] : [])
  }
  return out
}
