/**
 * The catalog: the frozen, provider-neutral description of a toolkit's tools, its fingerprint,
 * and the `Executor` contract the gateway calls to run a tool.
 *
 * @since 0.1.0
 */
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import type * as Either from "effect/Either"
import type * as Schema from "effect/Schema"
import * as internal from "./internal/catalog.js"
import * as internalJson from "./internal/json.js"
import * as internalJsonSchema from "./internal/jsonSchema.js"

/**
 * A JSON Schema document (Draft 2020-12), inline, describing the encoded side of a Schema.
 *
 * @since 0.1.0
 * @category models
 */
export type JsonSchema = { readonly [key: string]: unknown }

/**
 * A published output schema: `jsonSchema` is always an object schema; `envelope` says whether
 * the value travels wrapped as `{ "result": <value> }` (the Schema's own JSON Schema is not an
 * object schema).
 *
 * @since 0.2.0
 * @category models
 */
export interface OutputSchema {
  readonly jsonSchema: JsonSchema
  readonly envelope: boolean
}

/**
 * The JSON Schema a value of `schema` is published with, by the derivation every tool output
 * uses (`Toolkit.catalog`'s `outputSchema`): inferred from the encoded side (Draft 2020-12,
 * inline at the top level, schemas with an identifier and recursive ones as local `$ref`s into
 * `$defs`), wrapped in the `{ result }` envelope when it is not an object schema. Deep-frozen.
 * `Schema.Int` carries the safe-integer bounds it checks (`minimum: -(2^53 - 1)`,
 * `maximum: 2^53 - 1`) unless it states tighter ones; a case-insensitive `Schema.pattern` is
 * published as a pattern that matches alike without the flag, and one another flag changes
 * without a pattern (JSON Schema patterns have no flags). `@tether/core`'s structured output
 * sends it to providers. Fails with the reason when the schema cannot be expressed as JSON Schema
 * (a declaration, a bigint, a symbol…).
 *
 * @since 0.2.0
 * @category schemas
 */
export const outputSchema: (schema: Schema.Schema.AnyNoContext) => Either.Either<OutputSchema, string> =
  internalJsonSchema.outputSchema

/**
 * The tri-state MCP tool hints. A key that is absent is "unspecified"; an explicit `false`
 * is preserved as `false` on the wire (MCP defaults destructive and open-world to true).
 *
 * @since 0.1.0
 * @category models
 */
export interface Annotations {
  readonly readOnlyHint?: boolean
  readonly destructiveHint?: boolean
  readonly idempotentHint?: boolean
  readonly openWorldHint?: boolean
}

/**
 * One tool as published to a provider: everything the model may see, nothing executable.
 *
 * @since 0.1.0
 * @category models
 */
export interface Descriptor {
  readonly name: string
  readonly title: string | undefined
  readonly description: string
  readonly inputSchema: JsonSchema
  /**
   * Every tool made with `Tool.make` has one. Absent only for a tool answered with text alone (a
   * `Success` without `structuredContent`), such as the approver tool a CLI's permission prompt
   * reads: MCP clients then take the text block as the result.
   */
  readonly outputSchema?: JsonSchema
  readonly annotations: Annotations
  readonly revision: string | undefined
}

/**
 * A frozen list of descriptors sorted by name, and the SHA-256 fingerprint over their
 * domain-separated canonical JSON (hex). Never contains a closure or a secret.
 *
 * @since 0.1.0
 * @category models
 */
export interface Catalog {
  readonly descriptors: ReadonlyArray<Descriptor>
  readonly fingerprint: string
}

/**
 * The fingerprint of a list of descriptors: SHA-256 (hex) over the domain tag
 * `tether.tool.catalog.v1` and newline, then the canonical JSON (object keys sorted, no
 * whitespace, `undefined` members omitted) of the descriptors sorted by name. Independent of
 * tool order and key order; equal to `catalog.fingerprint` for the catalog's descriptors.
 *
 * @since 0.1.0
 * @category fingerprint
 */
export const fingerprint: (descriptors: ReadonlyArray<Descriptor>) => string = internal.fingerprint

/**
 * The stable, model-visible codes of a generic failure.
 *
 * @since 0.1.0
 * @category models
 */
export type FailureCode = "invalid_input" | "invalid_output" | "internal_error" | "deadline_exceeded" | "canceled"

/**
 * What one tool execution produced, ready to cross the provider boundary.
 *
 * - `Success`: `structuredContent` is always a JSON object (non-object outputs are wrapped as
 *   `{ result: value }`, which the published output schema describes); `text` is its rendering.
 * - `Rejected`: a `Tool.reject(code, message)` from the handler: the only model-visible failure.
 * - `Failed`: a fixed generic message under a stable code; never handler error text.
 *
 * @since 0.1.0
 * @category models
 */
export type Outcome =
  | {
    readonly _tag: "Success"
    /** Absent only for a tool whose descriptor has no `outputSchema`: the result is `text` alone. */
    readonly structuredContent?: { readonly [key: string]: unknown }
    readonly text: string
  }
  | { readonly _tag: "Rejected"; readonly code: string; readonly message: string }
  | { readonly _tag: "Failed"; readonly code: FailureCode; readonly message: string }

/**
 * Options of one execution.
 *
 * @since 0.1.0
 * @category models
 */
export interface ExecuteOptions {
  /**
   * The handler is interrupted and `deadline_exceeded` is returned at this deadline, on time
   * even if the handler ignores interruption (it is then interrupted in the background).
   * Absent: no deadline.
   */
  readonly deadline?: Duration.DurationInput
  /**
   * When this signal aborts (e.g. the MCP request's `extra.signal`), the handler is
   * interrupted (its finalizers run in the background) and `canceled` is returned at once.
   * An already aborted signal answers `canceled` without running the handler.
   */
  readonly signal?: AbortSignal
}

/**
 * A catalog bound to its handlers: what the gateway registers. `execute` never fails and
 * never exposes handler error text: every failure is an `Outcome`. Interrupting `execute`
 * interrupts the handler (its finalizers run; with a `deadline` or `signal` the caller does
 * not wait for them, without either it does). Calling an unknown name yields
 * `Failed("invalid_input")`; callers that must hide unknown tools check `catalog` first.
 * Input that is not a JSON object, or holds a number that is not finite anywhere (`1e309` in a
 * JSON body parses to `Infinity`), is `Failed("invalid_input")` naming the offending field; the
 * handler does not run. `execute` opens no span of its own (it is the hot path): its caller traces the call, as the
 * gateway's `Gateway.call` span does. Log lines carry `tool` and `code` annotations.
 *
 * @since 0.1.0
 * @category models
 */
export interface Executor {
  readonly catalog: Catalog
  readonly execute: (name: string, input: unknown, options?: ExecuteOptions) => Effect.Effect<Outcome>
}

/**
 * The path of the first value in a parsed JSON value that no tool's input may hold, depth first in
 * key order, or `undefined`: a number that is not finite (JSON has none, yet `1e309` parses to
 * `Infinity`, which `Schema.Number` accepts and `JSON.stringify` writes back as `null`), or an own
 * key `__proto__` (which `JSON.parse` makes as data, and which Effect's decoder writes back as the
 * decoded record's prototype). `Executor.execute` refuses such input; core refuses such a
 * structured-output value the same way. Walks any depth (its own stack) and each object once.
 *
 * @since 0.4.0
 * @category validation
 */
export const firstRefused: (value: unknown) => ReadonlyArray<PropertyKey> | undefined = internalJson.firstRefused
