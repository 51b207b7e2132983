import { describe, expect, it } from "@effect/vitest"
import * as Driver from "@tether/core/Driver"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Stream from "effect/Stream"
import { type LineResult, parseLines, RecentMap } from "../src/internal/lines.js"

/**
 * A stateful per-line function: a line starting with `!` is a protocol error; any other line
 * yields `length % 3` outputs, each numbered by a per-run counter (so the outputs depend on every
 * line before, and on the state being the run's own).
 */
const makeLine = (calls: { n: number }) => () => {
  let seen = 0
  return (line: string): LineResult<string> => {
    calls.n++
    if (line.startsWith("!")) return new Driver.ProtocolError({ reason: "MalformedOutput", detail: line })
    const out: Array<string> = []
    for (let i = 0; i < line.length % 3; i++) out.push(`${seen++}:${line}`)
    return out
  }
}

/** The reference: the same function in a plain loop, stopping at the first error. */
const reference = (lines: ReadonlyArray<string>) => {
  const calls = { n: 0 }
  const onLine = makeLine(calls)()
  const outputs: Array<string> = []
  for (const line of lines) {
    const result = onLine(line)
    if (result instanceof Driver.ProtocolError) return { outputs, error: result.detail, calls: calls.n }
    outputs.push(...result)
  }
  return { outputs, error: undefined, calls: calls.n }
}

/** Runs the stream: outputs in order, then the error's detail when it failed. */
const run = (stream: Stream.Stream<string, Driver.ProtocolError>) =>
  Effect.gen(function*() {
    const outputs: Array<string> = []
    const result = yield* Stream.runForEach(stream, (o) => Effect.sync(() => outputs.push(o))).pipe(Effect.either)
    return { outputs, error: Either.isLeft(result) ? result.left.detail : undefined }
  })

describe("parseLines", () => {
  it.effect("maps every line in order, with a fresh state per run", () =>
    Effect.gen(function*() {
      const calls = { n: 0 }
      const stream = parseLines(Stream.make("ab", "c", "", "abcde", "x"), makeLine(calls))
      const first = yield* run(stream)
      expect(first).toEqual({ outputs: ["0:ab", "1:ab", "2:c", "3:abcde", "4:abcde", "5:x"], error: undefined })
      expect(yield* run(stream)).toEqual(first)
      expect(calls.n).toBe(10)
    }))

  it.effect("emits the outputs before an error, fails with it, and pulls no line after it", () =>
    Effect.gen(function*() {
      const calls = { n: 0 }
      let pulls = 0
      const lines = Stream.make("ab", "c", "!bad", "ab", "!later").pipe(Stream.tap(() => Effect.sync(() => pulls++)))
      const result = yield* run(parseLines(lines, makeLine(calls)))
      expect(result).toEqual({ outputs: ["0:ab", "1:ab", "2:c"], error: "!bad" })
      expect(pulls).toBe(3)
      expect(calls.n).toBe(3)
    }))

  it.effect("an error inside a chunk stops the loop there and no further chunk is pulled", () =>
    Effect.gen(function*() {
      const calls = { n: 0 }
      const pulled: Array<number> = []
      const lines = Stream.fromChunks(Chunk.make("ab", "c"), Chunk.make("a", "!bad", "ab"), Chunk.make("ab")).pipe(
        Stream.mapChunks((chunk) => {
          pulled.push(chunk.length)
          return chunk
        })
      )
      const result = yield* run(parseLines(lines, makeLine(calls)))
      expect(result).toEqual({ outputs: ["0:ab", "1:ab", "2:c", "3:a"], error: "!bad" })
      expect(pulled).toEqual([2, 3])
      expect(calls.n).toBe(4)
    }))

  it.effect("an empty input is an empty output", () =>
    Effect.gen(function*() {
      expect(yield* run(parseLines(Stream.empty, makeLine({ n: 0 })))).toEqual({ outputs: [], error: undefined })
    }))

  it.effect.prop(
    "chunk boundaries do not matter: any split gives the plain loop's outputs, error and line count",
    [
      FastCheck.array(FastCheck.oneof(FastCheck.string({ maxLength: 5 }), FastCheck.constantFrom("!e1", "!e2")), {
        maxLength: 40
      }),
      FastCheck.array(FastCheck.nat({ max: 45 }), { maxLength: 10 })
    ],
    ([lines, cuts]) =>
      Effect.gen(function*() {
        const bounds = [...new Set([0, ...cuts.map((c) => Math.min(c, lines.length)), lines.length])]
          .sort((a, b) => a - b)
        const chunks = bounds.slice(1).map((end, i) => Chunk.fromIterable(lines.slice(bounds[i]!, end)))
        let pulled = 0
        const calls = { n: 0 }
        const source = Stream.fromChunks(...chunks).pipe(Stream.mapChunks((chunk) => {
          pulled += chunk.length
          return chunk
        }))
        const result = yield* run(parseLines(source, makeLine(calls)))
        const expected = reference(lines)
        expect(result).toEqual({ outputs: expected.outputs, error: expected.error })
        expect(calls.n).toBe(expected.calls)
        // Lines pulled: up to the end of the chunk holding the failing line, or all of them.
        expect(pulled).toBe(bounds.find((end) => end >= expected.calls) ?? lines.length)
      }),
    { fastCheck: { numRuns: 200 } }
  )
})

describe("RecentMap", () => {
  // Every sequence of operations over a few keys answers as a Map does; the keys are fresh
  // strings each time (as `JSON.parse` makes them), so the latest entry is found by content.
  const operation = FastCheck.oneof(
    FastCheck.record({
      op: FastCheck.constant("set" as const),
      key: FastCheck.integer({ min: 0, max: 4 }),
      value: FastCheck.integer()
    }),
    FastCheck.record({
      op: FastCheck.constantFrom("get" as const, "has" as const, "delete" as const),
      key: FastCheck.integer({ min: 0, max: 4 })
    }),
    FastCheck.record({ op: FastCheck.constant("clear" as const) })
  )
  it("answers get, has and empty as a Map does after any sets, deletes and clears", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.array(operation, { maxLength: 60 }), (operations) => {
        const recent = new RecentMap<number>()
        const model = new Map<string, number>()
        const fresh = (key: number) => JSON.parse(`"call_${key}"`) as string
        for (const operation of operations) {
          switch (operation.op) {
            case "set":
              recent.set(fresh(operation.key), operation.value)
              model.set(fresh(operation.key), operation.value)
              break
            case "get":
              expect(recent.get(fresh(operation.key))).toBe(model.get(fresh(operation.key)))
              break
            case "has":
              expect(recent.has(fresh(operation.key))).toBe(model.has(fresh(operation.key)))
              break
            case "delete":
              recent.delete(fresh(operation.key))
              model.delete(fresh(operation.key))
              break
            case "clear":
              recent.clear()
              model.clear()
          }
          expect(recent.empty).toBe(model.size === 0)
        }
        for (let key = 0; key <= 4; key++) expect(recent.get(fresh(key))).toBe(model.get(fresh(key)))
      }),
      { numRuns: 500 }
    )
  })
})
