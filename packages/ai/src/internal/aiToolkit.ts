/**
 * @effect/ai tools seen as Tether tools: the definition mapping (schemas, hints, title,
 * revision), the handlers that run the @effect/ai handler services, and the merge that names
 * both owners of a clashing name.
 *
 * @internal
 */
import * as AiTool from "@effect/ai/Tool"
import * as Tool from "@tether/tool/Tool"
import * as Toolkit from "@tether/tool/Toolkit"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as AST from "effect/SchemaAST"
import { Revision } from "../AiToolkit.js"

/** A tool's explicit failure → rejection mapping (see `rejectFailure`). @internal */
export type RejectionMapping = (failure: unknown) => Effect.Effect<never, Tool.Rejection>

/** @internal */
export class Rejection extends Context.Tag("@tether/ai/AiToolkit/Rejection")<Rejection, RejectionMapping>() {}

/** The @effect/ai toolkit shape this module reads (its `tools` record). @internal */
export interface AiToolkitLike {
  readonly tools: Readonly<Record<string, AiTool.Any>>
}

const aiToolTypeId = "~@effect/ai/Tool"

// @effect/ai declares a toolkit type id but does not set it at run time: a toolkit is
// recognised by its `tools` record of @effect/ai tools (a Tether toolkit is never one).
/** @internal */
export const isAiToolkit = (u: unknown): u is AiToolkitLike => {
  if ((typeof u !== "object" && typeof u !== "function") || u === null || Toolkit.isToolkit(u)) return false
  const tools = (u as { readonly tools?: unknown }).tools
  return Predicate.isRecord(tools) && Object.values(tools).every((tool) => Predicate.hasProperty(tool, aiToolTypeId))
}

const isEmptyParams = (schema: AiTool.AnyParametersSchema): boolean => {
  if (schema === AiTool.EmptyParams) return true
  const ast = schema.ast
  if (!AST.isTypeLiteral(ast) || ast.propertySignatures.length !== 0 || ast.indexSignatures.length !== 1) return false
  const [signature] = ast.indexSignatures
  return AST.isStringKeyword(signature!.parameter) && AST.isNeverKeyword(signature!.type)
}

// @effect/ai's default success is `Schema.Void`, whose encoded `undefined` is not JSON: it is
// published and sent as `null` (`{ "result": null }`), which is what "nothing" is in JSON.
const VoidAsNull = Schema.transform(Schema.Null, Schema.Void, {
  strict: true,
  decode: () => undefined,
  encode: () => null
})

const outputOf = (schema: Schema.Schema.Any): Schema.Schema.AnyNoContext => {
  const tag = schema.ast._tag
  return (tag === "VoidKeyword" || tag === "UndefinedKeyword" ? VoidAsNull : schema) as Schema.Schema.AnyNoContext
}

const hints = [
  ["readOnly", AiTool.Readonly],
  ["destructive", AiTool.Destructive],
  ["idempotent", AiTool.Idempotent],
  ["openWorld", AiTool.OpenWorld]
] as const

// @effect/ai's hints are references with defaults (destructive and open-world default to true);
// only the ones the tool sets explicitly are carried over, so "unspecified" stays unspecified.
const annotationsOf = (tool: AiTool.Any): Tool.Annotations => {
  const out: { -readonly [K in keyof Tool.Annotations]: boolean } = {}
  for (const [key, reference] of hints) {
    if (tool.annotations.unsafeMap.has(reference.key)) out[key] = tool.annotations.unsafeMap.get(reference.key)
  }
  return out
}

const explicit = <I, S>(tool: AiTool.Any, tag: Context.Tag<I, S>): S | undefined =>
  tool.annotations.unsafeMap.has(tag.key) ? tool.annotations.unsafeMap.get(tag.key) as S : undefined

const adapted = new WeakMap<AiTool.Any, Tool.Any>()
const sources = new WeakMap<Tool.Any, AiTool.Any>()

/**
 * The Tether definition of an @effect/ai tool, computed once per tool object so that the
 * toolkit an agent is given and the handler layer bind the very same definition.
 *
 * @internal
 */
export const adapt = (tool: AiTool.Any): Tool.Any => {
  let out = adapted.get(tool)
  if (out === undefined) {
    const revision = explicit(tool, Revision)
    const title = explicit(tool, AiTool.Title)
    out = Tool.make(tool.name, {
      description: AiTool.getDescription(tool as never) ?? "",
      input: isEmptyParams(tool.parametersSchema)
        ? Schema.Struct({})
        : tool.parametersSchema as unknown as Schema.Schema.AnyNoContext,
      output: outputOf(tool.successSchema),
      failure: tool.failureSchema as Schema.Schema.AnyNoContext,
      annotations: annotationsOf(tool),
      ...(title === undefined ? {} : { title }),
      ...(revision === undefined ? {} : { revision })
    }) as unknown as Tool.Any
    adapted.set(tool, out)
    sources.set(out, tool)
  }
  return out
}

/** The @effect/ai tool a Tether definition was adapted from, if any. @internal */
export const sourceOf = (tool: Tool.Any): AiTool.Any | undefined => sources.get(tool)

const providerDefinedError = (tool: AiTool.Any) =>
  new Tool.ToolDefinitionError({
    tool: tool.name,
    reason: "MissingHandler",
    detail: `a provider-defined tool of ${
      String((tool as unknown as AiTool.AnyProviderDefined).providerName)
    } is run by that provider's API, which a coding-agent CLI does not call; nothing can serve it`
  })

