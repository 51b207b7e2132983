/**
 * The `LanguageModel` provider: each call builds one agent from the layer's options plus the
 * call's toolkit, runs one turn and maps its events to response parts.
 *
 * @internal
 */
import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Response from "@effect/ai/Response"
import type * as AiTool from "@effect/ai/Tool"
import * as Agent from "@tether/core/Agent"
import type * as Event from "@tether/core/Event"
import * as StructuredOutput from "@tether/core/StructuredOutput"
import * as Unstable from "@tether/core/Unstable"
import type * as Tool from "@tether/tool/Tool"
import * as Toolkit from "@tether/tool/Toolkit"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { Options } from "../TetherLanguageModel.js"
import { UnsupportedRequest } from "../TetherLanguageModel.js"
import * as AiToolkit from "./aiToolkit.js"
import * as Parts from "./parts.js"
import * as Prompt from "./prompt.js"

/** @internal */
export const LanguageModelTag = LanguageModel.LanguageModel

type Method = "generateText" | "streamText" | "generateObject"

const moduleName = "TetherLanguageModel"

// Failures the request itself causes are `MalformedInput`; a run that fails is `UnknownError`.
const requestErrors: ReadonlySet<string> = new Set([
  "UnsupportedRequest",
  "ToolDefinitionError",
  "AgentConfigError",
  "UnsupportedCapability",
  "InvalidTurn"
])

const malformedOutput = (method: Method, error: StructuredOutput.StructuredOutputError): AiError.AiError =>
  new AiError.MalformedOutput({ module: moduleName, method, description: error.message, cause: error })

const toAiError = (method: Method) => (error: unknown): AiError.AiError => {
  if (AiError.isAiError(error)) return error
  if (error instanceof StructuredOutput.StructuredOutputError) return malformedOutput(method, error)
  const tag = typeof error === "object" && error !== null ? (error as { readonly _tag?: unknown })._tag : undefined
  const description = error instanceof Error ? error.message : String(error)
  const fields = { module: moduleName, method, description, cause: error }
  return typeof tag === "string" && requestErrors.has(tag)
    ? new AiError.MalformedInput(fields)
    : new AiError.UnknownError(fields)
}

/**
 * The parts of a `generateObject` turn (`streamAs`): the events' parts without their text (the
 * answer's prose, or the JSON before Tether validated it) and without the finish part of an
 * attempt that a repair turn followed; then the decoded value, encoded again, as the one text
 * block @effect/ai decodes with the same Schema, and the last attempt's finish part.
 */
const objectParts = <A, I>(state: Parts.State, schema: Schema.Schema<A, I>) => {
  let finish: ReadonlyArray<Response.StreamPartEncoded> = []
  return (
    item: Event.Event | StructuredOutput.Decoded<A>
  ): Effect.Effect<Array<Response.StreamPartEncoded>, AiError.MalformedOutput> => {
    if (item._tag === "Decoded") {
      const id = `${item.result.runId}/object`
      // A Schema may decode only (a one-way transformation: @effect/ai itself never encodes what
      // a model generated); its value then cannot be handed over as text.
      const encoded = Effect.mapError(Schema.encode(schema)(item.value), (error) =>
        new AiError.MalformedOutput({
          module: moduleName,
          method: "generateObject",
          description:
            `the decoded value does not encode with the Schema, to be handed to @effect/ai: ${error.message}`,
          cause: error
        }))
      // An encoded side the Schema does not check (`Unknown`) may hold what JSON has no text for
      // (a bigint throws, `undefined` gives none).
      const text = Effect.flatMap(encoded, (value) =>
        Effect.try({
          try: () => {
            const json: unknown = JSON.stringify(value)
            if (typeof json !== "string") throw new TypeError("the encoded value has no JSON text")
            return json
          },
          catch: (cause) =>
            new AiError.MalformedOutput({
              module: moduleName,
              method: "generateObject",
              description: `the decoded value encodes to no JSON, to be handed to @effect/ai: ${
                cause instanceof Error ? cause.message : String(cause)
              }`,
              cause
            })
        }))
      return Effect.map(text, (json) => [
        { type: "text-start", id },
        { type: "text-delta", id, delta: json },
        { type: "text-end", id },
        ...finish
      ])
    }
    const parts = Parts.step(state, item).filter((part) => !part.type.startsWith("text-"))
    if (item._tag === "RunFinished") finish = parts.filter((part) => part.type === "finish")
    return Effect.succeed(parts.filter((part) => part.type !== "finish"))
  }
}

