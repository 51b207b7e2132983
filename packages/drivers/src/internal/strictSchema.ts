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
 * Keywords OpenAI's strict structured outputs do not take (composition other than `anyOf`,
 * conditionals, and the object and array keywords outside its subset), or that only a tuple or
 * an open object carries.
 */
const refusedKeywords = [
  "allOf",
  "oneOf",
  "not",
  "if",
  "then",
  "else",
  "dependentRequired",
  "dependentSchemas",
  "patternProperties",
  "propertyNames",
  "unevaluatedProperties",
  "unevaluatedItems",
  "prefixItems",
  "additionalItems",
  "contains"
]

/** Whether a schema node says what its value is (a node that says nothing accepts anything). */
const typed = (node: Json): boolean =>
  "type" in node || "anyOf" in node || "$ref" in node || "enum" in node || "const" in node

const nodeRefusal = (node: unknown, at: string): string | undefined => {
  if (!isRecord(node)) return `${at} is ${typeof node === "boolean" ? "a boolean schema" : "not a schema"}`
  if (!typed(node)) return `${at} accepts any value (Schema.Unknown or Schema.Any): it needs a type`
  const types: ReadonlyArray<unknown> = Array.isArray(node["type"]) ? node["type"] : [node["type"]]
  if ((types.includes("object") || "properties" in node) && node["additionalProperties"] !== false) {
    return `${at} is an object open to other keys (a Schema.Record, an index signature, Schema.Object or an empty ` +
      "Struct): every object needs `additionalProperties: false`"
  }
  if (types.includes("array") && !isRecord(node["items"])) {
    return `${at} is an array without one item schema (a tuple?)`
  }
  const keyword = refusedKeywords.find((key) => key in node)
  if (keyword !== undefined) return `${at} uses \`${keyword}\``
  for (const key of ["properties", "$defs", "definitions"]) {
    const children = node[key]
    if (!isRecord(children)) continue
    for (const [name, child] of Object.entries(children)) {
      const refusal = nodeRefusal(child, `${at}/${key}/${name}`)
      if (refusal !== undefined) return refusal
    }
  }
  if ("items" in node) {
    const refusal = nodeRefusal(node["items"], `${at}/items`)
    if (refusal !== undefined) return refusal
  }
  const branches = node["anyOf"]
  if (Array.isArray(branches)) {
    for (let i = 0; i < branches.length; i++) {
      const refusal = nodeRefusal(branches[i], `${at}/anyOf/${i}`)
      if (refusal !== undefined) return refusal
    }
  }
  return undefined
}

/**
 * Why OpenAI's strict structured outputs would refuse `schema` (a JSON Schema as `strict` writes
 * it), or `undefined` when it takes it: the root must be an object; every object closed
 * (`additionalProperties: false`); every node typed (a type, `anyOf`, `$ref`, `enum` or `const`);
 * arrays with one item schema; none of the keywords outside its subset (`allOf`, `oneOf`, `not`,
 * conditionals, tuples, pattern or unevaluated properties). The documented limits on size and
 * nesting are not checked. Codex sends `--output-schema` / `outputSchema` strict and has no
 * setting to do otherwise, and the endpoint refuses such a schema after the CLI started.
 *
 * @internal
 */
export const refusal = (schema: unknown): string | undefined => {
  if (!isRecord(schema)) return "the schema is not an object"
  if (schema["type"] !== "object" || "anyOf" in schema) return "the root is not an object schema"
  return nodeRefusal(schema, "#")
}

/** The JSON type of a value, as a schema's `type` names it. */
const jsonType = (v: unknown): string =>
  v === null
    ? "null"
    : Array.isArray(v)
    ? "array"
    : typeof v === "number"
    ? Number.isInteger(v) ? "integer" : "number"
    : typeof v

/**
 * A value answered for `strict(schema)` as a value of `schema`: only the `null`s `strict`
 * introduced are removed; anything else is left for the Schema's own validation. Under a union
 * (`anyOf`, `oneOf`) the value is read as the first branch it fits, its `null`s included: a
 * branch fits when the value has its JSON type, its `const` and `enum`, the branch's required
 * properties and no property the branch closes out, a `null` only where the branch left the
 * property optional or admits it, and each property's value (each item's) fitting in turn, nested
 * objects and unions included. A value that fits no branch is left as it is. @internal
 */
