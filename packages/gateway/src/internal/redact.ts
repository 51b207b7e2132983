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

/** The base64url alphabet, by character code: what a gateway's tokens are written in. */
const alphabet = new Uint8Array(128)
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") alphabet[c.charCodeAt(0)] = 1
const inAlphabet = (code: number): boolean => code < 128 && alphabet[code] === 1

/** A gateway's token: `tokenLength` characters of base64url. Other values are matched one by one. */
const isTokenShaped = (value: string): boolean => {
  if (value.length !== tokenLength) return false
  for (let i = 0; i < value.length; i++) if (!inAlphabet(value.charCodeAt(i))) return false
  return true
}

/**
 * Up to this many token-shaped values, a text is searched for each of them in turn (the engine's
 * substring search, fastest for a few); above it, the text is read once against an index of all
 * of them, so the cost no longer grows with the number of live tokens (a gateway serving a fleet
 * holds one per registration and one per running process). Bytes (a file being scrubbed) are
 * searched with the engine's byte search, whose cost per value is lower: the index pays from more
 * values on. Both measured with `bench/redact.ts`.
 */
const textIndexFrom = 8
const bytesIndexFrom = 64

/** The first this many characters of a token key its entry among the token starts and ends. */
const edge = minimumPartial

// A polynomial hash over `tokenLength` characters, rolled one character at a time (32-bit).
const base = 0x01000193
const dropFactor = (() => {
  let f = 1
  for (let i = 1; i < tokenLength; i++) f = Math.imul(f, base)
  return f
})()
const hashOf = (value: string): number => {
  let h = 0
  for (let i = 0; i < tokenLength; i++) h = (Math.imul(h, base) + value.charCodeAt(i)) | 0
  return h
}

const addTo = <K>(map: Map<K, Array<string>>, key: K, value: string): void => {
  const list = map.get(key)
  if (list === undefined) map.set(key, [value])
  else list.push(value)
}
const removeFrom = <K>(map: Map<K, Array<string>>, key: K, value: string): void => {
  const list = map.get(key)
  if (list === undefined) return
  const at = list.indexOf(value)
  if (at !== -1) list.splice(at, 1)
  if (list.length === 0) map.delete(key)
}

/**
 * The values a redactor replaces: the gateway adds a token when it is minted and deletes it once
 * its scope closes. Token-shaped values are also indexed (by rolling hash, by their first and last
 * `edge` characters, and by their first one to `edge - 1` characters), kept up to date at each
 * change, so that a redactor over many of them reads its input once.
 *
 * @internal
 */
export class Tokens {
  readonly #all = new Set<string>()
  #list: ReadonlyArray<string> | undefined = []
  /** Values that are not token-shaped, matched one by one. */
  readonly #odd = new Set<string>()
  #oddList: ReadonlyArray<string> | undefined = []
  readonly #byHash = new Map<number, Array<string>>()
  readonly #byHead = new Map<string, Array<string>>()
  readonly #byTail = new Map<string, Array<string>>()
  /** `#starts[k]`: the first `k` characters of the token-shaped values (1 ≤ k < edge), counted. */
  readonly #starts: Array<Map<string, number>> = Array.from({ length: edge }, () => new Map())
  #shaped = 0

