/**
 * A Tether run's events as @effect/ai response parts (encoded, as a provider returns them).
 *
 * @internal
 */
import type * as Response from "@effect/ai/Response"
import type * as Event from "@tether/core/Event"
import type * as Result from "@tether/core/Result"
import * as Either from "effect/Either"
import * as JSONSchema from "effect/JSONSchema"
import * as Schema from "effect/Schema"
import type * as AST from "effect/SchemaAST"

/** What the mapping knows about one tool of the call's @effect/ai toolkit. @internal */
export interface ToolInfo {
  /** The tool's output is sent as `{ result: value }` (its encoded side is not a JSON object). */
  readonly wrapped: boolean
  /** `true` for an encoded result of the tool's `success` Schema. */
  readonly isEncodedSuccess: (u: unknown) => boolean
  /**
   * The tool's `success` is `Schema.Void` or `Schema.Undefined`: sent as `null` (JSON has no
   * `undefined`), and handed to @effect/ai as `undefined`, which both decode.
   */
  readonly nothing: boolean
  /** `true` for params the tool's `parameters` Schema decodes as the gateway decodes a call's input. */
  readonly acceptsParams: (u: unknown) => boolean
}

// Tether sends an output whose JSON Schema is not an object inside a `result` envelope; the
// rule is the tool catalog's, applied to the same inferred schema.
const isObjectOutput = (ast: AST.AST): boolean => {
  if (ast._tag === "TypeLiteral" && ast.propertySignatures.length === 0 && ast.indexSignatures.length === 0) {
    return true
  }
  try {
    const schema = JSONSchema.fromAST(ast, {
      definitions: {},
      target: "jsonSchema2020-12",
      topLevelReferenceStrategy: "skip"
    }) as { readonly type?: unknown }
    return schema.type === "object"
  } catch {
    return false
  }
}

// The gateway's options for decoding a call's input (`@tether/tool`'s executor): excess keys
// are an error there, so params with one were refused (`invalid_input`), never handled.
const gatewayInput: AST.ParseOptions = { onExcessProperty: "error", errors: "first" }

/** @internal */
export const toolInfo = (
  output: Schema.Schema.Any,
  parameters: Schema.Schema.Any,
  success: Schema.Schema.Any
): ToolInfo => {
  const decodeParams = Schema.decodeUnknownEither(parameters as Schema.Schema.AnyNoContext, gatewayInput)
  return {
    wrapped: !isObjectOutput(output.ast),
    isEncodedSuccess: Schema.is(Schema.encodedSchema(output as Schema.Schema.AnyNoContext)),
    nothing: success.ast._tag === "VoidKeyword" || success.ast._tag === "UndefinedKeyword",
    acceptsParams: (u) => Either.isRight(decodeParams(u))
  }
}

/** A tool call of the toolkit that did not produce a result part. @internal */
export interface FailedToolCall {
  readonly id: string
  readonly name: string
  /** What the CLI reported as the call's output (the message the model saw). */
  readonly output: unknown
  /** The params the model sent, when the tool's `parameters` Schema does not accept them (no `tool-call` part). */
  readonly input?: unknown
}

/** @internal */
export interface State {
  readonly tools: ReadonlyMap<string, ToolInfo>
  text: string | undefined
  reasoning: string | undefined
  /** The text the deltas streamed since the last assistant `Message` (whose text it begins). */
  streamed: string
  blocks: number
  /** Calls started and not ended: their tool's name, and the params when no `tool-call` part went out. */
  readonly calls: Map<string, { readonly name: string; readonly rejected?: { readonly input: unknown } }>
  readonly failed: Array<FailedToolCall>
}

/** @internal */
export const initial = (tools: ReadonlyMap<string, ToolInfo>): State => ({
  tools,
  text: undefined,
  reasoning: undefined,
  streamed: "",
  blocks: 0,
  calls: new Map(),
  failed: []
})

const closeText = (state: State, out: Array<Response.StreamPartEncoded>): void => {
  if (state.text !== undefined) out.push({ type: "text-end", id: state.text })
  state.text = undefined
}

const closeReasoning = (state: State, out: Array<Response.StreamPartEncoded>): void => {
  if (state.reasoning !== undefined) out.push({ type: "reasoning-end", id: state.reasoning })
  state.reasoning = undefined
}

const openText = (state: State, runId: string, out: Array<Response.StreamPartEncoded>): string => {
  closeReasoning(state, out)
  if (state.text === undefined) {
    state.text = `${runId}/${state.blocks++}`
    out.push({ type: "text-start", id: state.text })
  }
  return state.text
}

const openReasoning = (state: State, runId: string, out: Array<Response.StreamPartEncoded>): string => {
  closeText(state, out)
  if (state.reasoning === undefined) {
    state.reasoning = `${runId}/${state.blocks++}`
    out.push({ type: "reasoning-start", id: state.reasoning })
  }
  return state.reasoning
}

// CLIs report a tool's output as its structured content or as the text the model read.
const encodedOutput = (output: unknown, info: ToolInfo): Either.Either<unknown, undefined> => {
  let value = output
  if (typeof value === "string") {
    try {
      value = JSON.parse(value)
    } catch {
      return Either.left(undefined)
    }
  }
  if (info.wrapped) {
    if (typeof value !== "object" || value === null || !("result" in value)) return Either.left(undefined)
    value = (value as { readonly result: unknown }).result
  }
  if (info.nothing) return value === null ? Either.right(undefined) : Either.left(undefined)
  return info.isEncodedSuccess(value) ? Either.right(value) : Either.left(undefined)
}

