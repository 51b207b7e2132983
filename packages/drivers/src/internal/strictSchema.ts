/**
 * OpenAI's strict structured outputs (what Codex sends `--output-schema` as) accept an object
 * schema only when every property is required: an optional property is written as required and
 * nullable instead, and the model answers `null` for it. `strict` rewrites a published JSON
 * Schema that way; `unstrict` turns such an answer back into a value of the original schema (a
 * `null` for a property the original left optional, and that does not admit `null` itself, is
 * the property left out).
 *
 * @internal
 */

type Json = { readonly [key: string]: unknown }

const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

const requiredOf = (schema: Json): ReadonlyArray<string> =>
  Array.isArray(schema["required"]) ? schema["required"].filter((key): key is string => typeof key === "string") : []

const admitsNull = (schema: unknown): boolean => {
  if (!isRecord(schema)) return true
  if (schema["type"] === "null") return true
  if (Array.isArray(schema["type"]) && schema["type"].includes("null")) return true
  if (Array.isArray(schema["enum"]) && schema["enum"].includes(null)) return true
  for (const key of ["anyOf", "oneOf"]) {
    const branches = schema[key]
    if (Array.isArray(branches) && branches.some(admitsNull)) return true
  }
  return false
}

const mapValues = (u: unknown, f: (schema: unknown) => unknown): unknown =>
  isRecord(u) ? Object.fromEntries(Object.entries(u).map(([key, value]) => [key, f(value)])) : u

/** The strict form of a JSON Schema (a new document; the input is not modified). @internal */
export const strict = (schema: unknown): unknown => {
  if (Array.isArray(schema)) return schema.map(strict)
  if (!isRecord(schema)) return schema
  const out: { [key: string]: unknown } = {}
  for (const [key, value] of Object.entries(schema)) {
    switch (key) {
      case "properties":
      case "$defs":
      case "definitions":
        out[key] = mapValues(value, strict)
        break
      case "items":
      case "additionalProperties":
      case "anyOf":
      case "oneOf":
      case "allOf":
      case "prefixItems":
        out[key] = strict(value)
        break
      default:
        out[key] = value
    }
  }
  const properties = schema["properties"]
  if (isRecord(properties)) {
    const required = requiredOf(schema)
    const strictProperties = out["properties"] as { [key: string]: unknown }
    for (const key of Object.keys(properties)) {
      const property = strictProperties[key]
      if (!required.includes(key) && !admitsNull(property)) {
        strictProperties[key] = { anyOf: [property, { type: "null" }] }
      }
    }
    out["required"] = Object.keys(properties)
  }
  return out
}

/**
 * A value answered for `strict(schema)` as a value of `schema`: only the `null`s `strict`
 * introduced are removed; anything else is left for the Schema's own validation. @internal
 */
export const unstrict = (schema: unknown, value: unknown): unknown => {
  const root = isRecord(schema) ? schema : {}
  const resolve = (node: unknown, depth: number): unknown => {
    if (!isRecord(node) || typeof node["$ref"] !== "string" || depth > 64) return node
    const match = /^#\/(\$defs|definitions)\/(.+)$/.exec(node["$ref"])
    const defs = match === null ? undefined : root[match[1]!]
    return resolve(isRecord(defs) ? defs[match![2]!.replace(/~1/g, "/").replace(/~0/g, "~")] : undefined, depth + 1)
  }
  const walk = (node: unknown, v: unknown, depth: number): unknown => {
    const s = resolve(node, 0)
    if (!isRecord(s) || depth > 256) return v
    if (Array.isArray(v)) {
      const items = s["items"]
      return isRecord(items) ? v.map((item) => walk(items, item, depth + 1)) : v
    }
    if (!isRecord(v)) return v
    const properties = s["properties"]
    if (!isRecord(properties)) return v
    const required = requiredOf(s)
    const out: { [key: string]: unknown } = {}
    for (const [key, item] of Object.entries(v)) {
      const property = properties[key]
      if (property === undefined) {
        out[key] = item
        continue
      }
      if (item === null && !required.includes(key) && !admitsNull(resolve(property, 0))) continue
      out[key] = walk(property, item, depth + 1)
    }
    return out
  }
  return walk(root, value, 0)
}