  get size(): number {
    return this.#all.size
  }
  /** Every value, in the order added (the same array until the next change). */
  values(): ReadonlyArray<string> {
    return this.#list ??= Array.from(this.#all)
  }
  /** Whether a text is read against the index instead of searched for each value. */
  get indexed(): boolean {
    return this.#shaped > textIndexFrom
  }
  /** Whether bytes are read against the index instead of searched for each value. */
  get bytesIndexed(): boolean {
    return this.#shaped > bytesIndexFrom
  }
  /** The values read one by one when indexed (those not token-shaped). */
  odd(): ReadonlyArray<string> {
    return this.#oddList ??= Array.from(this.#odd)
  }
  add(value: string): void {
    if (value.length === 0 || this.#all.has(value)) return
    this.#all.add(value)
    this.#list = undefined
    if (!isTokenShaped(value)) {
      this.#odd.add(value)
      this.#oddList = undefined
      return
    }
    this.#shaped++
    addTo(this.#byHash, hashOf(value), value)
    addTo(this.#byHead, value.slice(0, edge), value)
    addTo(this.#byTail, value.slice(tokenLength - edge), value)
    for (let k = 1; k < edge; k++) {
      const start = value.slice(0, k)
      this.#starts[k]!.set(start, (this.#starts[k]!.get(start) ?? 0) + 1)
    }
  }
  delete(value: string): void {
    if (!this.#all.delete(value)) return
    this.#list = undefined
    if (this.#odd.delete(value)) {
      this.#oddList = undefined
      return
    }
    this.#shaped--
    removeFrom(this.#byHash, hashOf(value), value)
    removeFrom(this.#byHead, value.slice(0, edge), value)
    removeFrom(this.#byTail, value.slice(tokenLength - edge), value)
    for (let k = 1; k < edge; k++) {
      const start = value.slice(0, k)
      const count = this.#starts[k]!.get(start)!
      if (count === 1) this.#starts[k]!.delete(start)
      else this.#starts[k]!.set(start, count - 1)
    }
  }
  clear(): void {
    for (const value of Array.from(this.#all)) this.delete(value)
  }

  /** Whether a token-shaped value whose hash is `hash` stands at `text[at, at + tokenLength)`. */
  #at(text: string, at: number, hash: number): boolean {
    const list = this.#byHash.get(hash)
    if (list === undefined) return false
    for (const value of list) if (text.startsWith(value, at)) return true
    return false
  }
  /**
   * Where token-shaped values occur in `text`, left to right, not overlapping: the start of each.
   * Only runs of base64url characters at least a token long are hashed.
   */
  find(text: string): Array<number> {
    const found: Array<number> = []
    const n = text.length
    let i = 0
    while (i <= n - tokenLength) {
      if (!inAlphabet(text.charCodeAt(i))) {
        i++
        continue
      }
      let end = i + 1
      while (end < n && inAlphabet(text.charCodeAt(end))) end++
      let at = i
      while (end - at >= tokenLength) {
        let hash = 0
        for (let k = 0; k < tokenLength; k++) hash = (Math.imul(hash, base) + text.charCodeAt(at + k)) | 0
        let matched = false
        for (;;) {
          if (this.#at(text, at, hash)) {
            matched = true
            break
          }
          if (at + tokenLength >= end) break
          hash = (Math.imul((hash - Math.imul(text.charCodeAt(at), dropFactor)) | 0, base) +
            text.charCodeAt(at + tokenLength)) | 0
          at++
        }
        if (!matched) break
        found.push(at)
        at += tokenLength
      }
      i = end
    }
    return found
  }
  /** The longest `k` (below a token's length) such that `text` ends with the first `k` characters of a token-shaped value. */
  endingStart(text: string): number {
    const n = text.length
    let run = 0
    while (run < tokenLength - 1 && run < n && inAlphabet(text.charCodeAt(n - 1 - run))) run++
    for (let k = run; k >= edge; k--) {
      const list = this.#byHead.get(text.slice(n - k, n - k + edge))
      if (list === undefined) continue
      for (const value of list) if (value.startsWith(text.slice(n - k))) return k
    }
    for (let k = Math.min(run, edge - 1); k >= 1; k--) {
      if (this.#starts[k]!.has(text.slice(n - k))) return k
    }
    return 0
  }
  /** The longest `k` (from `edge`, below a token's length) such that `text` starts with the last `k` characters of a token-shaped value. */
  startingEnd(text: string): number {
    let run = 0
    while (run < tokenLength - 1 && run < text.length && inAlphabet(text.charCodeAt(run))) run++
    for (let k = run; k >= edge; k--) {
      const list = this.#byTail.get(text.slice(k - edge, k))
      if (list === undefined) continue
      for (const value of list) if (value.endsWith(text.slice(0, k))) return k
    }
    return 0
  }
}

/**
 * A redactor over the values of `tokens` at each call (the set changes while the redactor is in
 * use: tokens are minted and released).
 *
 * @internal
 */
export const make = (tokens: Tokens): Redactor => {
  const textWith = (vs: ReadonlyArray<string>, text: string): string => {
    let out = text
    for (const v of vs) {
      if (out.includes(v)) out = out.split(v).join(marker)
    }
    return out
  }
  /** Every whole value replaced: through the index when there are many, else one by one. */
  const whole = (input: string): string => {
    if (!tokens.indexed) return textWith(tokens.values(), input)
    const found = tokens.find(input)
    let out = input
    if (found.length > 0) {
      const parts: Array<string> = []
      let from = 0
      for (const at of found) {
        parts.push(input.slice(from, at), marker)
        from = at + tokenLength
      }
      parts.push(input.slice(from))
      out = parts.join("")
    }
    const odd = tokens.odd()
    return odd.length === 0 ? out : textWith(odd, out)
  }
  const text = (input: string): string => tokens.size === 0 || input.length < tokenLength ? input : whole(input)
  const bytes = (input: Uint8Array): Uint8Array => {
    if (tokens.size === 0 || input.length < tokenLength) return input
    const buffer = Buffer.from(input.buffer, input.byteOffset, input.byteLength)
    let copy: Buffer | undefined
    const indexed = tokens.bytesIndexed
    if (indexed) {
      // Read as latin1, one character per byte: a token is ASCII, so its bytes are its characters
      // and the positions found are byte offsets.
      for (const at of tokens.find(buffer.toString("latin1"))) {
        copy ??= Buffer.from(buffer)
        markerBytes.copy(copy, at)
      }
    }
    for (const v of indexed ? tokens.odd() : tokens.values()) {
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
  const deep = (input: unknown, depth: number): unknown => {
    if (typeof input === "string") return input.length < tokenLength ? input : whole(input)
    // Deeper than any document a CLI prints: left alone rather than risking the stack.
    if (depth > 256) return input
    if (Array.isArray(input)) {
      let out: Array<unknown> | undefined
      for (let i = 0; i < input.length; i++) {
        const next = deep(input[i], depth + 1)
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
        const nextKey = key.length < tokenLength ? key : whole(key)
        const next = deep(input[key], depth + 1)
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
  const value = <A>(input: A): A => tokens.size === 0 ? input : deep(input, 0) as A
  /** The longest `k` (above `longest`) such that `input` ends with the first `k` characters of one of `vs`. */
  const endingStartOf = (vs: ReadonlyArray<string>, input: string, longest: number): number => {
    const last = input.charCodeAt(input.length - 1)
    const most = Math.min(tokenLength - 1, input.length)
    for (const v of vs) {
      for (let k = most; k > longest; k--) {
        // The cheap test first: the candidate prefix must end with the text's last character.
        if (v.charCodeAt(k - 1) === last && input.endsWith(v.slice(0, k))) {
          longest = k
          break
        }
      }
    }
    return longest
  }
  const heldBack = (input: string): number => {
    if (input.length === 0 || tokens.size === 0) return 0
    if (!tokens.indexed) return endingStartOf(tokens.values(), input, 0)
    return endingStartOf(tokens.odd(), input, tokens.endingStart(input))
  }
  const window = (input: string): string => {
    if (tokens.size === 0) return input
    let out = whole(input)
    const indexed = tokens.indexed
    if (indexed) {
      const start = tokens.startingEnd(out)
      if (start >= minimumPartial) out = marker + out.slice(start)
      const end = out.length === 0 ? 0 : tokens.endingStart(out)
      if (end >= minimumPartial) out = out.slice(0, out.length - end) + marker
    }
    for (const v of indexed ? tokens.odd() : tokens.values()) {
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
