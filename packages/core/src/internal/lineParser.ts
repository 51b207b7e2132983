/**
 * Drivers' parsers built from a per-line function: as a `Stream` (`parseLines`), and the line
 * function itself, found by a run on the driver's `parse` (`lineFunctionOf`).
 *
 * @internal
 */
import * as Channel from "effect/Channel"
import * as Chunk from "effect/Chunk"
import * as Stream from "effect/Stream"
import type { Driver, LineOutputs, Output, ParseContext, ProtocolError } from "../Driver.js"

// An `Error` (as every copy of core's `ProtocolError` is), then by its tag: an error from
// another copy of core is still an error. The prototype check first: the usual result is a
// plain output object, whose `_tag` read, over the shapes of every driver's outputs a process
// runs, is a megamorphic load per line (a gain within the benchmark's noise, up to 3% in a
// scratch harness).
const isProtocolError = (result: unknown): result is ProtocolError =>
  result instanceof Error && (result as { readonly _tag?: unknown })._tag === "ProtocolError"

/** Above this many lines a chunk's output array grows as outputs come (see `parseLines`). */
const maxPreallocated = 8192

/** @internal */
export const parseLines = <O>(
  lines: Stream.Stream<string>,
  make: () => (line: string) => O | ReadonlyArray<O> | ProtocolError
): Stream.Stream<O, ProtocolError> =>
  Stream.suspend(() => {
    const onLine = make()
    // A chunk's outputs are gathered in a fresh array made with room for one output per line
    // (most lines have one; more grow it, a cap keeps a huge chunk's array out of dictionary
    // mode), cut to their count and handed over as the chunk. Not one array kept across chunks
    // and copied out: that array lives long enough to be promoted, and every output stored into
    // it pays the old-to-young write barrier (2–3% of Codex's and Cursor's parse, bench/parse.ts).
    const loop: Channel.Channel<Chunk.Chunk<O>, Chunk.Chunk<string>, ProtocolError, never, void, unknown> = Channel
      .readWithCause({
        onInput: (chunk: Chunk.Chunk<string>) => {
          let count = 0
          const input = Chunk.toReadonlyArray(chunk)
          const gathered: Array<O> = new Array(Math.min(input.length, maxPreallocated))
          for (let n = 0; n < input.length; n++) {
            const result = onLine(input[n]!)
            if (Array.isArray(result)) {
              for (let i = 0; i < result.length; i++) gathered[count++] = result[i] as O
            } else if (isProtocolError(result)) {
              // Emit what the lines before it produced, then fail without reading any further.
              gathered.length = count
              return Channel.zipRight(Channel.write(Chunk.unsafeFromArray(gathered)), Channel.fail(result))
            } else {
              gathered[count++] = result as O
            }
          }
          gathered.length = count
          return count === 0 ? loop : Channel.zipRight(Channel.write(Chunk.unsafeFromArray(gathered)), loop)
        },
        onFailure: Channel.failCause,
        onDone: () => Channel.void
      })
    return Stream.fromChannel(Channel.pipeTo(Stream.toChannel(lines), loop))
  })

const LineFunction = Symbol.for("@tether/core/Driver/LineFunction")

type Make = (context: ParseContext) => (line: string) => LineOutputs

/** @internal */
export const fromLines = (make: Make): Driver["parse"] =>
  Object.assign(
    (lines: Stream.Stream<string>, context: ParseContext) => parseLines<Output>(lines, () => make(context)),
    { [LineFunction]: make }
  )

/** The line function `parse` was built from with `fromLines`, if it was. @internal */
export const lineFunctionOf = (parse: Driver["parse"]): Make | undefined =>
  (parse as { readonly [LineFunction]?: Make })[LineFunction]

/** @internal */
export { isProtocolError }