/** The call's toolkit as the tool choice allows it. */
const callToolkit = (
  options: LanguageModel.ProviderOptions
): Either.Either<AiToolkit.AiToolkitLike | undefined, UnsupportedRequest> => {
  const choice = options.toolChoice
  if (choice === "none" || options.tools.length === 0) return Either.right(undefined)
  if (choice === "required" || (typeof choice === "object" && ("tool" in choice || choice.mode === "required"))) {
    return Either.left(
      new UnsupportedRequest({
        reason: "ToolChoice",
        detail: "a coding-agent CLI decides on its own whether to call a tool; use \"auto\", \"none\" or { oneOf }"
      })
    )
  }
  const tools: Record<string, AiTool.Any> = {}
  for (const tool of options.tools) tools[tool.name] = tool
  return Either.right({ tools })
}

const toolInfos = (toolkit: AiToolkit.AiToolkitLike | undefined): ReadonlyMap<string, Parts.ToolInfo> =>
  new Map(
    Object.values(toolkit?.tools ?? {}).map((tool) => {
      const adapted = AiToolkit.adapt(tool) as Tool.Any
      return [adapted.name, Parts.toolInfo(adapted.outputSchema, tool.parametersSchema, tool.successSchema)] as const
    })
  )

/** @internal */
export const make = (options: Options<Toolkit.Any>) =>
  Effect.gen(function*() {
    const { definition, ...agentOptions } = options
    const ownTools = definition?.tools ?? Toolkit.empty
    yield* Toolkit.catalog(ownTools)
    // The services every call's agent needs, as this model was built with them (not the
    // layer's scope: each call's agent lives in the call's own scope).
    const services = Context.omit(Scope.Scope)(yield* Effect.context<never>()) as Context.Context<never>

    const stream = (
      method: Method,
      providerOptions: LanguageModel.ProviderOptions
    ): Stream.Stream<Response.StreamPartEncoded, AiError.AiError> =>
      Stream.unwrapScoped(
        Effect.gen(function*() {
          // Typed out (`Options.approvals` needs a handler); a caller past the types is told here.
          if (agentOptions.approvals !== undefined && agentOptions.approvals.handler === undefined) {
            return yield* new UnsupportedRequest({
              reason: "Approvals",
              detail: "approvals without a handler wait for agent.approve, which a LanguageModel call cannot " +
                "reach: give approvals a handler"
            })
          }
          const toolkit = yield* callToolkit(providerOptions)
          const rendered = yield* Prompt.render(providerOptions.prompt)
          const tools = yield* AiToolkit.merge([
            { toolkit: ownTools, owner: "the agent definition's tools" },
            ...(toolkit === undefined ? [] : [{ toolkit, owner: `the toolkit passed to ${method}` }])
          ])
          // The toolkit's handler services are in the caller's context, as @effect/ai's own
          // tool call resolution expects them.
          const handlers = toolkit === undefined
            ? Context.empty()
            : yield* AiToolkit.handlerContext(toolkit, yield* Effect.context<never>())
          const instructions = [definition?.instructions ?? "", ...rendered.system]
            .filter((text) => text.length > 0)
            .join("\n\n")
          const agent = yield* (Agent.make({
            ...agentOptions,
            definition: { instructions, skills: definition?.skills ?? [], mcp: definition?.mcp ?? [], tools },
            events: { blocking: true }
          }) as Effect.Effect<Agent.Agent, unknown, Scope.Scope>).pipe(
            Effect.provide(Context.merge(services, handlers))
          )
          const state = Parts.initial(toolInfos(toolkit))
          const format = providerOptions.responseFormat
          if (format.type === "json") {
            // @effect/ai's schema may carry requirements; Tether decodes without any (as for tools).
            const schema = format.schema as Schema.Schema<unknown, unknown>
            return agent.streamAs(schema, rendered.input).pipe(
              Stream.mapEffect(objectParts(state, schema)),
              Stream.flattenIterables
            )
          }
          return agent.stream(rendered.input).pipe(Stream.mapConcat((event) => Parts.step(state, event)))
        })
      ).pipe(Stream.mapError(toAiError(method)))

    return yield* LanguageModel.make({
      generateText: (providerOptions) =>
        stream(providerOptions.responseFormat.type === "json" ? "generateObject" : "generateText", providerOptions)
          .pipe(
            Stream.runCollect,
            Effect.map((parts) => Parts.collect(Chunk.toReadonlyArray(parts)))
          ),
      streamText: (providerOptions) => stream("streamText", providerOptions)
    })
  }).pipe(Unstable.withSpan("TetherLanguageModel.make"))
