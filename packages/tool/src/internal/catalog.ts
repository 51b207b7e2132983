/**
 * Validation of tool definitions, descriptors and the catalog fingerprint.
 *
 * @internal
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { Buffer } from "node:buffer"
import { createHash } from "node:crypto"
import type * as Catalog from "../Catalog.js"
import { ToolDefinitionError } from "../Tool.js"
import * as Json from "./json.js"
import * as JsonSchema from "./jsonSchema.js"
import type { ToolData } from "./tool.js"

/** @internal */
export const namePattern = /^[A-Za-z0-9_.-]{1,128}$/

/** @internal */
export const fingerprintDomain = "tether.tool.catalog.v1\n"

/** What execution needs to know about one validated tool, beyond its descriptor. */
/** @internal */
export interface Definition {
  readonly tool: ToolData
  readonly descriptor: Catalog.Descriptor
  /** The encoded output is published and sent as `{ result: value }`. */
  readonly wrap: boolean
  readonly outputIsOverride: boolean
}

/** @internal */
export interface Built {
  readonly catalog: Catalog.Catalog
  readonly definitions: ReadonlyMap<string, Definition>
}

const shown = (name: unknown): string => {
  const text = typeof name === "string" ? name : String(name)
  return text.length > 64 ? `${text.slice(0, 64)}…` : text
}

const fail = (tool: string, reason: ToolDefinitionError["reason"], detail: string) =>
  Either.left(new ToolDefinitionError({ tool, reason, detail }))

const annotationKeys = [
  ["readOnly", "readOnlyHint"],
  ["destructive", "destructiveHint"],
  ["idempotent", "idempotentHint"],
  ["openWorld", "openWorldHint"]
] as const

const describe = (tool: ToolData): Either.Either<Definition, ToolDefinitionError> =>
  Either.gen(function*() {
    const name = tool.name
    if (typeof name !== "string" || !namePattern.test(name)) {
      return yield* fail(shown(name), "InvalidName", "a tool name must match ^[A-Za-z0-9_.-]{1,128}$")
    }
    if (typeof tool.description !== "string" || tool.description.trim().length === 0) {
      return yield* fail(name, "EmptyDescription", "a tool needs a non-empty description")
    }
    if (tool.title !== undefined && (typeof tool.title !== "string" || tool.title.trim().length === 0)) {
      return yield* fail(name, "InvalidTitle", "a title, when given, must be a non-empty string")
    }
    if (tool.revision !== undefined && (typeof tool.revision !== "string" || tool.revision.trim().length === 0)) {
      return yield* fail(name, "InvalidRevision", "a revision, when given, must be a non-empty string")
    }
    const annotations: { -readonly [K in keyof Catalog.Annotations]: boolean } = {}
    for (const [key, hint] of annotationKeys) {
      const value: unknown = tool.annotations[key]
      if (value === undefined) continue
      if (typeof value !== "boolean") {
        return yield* fail(name, "InvalidAnnotations", `the ${key} hint must be true, false or absent`)
      }
      annotations[hint] = value
    }
    if (annotations.readOnlyHint === true && annotations.destructiveHint === true) {
      return yield* fail(name, "ContradictoryAnnotations", "a read-only tool cannot be destructive")
    }
    for (
      const [label, schema] of [["input", tool.inputSchema], ["output", tool.outputSchema], [
        "failure",
        tool.failureSchema
      ]] as const
    ) {
      if (!Schema.isSchema(schema)) return yield* fail(name, "InvalidSchema", `the ${label} is not an Effect Schema`)
    }
    // An inferred schema is published in the form every client reads alike; an override as written.
    const schemaOf = (label: string, override: Catalog.JsonSchema | undefined, schema: Schema.Schema.AnyNoContext) =>
      Either.mapLeft(
        override !== undefined
          ? JsonSchema.checkOverride(override)
          : Either.map(
            JsonSchema.infer(schema),
            (inferred) => JsonSchema.portable(inferred, label === "output schema") as Catalog.JsonSchema
          ),
        (problem) =>
          new ToolDefinitionError({ tool: name, reason: problem.reason, detail: `${label}: ${problem.detail}` })
      )
    const inputSchema = yield* schemaOf("input schema", tool.inputSchemaJson, tool.inputSchema)
    if (!JsonSchema.isObjectSchema(inputSchema)) {
      return yield* fail(name, "NonObjectInput", "the input must encode as a JSON object (MCP requires an object)")
    }
    const published = yield* schemaOf("output schema", tool.outputSchemaJson, tool.outputSchema)
    const { envelope: wrap, jsonSchema: outputSchema } = JsonSchema.publish(published)
    // Keys in canonical order, frozen, its canonical JSON written once for the fingerprint.
    const descriptor: Catalog.Descriptor = Json.ordered({
      name,
      title: tool.title,
      description: tool.description,
      inputSchema,
      outputSchema,
      annotations,
      revision: tool.revision
    })
    return { tool, descriptor, wrap, outputIsOverride: tool.outputSchemaJson !== undefined }
  })

