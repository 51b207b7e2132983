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
import * as Util from "node:util"

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

/** Effect's tracer logger (a log line becomes an event of the current span) and its wraps here. */
const spanEventLoggers = new WeakSet<object>([Logger.tracerLogger])

// `withoutSpanEvents` of a logger set, by set: a host's set is the same object for every
// registration made with it (a logger is one of `spanEventLoggers` from its creation on).
const withoutEvents = new WeakMap<
  HashSet.HashSet<Logger.Logger<unknown, unknown>>,
  HashSet.HashSet<Logger.Logger<unknown, unknown>>
>()

/**
 * `loggers` without Effect's tracer logger, also where a redactor wrapped it: log lines written
 * under them become no span events.
 *
 * @internal
 */
export const withoutSpanEvents = (
  loggers: HashSet.HashSet<Logger.Logger<unknown, unknown>>
): HashSet.HashSet<Logger.Logger<unknown, unknown>> => {
  let out = withoutEvents.get(loggers)
  if (out !== undefined) return out
  out = loggers
  for (const logger of loggers) if (spanEventLoggers.has(logger)) out = HashSet.remove(out, logger)
  withoutEvents.set(loggers, out)
  return out
}

/** @internal */
export interface Redactor {
  readonly text: (text: string) => string
  readonly bytes: (bytes: Uint8Array) => Uint8Array
  readonly value: <A>(value: A) => A
  readonly heldBack: (text: string) => number
  readonly window: (text: string) => string
  readonly logs: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** A logger set with every logger wrapped as `logs` wraps them (the same set, the same result). */
  readonly loggers: (
    set: HashSet.HashSet<Logger.Logger<unknown, unknown>>
  ) => HashSet.HashSet<Logger.Logger<unknown, unknown>>
}

/** The base64url alphabet, by character code: what a gateway's tokens are written in. */
const alphabet = new Uint8Array(128)
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") alphabet[c.charCodeAt(0)] = 1
const inAlphabet = (code: number): boolean => code < 128 && alphabet[code] === 1

/** A gateway's token: `tokenLength` characters of base64url. */
const isTokenShaped = (value: string): boolean => {
  if (value.length !== tokenLength) return false
  for (let i = 0; i < value.length; i++) if (!inAlphabet(value.charCodeAt(i))) return false
  return true
}

/**
 * Up to this many live tokens, a text is searched for each of them in turn (the engine's
 * substring search, fastest for a few); above it, the text is read once against an index of all
 * of them, so the cost no longer grows with the number of live tokens (a gateway serving a fleet
 * holds one per registration and one per running process). Bytes (a file being scrubbed) are
 * searched with the engine's byte search, whose cost per token is lower: the index pays from more
 * tokens on. Both measured with `bench/redact.ts`.
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

const ascending = (a: number, b: number): number => a - b
const nowhere: ReadonlyArray<number> = []

/**
 * The tokens a redactor replaces: the gateway adds a token when it is minted and deletes it once
 * its scope closes. They are also indexed (by rolling hash, by their first and last `edge`
 * characters, and by their first one to `edge - 1` characters), kept up to date at each change,
 * so that a redactor over many of them reads its input once.
 *
 * @internal
 */
export class Tokens {
  readonly #all = new Set<string>()
  #list: ReadonlyArray<string> | undefined = []
  readonly #byHash = new Map<number, Array<string>>()
  readonly #byHead = new Map<string, Array<string>>()
  readonly #byTail = new Map<string, Array<string>>()
  /** `#starts[k]`: the first `k` characters of the tokens (1 ≤ k < edge), counted. */
  readonly #starts: Array<Map<string, number>> = Array.from({ length: edge }, () => new Map())

