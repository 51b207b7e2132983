/**
 * A `runAs` JSON Schema as Claude Code's own validator reads it. Claude Code (2.1) builds its
 * `StructuredOutput` tool from `--json-schema` with a default Ajv: Draft-07, strict, no formats, an
 * exact `multipleOf`, string lengths in code points. A schema it cannot compile (a 2020-12
 * `prefixItems`, a `format` it does not know) leaves the tool out without a word, and the model's
 * call of it fails; one it reads more strictly than the Schema (`multipleOf(0.01)` refusing
 * `0.07`) refuses values the Schema takes. Tether decodes the value with the Schema either way, so
 * the schema sent may say less than the Schema checks, never something else:
 * - a tuple's `prefixItems` becomes Draft-07's array form of `items`, its `items` (`false` or the
 *   rest element) `additionalItems`;
 * - `format` is left out (Claude Code's Ajv knows none);
 * - a fractional `multipleOf` is left out (Effect allows floating-point error);
 * - a `minLength` of `m` UTF-16 units (what Effect counts) becomes the `ceil(m / 2)` code points it
 *   implies.
 *
 * @internal
 */

/** Keywords whose values are JSON data, not schemas: never rewritten. */
const dataKeywords = new Set(["const", "enum", "default", "examples"])

/** Keywords whose values map names (property names, definition names) to schemas. */
const nameMaps = new Set(["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"])

const isRecord = (u: unknown): u is { readonly [key: string]: unknown } =>
  typeof u === "object" && u !== null && !Array.isArray(u)

const put = (out: Record<string, unknown>, key: string, value: unknown) =>
  Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true })

/** @internal */
export const forClaude = (u: unknown): unknown => {
  if (Array.isArray(u)) return u.map(forClaude)
  if (!isRecord(u)) return u
  const tuple = Array.isArray(u["prefixItems"])
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(u)) {
    if (dataKeywords.has(key)) put(out, key, value)
    else if (nameMaps.has(key) && isRecord(value)) {
      const names: Record<string, unknown> = {}
      for (const [name, schema] of Object.entries(value)) put(names, name, forClaude(schema))
      put(out, key, names)
    } else if (key === "format") continue
    else if (key === "multipleOf" && typeof value === "number" && !Number.isInteger(value)) continue
    else if (key === "minLength" && typeof value === "number" && value > 1) put(out, key, Math.ceil(value / 2))
    else if (tuple && key === "prefixItems") put(out, "items", forClaude(value))
    else if (tuple && key === "items") put(out, "additionalItems", forClaude(value))
    else put(out, key, forClaude(value))
  }
  return out
}

/**
 * The largest `--json-schema` sent: Linux caps one argument at 128 KiB (`MAX_ARG_STRLEN`); a
 * larger schema is asked for by instruction (in the prompt, which goes on stdin).
 *
 * @internal
 */
export const maxArgumentBytes = 120_000

/** Why Claude Code cannot take `schema` on its command line, if it cannot. @internal */
export const refusal = (schema: unknown): string | undefined =>
  Buffer.byteLength(JSON.stringify(forClaude(schema))) > maxArgumentBytes
    ? `the JSON Schema is larger than one command-line argument (${maxArgumentBytes} bytes)`
    : undefined
