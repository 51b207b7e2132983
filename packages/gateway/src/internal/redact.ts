/**
 * Replacing token values by a fixed marker in text, bytes and JSON-like values. The marker has
 * the length of a token (43 characters, 32 bytes base64url), so bytes keep their length and a
 * file can be rewritten in place.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as HashMap from "effect/HashMap"
import * as HashSet from "effect/HashSet"
import * as Logger from "effect/Logger"

/** @internal */
export const tokenLength = 43

/** The fixed marker; exactly as long as a token, ASCII, valid inside JSON and TOML strings. @internal */
export const marker = "[REDACTED-TETHER-GATEWAY-TOKEN------------]"

/**
 * Partial tokens at the edges of a bounded window are replaced from this many characters on:
 * below it the exposed part leaves more than 210 of the token's 256 bits unknown.
 */
const minimumPartial = 8

const markerBytes = Buffer.from(marker, "latin1")

const isPlainObject = (u: unknown): u is { readonly [key: string]: unknown } => {
  if (typeof u !== "object" || u === null) return false
  const proto = Object.getPrototypeOf(u)
  return proto === Object.prototype || proto === null
}

/** @internal */
export interface Redactor {
  readonly text: (text: string) => string
  readonly bytes: (bytes: Uint8Array) => Uint8Array
  readonly value: <A>(value: A) => A
  readonly heldBack: (text: string) => number
  readonly window: (text: string) => string
  readonly logs: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/**
 * A redactor over the token values `values()` returns at each call (the set may change between
 * calls: tokens are minted and released while the redactor is in use).
 *
 * @internal
 */
export const make = (values: () => ReadonlyArray<string>): Redactor => {
  const textWith = (vs: ReadonlyArray<string>, text: string): string => {
    let out = text
    for (const v of vs) {
      if (out.includes(v)) out = out.split(v).join(marker)
    }
    return out
  }
  const text = (input: string): string => {
    const vs = values()
    return vs.length === 0 || input.length < tokenLength ? input : textWith(vs, input)
  }
  const bytes = (input: Uint8Array): Uint8Array => {
    const vs = values()
    if (vs.length === 0 || input.length < tokenLength) return input
    const buffer = Buffer.from(input.buffer, input.byteOffset, input.byteLength)
    let copy: Buffer | undefined
    for (const v of vs) {
      const needle = Buffer.from(v, "latin1")
      let at = buffer.indexOf(needle)
      while (at !== -1) {
        copy ??= Buffer.from(buffer)
        markerBytes.copy(copy, at, 0, Math.min(markerBytes.length, needle.length))
        at = buffer.indexOf(needle, at + needle.length)
      }
    }
    return copy ?? input
  }
  const deep = (vs: ReadonlyArray<string>, input: unknown, depth: number): unknown => {
    if (typeof input === "string") return input.length < tokenLength ? input : textWith(vs, input)
    // Deeper than any document a CLI prints: left alone rather than risking the stack.
    if (depth > 256) return input
    if (Array.isArray(input)) {
      let out: Array<unknown> | undefined
      for (let i = 0; i < input.length; i++) {
        const next = deep(vs, input[i], depth + 1)
        if (next !== input[i]) {
          out ??= input.slice()
          out[i] = next
        }
      }
      return out ?? input
    }
    if (isPlainObject(input)) {
      let out: { [key: string]: unknown } | undefined
      for (const key of Object.keys(input)) {
        const nextKey = key.length < tokenLength ? key : textWith(vs, key)
        const next = deep(vs, input[key], depth + 1)
        if (next !== input[key] || nextKey !== key) {
          if (out === undefined) {
            out = {}
            for (const k of Object.keys(input)) out[k] = input[k]
          }
          if (nextKey !== key) delete out[key]
          out[nextKey] = next
        }
      }
      return out ?? input
    }
    return input
  }
  const value = <A>(input: A): A => {
    const vs = values()
    return vs.length === 0 ? input : deep(vs, input, 0) as A
  }
  const heldBack = (input: string): number => {
    const vs = values()
    if (input.length === 0) return 0
    const last = input.charCodeAt(input.length - 1)
    let longest = 0
    for (const v of vs) {
      for (let k = Math.min(tokenLength - 1, input.length); k > longest; k--) {
        // The cheap test first: the candidate prefix must end with the text's last character.
        if (v.charCodeAt(k - 1) === last && input.endsWith(v.slice(0, k))) {
          longest = k
          break
        }
      }
    }
    return longest
  }
  const window = (input: string): string => {
    const vs = values()
    if (vs.length === 0) return input
    let out = textWith(vs, input)
    for (const v of vs) {
      for (let k = Math.min(tokenLength - 1, out.length); k >= minimumPartial; k--) {
        if (out.startsWith(v.slice(tokenLength - k))) {
          out = marker + out.slice(k)
          break
        }
      }
      for (let k = Math.min(tokenLength - 1, out.length); k >= minimumPartial; k--) {
        if (out.endsWith(v.slice(0, k))) {
          out = out.slice(0, out.length - k) + marker
          break
        }
      }
    }
    return out
  }
  const cause = (input: Cause.Cause<unknown>): Cause.Cause<unknown> => {
    if (Cause.isEmpty(input)) return input
    const pretty = Cause.pretty(input)
    const scrubbed = text(pretty)
    // The structure is lost only when there was a token to take out of it.
    return scrubbed === pretty ? input : Cause.fail(scrubbed)
  }
  // Most log lines carry no token: they are passed on as they are, without rebuilding the
  // annotation map (a line per tool call goes through here).
  const annotationsOf = (annotations: HashMap.HashMap<string, unknown>): HashMap.HashMap<string, unknown> => {
    for (const [, annotation] of annotations) {
      if (value(annotation) !== annotation) return HashMap.map(annotations, (a) => value(a))
    }
    return annotations
  }
  const wrap = <M, O>(logger: Logger.Logger<M, O>): Logger.Logger<M, O> =>
    Logger.make((options) => {
      const message = value(options.message)
      const annotations = annotationsOf(options.annotations)
      const scrubbed = cause(options.cause)
      return logger.log(
        message === options.message && annotations === options.annotations && scrubbed === options.cause
          ? options
          : { ...options, message, annotations, cause: scrubbed }
      )
    })
  // The same logger set is wrapped once (a gateway wraps it for every call).
  const wrapped = new WeakMap<
    HashSet.HashSet<Logger.Logger<unknown, unknown>>,
    HashSet.HashSet<Logger.Logger<unknown, unknown>>
  >()
  const logs = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.locallyWith(effect, FiberRef.currentLoggers, (loggers) => {
      let out = wrapped.get(loggers)
      if (out === undefined) {
        out = HashSet.map(loggers, wrap)
        wrapped.set(loggers, out)
      }
      return out
    })
  return { text, bytes, value, heldBack, window, logs }
}