  get size(): number {
    return this.#all.size
  }
  /** Every token, in the order added (the same array until the next change). */
  values(): ReadonlyArray<string> {
    return this.#list ??= Array.from(this.#all)
  }
  /** Whether a text is read against the index instead of searched for each token. */
  get indexed(): boolean {
    return this.#all.size > textIndexFrom
  }
  /** Whether bytes are read against the index instead of searched for each token. */
  get bytesIndexed(): boolean {
    return this.#all.size > bytesIndexFrom
  }
  /** Adds a token; anything but `tokenLength` characters of base64url is a defect of the caller. */
  add(value: string): void {
    if (!isTokenShaped(value)) throw new Error("Redact.Tokens holds gateway tokens only (43 characters of base64url)")
    if (this.#all.has(value)) return
    this.#all.add(value)
    this.#list = undefined
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

  /**
   * Where tokens occur in `text`: the start of every occurrence, ascending, overlapping ones
   * included. Through the index when there are many tokens (only runs of base64url at least a
   * token long are hashed, a hash hit is checked against the token), else token by token.
   */
  find(text: string, indexed: boolean): ReadonlyArray<number> {
    if (!indexed) {
      // Most texts hold no token: nothing is allocated for them.
      let found: Array<number> | undefined
      for (const value of this.values()) {
        for (let at = text.indexOf(value); at !== -1; at = text.indexOf(value, at + 1)) (found ??= []).push(at)
      }
      return found === undefined ? nowhere : found.length > 1 ? found.sort(ascending) : found
    }
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
      if (end - i >= tokenLength) {
        let hash = 0
        for (let k = 0; k < tokenLength; k++) hash = (Math.imul(hash, base) + text.charCodeAt(i + k)) | 0
        for (let at = i;; at++) {
          const list = this.#byHash.get(hash)
          if (list !== undefined) {
            for (const value of list) {
              if (text.startsWith(value, at)) {
                found.push(at)
                break
              }
            }
          }
          if (at + tokenLength >= end) break
          hash = (Math.imul((hash - Math.imul(text.charCodeAt(at), dropFactor)) | 0, base) +
            text.charCodeAt(at + tokenLength)) | 0
        }
      }
      i = end
    }
    return found
  }
  /** The longest `k` (below a token's length) such that `text` ends with the first `k` characters of a token. */
  endingStart(text: string): number {
    const n = text.length
    let run = 0
    while (run < tokenLength - 1 && run < n && inAlphabet(text.charCodeAt(n - 1 - run))) run++
    if (!this.indexed) {
      const last = text.charCodeAt(n - 1)
      let longest = 0
      for (const value of this.values()) {
        for (let k = run; k > longest; k--) {
          // The cheap test first: the candidate start must end with the text's last character.
          if (value.charCodeAt(k - 1) === last && text.endsWith(value.slice(0, k))) {
            longest = k
            break
          }
        }
      }
      return longest
    }
    for (let k = run; k >= edge; k--) {
      const list = this.#byHead.get(text.slice(n - k, n - k + edge))
      if (list === undefined) continue
      const tail = text.slice(n - k)
      for (const value of list) if (value.startsWith(tail)) return k
    }
    for (let k = Math.min(run, edge - 1); k >= 1; k--) {
      if (this.#starts[k]!.has(text.slice(n - k))) return k
    }
    return 0
  }
  /** The longest `k` (from `edge`, below a token's length) such that `text` starts with the last `k` characters of a token. */
  startingEnd(text: string): number {
    let run = 0
    while (run < tokenLength - 1 && run < text.length && inAlphabet(text.charCodeAt(run))) run++
    if (!this.indexed) {
      const first = text.charCodeAt(0)
      let longest = edge - 1
      for (const value of this.values()) {
        for (let k = run; k > longest; k--) {
          if (value.charCodeAt(tokenLength - k) === first && value.endsWith(text.slice(0, k))) {
            longest = k
            break
          }
        }
      }
      return longest < edge ? 0 : longest
    }
    for (let k = run; k >= edge; k--) {
      const list = this.#byTail.get(text.slice(k - edge, k))
      if (list === undefined) continue
      const head = text.slice(0, k)
      for (const value of list) if (value.endsWith(head)) return k
    }
    return 0
  }
}

/**
 * `text` with the marker written over each occurrence at `found` (ascending), left to right: where
 * two occurrences overlap, the later one's marker starts inside the earlier one's, so every
 * character of every occurrence is replaced and the text keeps its length.
 */
const overwrite = (text: string, found: ReadonlyArray<number>): string => {
  const parts: Array<string> = []
  let from = 0
  for (let i = 0; i < found.length; i++) {
    const at = found[i]!
    const next = i + 1 < found.length ? found[i + 1]! : text.length
    parts.push(text.slice(from, at), next < at + tokenLength ? marker.slice(0, next - at) : marker)
    from = Math.min(next, at + tokenLength)
  }
  parts.push(text.slice(from))
  return parts.join("")
}

/**
 * A redactor over the tokens of `tokens` at each call (the set changes while the redactor is in
 * use: tokens are minted and released). Every occurrence of a live token is replaced, all of its
 * characters, also where two occurrences overlap (see `overwrite`).
 *
 * @internal
 */
export const make = (tokens: Tokens): Redactor => {
  const whole = (input: string): string => {
    if (tokens.size === 0 || input.length < tokenLength) return input
    const found = tokens.find(input, tokens.indexed)
    return found.length === 0 ? input : overwrite(input, found)
  }
  const text = whole
  const bytes = (input: Uint8Array): Uint8Array => {
    if (tokens.size === 0 || input.length < tokenLength) return input
    const buffer = Buffer.from(input.buffer, input.byteOffset, input.byteLength)
    let copy: Buffer | undefined
    if (tokens.bytesIndexed) {
      // Read as latin1, one character per byte: a token is ASCII, so its bytes are its characters
      // and the positions found are byte offsets.
      for (const at of tokens.find(buffer.toString("latin1"), true)) {
        copy ??= Buffer.from(buffer)
        markerBytes.copy(copy, at)
      }
      return copy ?? input
    }
    const found: Array<number> = []
    for (const value of tokens.values()) {
      const needle = Buffer.from(value, "latin1")
      for (let at = buffer.indexOf(needle); at !== -1; at = buffer.indexOf(needle, at + 1)) found.push(at)
    }
    if (found.length === 0) return input
    copy = Buffer.from(buffer)
    // Ascending, so that a later occurrence's marker overwrites the tail of an earlier overlapping one.
    for (const at of found.sort(ascending)) markerBytes.copy(copy, at)
    return copy
  }
  const inspectOptions: Util.InspectOptions = {
    depth: Infinity,
    breakLength: Infinity,
    maxArrayLength: Infinity,
    maxStringLength: Infinity,
    colors: false,
    // Non-enumerable fields too: a host may read them by name.
    showHidden: true
  }
  /**
   * Whether bytes anywhere inside a value (typed arrays, through every own property, hidden and
   * symbol ones too, and the entries of maps and sets) hold a token: `util.inspect` writes them as
   * hex, where the text check cannot see one.
   */
  const bytesInside = (value: object): boolean => {
    const seen = new Set<object>()
    const visit = (v: unknown, depth: number): boolean => {
      if (typeof v !== "object" || v === null || depth > 64 || seen.has(v)) return false
      seen.add(v)
      if (ArrayBuffer.isView(v)) {
        const view = new Uint8Array(v.buffer, v.byteOffset, v.byteLength)
        return bytes(view) !== view
      }
      if (v instanceof Map) {
        for (const [key, entry] of v) if (visit(key, depth + 1) || visit(entry, depth + 1)) return true
        return false
      }
      if (v instanceof Set) {
        for (const entry of v) if (visit(entry, depth + 1)) return true
        return false
      }
      for (const key of Reflect.ownKeys(v)) {
        let field: unknown
        try {
          field = (v as { readonly [key: PropertyKey]: unknown })[key]
        } catch {
          continue
        }
        if (visit(field, depth + 1)) return true
      }
      return false
    }
    return visit(value, 0)
  }
  const unreadable = "(a value that could not be read)"
  /**
   * A value that is not plain JSON (a Map, a Set, a URL, an Error, any class instance) as
   * `util.inspect` shows it (hidden fields too), scrubbed, when it holds a token there or in bytes
   * inside it (then without the bytes); `undefined` when it holds none.
   */
  const held = (input: object): string | undefined => {
    try {
      const shown = Util.inspect(input, inspectOptions)
      const scrubbed = text(shown)
      if (scrubbed !== shown) return scrubbed
      return bytesInside(input) ? text(Util.inspect(input, { ...inspectOptions, maxArrayLength: 0 })) : undefined
    } catch {
      // It cannot be read whole: whatever it holds stays out of reach.
      return unreadable
    }
  }
  /**
   * A value that is neither a string, an array nor a plain object: bytes checked as `bytes` does;
   * anything else by `held`, becoming its text when it holds a token and left as it is otherwise.
   * Parsed JSON holds none of these: only what a driver or a host built pays.
   */
  const opaque = (input: object): unknown => {
    if (ArrayBuffer.isView(input)) {
      const view = new Uint8Array(input.buffer, input.byteOffset, input.byteLength)
      const scrubbed = bytes(view)
      return scrubbed === view ? input : scrubbed
    }
    return held(input) ?? input
  }
  const deep = (input: unknown, depth: number): unknown => {
    if (typeof input === "string") return whole(input)
    // Deeper than any document a CLI prints: the rest is walked without recursion rather than
    // risking the stack (a model can nest a tool call's input as deep as it likes).
    if (depth > 256) return deepIterative(input)
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
        const nextKey = whole(key)
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
    return typeof input === "object" && input !== null ? opaque(input) : input
  }
  /**
   * `deep` without recursion, for what lies below its depth cap: an explicit stack of the arrays
   * and plain objects being read, each copied on its first changed child, as `deep` does. A value
   * already on the path (a cycle) is left as it is there: its strings are scrubbed where it was
   * first reached.
   */
  const deepIterative = (root: unknown): unknown => {
    if (!Array.isArray(root) && !isPlainObject(root)) return typeof root === "string" ? whole(root) : root
    interface Frame {
      readonly input: ReadonlyArray<unknown> | { readonly [key: string]: unknown }
      readonly keys: ReadonlyArray<string> | undefined
      readonly length: number
      i: number
      out: Array<unknown> | { [key: string]: unknown } | undefined
    }
    const frameOf = (input: ReadonlyArray<unknown> | { readonly [key: string]: unknown }): Frame => {
      const keys = Array.isArray(input) ? undefined : Object.keys(input)
      return {
        input,
        keys,
        length: keys === undefined ? (input as ReadonlyArray<unknown>).length : keys.length,
        i: 0,
        out: undefined
      }
    }
    const onPath = new Set<unknown>([root])
    const stack: Array<Frame> = [frameOf(root as ReadonlyArray<unknown>)]
    let done: unknown
    let finished = false
    for (;;) {
      const frame = stack[stack.length - 1]!
      if (finished) {
        finished = false
        if (frame.keys === undefined) {
          const input = frame.input as ReadonlyArray<unknown>
          if (done !== input[frame.i]) {
            frame.out ??= input.slice()
            ;(frame.out as Array<unknown>)[frame.i] = done
          }
        } else {
          const input = frame.input as { readonly [key: string]: unknown }
          const key = frame.keys[frame.i]!
          const nextKey = whole(key)
          if (done !== input[key] || nextKey !== key) {
            if (frame.out === undefined) {
              const out: { [key: string]: unknown } = {}
              for (const k of frame.keys) out[k] = input[k]
              frame.out = out
            }
            const out = frame.out as { [key: string]: unknown }
            if (nextKey !== key) delete out[key]
            out[nextKey] = done
          }
        }
        frame.i++
      }
      if (frame.i < frame.length) {
        const child = frame.keys === undefined
          ? (frame.input as ReadonlyArray<unknown>)[frame.i]
          : (frame.input as { readonly [key: string]: unknown })[frame.keys[frame.i]!]
        if ((Array.isArray(child) || isPlainObject(child)) && !onPath.has(child)) {
          onPath.add(child)
          stack.push(frameOf(child))
        } else {
          done = typeof child === "string" ? whole(child) : child
          finished = true
        }
        continue
      }
      stack.pop()
      onPath.delete(frame.input)
      done = frame.out ?? frame.input
      if (stack.length === 0) return done
      finished = true
    }
  }
  const value = <A>(input: A): A => tokens.size === 0 ? input : deep(input, 0) as A
  const heldBack = (input: string): number => input.length === 0 || tokens.size === 0 ? 0 : tokens.endingStart(input)
  const window = (input: string): string => {
    if (tokens.size === 0) return input
    let out = whole(input)
    const start = tokens.startingEnd(out)
    if (start >= minimumPartial) out = marker + out.slice(start)
    const end = out.length === 0 ? 0 : tokens.endingStart(out)
    if (end >= minimumPartial) out = out.slice(0, out.length - end) + marker
    return out
  }
  const cause = (input: Cause.Cause<unknown>): Cause.Cause<unknown> => {
    if (Cause.isEmpty(input)) return input
    // Rendered as Effect's loggers render it (its tracer logger too): with each error's `cause`
    // chain, where a handler's error may quote a token it was given.
    let pretty: string
    try {
      pretty = Cause.pretty(input, { renderErrorCause: true })
    } catch {
      // Effect cannot render it (a bigint in a plain object, a throwing getter): each failure as
      // `util.inspect` shows it, scrubbed, rather than losing the line.
      const shown = [...Cause.failures(input), ...Cause.defects(input)].map((error) => {
        try {
          return Util.inspect(error, inspectOptions)
        } catch {
          return unreadable
        }
      })
      return Cause.fail(text(shown.join("\n")))
    }
    const scrubbed = text(pretty)
    // The structure is lost only when there was a token to take out of it.
    if (scrubbed !== pretty) return Cause.fail(scrubbed)
    // That text holds each error's message and stack, not its own fields (and its chain's), which a
    // logger that prints the error shows (the console, `util.inspect`, JSON, Effect's browser-mode
    // `prettyLogger`): read by `held`. Only failure lines pay for it.
    const found: Array<string> = []
    for (const error of [...Cause.failures(input), ...Cause.defects(input)]) {
      if (typeof error !== "object" || error === null) continue
      const shown = held(error)
      if (shown !== undefined) found.push(shown)
    }
    return found.length === 0 ? input : Cause.fail([pretty, ...found].join("\n"))
  }
  // Most log lines carry no token: they are passed on as they are, without rebuilding the
  // annotation map (a line per tool call goes through here).
  const annotationsOf = (annotations: HashMap.HashMap<string, unknown>): HashMap.HashMap<string, unknown> => {
    for (const [, annotation] of annotations) {
      if (value(annotation) !== annotation) return HashMap.map(annotations, (a) => value(a))
    }
    return annotations
  }
  const wrap = <M, O>(logger: Logger.Logger<M, O>): Logger.Logger<M, O> => {
    const out = Logger.make<M, O>((options) => {
      const message = value(options.message)
      const annotations = annotationsOf(options.annotations)
      const scrubbed = cause(options.cause)
      return logger.log(
        message === options.message && annotations === options.annotations && scrubbed === options.cause
          ? options
          : { ...options, message, annotations, cause: scrubbed }
      )
    })
    if (spanEventLoggers.has(logger)) spanEventLoggers.add(out)
    return out
  }
  // The same logger set is wrapped once (a gateway wraps it for every call).
  const wrapped = new WeakMap<
    HashSet.HashSet<Logger.Logger<unknown, unknown>>,
    HashSet.HashSet<Logger.Logger<unknown, unknown>>
  >()
  const loggers = (
    set: HashSet.HashSet<Logger.Logger<unknown, unknown>>
  ): HashSet.HashSet<Logger.Logger<unknown, unknown>> => {
    let out = wrapped.get(set)
    if (out === undefined) {
      out = HashSet.map(set, wrap)
      wrapped.set(set, out)
    }
    return out
  }
  const logs = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.locallyWith(effect, FiberRef.currentLoggers, loggers)
  return { text, bytes, value, heldBack, window, logs, loggers }
}
