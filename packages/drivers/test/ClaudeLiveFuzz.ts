/**
 * Claude's live session as a line parser, for the parser fuzz harness. `parse` feeds the given
 * stdout lines to a session one chunk at a time and emits what each chunk gave before the next
 * is pulled. A line that replays a user line while no turn runs first starts a turn whose prompt
 * carries that line's `uuid` (as if the session had written it), so recorded and mutated
 * transcripts drive whole turns; lines outside any turn take the session's idle path.
 * `transcripts` are the stdout lines of the recordings in fixtures/claude-live.
 */
import type * as Driver from "@tether/core/Driver"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Live from "../src/internal/claudeLive.js"
import { fixtureDir, readFixture } from "./ClaudeLiveHarness.js"

/** The stdout lines of every recorded live session. */
export const transcripts: ReadonlyArray<ReadonlyArray<string>> = Fs.readdirSync(fixtureDir)
  .filter((file) => file.endsWith(".jsonl"))
  .sort()
  .map((file) => readFixture(Path.basename(file, ".jsonl")).flatMap((f) => f.dir === "out" ? [f.line] : []))

const nowhere: Driver.Channel = { write: () => Effect.void, lines: Stream.empty, closeInput: Effect.void }

/** The `uuid` of a user-line replay. */
const replayed = (line: string): string | undefined => {
  if (!line.includes("\"isReplay\"")) return undefined
  try {
    const record = JSON.parse(line) as { readonly type?: unknown; readonly isReplay?: unknown; readonly uuid?: unknown }
    return record.type === "user" && record.isReplay === true && typeof record.uuid === "string"
      ? record.uuid
      : undefined
  } catch {
    return undefined
  }
}

type Outputs = Queue.Dequeue<Take.Take<Driver.Output, Driver.ProtocolError>>

export const parse = (
  lines: Stream.Stream<string>,
  context: Driver.ParseContext
): Stream.Stream<Driver.Output, Driver.ProtocolError> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    const scope = yield* Effect.scope
    let id = ""
    const parts = yield* Live.build(nowhere, context, { newId: () => id })
    /** The running turn's outputs; `undefined` between turns. */
    let outputs: Outputs | undefined
    /** Whether the running turn gave anything yet (the end of the lines then fails it). */
    let gave = false

    const drain = (out: Array<Driver.Output>) =>
      Effect.gen(function*() {
        if (outputs === undefined) return
        for (const take of yield* Queue.takeAll(outputs)) {
          yield* Take.match(take, {
            onEnd: () => Effect.sync(() => (outputs = undefined)),
            onFailure: Effect.failCause,
            onSuccess: (chunk) =>
              Effect.sync(() => {
                gave = true
                out.push(...chunk)
              })
          })
        }
      })

    const onChunk = (chunk: Chunk.Chunk<string>) =>
      Effect.gen(function*() {
        const out: Array<Driver.Output> = []
        for (const line of chunk) {
          const uuid = outputs === undefined ? replayed(line) : undefined
          if (uuid !== undefined) {
            id = uuid
            outputs = yield* Scope.extend(parts.start({ runId: "fuzz", prompt: "fuzz" }), scope)
            gave = false
          }
          yield* parts.feed([line])
          yield* drain(out)
        }
        return Chunk.unsafeFromArray(out)
      })

    const atEnd = Effect.gen(function*() {
      const out: Array<Driver.Output> = []
      if (outputs !== undefined && gave) {
        yield* parts.end
        yield* drain(out)
      }
      return Chunk.unsafeFromArray(out)
    })

    return Stream.concat(
      Stream.mapChunksEffect(lines, onChunk),
      Stream.flattenChunks(Stream.fromEffect(atEnd))
    )
  }))
