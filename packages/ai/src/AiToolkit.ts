/**
 * `@effect/ai` toolkits as an agent's tools. An @effect/ai `Toolkit` and the layer of its
 * handlers (`toolkit.toLayer(...)`) become Tether tools served through the gateway, alone or
 * next to Tether toolkits, under the same rules as Tether's own tools:
 *
 * - the input Schema is the tool's `parameters` (no parameters: a closed empty object), the
 *   output Schema its `success` (`Schema.Void` is sent as `null`), both validated by Tether;
 * - the description is `description`, else the parameters' description annotation; the title
 *   is the `Tool.Title` annotation;
 * - `Tool.Readonly`, `Tool.Destructive`, `Tool.Idempotent` and `Tool.OpenWorld` become the
 *   tri-state hints `readOnly`, `destructive`, `idempotent`, `openWorld` when the tool sets
 *   them; @effect/ai's defaults are not copied, so an unset hint stays unspecified;
 * - the revision comes from the `Revision` annotation of this module. The catalog fingerprint
 *   covers it like a Tether tool's; a thread refuses a tool without a revision before its
 *   driver starts;
 * - failures: a failure that is a value of the tool's `failure` Schema reaches the model as a
 *   rejection only through the mapping given with `rejectFailure`; every other failure (with
 *   either `failureMode`), every defect and every failure without a mapping reaches the model as
 *   Tether's fixed generic error (`internal_error`); the error itself goes to the host's log.
 *
 * Schemas that need services to decode or encode are not supported: Tether decodes input and
 * encodes output without the handler's context, so such a tool fails every call with
 * `internal_error`.
 *
 * @example
 * ```ts
 * import * as NodeContext from "@effect/platform-node/NodeContext"
 * import { Tool as AiTool, Toolkit as AiTools } from "@effect/ai"
 * import { AiToolkit } from "@tether/ai"
 * import { Agent } from "@tether/core"
 * import { Claude } from "@tether/drivers"
 * import { Gateway } from "@tether/gateway"
 * import { Tool, Toolkit } from "@tether/tool"
 * import { Effect, Layer, Schema } from "effect"
 *
 * const GetWeather = AiTool.make("get_weather", {
 *   description: "The current weather of a city.",
 *   parameters: { city: Schema.String },
 *   success: Schema.Struct({ celsius: Schema.Number })
 * }).annotate(AiTool.Readonly, true).annotate(AiToolkit.Revision, "get_weather/v1")
 * const Weather = AiTools.make(GetWeather)
 * const WeatherLive = Weather.toLayer({ get_weather: ({ city }) => Effect.succeed({ celsius: 21 }) })
 *
 * const LookupIssue = Tool.make("lookup_issue", {
 *   description: "Look up one issue by key.",
 *   input: { key: Schema.String },
 *   output: Schema.Struct({ title: Schema.String })
 * })
 * const IssueTools = Toolkit.make(LookupIssue)
 * const IssueToolsLive = IssueTools.toLayer({ lookup_issue: ({ key }) => Effect.succeed({ title: key }) })
 *
 * const program = Effect.gen(function*() {
 *   const tools = yield* AiToolkit.merge(IssueTools, Weather) // one Tether toolkit
 *   const agent = yield* Agent.make({
 *     driver: Claude.driver(),
 *     definition: { instructions: "", tools },
 *     workspace: process.cwd()
 *   })
 *   return yield* agent.run("What is the weather in Paris?")
 * }).pipe(
 *   Effect.scoped,
 *   Effect.provide([
 *     IssueToolsLive,
 *     AiToolkit.layer(Weather).pipe(Layer.provide(WeatherLive)),
 *     Gateway.layer(),
 *     NodeContext.layer
 *   ])
 * )
 * ```
 *
 * @since 0.1.0
 */
import type * as AiTool from "@effect/ai/Tool"
import * as Unstable from "@tether/core/Unstable"
import type * as Tool from "@tether/tool/Tool"
import type * as Toolkit from "@tether/tool/Toolkit"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Schema from "effect/Schema"
import * as internal from "./internal/aiToolkit.js"

/**
 * The annotation that gives an @effect/ai tool its Tether `revision`, e.g.
 * `AiTool.make("get_weather", {...}).annotate(AiToolkit.Revision, "get_weather/v1")`. Other
 * @effect/ai providers ignore it. Change it whenever the tool's behaviour changes in a way a
 * resumed thread must not silently inherit.
 *
 * @since 0.1.0
 * @category annotations
 */
export class Revision extends Context.Tag("@tether/ai/AiToolkit/Revision")<Revision, string>() {}

/**
 * The shape of an @effect/ai toolkit this module reads: `Toolkit.make(...)` from `@effect/ai`.
 *
 * @since 0.1.0
 * @category models
 */
export interface AiToolkitAny {
  readonly tools: Readonly<Record<string, AiTool.Any>>
}

/**
 * `true` for an @effect/ai toolkit.
 *
 * @since 0.1.0
 * @category guards
 */
export const isAiToolkit: (u: unknown) => u is AiToolkitAny = internal.isAiToolkit

type AiInput<P> = P extends AiTool.EmptyParams ? Schema.Struct<{}>
  : P extends Schema.Schema.Any ? P
  : never

type AiFailure<F> = F extends Schema.Schema.Any ? F : typeof Schema.Unknown

