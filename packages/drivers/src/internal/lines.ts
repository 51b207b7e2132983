/**
 * Chunk-wise, synchronous line parsing shared by the drivers' `parse`.
 *
 * @internal
 */
import * as Driver from "@tether/core/Driver"
import { Usage } from "@tether/core/Result"
import type * as Stream from "effect/Stream"

/** What a per-line function returns: the outputs of the line, or the protocol error that ends the run. */
export type LineResult<O> = ReadonlyArray<O> | Driver.ProtocolError

/**
 * What `parseLines`' per-line function may return: a `LineResult`, or the line's one output as
 * it is (no array is allocated around it: most lines have exactly one output).
 */
export type LineOutputs<O> = O | LineResult<O>

/**
 * No output: one shared empty array (nothing writes to a line's outputs), so that a line without
 * output allocates none.
 *
 * @internal
 */
export const none: ReadonlyArray<never> = []

/**
 * The outputs that end a turn, in order: the assistant's last `Message` and the turn's `Usage`
 * when there are, then its `Terminal`, in an array of their exact length (`push` onto an empty
 * array allocates room for 16).
 *
 * @internal
 */
export const turnEnd = (
  message: Driver.Output | undefined,
  usage: Usage | undefined,
  terminal: Driver.Output
): Array<Driver.Output> => {
  if (usage === undefined) return message === undefined ? [terminal] : [message, terminal]
  const usageOutput: Driver.Output = { _tag: "Usage", usage }
  return message === undefined ? [usageOutput, terminal] : [message, usageOutput, terminal]
}

/**
 * Whether a line is empty or only whitespace: the same answer as `line.trim().length === 0`,
 * without trimming the usual JSON line (which starts with `{`).
 *
 * @internal
 */
export const isBlank = (line: string): boolean =>
  line.length === 0 || (line.charCodeAt(0) !== 123 && line.trim().length === 0)

/**
 * Maps every line through the run's per-line function (core's `Driver.parseLines`, chunk by
 * chunk, no effect per line; on the first error the outputs of the lines before it, then the
 * failure). A driver's `parse` is built with `Driver.parseFromLines` instead, so that a run can
 * use the line function directly.
 *
 * @internal
 */
export const parseLines: <O>(
  lines: Stream.Stream<string>,
  make: () => (line: string) => LineOutputs<O>
) => Stream.Stream<O, Driver.ProtocolError> = Driver.parseLines

/**
 * A value read from a provider line, as text for a notice or an error: a string as it is, any
 * other primitive as `String` writes it, an object or an array as `fallback`. Never converts an
 * object (a record may carry `{"toString": 1}`, or arrays nested thousands deep, and `String`
 * throws on both).
 *
 * @internal
 */
export const textOf = (u: unknown, fallback = "(not text)"): string =>
  typeof u === "string" ? u : typeof u === "object" && u !== null ? fallback : String(u)

/** A `Notice` output (`raw` only when given). @internal */
export const notice = (
  level: "info" | "warning" | "error",
  kind: string,
  message: string,
  raw?: unknown
): Driver.Output =>
  raw === undefined ? { _tag: "Notice", level, kind, message } : { _tag: "Notice", level, kind, message, raw }

/**
 * The `Usage` that `new Usage(fields, true)` builds from the fields given here (each a finite
 * number, or `undefined`: absent, not reported), the same instance field for field (its
 * prototype, its own fields in this order: equal, encoded alike), without the class
 * constructor's copy of a fields object and its pass over the schema for defaults (`Usage` has
 * none): the parsers read a usage per turn (Codex's app-server several). Nothing is checked here:
 * the parsers read every count with their `num`.
 *
 * @internal
 */
export const usageFrom = (
  inputTokens: number | undefined,
  outputTokens: number | undefined,
  cachedInputTokens?: number | undefined,
  reasoningTokens?: number | undefined,
  costUsd?: number | undefined
): Usage => {
  const usage = Object.create(Usage.prototype) as {
    inputTokens?: number
    outputTokens?: number
    cachedInputTokens?: number
    reasoningTokens?: number
    costUsd?: number
  }
  if (inputTokens !== undefined) usage.inputTokens = inputTokens
  if (outputTokens !== undefined) usage.outputTokens = outputTokens
  if (cachedInputTokens !== undefined) usage.cachedInputTokens = cachedInputTokens
  if (reasoningTokens !== undefined) usage.reasoningTokens = reasoningTokens
  if (costUsd !== undefined) usage.costUsd = costUsd
  return usage as Usage
}

/**
 * A map from ids read in the CLI's lines (tool call ids) with its latest entry held apart, found
 * by `===`. A string `JSON.parse` just made has no hash yet: each lookup of it in a `Map` hashes
 * it whole (a Gemini call id is 45 characters; 80 ns a lookup here), and a call's result usually
 * follows its start, so its lookup finds the latest entry without hashing. Otherwise a `Map`:
 * an older entry moves into the map when a newer key is set.
 *
 * @internal
 */
export class RecentMap<V> {
  private key: string | undefined = undefined
  private value: V | undefined = undefined
  private readonly older = new Map<string, V>()

  get(key: string): V | undefined {
    return key === this.key ? this.value : this.older.size === 0 ? undefined : this.older.get(key)
  }

  has(key: string): boolean {
    return key === this.key || (this.older.size > 0 && this.older.has(key))
  }

  set(key: string, value: V): void {
    if (key !== this.key) {
      if (this.key !== undefined) this.older.set(this.key, this.value as V)
      this.key = key
    }
    this.value = value
  }

  delete(key: string): void {
    if (key === this.key) {
      this.key = undefined
      this.value = undefined
    }
    if (this.older.size > 0) this.older.delete(key)
  }

  clear(): void {
    this.key = undefined
    this.value = undefined
    // `clear` allocates a new table even for an empty map.
    if (this.older.size > 0) this.older.clear()
  }

  /** Whether it holds no entry. */
  get empty(): boolean {
    return this.key === undefined && this.older.size === 0
  }
}

const lineTerminator = /[\n\r\u2028\u2029]/

/**
 * `mcp__<server>__<tool>`, split as `/^mcp__(.+?)__(.+)$/` would split it (the first `__` after a
 * non-empty server name, a non-empty tool name, no line terminator anywhere) but in linear time:
 * the pattern backtracks quadratically on `mcp__`, many underscores and a line break (seconds at
 * 64 KiB, minutes at 1 MiB), and parsing is synchronous: the whole host would wait. `undefined`
 * for a name not of that shape.
 *
 * @internal
 */
export const splitMcpName = (name: string): { readonly server: string; readonly tool: string } | undefined => {
  if (!name.startsWith("mcp__")) return undefined
  const separator = name.indexOf("__", 6)
  if (separator === -1 || separator + 2 >= name.length || lineTerminator.test(name)) return undefined
  return { server: name.slice(5, separator), tool: name.slice(separator + 2) }
}
