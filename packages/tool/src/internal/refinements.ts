/**
 * Refinements whose JSON Schema, as `JSONSchema.fromAST` writes it, states another rule than the
 * one Effect checks: `Schema.pattern` publishes its RegExp's source without the flags, and
 * `Schema.int` (`Number.isSafeInteger`) publishes a bare `integer`, which admits `1e20`.
 *
 * @internal
 */
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as AST from "effect/SchemaAST"

// As `fromAST` decides: such an annotation is published as it is and nothing under it is
// inferred. Effect's own `int` annotation (`{ type: "integer" }`) is merged instead.
const isReplacement = (ast: AST.AST, jsonSchema: object): boolean =>
  AST.isRefinement(ast) && ast.annotations[AST.SchemaIdAnnotationId] === Schema.IntSchemaId
    ? "type" in jsonSchema && jsonSchema.type !== "integer"
    : "type" in jsonSchema || "oneOf" in jsonSchema || "anyOf" in jsonSchema || "$ref" in jsonSchema

/**
 * Flags that change which strings a RegExp matches, with what each does. JSON Schema patterns
 * have no flags: a pattern published without them would state another rule. The others are
 * harmless: `d` only adds match indices; `g` makes `test` start at `lastIndex`, which
 * `Schema.pattern` resets to 0 before every test; `u` is how validators run a published pattern
 * (Ajv's `unicodeRegExp`, on by default, here and in the MCP SDK), so with it Effect matches as
 * they do. `y` anchors the match at `lastIndex`, that is at the start; `v` has its own class
 * syntax (set operations, nested classes), which validators compiling with `u` read otherwise.
 */
const meaningfulFlags = new Set(["i", "m", "s", "y", "v"])

const regexOf = (ast: AST.AST): RegExp | undefined => {
  const annotation = ast.annotations[Schema.PatternSchemaId]
  return Predicate.hasProperty(annotation, "regex") && annotation.regex instanceof RegExp
    ? annotation.regex
    : undefined
}

const isAsciiLetter = (c: string): boolean => (c >= "a" && c <= "z") || (c >= "A" && c <= "Z")
const otherCase = (c: string): string => c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()
// With `u`, case-insensitive matching folds two characters outside ASCII onto ASCII letters: the
// Kelvin sign onto k, the long s onto s.
const folded: Readonly<Record<string, string>> = { k: "\u212A", s: "\u017F" }
const overlapsLetters = (low: number, high: number): boolean => (low <= 90 && high >= 65) || (low <= 122 && high >= 97)

/**
 * The source of a case-insensitive RegExp (`i`; `unicode`: with `u`) that matches the same strings
 * without the flag: an ASCII letter outside a class becomes a class of both cases, and a class
 * gains the other case of its letters and letter ranges (with `u`, and the characters folded onto
 * them). `undefined` for what this cannot state alike: a back-reference (matched regardless of
 * case), a letter written as an escape or outside ASCII (case folding beyond ASCII), a property
 * escape, a range mixing letters and other characters, and with `u` a word escape (`\w`, `\b`:
 * they take in the folded characters).
 *
 * @internal
 */
