/**
 * Plain JSON values: checked deep copies, deep freezing and canonical serialization
 * (sorted keys, no insignificant whitespace).
 *
 * @internal
 */
import * as Either from "effect/Either"
import { Buffer } from "node:buffer"

const maxDepth = 256

const isPlainObject = (u: object): boolean => {
  const proto = Object.getPrototypeOf(u)
  return proto === Object.prototype || proto === null
}

type Copied = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly reason: string }

const fail = (reason: string): Copied => ({ ok: false, reason })

const copy = (u: unknown, depth: number, path: string): Copied => {
  if (u === null || typeof u === "string" || typeof u === "boolean") return { ok: true, value: u }
  if (typeof u === "number") {
    if (!Number.isFinite(u)) return fail(`${path} is not a finite number`)
    // JSON has no -0: the copy holds what its JSON text says.
    return { ok: true, value: u === 0 ? 0 : u }
  }
  if (typeof u !== "object") return fail(`${path} is a ${typeof u}, not JSON`)
  if (depth >= maxDepth) return fail(`${path} is nested deeper than ${maxDepth}`)
  if (Array.isArray(u)) {
    const out: Array<unknown> = []
    for (let i = 0; i < u.length; i++) {
      const item = copy(u[i], depth + 1, `${path}[${i}]`)
      if (!item.ok) return item
      out.push(item.value)
    }
    return { ok: true, value: out }
  }
  if (!isPlainObject(u)) return fail(`${path} is not a plain object`)
  const out: Record<string, unknown> = {}
  for (const key of Object.keys(u)) {
    const member = (u as Record<string, unknown>)[key]
    // As in JSON.stringify, an `undefined` member is an absent one.
    if (member === undefined) continue
    const item = copy(member, depth + 1, `${path}.${key}`)
    if (!item.ok) return item
    // `__proto__` as an own key must stay data, never become the prototype.
    Object.defineProperty(out, key, { value: item.value, enumerable: true, writable: true, configurable: true })
  }
  return { ok: true, value: out }
}

/**
 * A deep copy of `u` if it is a plain JSON value (plain objects, arrays, strings, finite
 * numbers, booleans, null; `undefined` object members are dropped), otherwise the reason it
 * is not: nothing is converted silently (no `NaN` to `null`, no `toJSON`).
 *
 * @internal
 */
export const toJson = (u: unknown): Either.Either<unknown, string> => {
  let copied: Copied
  try {
    copied = copy(u, 0, "$")
  } catch {
    // A getter or a Proxy trap threw while reading the value.
    copied = fail("$ could not be read")
  }
  return copied.ok ? Either.right(copied.value) : Either.left(copied.reason)
}

interface Visit {
  readonly value: unknown
  readonly key: PropertyKey | undefined
  readonly parent: Visit | undefined
}

const pathOf = (visit: Visit): ReadonlyArray<PropertyKey> => {
  const path: Array<PropertyKey> = []
  for (let at: Visit | undefined = visit; at?.key !== undefined; at = at.parent) path.push(at.key)
  return path.reverse()
}

/**
 * The path of the first value in `u` a tool's input may not hold, depth first in key order, or
 * `undefined`: a number that is not finite (JSON has no NaN or ±Infinity, yet `1e309` parses to
 * `Infinity`), or an own key `__proto__` (which `JSON.parse` makes as data, and which Effect's
 * decoder writes back with `output[key] =`: the decoded record loses the key and gets the
 * model's value as its prototype). Iterative, because values may nest deeply, and each object is
 * visited once, because a value may be cyclic. Reads properties: a throwing getter or Proxy trap
 * throws.
 *
 * @internal
 */
export const firstRefused = (u: unknown): ReadonlyArray<PropertyKey> | undefined => {
  const seen = new Set<object>()
  const stack: Array<Visit> = [{ value: u, key: undefined, parent: undefined }]
  while (stack.length > 0) {
    const visit = stack.pop()!
    const value = visit.value
    if (typeof value === "number") {
      if (!Number.isFinite(value)) return pathOf(visit)
      continue
    }
    if (typeof value !== "object" || value === null || seen.has(value)) continue
    seen.add(value)
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], key: i, parent: visit })
    } else {
      if (Object.hasOwn(value, "__proto__")) return [...pathOf(visit), "__proto__"]
      const keys = Object.keys(value)
      for (let i = keys.length - 1; i >= 0; i--) {
        stack.push({ value: (value as Record<string, unknown>)[keys[i]!], key: keys[i]!, parent: visit })
      }
    }
  }
  return undefined
}

/** @internal */
export const deepFreeze = <A>(u: A): A => {
  if (typeof u === "object" && u !== null && !Object.isFrozen(u)) {
    for (const key of Object.keys(u)) deepFreeze((u as Record<string, unknown>)[key])
    Object.freeze(u)
  }
  return u
}

const compareKeys = (a: string, b: string): number => a < b ? -1 : a > b ? 1 : 0