/**
 * The served tools of an @effect/ai toolkit, in its order. A provider-defined tool that needs
 * no handler (its provider runs it) fails with `MissingHandler`; one that has a handler is
 * served like a user-defined tool.
 *
 * @internal
 */
export const toolsOf = (toolkit: AiToolkitLike): Effect.Effect<ReadonlyArray<Tool.Any>, Tool.ToolDefinitionError> =>
  Effect.suspend(() => {
    const out: Array<Tool.Any> = []
    for (const tool of Object.values(toolkit.tools)) {
      if (AiTool.isProviderDefined(tool) && !(tool as unknown as AiTool.AnyProviderDefined).requiresHandler) {
        return Effect.fail(providerDefinedError(tool))
      }
      out.push(adapt(tool))
    }
    return Effect.succeed(out)
  })

/** One toolkit of a merge and how errors name it. @internal */
export interface Owned {
  readonly toolkit: Toolkit.Any | AiToolkitLike
  readonly owner: string
}

/** @internal */
export const describeOwner = (toolkit: unknown, index: number): string =>
  `toolkits[${index}] (${
    Toolkit.isToolkit(toolkit) ? "a Tether toolkit" : isAiToolkit(toolkit) ? "an @effect/ai toolkit" : "not a toolkit"
  })`

/**
 * One Tether toolkit with the tools of all of them, validated (the catalog is built): a name
 * two owners define fails with `DuplicateName` naming both.
 *
 * @internal
 */
export const merge = (owned: ReadonlyArray<Owned>): Effect.Effect<Toolkit.Any, Tool.ToolDefinitionError> =>
  Effect.gen(function*() {
    const owners = new Map<string, string>()
    const tools: Array<Tool.Any> = []
    for (const { owner, toolkit } of owned) {
      const list = Toolkit.isToolkit(toolkit)
        ? toolkit.toolList
        : isAiToolkit(toolkit)
        ? yield* toolsOf(toolkit)
        : yield* new Tool.ToolDefinitionError({
          tool: "",
          reason: "InvalidSchema",
          detail: `${owner}: pass Tether toolkits (Toolkit.make) or @effect/ai toolkits (Toolkit.make of @effect/ai)`
        })
      for (const tool of list) {
        const previous = owners.get(tool.name)
        if (previous !== undefined && previous !== owner) {
          return yield* new Tool.ToolDefinitionError({
            tool: tool.name,
            reason: "DuplicateName",
            detail: `the tool is defined twice: by ${previous} and by ${owner}`
          })
        }
        owners.set(tool.name, owner)
        tools.push(tool)
      }
    }
    const merged = Toolkit.make(...tools) as Toolkit.Any
    yield* Toolkit.catalog(merged)
    return merged
  })

const isFailure = new WeakMap<AiTool.Any, (u: unknown) => boolean>()

const failureGuard = (tool: AiTool.Any): (u: unknown) => boolean => {
  let guard = isFailure.get(tool)
  if (guard === undefined) {
    guard = Schema.is(tool.failureSchema as Schema.Schema.AnyNoContext)
    isFailure.set(tool, guard)
  }
  return guard
}

/**
 * The Tether handler of an @effect/ai tool: runs the @effect/ai handler in its own context
 * merged under the caller's (as @effect/ai's `Toolkit.handle` does). A failure that is a value
 * of the tool's `failure` Schema becomes a rejection only through the tool's explicit mapping;
 * everything else stays an ordinary failure, which Tether reports as `internal_error`.
 *
 * @internal
 */
export const handlerOf = (tool: AiTool.Any, entry: AiTool.Handler<string>) => {
  const mapping = explicit(tool, Rejection)
  const guard = failureGuard(tool)
  return (input: unknown): Effect.Effect<unknown, unknown> => {
    const run = Effect.mapInputContext(
      Effect.suspend(() => entry.handler(input)),
      (context: Context.Context<never>) => Context.merge(entry.context, context)
    )
    return mapping === undefined
      ? run
      : Effect.catchAll(run, (failure) => guard(failure) ? mapping(failure) : Effect.fail(failure))
  }
}

/**
 * The Tether handler services of an @effect/ai toolkit's served tools, built from the
 * @effect/ai handler services found in `context` (a tool whose handler is absent gets none,
 * which the agent reports as `MissingHandler`).
 *
 * @internal
 */
export const handlerContext = (
  toolkit: AiToolkitLike,
  context: Context.Context<never>
): Effect.Effect<Context.Context<never>, Tool.ToolDefinitionError> =>
  Effect.gen(function*() {
    const tools = yield* toolsOf(toolkit)
    const handlers: Record<string, (input: unknown) => Effect.Effect<unknown, unknown>> = {}
    for (const tool of tools) {
      const source = sourceOf(tool)!
      const entry = context.unsafeMap.get(source.id) as AiTool.Handler<string> | undefined
      if (entry !== undefined) handlers[tool.name] = handlerOf(source, entry)
    }
    const served = Toolkit.make(...tools) as unknown as Toolkit.Toolkit<Record<string, Tool.Any>>
    return (yield* served.toContext(handlers as never)) as Context.Context<never>
  })
