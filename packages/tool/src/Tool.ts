/**
 * Typed host tools: a name, a description, Effect Schemas for input, output and expected
 * failures, tri-state hints, and the rejection that is the only failure a model ever sees.
 *
 * @since 0.1.0
 */
import type * as Cause from "effect/Cause"
import type * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { Pipeable } from "effect/Pipeable"
import * as Schema from "effect/Schema"
import type * as Catalog from "./Catalog.js"
import * as internalRejection from "./internal/rejection.js"
import * as internal from "./internal/tool.js"

/**
 * The brand of tool values (see `isTool`).
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
 * Tri-state hints for the model and the host (`true`, `false`, or absent = unspecified).
 * An explicit `false` is kept as `false` in the published descriptor. They are hints, not
 * access control. `readOnly: true` together with `destructive: true` is contradictory and
 * fails validation.
 *
 * @since 0.1.0
 * @category models
 */
export interface Annotations {
  readonly readOnly?: boolean
  readonly destructive?: boolean
  readonly idempotent?: boolean
  readonly openWorld?: boolean
}

/**
 * A tool definition. It holds no handler and nothing executable: handlers are services
 * provided by `Toolkit.toLayer`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Tool<
  Name extends string,
  Input extends Schema.Schema.Any,
  Output extends Schema.Schema.Any,
  Failure extends Schema.Schema.Any
> extends Pipeable {
  readonly [TypeId]: TypeId
  readonly name: Name
  readonly description: string
  readonly title: string | undefined
  readonly revision: string | undefined
  /** Only the hints that were given explicitly. */
  readonly annotations: Annotations
  /** Decodes the model's arguments; its encoded side must be a JSON object. */
  readonly inputSchema: Input
  /** Encodes the handler's output; any JSON-compatible encoded side. */
  readonly outputSchema: Output
  /** The handler's expected failures (`Schema.Unknown` when not given). */
  readonly failureSchema: Failure
  /** Published instead of the inferred input schema when given. */
  readonly inputSchemaJson: Catalog.JsonSchema | undefined
  /** Published instead of the inferred output schema when given. */
  readonly outputSchemaJson: Catalog.JsonSchema | undefined
}

/**
 * Any tool.
 *
 * @since 0.1.0
 * @category models
 */
export interface Any extends Tool<string, Schema.Schema.Any, Schema.Schema.Any, Schema.Schema.Any> {}

/**
 * The name of a tool type, as the model calls it.
 *
 * @since 0.1.0
 * @category type-level
 */
export type Name<T extends Any> = T["name"]

/**
 * The decoded input a handler receives.
 *
 * @since 0.1.0
 * @category type-level
 */
export type Input<T extends Any> = Schema.Schema.Type<T["inputSchema"]>

/**
 * The input as the model sends it (the encoded side).
 *
 * @since 0.1.0
 * @category type-level
 */
export type InputEncoded<T extends Any> = Schema.Schema.Encoded<T["inputSchema"]>

/**
 * The output a handler returns.
 *
 * @since 0.1.0
 * @category type-level
 */
export type Output<T extends Any> = Schema.Schema.Type<T["outputSchema"]>

/**
 * The output as it crosses the provider boundary (before any `result` envelope).
 *
 * @since 0.1.0
 * @category type-level
 */
export type OutputEncoded<T extends Any> = Schema.Schema.Encoded<T["outputSchema"]>

/**
 * The handler's expected failures (besides `Rejection`); `unknown` when the tool declares none.
 *
 * @since 0.1.0
 * @category type-level
 */
export type Failure<T extends Any> = Schema.Schema.Type<T["failureSchema"]>

/**
 * The function that runs a tool: it receives the decoded input and returns the output, a
 * `Rejection` (shown to the model) or an expected failure (logged, never shown). It may run
 * concurrently with itself and must honour interruption.
 *
 * @since 0.1.0
 * @category handlers
 */
export type Handler<T extends Any, R = never> = (input: Input<T>) => Effect.Effect<Output<T>, Rejection | Failure<T>, R>

/**
 * The service that holds the handler of the tool called `Name`. `Toolkit.toLayer` provides
 * one per tool; `Toolkit.executor` requires one per tool, so a missing handler is a type error.
 *
 * @since 0.1.0
 * @category handlers
 */
export interface HandlerService<Name extends string> {
  readonly [internal.HandlerTypeId]: internal.HandlerTypeId
  readonly name: Name
}

/**
 * The input Schema `make` builds: the Schema given, or a `Schema.Struct` of the fields given.
 *
 * @since 0.1.0
 * @category constructors
 */
export type InputSchema<I> = I extends Schema.Schema.AnyNoContext ? I
  : I extends Schema.Struct.Fields ? Schema.Struct<I>
  : never