const usageOf = (usage: Result.Usage | undefined): Response.FinishPartEncoded["usage"] => {
  const input = usage?.inputTokens
  const output = usage?.outputTokens
  return {
    inputTokens: input,
    outputTokens: output,
    totalTokens: input !== undefined && output !== undefined ? input + output : undefined,
    ...(usage?.reasoningTokens !== undefined ? { reasoningTokens: usage.reasoningTokens } : {}),
    ...(usage?.cachedInputTokens !== undefined ? { cachedInputTokens: usage.cachedInputTokens } : {})
  }
}

/**
 * The parts one event maps to. Text and reasoning deltas open a block that the next other
 * part closes; an assistant `Message` adds what its deltas did not stream (all of it when none
 * did: a text block that reasoning closed early is not sent again), then closes the block. A
 * toolkit tool's call is a provider-executed `tool-call`; its successful end a `tool-result`
 * with the encoded output; a failed call gets no result part and is listed under
 * `metadata.tether.failedToolCalls` of the finish part. Calls of other
 * tools (the agent's own, the CLI's built-ins) are not parts: @effect/ai decodes only the
 * toolkit's. `RunFinished` with a success is the `finish` part with the run's usage; any
 * other ending produces nothing (the stream fails or is interrupted).
 *
 * @internal
 */
export const step = (state: State, event: Event.Event): Array<Response.StreamPartEncoded> => {
  const out: Array<Response.StreamPartEncoded> = []
  switch (event._tag) {
    case "RunStarted": {
      state.streamed = ""
      out.push({
        type: "response-metadata",
        id: event.runId,
        ...(event.model !== undefined ? { modelId: event.model } : {}),
        timestamp: new Date(event.time).toISOString()
      })
      break
    }
    case "TextDelta": {
      if (event.text.length > 0) {
        state.streamed += event.text
        out.push({ type: "text-delta", id: openText(state, event.runId, out), delta: event.text })
      }
      break
    }
    case "ReasoningDelta": {
      if (event.text.length > 0) {
        out.push({ type: "reasoning-delta", id: openReasoning(state, event.runId, out), delta: event.text })
      }
      break
    }
    case "Message": {
      if (event.role !== "assistant") break
      // Deltas that do not begin it (some were dropped under the agent's event policy) are left
      // as they streamed.
      const rest = state.streamed === ""
        ? event.text
        : event.text.startsWith(state.streamed)
        ? event.text.slice(state.streamed.length)
        : ""
      state.streamed = ""
      if (rest.length > 0) out.push({ type: "text-delta", id: openText(state, event.runId, out), delta: rest })
      closeText(state, out)
      break
    }
    case "ToolCall": {
      const info = event.source === "host" ? state.tools.get(event.name) : undefined
      if (info === undefined) break
      closeText(state, out)
      closeReasoning(state, out)
      if (event.phase === "start") {
        const params = event.input ?? {}
        // Params the tool's Schema does not accept (the gateway refused the call, invalid_input):
        // a `tool-call` part of them would fail @effect/ai's decoding of the whole response.
        if (!info.acceptsParams(params)) {
          state.calls.set(event.callId, { name: event.name, rejected: { input: params } })
          break
        }
        state.calls.set(event.callId, { name: event.name })
        out.push({ type: "tool-call", id: event.callId, name: event.name, params, providerExecuted: true })
        break
      }
      const started = state.calls.get(event.callId)
      if (started === undefined) break
      state.calls.delete(event.callId)
      if (started.rejected !== undefined) {
        state.failed.push({ id: event.callId, name: event.name, output: event.output, input: started.rejected.input })
        break
      }
      const encoded = event.isError === true ? Either.left(undefined) : encodedOutput(event.output, info)
      if (Either.isRight(encoded)) {
        out.push({
          type: "tool-result",
          id: event.callId,
          name: event.name,
          result: encoded.right,
          isFailure: false,
          providerExecuted: true
        })
      } else {
        state.failed.push({ id: event.callId, name: event.name, output: event.output })
      }
      break
    }
    case "RunFinished": {
      closeText(state, out)
      closeReasoning(state, out)
      if (event.outcome !== "success") break
      const result = event.result
      out.push({
        type: "finish",
        reason: "stop",
        usage: usageOf(result.usage),
        metadata: {
          tether: {
            runId: result.runId,
            provider: result.provider,
            model: result.model,
            session: result.session,
            failedToolCalls: [...state.failed]
          }
        }
      })
      break
    }
    default:
      break
  }
  return out
}

/**
 * The non-streaming parts of a streamed response: each text or reasoning block joined into one
 * part, every other part as it came.
 *
 * @internal
 */
export const collect = (parts: Iterable<Response.StreamPartEncoded>): Array<Response.PartEncoded> => {
  const out: Array<Response.PartEncoded> = []
  const open = new Map<string, { readonly index: number; readonly texts: Array<string> }>()
  for (const part of parts) {
    switch (part.type) {
      case "text-start":
      case "reasoning-start": {
        open.set(part.id, { index: out.length, texts: [] })
        out.push({ type: part.type === "text-start" ? "text" : "reasoning", text: "" })
        break
      }
      case "text-delta":
      case "reasoning-delta": {
        open.get(part.id)?.texts.push(part.delta)
        break
      }
      case "text-end":
      case "reasoning-end": {
        const block = open.get(part.id)
        if (block !== undefined) {
          const done = out[block.index] as { readonly type: "text" | "reasoning" }
          out[block.index] = { type: done.type, text: block.texts.join("") }
          open.delete(part.id)
        }
        break
      }
      case "response-metadata":
      case "tool-call":
      case "tool-result":
      case "finish":
        out.push(part)
        break
      default:
        break
    }
  }
  return out
}
