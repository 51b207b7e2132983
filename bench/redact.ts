/**
 * The gateway's redactor as the number of live tokens grows: one token per registration and one
 * per running process, so a gateway serving a fleet holds hundreds to thousands of them, and every
 * text delta of every run, and every file a CLI writes in its clone, is scrubbed of all of them.
 * Measured through the public API: a gateway with one registration and `tokens - 1` credentials,
 * its `redactor`:
 * - a text delta (`text` + `heldBack`, what a run does per delta), µs per delta over 1,000 deltas;
 * - bytes, ms per MiB: a JSON transcript of plain words, and one holding a base64 blob (a long run
 *   of the token alphabet, the worst case for a search keyed on it).
 * Each against the same redactor with 2 live tokens, measured in the same process (the ratio is
 * how much the cost grew with the tokens); best of `rounds` (default 7), alternating the sizes.
 *
 * Run: node --import tsx --import ./bench/compiled.mjs bench/redact.ts [tokens=1000]
 */
import { Gateway } from "@tether/gateway"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Crypto from "node:crypto"
import * as NodePath from "node:path"

export interface RedactFigures {
  readonly tokens: number
  /** µs per delta, ms per MiB of words, ms per MiB with a base64 blob: at `tokens`, then at 2. */
  readonly many: readonly [number, number, number]
  readonly two: readonly [number, number, number]
}

const deltas = Array.from(
  { length: 1000 },
  (_, i) => `Here is some streamed text, chunk ${i}, with words and identifiers_${i % 7}`
)
const words = Buffer.from(
  JSON.stringify({ transcript: "lorem ipsum dolor sit amet, consectetur adipiscing elit; ".repeat(20_000) })
)
const blob = Buffer.from(JSON.stringify({ image: Crypto.randomBytes(768 * 1024).toString("base64") }))
const mib = (bytes: Buffer) => bytes.length / 1024 / 1024

/** A gateway whose redactor knows `count` live tokens (a registration and its credentials). */
const redactorWith = (count: number) =>
  Effect.gen(function*() {
    const gateway = yield* Gateway.make()
    const registration = yield* gateway.register(yield* Toolkit.executor(Toolkit.empty))
    for (let i = 1; i < count; i++) yield* registration.credential()
    return gateway.redactor
  })

const time = (redactor: Gateway.Redactor): readonly [number, number, number] => {
  let start = performance.now()
  for (const delta of deltas) {
    redactor.text(delta)
    redactor.heldBack(delta)
  }
  const perDelta = (performance.now() - start) * 1000 / deltas.length
  start = performance.now()
  redactor.bytes(words)
  const perWords = (performance.now() - start) / mib(words)
  start = performance.now()
  redactor.bytes(blob)
  const perBlob = (performance.now() - start) / mib(blob)
  return [perDelta, perWords, perBlob]
}

const best = (a: readonly [number, number, number] | undefined, b: readonly [number, number, number]) =>
  a === undefined ? b : [Math.min(a[0], b[0]), Math.min(a[1], b[1]), Math.min(a[2], b[2])] as const

/** Measures the figures above with `tokens` (default 1,000) live tokens against 2. */
export const measure = (
  options: { readonly tokens?: number; readonly rounds?: number } = {}
): Effect.Effect<RedactFigures> =>
  Effect.gen(function*() {
    const tokens = options.tokens ?? 1000
    const rounds = options.rounds ?? 7
    const two = yield* redactorWith(2)
    const many = yield* redactorWith(tokens)
    let twoBest: readonly [number, number, number] | undefined
    let manyBest: readonly [number, number, number] | undefined
    // Warm-up of both.
    time(two)
    time(many)
    for (let round = 0; round < rounds; round++) {
      if (round % 2 === 0) {
        twoBest = best(twoBest, time(two))
        manyBest = best(manyBest, time(many))
      } else {
        manyBest = best(manyBest, time(many))
        twoBest = best(twoBest, time(two))
      }
    }
    return { tokens, many: manyBest!, two: twoBest! }
  }).pipe(Effect.scoped, Effect.orDie)

/** The lines printed when run directly. */
export const format = (f: RedactFigures): string =>
  [
    `redactor with ${f.tokens} live tokens vs 2 (best of the rounds):`,
    `  text delta (text + heldBack): ${f.many[0].toFixed(2)} µs vs ${f.two[0].toFixed(2)} µs = ${
      (f.many[0] / f.two[0]).toFixed(1)
    }×`,
    `  bytes, words: ${f.many[1].toFixed(2)} vs ${f.two[1].toFixed(2)} ms/MiB = ${(f.many[1] / f.two[1]).toFixed(1)}×`,
    `  bytes, base64 blob: ${f.many[2].toFixed(2)} vs ${f.two[2].toFixed(2)} ms/MiB = ${
      (f.many[2] / f.two[2]).toFixed(1)
    }×`
  ].join("\n")

const isMain = process.argv[1] !== undefined && import.meta.url.endsWith(NodePath.basename(process.argv[1]))
if (isMain) {
  Effect.runPromise(measure({ tokens: Number(process.argv[2] ?? 1000) })).then((f) =>
    process.stdout.write(`${format(f)}\n`)
  )
}
