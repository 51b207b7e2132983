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

// By its tag (no output is tagged so): an error from another copy of core is still an error.
const isProtocolError = (result: unknown): result is ProtocolError =>
  (result as { readonly _tag?: unknown })._tag === "ProtocolError"

/** @internal */
export const parseLines = <O>(
  lines: Stream.Stream<string>,
  make: () => (line: string) => O | ReadonlyArray<O> | ProtocolError
): Stream.Stream<O, ProtocolError> =>
  Stream.suspend(() => {
    const onLine = make()
    const loop: Channel.Channel<Chunk.Chunk<O>, Chunk.Chunk<string>, ProtocolError, never, void, unknown> = Channel
      .readWithCause({
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