const comma = new Uint8Array([44])

const byName = (a: Catalog.Descriptor, b: Catalog.Descriptor): number => a.name < b.name ? -1 : a.name > b.name ? 1 : 0

const isSorted = (descriptors: ReadonlyArray<Catalog.Descriptor>): boolean => {
  for (let i = 1; i < descriptors.length; i++) if (byName(descriptors[i - 1]!, descriptors[i]!) > 0) return false
  return true
}

/**
 * The canonical JSON of each catalog's descriptors array (`[`, the descriptors' texts joined by
 * `,`, `]`) as one buffer: written when the catalog is built, keyed by its frozen array of frozen
 * descriptors (whose canonical JSON can therefore never change). The descriptors' own bytes
 * (`Json.ordered` keeps them) then become views into it: the catalog's texts are held once, side
 * by side, and `fingerprint` hashes a catalog's list in one piece (no lookup per descriptor, no
 * order check, no call into the hash per descriptor).
 */
const catalogBytes = new WeakMap<ReadonlyArray<Catalog.Descriptor>, Uint8Array>()

const keepCatalogBytes = (descriptors: ReadonlyArray<Catalog.Descriptor>): void => {
  const parts = descriptors.map(Json.canonicalUtf8)
  let size = 2 + Math.max(0, parts.length - 1)
  for (const part of parts) size += part.length
  const whole = Buffer.allocUnsafeSlow(size)
  let offset = 0
  whole[offset++] = 91 // [
  for (let i = 0; i < parts.length; i++) {
    if (i > 0) whole[offset++] = 44 // ,
    whole.set(parts[i]!, offset)
    Json.rehome(descriptors[i]!, whole.subarray(offset, offset + parts[i]!.length))
    offset += parts[i]!.length
  }
  whole[offset] = 93 // ]
  catalogBytes.set(descriptors, whole)
}

/**
 * SHA-256 (hex) over the domain tag and the canonical JSON of the descriptors sorted by name.
 *
 * @internal
 */
export const fingerprint = (descriptors: ReadonlyArray<Catalog.Descriptor>): string => {
  // The bytes of `Json.canonical(sorted)`: a catalog's own list has them in one piece; any other
  // list is hashed a descriptor at a time, from the bytes each descriptor a catalog built carries
  // (`Json.ordered`). Either way nothing as large as the catalog is allocated, whose allocation
  // costs collections (and incremental marking) in proportion to everything else alive.
  const hash = createHash("sha256").update(fingerprintDomain)
  const kept = catalogBytes.get(descriptors)
  if (kept !== undefined) return hash.update(kept).digest("hex")
  // Any other list: a sorted one (a catalog's copies) is checked in one pass, not copied and sorted again.
  const sorted = isSorted(descriptors) ? descriptors : [...descriptors].sort(byName)
  hash.update("[")
  for (let i = 0; i < sorted.length; i++) {
    if (i > 0) hash.update(comma)
    hash.update(Json.canonicalUtf8(sorted[i]))
  }
  return hash.update("]").digest("hex")
}

/** @internal */
export const build = (tools: ReadonlyArray<ToolData>): Either.Either<Built, ToolDefinitionError> =>
  Either.gen(function*() {
    const definitions = new Map<string, Definition>()
    for (const tool of tools) {
      const definition = yield* describe(tool)
      if (definitions.has(definition.descriptor.name)) {
        return yield* fail(definition.descriptor.name, "DuplicateName", "two tools of this toolkit share this name")
      }
      definitions.set(definition.descriptor.name, definition)
    }
    const descriptors = Object.freeze([...definitions.values()].map((d) => d.descriptor).sort(byName))
    keepCatalogBytes(descriptors)
    const catalog: Catalog.Catalog = Object.freeze({ descriptors, fingerprint: fingerprint(descriptors) })
    return { catalog, definitions }
  })
