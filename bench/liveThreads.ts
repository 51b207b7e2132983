/**
 * P9 — a live thread's warm turn vs a cold turn, through the public API, with the real CLIs
 * offline (scripted model servers), per CLI, side by side in one run: two agents on the same
 * driver and model server, one with live threads (the default), one with `live.threads: false`.
 * Each runs one thread; after one warm-up turn of each (the live one starts its process there),
 * their turns are interleaved (alternating which goes first). Every turn is the same plain answer
 * and is committed as a checkpoint. Timed: `thread.run` wall clock. Ratio = warm median / cold
 * median; targets (issue #18): Claude ≤ 0.1×, Codex and Gemini ≤ 0.3×.
 *
 * Then 30 more warm turns of each thread: the median of their last 10 is printed beside (a thread's
 * turns must not slow down as it goes on).
 *
 * Run: node --import tsx --import ./bench/compiled.mjs bench/liveThreads.ts [turns=5] [later=30]
 */
import { Agent } from "@tether/core"
import { AnthropicServer, Harness, ResponsesServer } from "@tether/testing"
import * as GeminiServer from "@tether/testing/GeminiServer"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as NodePath from "node:path"
import * as Offline from "./offline.js"

export interface LiveThreadFigures {
  readonly driver: string
  readonly turns: number
  /** Median wall ms of a thread turn on the warm live process. */
  readonly warmMs: number
  /** Median wall ms of the same thread turn, one-shot (a CLI started and resumed per turn). */
  readonly coldMs: number
  readonly ratio: number
  readonly target: number
  /** Median wall ms of the last 10 of `later` more warm turns on the same thread (0 when none). */
  readonly lateWarmMs: number
  readonly later: number
}

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const measureDriver = (
  name: string,
  driver: Agent.Options<typeof Toolkit.empty>["driver"],
  target: number,
  turns: number,
  later: number
) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const make = (live: boolean) =>
      Agent.make({
        driver,
        definition: { instructions: "", skills: [], tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        live: { threads: live }
      })
    const warm = yield* (yield* make(true)).thread("bench-warm")
    const cold = yield* (yield* make(false)).thread("bench-cold")
    const timed = (thread: typeof warm, input: string, into: Array<number>) =>
      Effect.gen(function*() {
        const start = performance.now()
        yield* thread.run(input)
        into.push(performance.now() - start)
      })
    yield* timed(warm, "warm up", [])
    yield* timed(cold, "warm up", [])
    const warmMs: Array<number> = []
    const coldMs: Array<number> = []
    for (let i = 0; i < turns; i++) {
      const a = timed(warm, `question ${i}`, warmMs)
      const b = timed(cold, `question ${i}`, coldMs)
      yield* i % 2 === 0 ? Effect.zipRight(a, b) : Effect.zipRight(b, a)
    }
    // A thread's turns keep their speed: the warm process, its session files and what waits on
    // them after each commit do not pile up from one turn to the next.
    const lateMs: Array<number> = []
    for (let i = 0; i < later; i++) yield* timed(warm, `later question ${i}`, lateMs)
    return {
      driver: name,
      turns,
      warmMs: median(warmMs),
      coldMs: median(coldMs),
      ratio: median(warmMs) / median(coldMs),
      target,
      lateWarmMs: lateMs.length === 0 ? 0 : median(lateMs.slice(-10)),
      later
    } satisfies LiveThreadFigures
  }).pipe(Effect.scoped)

/**
 * Measures `turns` (default 5) warm and cold thread turns per CLI, after one warm-up of each;
 * then `later` (default 30) more warm turns of the same thread. The CLIs one after the other, or
 * side by side with `concurrent` (CI's short smoke run: no verdict is drawn from it).
 */
export const measure = (
  turns = 5,
  later = 30,
  options: { readonly concurrent?: boolean } = {}
): Effect.Effect<ReadonlyArray<LiveThreadFigures>, unknown> =>
  Effect.gen(function*() {
    const anthropic = yield* AnthropicServer.make({ respond: () => AnthropicServer.reply("fine") })
    const responses = yield* ResponsesServer.make({ script: () => ResponsesServer.text("fine") })
    const gemini = yield* GeminiServer.make({ respond: () => GeminiServer.reply("fine") })
    return yield* Effect.all([
      measureDriver(
        "claude",
        Offline.claude(anthropic.url),
        0.1,
        turns,
        later
      ),
      measureDriver(
        "codex",
        Offline.codex(responses.baseUrl),
        0.3,
        turns,
        later
      ),
      measureDriver(
        "gemini",
        Offline.gemini(gemini.url),
        0.3,
        turns,
        later
      )
    ], { concurrency: options.concurrent === true ? "unbounded" : 1 })
  }).pipe(
    Effect.scoped,
    Effect.provide(Harness.layer),
    Effect.provide(Logger.replace(Logger.defaultLogger, Logger.none))
  )

/** The lines printed when run directly. */
export const format = (rows: ReadonlyArray<LiveThreadFigures>): string =>
  rows.map((f) =>
    `${f.driver.padEnd(7)} thread turn: warm live ${f.warmMs.toFixed(0)} ms vs cold ${f.coldMs.toFixed(0)} ms = ${
      f.ratio.toFixed(3)
    }× (target ≤ ${f.target}×), medians of ${f.turns}${
      f.later === 0 ? "" : `; the last 10 of ${f.later} more warm turns ${f.lateWarmMs.toFixed(0)} ms`
    }`
  ).join("\n")

const isMain = process.argv[1] !== undefined && import.meta.url.endsWith(NodePath.basename(process.argv[1]))
if (isMain) {
  Effect.runPromise(measure(Number(process.argv[2] ?? 5), Number(process.argv[3] ?? 30))).then((rows) =>
    process.stdout.write(`${format(rows)}\n`)
  )
}
