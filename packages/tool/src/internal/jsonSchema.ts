/**
 * JSON Schema for tools: inferred from Effect Schemas (inline, encoded side, Draft 2020-12),
 * checked overrides, the `result` envelope of non-object outputs, and compiled validators.
 *
 * @internal
 */
import { Ajv2020 } from "ajv/dist/2020.js"
import type { ValidateFunction } from "ajv/dist/2020.js"
import * as Either from "effect/Either"
import * as JSONSchema from "effect/JSONSchema"
import type * as Schema from "effect/Schema"
import * as AST from "effect/SchemaAST"
import type * as Catalog from "../Catalog.js"
import * as Json from "./json.js"
import * as Refinements from "./refinements.js"

/** @internal */
export type Problem =
  | { readonly reason: "InvalidSchema"; readonly detail: string }
  | { readonly reason: "NonLocalRef"; readonly detail: string }

const invalid = (detail: string): Problem => ({ reason: "InvalidSchema", detail })

/**
 * `true` for a struct with no fields and no index signatures.
 *
 * @internal
 */
export const isEmptyStruct = (ast: AST.AST): boolean =>
  ast._tag === "TypeLiteral" && ast.propertySignatures.length === 0 && ast.indexSignatures.length === 0

/**
 * The JSON Schema of the encoded side of `schema`, inline at the top level; nested schemas
 * with an identifier (and recursive ones) are local `$ref`s into a top-level `$defs`.
 * `Schema.int` is published with the safe-integer bounds it checks; a `Schema.pattern` whose
 * flags change what it matches with an equivalent pattern, or none (JSON Schema patterns have no
 * flags).
 *
 * @internal
 */
export const infer = (schema: Schema.Schema.AnyNoContext): Either.Either<Catalog.JsonSchema, Problem> => {
  if (isEmptyStruct(schema.ast)) {
    // `Schema.Struct({})` is TypeScript's `{}` (anything but null/undefined) and infers as
    // "object or array"; a tool without parameters means a closed, empty object.
    const description = AST.getDescriptionAnnotation(schema.ast)
    return Either.right({
      type: "object",
      properties: {},
      additionalProperties: false,
      ...(description._tag === "Some" ? { description: description.value } : {})
    })
  }
  const definitions: Record<string, JSONSchema.JsonSchema7> = {}
  let publishable: Refinements.Publishable
  let inferred: JSONSchema.JsonSchema7
  try {
    publishable = Refinements.publishable(schema.ast)
    inferred = JSONSchema.fromAST(publishable.ast, {
      definitions,
      target: "jsonSchema2020-12",
      topLevelReferenceStrategy: "skip"
    })
  } catch (error) {
    // `fromAST` reports schemas it cannot express (declarations, bigint, symbols) by throwing.
    return Either.left(
      invalid(error instanceof Error ? error.message : "the schema cannot be expressed as JSON Schema")
    )
  }
  const document = Object.keys(definitions).length === 0 ? inferred : { ...inferred, $defs: definitions }
  return Either.map(
    Either.mapLeft(Json.toJson(publishable.bound(document)), invalid),
    (json) => json as Catalog.JsonSchema
  )
}

const refKeywords = ["$ref", "$dynamicRef", "$recursiveRef"] as const

const findNonLocalRef = (u: unknown): string | undefined => {
  if (typeof u !== "object" || u === null) return undefined
  if (Array.isArray(u)) {
    for (const item of u) {
      const found = findNonLocalRef(item)
      if (found !== undefined) return found
    }
    return undefined
  }
  const record = u as Record<string, unknown>
  for (const keyword of refKeywords) {
    const value = record[keyword]
    if (value !== undefined && (typeof value !== "string" || !value.startsWith("#"))) {
      return `${keyword} ${JSON.stringify(value).slice(0, 200)} is not local (it must start with "#")`
    }
  }
  for (const key of Object.keys(record)) {
    const found = findNonLocalRef(record[key])
    if (found !== undefined) return found
  }
  return undefined
}

const draft2020 = "https://json-schema.org/draft/2020-12/schema"

// As Effect Schema checks what the schemas are inferred from: a string's length in UTF-16 code
// units (`minLength` / `maxLength`, where JSON Schema counts code points), and `multipleOf` within
// floating-point error (0.3 is a multiple of 0.1): an output Effect encodes is never refused here.
const ajvOptions = {
  strict: false,
  validateFormats: false,
  allErrors: false,
  logger: false,
  unicode: false,
  multipleOfPrecision: 9
} as const

// One instance compiles everything. `addUsedSchema: false` keeps no compiled document in
// the instance, so two documents with the same `$id` never collide.
let shared: Ajv2020 | undefined
const ajv = (): Ajv2020 => shared ??= new Ajv2020({ ...ajvOptions, addUsedSchema: false })

/** @internal */
export const compile = (schema: Catalog.JsonSchema): Either.Either<ValidateFunction, Problem> => {
  try {
    const validate = ajv().compile(schema)
    // Drop the instance's cache entry: the validator stays usable, and compiled documents
    // are held only by the catalogs that use them.
    ajv().removeSchema(schema)
    return Either.right(validate)
  } catch (error) {
    // Ajv reports schemas that fail the meta-schema or have unresolvable references by throwing.
    return Either.left(invalid(error instanceof Error ? error.message : "the schema does not compile"))
  }
}

