/**
 * A toolkit groups tools; its handlers are services provided by `toolkit.toLayer`. From a
 * toolkit come the validated, frozen `Catalog` and the `Executor` the gateway calls.
 *
 * @since 0.1.0
 */
import type * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type { Pipeable } from "effect/Pipeable"
import type * as Scope from "effect/Scope"
import type * as Catalog from "./Catalog.js"
import * as internal from "./internal/toolkit.js"
import type * as Tool from "./Tool.js"

/**
 * The brand of toolkit values (see `isToolkit`).
 *
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: typeof internal.TypeId = internal.TypeId

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * The handlers of `Tools` keyed by tool name; each may require services `R`.
 *
 * @since 0.1.0
 * @category handlers
 */
export type HandlersFrom<Tools extends Record<string, Tool.Any>, R = unknown> = {
  readonly [Name in keyof Tools]: Tool.Handler<Tools[Name], R>
}

/**
 * Rejects keys that name no tool of the toolkit (a misspelled handler is a type error even
 * when every tool has a handler).
 *
 * @since 0.1.0
 * @category handlers
 */
export type Exact<Handlers, Tools> = Handlers & { readonly [Name in Exclude<keyof Handlers, keyof Tools>]: never }

/**
 * The services the handlers in `Handlers` require.
 *
 * @since 0.1.0
 * @category handlers
 */
export type HandlerRequirements<Handlers> = {
  [Name in keyof Handlers]: Handlers[Name] extends (input: never) => Effect.Effect<infer _A, infer _E, infer R> ? R
    : never
}[keyof Handlers]

/**
 * The handler services of a set of tools: one `Tool.HandlerService<name>` per tool.
 *
 * @since 0.1.0
 * @category handlers
 */
export type HandlerServicesOf<Tools extends Record<string, Tool.Any>> = {
  [Name in keyof Tools]: Tool.HandlerService<Tools[Name]["name"]>
}[keyof Tools]

/**
 * The handler services a toolkit needs: what `executor(toolkit)` requires and what
 * `toolkit.toLayer(...)` provides. `never` for the empty toolkit.
 *
 * @example
 * ```ts
 * import type { Toolkit } from "@tether/tool"
 * import type { Effect } from "effect"
 *
 * // A function that serves any toolkit requires that toolkit's handlers, as `Agent.make` does:
 * declare const serve: <T extends Toolkit.Any>(tools: T) => Effect.Effect<void, never, Toolkit.HandlerServices<T>>
 * ```
 *
 * @since 0.1.0
 * @category handlers
 */
export type HandlerServices<T extends Any> = HandlerServicesOf<T["tools"]>

/**
 * A set of tools.
 *
 * @since 0.1.0
 * @category models
 */
export interface Toolkit<in out Tools extends Record<string, Tool.Any>> extends Pipeable {
  readonly [TypeId]: TypeId
  /** The tools by name. */
  readonly tools: Tools
  /** The tools in definition order (a duplicate name stays here; validation reports it). */
  readonly toolList: ReadonlyArray<Tools[keyof Tools]>
  /** Types a handlers object against this toolkit (identity at run time). */
  of<Handlers extends HandlersFrom<Tools>>(handlers: Exact<Handlers, Tools>): Handlers
  /**
   * Builds the handler services from handlers or from an effect producing them. Handlers run
   * in the context this effect runs in, so they may use its services; a handler's `Scope` is
   * its call's own (see `toLayer`).
   */
  toContext<Handlers extends HandlersFrom<Tools>, EX = never, RX = never>(
    build: Exact<Handlers, Tools> | Effect.Effect<Exact<Handlers, Tools>, EX, RX>
  ): Effect.Effect<Context.Context<HandlerServicesOf<Tools>>, EX, RX | HandlerRequirements<Handlers>>
  /**
   * The handler services as a Layer. The handlers' own requirements and those of `build`
   * become the Layer's requirements; a scope used by `build` is the Layer's. A handler that
   * uses a `Scope` (`Effect.acquireRelease`) gets one per call, closed when the call ends
   * (answered, rejected, failed, canceled or past its deadline).
   *
   * @example
   * ```ts
   * import { Tool, Toolkit } from "@tether/tool"
   * import { Context, Effect, Schema } from "effect"
   *
   * class Issues extends Context.Tag("app/Issues")<Issues, {
   *   readonly title: (key: string) => Effect.Effect<string | undefined>
   * }>() {}
   *
   * const LookupIssue = Tool.make("lookup_issue", {
   *   description: "Look up one issue by key.",
   *   input: { key: Schema.String },
   *   output: Schema.Struct({ title: Schema.String })
   * })
   * const IssueTools = Toolkit.make(LookupIssue)
   *
   * // Built in an effect, the handlers may use the host's services (here `Issues`, which the
   * // Layer then requires). Provide the Layer where the agent is made.
   * const IssueToolsLive = IssueTools.toLayer(Effect.gen(function*() {
   *   const issues = yield* Issues
   *   return {
   *     lookup_issue: ({ key }) =>
   *       Effect.flatMap(issues.title(key), (title) =>
   *         title === undefined ? Tool.reject("not_found", `There is no issue ${key}.`) : Effect.succeed({ title }))
   *   }
   * }))
   * ```
   */
  toLayer<Handlers extends HandlersFrom<Tools>, EX = never, RX = never>(
    build: Exact<Handlers, Tools> | Effect.Effect<Exact<Handlers, Tools>, EX, RX>
  ): Layer.Layer<HandlerServicesOf<Tools>, EX, Exclude<RX | HandlerRequirements<Handlers>, Scope.Scope>>
}