/**
 * The canonical JSON, as UTF-8 bytes, of the values made by `ordered` whose `JSON.stringify`
 * text is their canonical JSON (every object's own keys enumerate in sorted order, nothing but
 * plain JSON and `undefined` members inside): written once, from the copy before it is frozen
 * (`JSON.stringify` writes frozen objects and arrays at about half the speed), and never again.
 * Kept as bytes, not as the text: what reads them is a hash, which then takes them as they are
 * (a text is encoded again on every `update`), and small `Buffer`s share Node's pool slabs, so
 * the bytes of a catalog's descriptors lie side by side instead of across the heap.
 */
const canonicalBytes = new WeakMap<object, Uint8Array>()

const orderedCopy = (
  u: unknown,
  depth: number,
  made: Array<object>
): { readonly value: unknown; readonly canonical: boolean } => {
  if (typeof u !== "object" || u === null) {
    const canonical = u === undefined || u === null || typeof u === "string" || typeof u === "number" ||
      typeof u === "boolean"
    return { value: u, canonical }
  }
  if (depth >= maxDepth || !(Array.isArray(u) || isPlainObject(u))) return { value: u, canonical: false }
  let canonical = true
  if (Array.isArray(u)) {
    const out: Array<unknown> = []
    for (let i = 0; i < u.length; i++) {
      const item = orderedCopy(u[i], depth + 1, made)
      // `JSON.stringify` writes an `undefined` element as null, as `canonical` does.
      canonical &&= item.canonical
      out.push(item.value)
    }
    made.push(out)
    return { value: out, canonical }
  }
  const record = u as Record<string, unknown>
  const keys = Object.keys(record).sort(compareKeys)
  const out: Record<string, unknown> = {}
  for (const key of keys) {
    const item = orderedCopy(record[key], depth + 1, made)
    canonical &&= item.canonical
    // `__proto__` as an own key must stay data, never become the prototype.
    if (key === "__proto__") {
      Object.defineProperty(out, key, { value: item.value, enumerable: true, writable: true, configurable: true })
    } else {
      out[key] = item.value
    }
  }
  // Integer-like keys enumerate first, in numeric order, whatever the insertion order.
  const enumerated = Object.keys(out)
  for (let i = 0; i < keys.length && canonical; i++) canonical = enumerated[i] === keys[i]
  made.push(out)
  return { value: out, canonical }
}

/**
 * A deep-frozen copy of `u` with every object's keys inserted in sorted order, its canonical
 * JSON written once (natively, by `JSON.stringify`, before the copy is frozen) and kept for
 * `canonical`. A value that cannot be written that way is still copied and frozen.
 *
 * @internal
 */
export const ordered = <A>(u: A): A => {
  const made: Array<object> = []
  const copy = orderedCopy(u, 0, made)
  if (copy.canonical && typeof copy.value === "object" && copy.value !== null) {
    canonicalBytes.set(copy.value, Buffer.from(JSON.stringify(copy.value), "utf8"))
  }
  for (const value of made) Object.freeze(value)
  return copy.value as A
}

/** Whether `JSON.stringify` writes this array element as `canonical` does. */
const isNative = (u: unknown): boolean =>
  u === null || u === undefined || typeof u === "string" || typeof u === "boolean" || typeof u === "number"

/**
 * Canonical JSON of a value already known to be plain JSON: object keys sorted by UTF-16
 * code units, `undefined` object members omitted, numbers and strings as `JSON.stringify`
 * writes them.
 *
 * @internal
 */
export const canonical = (u: unknown): string => {
  if (u === null || typeof u !== "object") return JSON.stringify(u) ?? "null"
  const bytes = canonicalBytes.get(u)
  if (bytes !== undefined) return utf8.decode(bytes)
  if (Array.isArray(u)) return u.every(isNative) ? JSON.stringify(u) : `[${u.map(canonical).join(",")}]`
  const record = u as Record<string, unknown>
  const parts: Array<string> = []
  for (const key of Object.keys(record).sort(compareKeys)) {
    const value = record[key]
    if (value !== undefined) parts.push(`${JSON.stringify(key)}:${canonical(value)}`)
  }
  return `{${parts.join(",")}}`
}

const utf8 = new TextDecoder()

/**
 * `canonical` as UTF-8 bytes: the bytes `ordered` kept for its value, or the text encoded.
 *
 * @internal
 */
export const canonicalUtf8 = (u: unknown): Uint8Array =>
  (typeof u === "object" && u !== null ? canonicalBytes.get(u) : undefined) ?? Buffer.from(canonical(u), "utf8")

/**
 * Moves the bytes kept for `value` (made by `ordered`) to `bytes`, the same bytes elsewhere (a
 * view into a larger buffer holding several values' texts side by side). Nothing happens when
 * nothing is kept for `value`, or when `bytes` are not the bytes kept.
 *
 * @internal
 */
export const rehome = (value: object, bytes: Uint8Array): void => {
  const kept = canonicalBytes.get(value)
  if (kept !== undefined && Buffer.compare(kept, bytes) === 0) canonicalBytes.set(value, bytes)
}