export const unstrict = (schema: unknown, value: unknown): unknown => {
  const root = isRecord(schema) ? schema : {}
  // A local reference is a JSON Pointer from the document's root: `#/$defs/…`, or where the
  // published envelope put them (`#/properties/result/$defs/…` for a non-object output).
  const pointer = (ref: string): unknown => {
    if (ref === "#") return root
    if (!ref.startsWith("#/")) return undefined
    let at: unknown = root
    for (const token of ref.slice(2).split("/")) {
      let key: string
      try {
        key = decodeURIComponent(token).replace(/~1/g, "/").replace(/~0/g, "~")
      } catch {
        return undefined
      }
      at = isRecord(at)
        ? (Object.hasOwn(at, key) ? at[key] : undefined)
        : Array.isArray(at)
        ? at[Number(key)]
        : undefined
      if (at === undefined) return undefined
    }
    return at
  }
  const resolve = (node: unknown, depth: number): unknown => {
    if (!isRecord(node) || typeof node["$ref"] !== "string" || depth > 64) return node
    return resolve(pointer(node["$ref"]), depth + 1)
  }
  /** The schema of an array's item `i`: its `prefixItems` entry, else its `items` (an array of them: Draft-07's tuple form). */
  const itemOf = (s: Json, i: number): unknown => {
    const prefix = s["prefixItems"]
    if (Array.isArray(prefix) && i < prefix.length) return prefix[i]
    const items = s["items"]
    return Array.isArray(items) ? items[i] : isRecord(items) ? items : undefined
  }
  const branchesOf = (s: Json): ReadonlyArray<unknown> | undefined =>
    Array.isArray(s["anyOf"]) ? s["anyOf"] : Array.isArray(s["oneOf"]) ? s["oneOf"] : undefined
  /** Whether `v` has the type, `const` and `enum` of `node` (shallow: an object's properties are not looked at). */
  const typeFits = (node: unknown, v: unknown, depth: number): boolean => {
    const s = resolve(node, 0)
    if (!isRecord(s) || depth > 64) return true
    const primitive = v === null || typeof v !== "object"
    if ("const" in s && primitive && s["const"] !== v) return false
    if (Array.isArray(s["enum"]) && primitive && !s["enum"].includes(v)) return false
    const type = s["type"]
    if (typeof type === "string" || Array.isArray(type)) {
      const actual = jsonType(v)
      const types: ReadonlyArray<unknown> = Array.isArray(type) ? type : [type]
      if (!types.some((t) => t === actual || (t === "number" && actual === "integer"))) return false
    }
    const branches = branchesOf(s)
    return branches === undefined || branches.some((branch) => typeFits(branch, v, depth + 1))
  }
  /**
   * Whether `v` can be the strict answer for `node`, all the way down: its type, `const` and
   * `enum`; an object's required properties, no property it closes out, a `null` only where the
   * property is optional or admits it, and each property's value fitting the property; an array's
   * items fitting theirs; under a union, some branch fitting. (Looking one level deep would read
   * two structs that differ only inside a nested object as the first, and keep the other's nulls.)
   */
  const fitted = new WeakMap<object, Map<Json, boolean>>()
  const fits = (node: unknown, v: unknown, depth: number): boolean => {
    const s = resolve(node, 0)
    if (!isRecord(s) || depth > 64) return true
    if (typeof v !== "object" || v === null) return fitsNow(s, v, depth)
    // Each (schema node, value) pair is fitted once per reply: a union's branch refused only
    // after its subtree was read (a tree whose operator comes after its operands) would otherwise
    // have every enclosing union read that subtree again, each level doubling the work.
    let known = fitted.get(v)
    if (known === undefined) fitted.set(v, known = new Map())
    const hit = known.get(s)
    if (hit !== undefined) return hit
    // A reference that comes back to this pair before it is decided is taken to fit, as the depth
    // bound does.
    known.set(s, true)
    const result = fitsNow(s, v, depth)
    known.set(s, result)
    return result
  }
  const fitsNow = (s: Json, v: unknown, depth: number): boolean => {
    if (!typeFits(s, v, 0)) return false
    const branches = branchesOf(s)
    if (branches !== undefined && !branches.some((branch) => fits(branch, v, depth + 1))) return false
    if (Array.isArray(s["allOf"]) && !s["allOf"].every((part) => fits(part, v, depth + 1))) return false
    if (Array.isArray(v)) {
      return v.every((item, i) => {
        const schema = itemOf(s, i)
        return schema === undefined || fits(schema, item, depth + 1)
      })
    }
    if (!isRecord(v)) return true
    const properties = isRecord(s["properties"]) ? s["properties"] : undefined
    const additional = s["additionalProperties"]
    const required = requiredOf(s)
    for (const key of required) if (!Object.hasOwn(v, key)) return false
    for (const [key, item] of Object.entries(v)) {
      const property = properties !== undefined && Object.hasOwn(properties, key) ? properties[key] : undefined
      if (property === undefined) {
        if (additional === false) return false
        if (isRecord(additional) && !fits(additional, item, depth + 1)) return false
        continue
      }
      if (item === null) {
        if (required.includes(key) && !admitsNull(resolve(property, 0))) return false
        continue
      }
      if (!fits(property, item, depth + 1)) return false
    }
    return true
  }
  const walk = (node: unknown, v: unknown, depth: number): unknown => {
    const s = resolve(node, 0)
    if (!isRecord(s) || depth > 256) return v
    const branches = branchesOf(s)
    if (branches !== undefined) {
      const branch = branches.find((b) => isRecord(resolve(b, 0)) && fits(b, v, 0))
      return branch === undefined ? v : walk(branch, v, depth + 1)
    }
    if (Array.isArray(s["allOf"])) {
      for (const part of s["allOf"]) v = walk(part, v, depth + 1)
    }
    if (Array.isArray(v)) {
      return v.map((item, i) => {
        const schema = itemOf(s, i)
        return schema === undefined ? item : walk(schema, item, depth + 1)
      })
    }
    if (!isRecord(v)) return v
    const properties = isRecord(s["properties"]) ? s["properties"] : {}
    const additional = isRecord(s["additionalProperties"]) ? s["additionalProperties"] : undefined
    if (!isRecord(s["properties"]) && additional === undefined) return v
    const required = requiredOf(s)
    const out: { [key: string]: unknown } = {}
    for (const [key, item] of Object.entries(v)) {
      const property = properties[key]
      if (property === undefined) {
        out[key] = additional === undefined ? item : walk(additional, item, depth + 1)
        continue
      }
      if (item === null && !required.includes(key) && !admitsNull(resolve(property, 0))) continue
      out[key] = walk(property, item, depth + 1)
    }
    return out
  }
  return walk(root, value, 0)
}
