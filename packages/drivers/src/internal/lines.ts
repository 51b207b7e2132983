/**
 * Chunk-wise, synchronous line parsing shared by the drivers' `parse`.
 *
 * @internal
 */
import type * as Driver from "@tether/core/Driver"
import * as Channel from "effect/Channel"
import * as Chunk from "effect/Chunk"
import * as Stream from "effect/Stream"

/** What a per-line function returns: the outputs of the line, or the protocol error that ends the run. */
export type LineResult<O> = ReadonlyArray<O> | Driver.ProtocolError

/**
 * What `parseLines`' per-line function may return: a `LineResult`, or the line's one output as
 * it is (no array is allocated around it: most lines have exactly one output).
 */
export type LineOutputs<O> = O | LineResult<O>

/**
 * Whether a line is empty or only whitespace: the same answer as `line.trim().length === 0`,
 * without trimming the usual JSON line (which starts with `{`).
 *
 * @internal
 */
export const isBlank = (line: string): boolean =>
  line.length === 0 || (line.charCodeAt(0) !== 123 && line.trim().length === 0)

// By its tag (no output is tagged so): an error from another copy of core is still an error.
const isProtocolError = (result: unknown): result is Driver.ProtocolError =>
  (result as { readonly _tag?: unknown })._tag === "ProtocolError"

/**
 * Maps every line through the run's per-line function, chunk by chunk in a plain loop (no
 * effect per line). On the first error the outputs of the lines before it are emitted, then the
 * stream fails with that error: no line after the failing one is given to the per-line function,
 * and no further chunk is pulled from `lines`.
 *
 * `make` is called once per run of the stream; it builds that run's per-line function (which
 * closes over the run's own mutable state).
 *
 * @internal
 */
export const parseLines = <O>(
  lines: Stream.Stream<string>,
  make: () => (line: string) => LineOutputs<O>
): Stream.Stream<O, Driver.ProtocolError> =>
  Stream.suspend(() => {
    const onLine = make()
    const loop: Channel.Channel<Chunk.Chunk<O>, Chunk.Chunk<string>, Driver.ProtocolError, never, void, unknown> =
      Channel.readWithCause({
        onInput: (chunk: Chunk.Chunk<string>) => {
          const out: Array<O> = []
          const input = Chunk.toReadonlyArray(chunk)
          for (let n = 0; n < input.length; n++) {
            const result = onLine(input[n]!)
            if (Array.isArray(result)) {
              for (let i = 0; i < result.length; i++) out.push(result[i] as O)
            } else if (isProtocolError(result)) {
              // Emit what the lines before it produced, then fail without reading any further.
              return Channel.zipRight(Channel.write(Chunk.unsafeFromArray(out)), Channel.fail(result))
            } else {
              out.push(result as O)
            }
          }
          return out.length === 0 ? loop : Channel.zipRight(Channel.write(Chunk.unsafeFromArray(out)), loop)
        },
        onFailure: Channel.failCause,
        onDone: () => Channel.void
      })
    return Stream.fromChannel(Channel.pipeTo(Stream.toChannel(lines), loop))
  })

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