/**
 * The Tether definition of the @effect/ai tool `T`.
 *
 * @since 0.1.0
 * @category type-level
 */
export type Adapted<T extends AiTool.Any> = Tool.Tool<
  T["name"],
  AiInput<T["parametersSchema"]>,
  T["successSchema"],
  AiFailure<T["failureSchema"]>
>

/**
 * The Tether definitions of an @effect/ai toolkit's tools, by name.
 *
 * @since 0.1.0
 * @category type-level
 */
export type AdaptedTools<Tools extends Record<string, AiTool.Any>> = {
  readonly [Name in keyof Tools as Tools[Name]["name"]]: Adapted<Tools[Name]>
}

type ToolsOf<T> = T extends Toolkit.Any ? T["tools"][keyof T["tools"]]
  : T extends AiToolkitAny ? AdaptedTools<T["tools"]>[keyof AdaptedTools<T["tools"]>]
  : never

/**
 * The tools of a merge of Tether and @effect/ai toolkits, by name.
 *
 * @since 0.1.0
 * @category type-level
 */
export type MergedTools<Toolkits extends ReadonlyArray<Toolkit.Any | AiToolkitAny>> = {
  readonly [T in ToolsOf<Toolkits[number]> as T["name"]]: T
}

/**
 * One Tether toolkit with the tools of the given Tether and @effect/ai toolkits, in order,
 * validated before it is returned (what `Agent.make` would check: names, descriptions, schemas,
 * hints). Fails with `ToolDefinitionError`:
 *
 * - `DuplicateName` when two of the toolkits define the same name; the detail names both
 *   owners by position and kind, e.g. `by toolkits[0] (a Tether toolkit) and by toolkits[1]
 *   (an @effect/ai toolkit)`;
 * - `MissingHandler` for a provider-defined @effect/ai tool its provider runs (e.g. a hosted
 *   web search): no coding-agent CLI calls that API, so nothing could serve it;
 * - any other reason of Tether's own validation, naming the tool (an @effect/ai tool without a
 *   description is `EmptyDescription`).
 *
 * The handlers come from `Toolkit.toLayer` for the Tether toolkits and from `layer` for the
 * @effect/ai ones.
 *
 * @since 0.1.0
 * @category constructors
 */
export const merge: <const Toolkits extends ReadonlyArray<Toolkit.Any | AiToolkitAny>>(
  ...toolkits: Toolkits
) => Effect.Effect<Toolkit.Toolkit<MergedTools<Toolkits>>, Tool.ToolDefinitionError> = (
  ...toolkits: ReadonlyArray<Toolkit.Any | AiToolkitAny>
) =>
  internal.merge(toolkits.map((toolkit, index) => ({ toolkit, owner: internal.describeOwner(toolkit, index) }))).pipe(
    Unstable.withSpan("AiToolkit.merge")
  ) as never

/**
 * The Tether handler services of an @effect/ai toolkit's tools, built from its @effect/ai
 * handler services (`aiToolkit.toLayer(...)`, which this layer requires) and the services its
 * tools declare with `dependencies`. Each handler runs in the context the @effect/ai handlers
 * were built in, merged under this layer's, as @effect/ai runs them. Fails with
 * `ToolDefinitionError` (`MissingHandler`) when the toolkit holds a provider-defined tool its
 * provider runs; a handler absent from the context is reported by the agent (`MissingHandler`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <Tools extends Record<string, AiTool.Any>>(
  toolkit: { readonly tools: Tools }
): Layer.Layer<
  Toolkit.HandlerServicesOf<AdaptedTools<Tools>>,
  Tool.ToolDefinitionError,
  AiTool.HandlersFor<Tools> | AiTool.Requirements<Tools[keyof Tools]>
> =>
  Layer.effectContext(
    Effect.flatMap(Effect.context<never>(), (context) => internal.handlerContext(toolkit, context))
  ) as never

/**
 * Gives an @effect/ai tool the explicit mapping from its declared failures to the rejection
 * the model sees (`Tool.reject(code, message)` of `@tether/tool`). Only a failure that is a
 * value of the tool's `failure` Schema is mapped; without a mapping, and for any other
 * failure, the model sees `internal_error`. Returns the annotated tool (rebuild the @effect/ai
 * toolkit with it).
 *
 * @example
 * ```ts
 * import { Tool as AiTool } from "@effect/ai"
 * import { AiToolkit } from "@tether/ai"
 * import { Tool } from "@tether/tool"
 * import { Schema } from "effect"
 *
 * const GetWeather = AiToolkit.rejectFailure(
 *   AiTool.make("get_weather", {
 *     description: "The current weather of a city.",
 *     parameters: { city: Schema.String },
 *     success: Schema.Struct({ celsius: Schema.Number }),
 *     failure: Schema.Struct({ unknownCity: Schema.String })
 *   }),
 *   (failure) => Tool.reject("unknown_city", `There is no city called ${failure.unknownCity}.`)
 * )
 * ```
 *
 * @since 0.1.0
 * @category failures
 */
export const rejectFailure = <T extends AiTool.Any>(
  tool: T,
  mapping: (failure: AiTool.Failure<T>) => Effect.Effect<never, Tool.Rejection>
): T =>
  (tool as unknown as {
    readonly annotate: <I, S>(tag: Context.Tag<I, S>, value: S) => T
  }).annotate(internal.Rejection, mapping as internal.RejectionMapping)