export const caseless = (source: string, unicode: boolean): string | undefined => {
  const others = (c: string): string => `${otherCase(c)}${unicode ? folded[c.toLowerCase()] ?? "" : ""}`
  let i = 0
  // An escape, as it is: `\` and what it escapes (a class escape, a control, a code point that is
  // not a letter, an escaped punctuator).
  const escape = (): string | undefined => {
    const next = source[i + 1]
    if (next === undefined) return undefined
    let end = i + 2
    if (next === "x" || next === "u") {
      const braced = next === "u" && source[end] === "{"
      end = braced ? source.indexOf("}", end) + 1 : end + (next === "x" ? 2 : 4)
      if (end <= i + 2) return undefined
      const hex = braced ? source.slice(i + 3, end - 1) : source.slice(i + 2, end)
      const code = Number.parseInt(hex, 16)
      if (!/^[0-9a-fA-F]+$/.test(hex) || Number.isNaN(code) || code > 127) return undefined
      if (isAsciiLetter(String.fromCharCode(code))) return undefined
    } else if (next === "c") {
      end += 1
    } else if (/[0-9A-Za-z]/.test(next) && !(unicode ? "dDsSnrtfv0" : "dDwWsSbBnrtfv0").includes(next)) {
      // Back-references (`\1`, `\k<…>`), property escapes and anything else with a letter.
      return undefined
    }
    const text = source.slice(i, end)
    i = end
    return text
  }
  const klass = (): string | undefined => {
    let out = "["
    i++
    if (source[i] === "^") {
      out += "^"
      i++
    }
    const items: Array<string> = []
    const added: Array<string> = []
    while (i < source.length && source[i] !== "]") {
      if (source[i] === "\\") {
        const text = escape()
        if (text === undefined) return undefined
        // An escape as a range's end: only away from letters (checked on its code point above).
        if (source[i] === "-" && source[i + 1] !== "]" && source[i + 1] !== undefined) return undefined
        items.push(text)
        continue
      }
      const low = source[i]!
      if (low.charCodeAt(0) > 127) return undefined
      if (source[i + 1] === "-" && source[i + 2] !== undefined && source[i + 2] !== "]") {
        const high = source[i + 2]!
        if (high === "\\" || high.charCodeAt(0) > 127) return undefined
        i += 3
        items.push(`${low}-${high}`)
        if (!overlapsLetters(low.charCodeAt(0), high.charCodeAt(0))) continue
        const sameCase = isAsciiLetter(low) && isAsciiLetter(high) &&
          (low === low.toLowerCase()) === (high === high.toLowerCase())
        if (!sameCase) return undefined
        added.push(`${otherCase(low)}-${otherCase(high)}`)
        if (unicode) {
          for (const [letter, other] of Object.entries(folded)) {
            const code = (low === low.toLowerCase() ? letter : letter.toUpperCase()).charCodeAt(0)
            if (code >= low.charCodeAt(0) && code <= high.charCodeAt(0)) added.push(other)
          }
        }
        continue
      }
      i++
      items.push(low)
      if (isAsciiLetter(low)) added.push(...others(low))
    }
    if (source[i] !== "]") return undefined
    i++
    const present = new Set(items)
    return `${out}${items.join("")}${added.filter((item) => !present.has(item)).join("")}]`
  }
  let out = ""
  while (i < source.length) {
    const c = source[i]!
    if (c === "\\") {
      const text = escape()
      if (text === undefined) return undefined
      out += text
    } else if (c === "[") {
      const text = klass()
      if (text === undefined) return undefined
      out += text
    } else if (c === "(" && source[i + 1] === "?") {
      // A group's opening as it is: `(?:`, `(?=`, `(?!`, `(?<=`, `(?<!`, `(?<name>`.
      const named = source[i + 2] === "<" && source[i + 3] !== "=" && source[i + 3] !== "!"
      const end = named ? source.indexOf(">", i) + 1 : i + (source[i + 2] === "<" ? 4 : 3)
      if (end <= i) return undefined
      out += source.slice(i, end)
      i = end
    } else if (c.charCodeAt(0) > 127) {
      return undefined
    } else {
      out += isAsciiLetter(c) ? `[${c}${others(c)}]` : c
      i++
    }
  }
  return out
}

/**
 * Whether validators can run `source` as they run a published pattern: with `u` (Ajv's
 * `unicodeRegExp`, the MCP SDK's and the CLIs' clients). `/^[\w-.]+$/` is a valid RegExp without
 * `u` and a syntax error with it: published, every validator compiling it would fail.
 */
const compilesWithU = (source: string): boolean => {
  try {
    new RegExp(source, "u")
    return true
  } catch {
    return false
  }
}

/**
 * The JSON Schema annotation a `Schema.pattern` refinement is published with: its RegExp's source,
 * which is the same rule only when no flag changes what it matches. A case-insensitive pattern is
 * published as its `caseless` source; a pattern any other flag changes (or one `caseless` cannot
 * rewrite), or whose source is no pattern under `u` (`compilesWithU`), without a `pattern`: the
 * published schema says less than the Schema checks, as for any filter without a JSON Schema,
 * never something else. `undefined`: published as it is. Effect's own description (`a string
 * matching the pattern <source>`) then names the RegExp with its flags.
 */