/**
 * Any toolkit.
 *
 * @since 0.1.0
 * @category models
 */
export interface Any {
  readonly [TypeId]: TypeId
  readonly tools: Record<string, Tool.Any>
  readonly toolList: ReadonlyArray<Tool.Any>
}

/**
 * The tools of a toolkit by name.
 *
 * @since 0.1.0
 * @category type-level
 */
export type Tools<T extends Any> = T["tools"]

/**
 * The tools of a tuple keyed by their names: what `make(...tools)` holds.
 *
 * @since 0.1.0
 * @category type-level
 */
export type ToolsByName<Tools extends ReadonlyArray<Tool.Any>> = {
  readonly [T in Tools[number] as T["name"]]: T
}

type ToolsOf<T> = T extends Any ? T["tools"][keyof T["tools"]] : never

/**
 * The tools of several toolkits keyed by their names: what `merge` holds.
 *
 * @since 0.1.0
 * @category type-level
 */
export type MergedTools<Toolkits extends ReadonlyArray<Any>> = {
  readonly [T in ToolsOf<Toolkits[number]> as T["name"]]: T
}

/**
 * Whether a value is a toolkit built by `make`, `merge` or `empty`.
 *
 * @since 0.1.0
 * @category guards
 */
export const isToolkit: (u: unknown) => u is Any = internal.isToolkit as never

/**
 * A toolkit of the given tools.
 *
 * @example
 * ```ts
 * import { Tool, Toolkit } from "@tether/tool"
 * import { Schema } from "effect"
 *
 * const LookupIssue = Tool.make("lookup_issue", {
 *   description: "Look up one issue by key.",
 *   input: { key: Schema.String },
 *   output: Schema.Struct({ title: Schema.String })
 * })
 * const CloseIssue = Tool.make("close_issue", {
 *   description: "Close an issue.",
 *   input: { key: Schema.String },
 *   output: Schema.Struct({ closed: Schema.Boolean })
 * })
 * // What an agent's definition takes: `{ instructions, tools: IssueTools }`.
 * const IssueTools = Toolkit.make(LookupIssue, CloseIssue)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: <const Tools extends ReadonlyArray<Tool.Any>>(
  ...tools: Tools
) => Toolkit<ToolsByName<Tools>> = ((...tools: ReadonlyArray<Tool.Any>) => internal.make(tools as never)) as never

/**
 * The toolkit with no tools: its executor requires no handler services.
 *
 * @since 0.1.0
 * @category constructors
 */
export const empty: Toolkit<{}> = internal.empty as never

/**
 * One toolkit with the tools of all of them, in order. A name present in two of them is a
 * `DuplicateName` when the merged toolkit is validated.
 *
 * @since 0.1.0
 * @category combinators
 */
export const merge: <const Toolkits extends ReadonlyArray<Any>>(
  ...toolkits: Toolkits
) => Toolkit<MergedTools<Toolkits>> = ((...toolkits: ReadonlyArray<Any>) => internal.merge(toolkits as never)) as never

/**
 * Validates every definition and returns the frozen catalog (descriptors sorted by name and
 * the fingerprint). The result is computed once per toolkit.
 *
 * @since 0.1.0
 * @category catalog
 */
export const catalog: (toolkit: Any) => Effect.Effect<Catalog.Catalog, Tool.ToolDefinitionError> = internal
  .catalog as never

/**
 * Validates the toolkit and binds it to the handlers found in the context (provided by
 * `toolkit.toLayer`). Fails with `MissingHandler` when a handler service is absent and with
 * `HandlerMismatch` when the handler under a name was provided for another definition.
 *
 * @since 0.1.0
 * @category executor
 */
export const executor: <T extends Any>(
  toolkit: T
) => Effect.Effect<Catalog.Executor, Tool.ToolDefinitionError, HandlerServices<T>> = internal.executor as never