/**
 * Checks an override: a plain JSON object, a Draft 2020-12 document (an explicit `$schema`
 * must name it), every reference local, and compiles under Draft 2020-12. Returns a
 * detached deep copy. Nothing is ever fetched: no loader is configured.
 *
 * @internal
 */
export const checkOverride = (u: unknown): Either.Either<Catalog.JsonSchema, Problem> =>
  Either.gen(function*() {
    const json = yield* Either.mapLeft(Json.toJson(u), invalid)
    if (typeof json !== "object" || json === null || Array.isArray(json)) {
      return yield* Either.left(invalid("a JSON Schema override must be a JSON object"))
    }
    const document = json as Catalog.JsonSchema
    const nonLocal = findNonLocalRef(document)
    if (nonLocal !== undefined) return yield* Either.left<Problem>({ reason: "NonLocalRef", detail: nonLocal })
    if (document["$schema"] !== undefined && document["$schema"] !== draft2020) {
      return yield* Either.left(invalid(`$schema must be ${draft2020}`))
    }
    yield* compile(document)
    return document
  })

/** Keywords whose values are JSON data, not schemas: never rewritten. */
const dataKeywords = new Set(["const", "enum", "examples", "default"])

/**
 * An inferred tool schema in the form every client reads alike. The MCP TypeScript SDK's client,
 * and the CLIs that bundle it (Gemini CLI), validate with a Draft-07 Ajv, which ignores
 * `prefixItems` and reads `items` as applying to every element: a tuple keeps its `prefixItems`
 * and gives up `items` (`items: false` becomes `maxItems`; a rest element's schema is left out,
 * Effect still checks it). An output's schema is also checked there with `minLength` in code points
 * (Effect counts UTF-16 units: a bound of `m` units is published as the `ceil(m / 2)` code points
 * it implies) and an exact `multipleOf` (Effect allows floating-point error: a fractional one is
 * left out). The published schema then says less than the Schema checks, never something else.
 *
 * @internal
 */
export const portable = (u: unknown, output: boolean): unknown => {
  if (typeof u !== "object" || u === null) return u
  if (Array.isArray(u)) return u.map((item) => portable(item, output))
  const record = u as Record<string, unknown>
  const tuple = Array.isArray(record["prefixItems"])
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(record)) {
    let next: unknown = dataKeywords.has(key) ? value : portable(value, output)
    if (tuple && key === "items") continue
    if (output && key === "minLength" && typeof value === "number" && value > 1) next = Math.ceil(value / 2)
    if (output && key === "multipleOf" && typeof value === "number" && !Number.isInteger(value)) continue
    Object.defineProperty(out, key, { value: next, enumerable: true, writable: true, configurable: true })
  }
  if (tuple && record["items"] === false && out["maxItems"] === undefined) {
    out["maxItems"] = (record["prefixItems"] as ReadonlyArray<unknown>).length
  }
  return out
}

/** @internal */
export const isObjectSchema = (schema: Catalog.JsonSchema): boolean => schema["type"] === "object"

const escapePointer = (segment: string): string => segment.replace(/~/g, "~0").replace(/\//g, "~1")

const rebase = (u: unknown, prefix: string): unknown => {
  if (typeof u !== "object" || u === null) return u
  if (Array.isArray(u)) return u.map((item) => rebase(item, prefix))
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(u)) {
    const rebased = refKeywords.includes(key as typeof refKeywords[number]) && typeof value === "string" &&
        (value === "#" || value.startsWith("#/"))
      ? prefix + value.slice(1)
      : rebase(value, prefix)
    Object.defineProperty(out, key, { value: rebased, enumerable: true, writable: true, configurable: true })
  }
  return out
}

/**
 * The published output schema of a non-object output: `{ result: <schema> }`. JSON Pointer
 * references inside the wrapped schema are rebased onto its new location, so they keep
 * pointing at the same subschemas.
 *
 * @internal
 */
export const envelope = (schema: Catalog.JsonSchema): Catalog.JsonSchema => {
  const { $schema, ...rest } = schema
  // A schema with its own `$id` is an embedded resource: its "#/..." references already
  // resolve against it, wherever it is placed.
  const wrapped = rest["$id"] !== undefined
    ? rest
    : rebase(rest, `#/properties/${escapePointer("result")}`) as Catalog.JsonSchema
  return {
    ...($schema !== undefined ? { $schema } : {}),
    type: "object",
    properties: { result: wrapped },
    required: ["result"],
    additionalProperties: false
  }
}

/**
 * How an output is published: an object schema as it is, any other schema in the `result`
 * envelope (`envelope: true`: the JSON value is `{ "result": <value> }`).
 *
 * @internal
 */
export const publish = (schema: Catalog.JsonSchema): Catalog.OutputSchema =>
  isObjectSchema(schema) ? { jsonSchema: schema, envelope: false } : { jsonSchema: envelope(schema), envelope: true }

/**
 * The published output schema of an Effect Schema (inferred, then `publish`ed), deep-frozen.
 *
 * @internal
 */
export const outputSchema = (schema: Schema.Schema.AnyNoContext): Either.Either<Catalog.OutputSchema, string> =>
  Either.map(
    Either.mapLeft(infer(schema), (problem) => problem.detail),
    (inferred) => Json.deepFreeze(publish(inferred))
  )
