/**
 * @internal
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { identity } from "effect/Function"
import * as Layer from "effect/Layer"
import { pipeArguments } from "effect/Pipeable"
import * as Predicate from "effect/Predicate"
import type * as Catalog from "../Catalog.js"
import { ToolDefinitionError } from "../Tool.js"
import type * as Toolkit from "../Toolkit.js"
import * as CatalogInternal from "./catalog.js"
import * as Executor from "./executor.js"
import type { ToolData } from "./tool.js"

/** @internal */
export const TypeId: unique symbol = Symbol.for("@tether/tool/Toolkit")

/** @internal */
export type TypeId = typeof TypeId

/** @internal */
export interface ToolkitData {
  readonly tools: Readonly<Record<string, ToolData>>
  readonly toolList: ReadonlyArray<ToolData>
}

type HandlerRecord = Readonly<Record<string, (input: unknown) => Effect.Effect<unknown, unknown, unknown>>>

const tags = new Map<string, Context.Tag<unknown, Executor.HandlerEntry>>()

/** The service key of the handler of the tool called `name`. @internal */
export const handlerTag = (name: string): Context.Tag<unknown, Executor.HandlerEntry> => {
  let tag = tags.get(name)
  if (tag === undefined) {
    tag = Context.GenericTag<unknown, Executor.HandlerEntry>(`@tether/tool/Tool/Handler/${name}`)
    tags.set(name, tag)
  }
  return tag
}

const entriesOf = (
  toolkit: ToolkitData,
  handlers: HandlerRecord,
  context: Context.Context<never>
): Map<string, Executor.HandlerEntry> => {
  const entries = new Map<string, Executor.HandlerEntry>()
  for (const tool of toolkit.toolList) {
    const handler = Object.prototype.hasOwnProperty.call(handlers, tool.name) ? handlers[tool.name] : undefined
    if (typeof handler === "function" && !entries.has(tool.name)) entries.set(tool.name, { tool, handler, context })
  }
  return entries
}

type Build = HandlerRecord | Effect.Effect<HandlerRecord, unknown, unknown>

const toContext = (toolkit: ToolkitData, build: Build): Effect.Effect<Context.Context<never>, unknown, unknown> =>
  Effect.gen(function*() {
    // Handlers run in the context the handlers were built in, so they may use its services.
    const context = yield* Effect.context<never>()
    const handlers = Effect.isEffect(build) ? yield* build : build
    let out = Context.empty() as Context.Context<unknown>
    for (const [name, entry] of entriesOf(toolkit, handlers, context)) out = Context.add(out, handlerTag(name), entry)
    return out as Context.Context<never>
  })

const Proto = {
  [TypeId]: TypeId,
  of: identity,
  toContext(this: ToolkitData, build: Build) {
    return toContext(this, build)
  },
  toLayer(this: ToolkitData, build: Build) {
    return Layer.scopedContext(toContext(this, build))
  },
  toJSON(this: ToolkitData) {
    return { _id: "@tether/tool/Toolkit", tools: this.toolList.map((tool) => tool.name) }
  },
  pipe() {
    return pipeArguments(this, arguments)
  }
}

/** @internal */
export const isToolkit = (u: unknown): u is ToolkitData => Predicate.hasProperty(u, TypeId)

/** @internal */
export const make = (tools: ReadonlyArray<ToolData>): ToolkitData => {
  const record: Record<string, ToolData> = {}
  for (const tool of tools) {
    // Duplicates are kept in `toolList` for validation to report; here the last one wins.
    Object.defineProperty(record, tool.name, { value: tool, enumerable: true, writable: true, configurable: true })
  }
  return Object.freeze(Object.assign(Object.create(Proto), {
    tools: Object.freeze(record),
    toolList: Object.freeze([...tools])
  }))
}

/** @internal */
export const empty: ToolkitData = make([])

/** @internal */
export const merge = (toolkits: ReadonlyArray<ToolkitData>): ToolkitData => make(toolkits.flatMap((t) => t.toolList))

const built = new WeakMap<ToolkitData, Either.Either<CatalogInternal.Built, ToolDefinitionError>>()

/** Validation is pure, so it runs once per toolkit. @internal */
export const build = (toolkit: ToolkitData): Either.Either<CatalogInternal.Built, ToolDefinitionError> => {
  let result = built.get(toolkit)
  if (result === undefined) {
    result = CatalogInternal.build(toolkit.toolList)
    built.set(toolkit, result)
  }
  return result
}

/** @internal */
export const catalog = (toolkit: ToolkitData): Effect.Effect<Catalog.Catalog, ToolDefinitionError> =>
  Effect.suspend(() => Either.map(build(toolkit), (b) => b.catalog))

/** @internal */
export const executor = (toolkit: ToolkitData): Effect.Effect<Catalog.Executor, ToolDefinitionError> =>
  Effect.flatMap(Effect.context<never>(), (context) =>
    Effect.suspend(() =>
      Either.flatMap(build(toolkit), (b) => {
        const entries = new Map<string, Executor.HandlerEntry>()
        for (const name of b.definitions.keys()) {
          const entry = Context.getOption(context as Context.Context<unknown>, handlerTag(name))
          if (entry._tag === "Some") entries.set(name, entry.value)
        }
        return Executor.make(b, entries)
      })
    ))

const executorFromUntyped = (
  toolkit: ToolkitData,
  handlers: HandlerRecord
): Effect.Effect<Catalog.Executor, ToolDefinitionError> =>
  Effect.suspend(() =>
    Either.flatMap(build(toolkit), (b) => Executor.make(b, entriesOf(toolkit, handlers, Executor.emptyContext)))
  )

/**
 * Validates the toolkit and binds it to handlers given directly (no services; handlers that need
 * nothing): for tests and benchmarks. Hosts provide handlers with `toolkit.toLayer`.
 *
 * @internal
 */
export const executorFrom: <T extends Toolkit.Any, Handlers extends Toolkit.HandlersFrom<T["tools"], never>>(
  toolkit: T,
  handlers: Toolkit.Exact<Handlers, T["tools"]>
) => Effect.Effect<Catalog.Executor, ToolDefinitionError> = executorFromUntyped as never