const patternAnnotations = (ast: AST.Refinement): AST.Annotations | undefined => {
  const regex = regexOf(ast)
  const jsonSchema = AST.getJSONSchemaAnnotation(ast)
  // A pattern annotated with another JSON Schema `pattern` (or none) publishes what was written.
  if (
    regex === undefined || Option.isNone(jsonSchema) || !("pattern" in jsonSchema.value) ||
    jsonSchema.value.pattern !== regex.source
  ) return undefined
  const flags = [...regex.flags].filter((flag) => meaningfulFlags.has(flag))
  if (flags.length === 0 && compilesWithU(regex.source)) return undefined
  const candidate = flags.length === 0
    ? regex.source
    : flags.length === 1 && flags[0] === "i"
    ? caseless(regex.source, regex.unicode)
    : undefined
  const rewritten = candidate !== undefined && compilesWithU(candidate) ? candidate : undefined
  const { pattern: _, ...rest } = jsonSchema.value
  const described = ast.annotations[AST.DescriptionAnnotationId] === `a string matching the pattern ${regex.source}`
  return {
    ...ast.annotations,
    [AST.JSONSchemaAnnotationId]: rewritten === undefined ? rest : { ...rest, pattern: rewritten },
    ...(described ? { [AST.DescriptionAnnotationId]: `a string matching the pattern ${regex}` } : {})
  }
}

const maxSafe = Number.MAX_SAFE_INTEGER

/** Marks, in the JSON Schema annotation of a `Schema.int` refinement, the node `fromAST` writes for it. */
const safeInteger: unique symbol = Symbol("@tether/tool/safeInteger")

// The JSON Schema annotation of a `Schema.int` refinement, unless it replaces the inferred schema.
const intJsonSchema = (ast: AST.Refinement): Option.Option<object> =>
  ast.annotations[AST.SchemaIdAnnotationId] === Schema.IntSchemaId
    ? Option.filter(AST.getJSONSchemaAnnotation(ast), (jsonSchema) => !isReplacement(ast, jsonSchema))
    : Option.none()

/** @internal */
export interface Publishable {
  /**
   * The AST to infer from: the same schema, its `Schema.int` refinements marked, its flagged
   * patterns' JSON Schema annotations rewritten (`patternAnnotations`).
   */
  readonly ast: AST.AST
  /**
   * The JSON Schema inferred from `ast`, with `minimum: -(2^53 - 1)` and `maximum: 2^53 - 1` on
   * each marked node unless it states a bound at least as tight (a copy, without the marks).
   */
  readonly bound: (jsonSchema: unknown) => unknown
}

/**
 * The schema as it is to be published. `Schema.int` checks `Number.isSafeInteger`, but `fromAST`
 * publishes it as `{ type: "integer" }`.
 * The marks travel with the node `fromAST` writes for the refinement (it spreads annotations
 * into fresh objects, symbol keys included, merging the bounds of the refinements around it into
 * that node or its `allOf`), so the bounds are added where the check is, and only there: an
 * `integer` written in a JSON Schema annotation is published as written.
 *
 * @internal
 */