/**
 * Defines a tool. `input` is a Schema (or the fields of a struct) whose encoded side is a JSON
 * object; `output` is any Schema with a JSON-compatible encoded side; `failure` declares the
 * handler's expected failures (they are logged as warnings, other failures as errors; none is
 * ever shown to the model). JSON Schema overrides replace the inferred schemas in the catalog.
 *
 * Nothing is checked here: `Toolkit.catalog` / `Toolkit.executor` validate every definition
 * and fail with `ToolDefinitionError`.
 *
 * @example
 * ```ts
 * import { Tool } from "@tether/tool"
 * import { Schema } from "effect"
 *
 * const LookupIssue = Tool.make("lookup_issue", {
 *   description: "Look up one issue by key.",
 *   input: { key: Schema.String }, // the fields of a struct, or any Schema of a JSON object
 *   output: Schema.Struct({ title: Schema.String, state: Schema.Literal("open", "closed") }),
 *   revision: "lookup_issue/v1", // change it when the contract changes: it enters the fingerprint
 *   annotations: { readOnly: true, idempotent: true }
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: <
  const Name extends string,
  Input extends Schema.Struct.Fields | Schema.Schema.AnyNoContext,
  Output extends Schema.Schema.AnyNoContext,
  Failure extends Schema.Schema.AnyNoContext = typeof Schema.Unknown
>(name: Name, options: {
  readonly description: string
  readonly input: Input
  readonly output: Output
  readonly failure?: Failure | undefined
  readonly title?: string | undefined
  readonly revision?: string | undefined
  readonly annotations?: Annotations | undefined
  readonly inputSchemaJson?: Catalog.JsonSchema | undefined
  readonly outputSchemaJson?: Catalog.JsonSchema | undefined
}) => Tool<Name, InputSchema<Input>, Output, Failure> = internal.make as never

/**
 * Whether a value is a tool built by `make`.
 *
 * @since 0.1.0
 * @category guards
 */
export const isTool: (u: unknown) => u is Any = internal.isTool as never

/**
 * A model-visible refusal: `code` matches `[A-Za-z0-9_.-]{1,64}`, `message` has at most 4096
 * characters and tells the model what to do instead. Only `reject` / `rejection` create one
 * (a private brand): a lookalike object or error is an ordinary failure (`internal_error`).
 * A rejection with an invalid code or message is reported as `internal_error` and logged.
 *
 * @since 0.1.0
 * @category rejections
 */
export interface Rejection extends Cause.YieldableError {
  readonly _tag: "Rejection"
  readonly code: string
  readonly message: string
}

/**
 * Fails with a new `Rejection`.
 *
 * @example
 * ```ts
 * import { Tool, Toolkit } from "@tether/tool"
 * import { Effect, Schema } from "effect"
 *
 * const CloseIssue = Tool.make("close_issue", {
 *   description: "Close an issue that has been fixed.",
 *   input: { key: Schema.String },
 *   output: Schema.Struct({ closed: Schema.Boolean })
 * })
 * // The model sees the code and the message, and nothing else of a failure.
 * const IssueToolsLive = Toolkit.make(CloseIssue).toLayer({
 *   close_issue: ({ key }) => Tool.reject("permission_denied", `Closing ${key} needs a maintainer: ask one.`)
 * })
 * ```
 *
 * @since 0.1.0
 * @category rejections
 */
export const reject: (code: string, message: string) => Effect.Effect<never, Rejection> = internalRejection.reject

/**
 * A new `Rejection` value (yieldable: `yield* Tool.rejection(code, message)` fails with it).
 *
 * @since 0.1.0
 * @category rejections
 */
export const rejection: (code: string, message: string) => Rejection = internalRejection.make

/**
 * `true` when `u` is a genuine `Rejection` or wraps one: inside a `Cause` (failures and
 * defects, sequential or parallel), a `cause` / `error` property chain, an `AggregateError`'s
 * `errors`, or a `FiberFailure`. Lookalikes are never recognised.
 *
 * @since 0.1.0
 * @category rejections
 */
export const isRejection: (u: unknown) => boolean = internalRejection.isRejection

/**
 * The genuine `Rejection` that `u` is or wraps (see `isRejection`), if any.
 *
 * @since 0.1.0
 * @category rejections
 */
export const findRejection: (u: unknown) => Option.Option<Rejection> = internalRejection.find

/**
 * A tool definition is invalid. Raised before any provider process starts, naming the tool.
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolDefinitionError
  extends Schema.TaggedError<ToolDefinitionError>("@tether/tool/ToolDefinitionError")("ToolDefinitionError", {
    /** The tool's name (shortened when the name itself is what is invalid). */
    tool: Schema.String,
    reason: Schema.Literal(
      "InvalidName",
      "EmptyDescription",
      "InvalidTitle",
      "InvalidRevision",
      "DuplicateName",
      "NonObjectInput",
      "InvalidSchema",
      "NonLocalRef",
      "InvalidAnnotations",
      "ContradictoryAnnotations",
      "MissingHandler",
      "HandlerMismatch"
    ),
    detail: Schema.String
  })
{
  override get message(): string {
    return `tool ${JSON.stringify(this.tool)}: ${this.reason}: ${this.detail}`
  }
}