export const publishable = (ast: AST.AST): Publishable => {
  const memo = new Map<AST.AST, AST.AST>()
  let marked = false
  const mark = (ast: AST.AST): AST.AST => {
    const cached = memo.get(ast)
    if (cached !== undefined) return cached
    if (ast._tag === "Suspend") {
      // Recursive schemas come back here through the thunk, which finds the copy in `memo`.
      const copy = copyWith(ast, { f: () => mark(ast.f()) })
      memo.set(ast, copy)
      return copy
    }
    const copy = copyOf(ast)
    memo.set(ast, copy)
    return copy
  }
  const marks = <A extends { readonly type: AST.AST }>(members: ReadonlyArray<A>): ReadonlyArray<A> | undefined => {
    const copies = members.map((member) => {
      const type = mark(member.type)
      return type === member.type ? member : copyWith<A>(member, { type } as Partial<A>)
    })
    return copies.some((copy, i) => copy !== members[i]) ? copies : undefined
  }
  // A node is copied only when something under it changed: a schema without `Schema.int` or a
  // flagged pattern is inferred from the very AST it was given.
  const copyOf = (ast: AST.AST): AST.AST => {
    const changes: Record<string, unknown> = {}
    let annotations = ast.annotations
    switch (ast._tag) {
      case "Refinement": {
        const from = mark(ast.from)
        if (from !== ast.from) changes["from"] = from
        const check = intJsonSchema(ast)
        if (Option.isSome(check)) {
          marked = true
          annotations = { ...annotations, [AST.JSONSchemaAnnotationId]: { ...check.value, [safeInteger]: true } }
        }
        annotations = patternAnnotations(ast) ?? annotations
        break
      }
      case "Transformation": {
        const from = mark(ast.from)
        const to = mark(ast.to)
        if (from !== ast.from) changes["from"] = from
        if (to !== ast.to) changes["to"] = to
        break
      }
      case "Union": {
        const types = ast.types.map(mark)
        if (types.some((type, i) => type !== ast.types[i])) changes["types"] = types
        break
      }
      case "TupleType": {
        const elements = marks(ast.elements)
        const rest = marks(ast.rest)
        if (elements !== undefined) changes["elements"] = elements
        if (rest !== undefined) changes["rest"] = rest
        break
      }
      case "TypeLiteral": {
        const properties = marks(ast.propertySignatures)
        // An index signature's key is published too (`propertyNames`).
        const indexes = ast.indexSignatures.map((signature) => {
          const parameter = mark(signature.parameter) as AST.Parameter
          const type = mark(signature.type)
          return parameter === signature.parameter && type === signature.type
            ? signature
            : copyWith(signature, { parameter, type })
        })
        if (properties !== undefined) changes["propertySignatures"] = properties
        if (indexes.some((index, i) => index !== ast.indexSignatures[i])) changes["indexSignatures"] = indexes
        break
      }
    }
    // A class (its transformation and its declaration) is published as its surrogate's schema.
    const surrogate = AST.getSurrogateAnnotation(ast)
    if (Option.isSome(surrogate)) {
      const copy = mark(surrogate.value)
      if (copy !== surrogate.value) annotations = { ...annotations, [AST.SurrogateAnnotationId]: copy }
    }
    if (annotations !== ast.annotations) changes["annotations"] = annotations
    return Object.keys(changes).length === 0 ? ast : copyWith(ast, changes as Partial<AST.AST>)
  }
  const copy = mark(ast)
  return {
    ast: copy,
    // Read when the JSON Schema is bound: suspended schemas are marked while `fromAST` runs.
    bound: (jsonSchema) => marked ? bound(jsonSchema) : jsonSchema
  }
}

// A copy of an AST node (or of a property, element or index signature) with some fields
// replaced, its class and every other field kept: how `SchemaAST.annotations` copies a node.
const copyWith = <A extends object>(node: A, changes: Partial<A>): A => {
  const descriptors = Object.getOwnPropertyDescriptors(node) as Record<string, PropertyDescriptor>
  for (const [key, value] of Object.entries(changes)) descriptors[key] = { ...descriptors[key], value }
  return Object.create(Object.getPrototypeOf(node), descriptors)
}

const statedBounds = (schema: Record<string, unknown>, keys: ReadonlyArray<string>): Array<number> => {
  const out: Array<number> = []
  const allOf = Array.isArray(schema["allOf"]) ? schema["allOf"] : []
  for (const node of [schema, ...allOf]) {
    if (typeof node !== "object" || node === null) continue
    for (const key of keys) {
      const value = (node as Record<string, unknown>)[key]
      if (typeof value === "number") out.push(value)
    }
  }
  return out
}

const bound = (u: unknown): unknown => {
  if (Array.isArray(u)) return u.map(bound)
  if (typeof u !== "object" || u === null) return u
  const out: Record<string, unknown> = {}
  for (const key of Object.keys(u)) {
    // `__proto__` as an own key must stay data, never become the prototype.
    Object.defineProperty(out, key, {
      value: bound((u as Record<string, unknown>)[key]),
      enumerable: true,
      writable: true,
      configurable: true
    })
  }
  if ((u as { readonly [safeInteger]?: unknown })[safeInteger] === true) {
    // A looser `minimum` (`maximum`) gives way; a looser exclusive bound may stay beside it.
    if (!statedBounds(out, ["minimum", "exclusiveMinimum"]).some((b) => b >= -maxSafe)) out["minimum"] = -maxSafe
    if (!statedBounds(out, ["maximum", "exclusiveMaximum"]).some((b) => b <= maxSafe)) out["maximum"] = maxSafe
  }
  return out
}
