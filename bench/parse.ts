/**
 * P3 — driver parse throughput, one-shot and live protocols. A large transcript per parser is
 * generated from the records recorded from the real CLIs (packages/drivers/test/fixtures): the
 * first record, the body repeated until the transcript has ~`lines` lines, and the last record.
 * Compared, in the same process, in rounds of one run of each (which goes first alternates):
 * - the driver: the text's lines handed to `Driver.parse` (a `Stream`) read by read, as a run's
 *   stdout reader hands them over (Node reads a pipe 64 KiB at a time; each read's text split
 *   into an array of lines when the parser pulls it, so the lines of the reads already parsed are
 *   garbage; no iterator per line, blank lines left to the parser), every output drained;
 * - the baseline: a raw loop, `text.split("\n")` + `JSON.parse` per line (its whole split kept
 *   through the loop: a run's reader keeps one read's lines at a time, so the driver is spared
 *   the collections that copy the baseline's lines; the breakdown's stream loop, `JSON.parse` of
 *   the same reads with no output, is the reference without that difference).
 * Throughput ratio = the median over rounds of baseline time / driver time within the round
 * (target ≥ 0.9×): the two runs of a round are side by side, so a load swing from other
 * processes weighs on both alike; the median round times are printed beside it.
 *
 * Run: node --import tsx --import ./bench/compiled.mjs bench/parse.ts
 *
 * `--breakdown` prints, per transcript, where the driver's time goes instead (medians of
 * `rounds` interleaved rounds, default 15): the raw loop; `JSON.parse` of the driver's reads run
 * through the drivers' shared stream loop (`parseLines`) with no output (the loop's own cost); the
 * driver; and the garbage collection inside each (V8's `gc` performance entries whose start falls
 * in the timed window, summed over the rounds and divided by them).
 *
 * `--alloc` prints what the same three paths allocate per 10,000 lines instead (young-generation
 * bytes, a full collection before each of 7 runs, the median). It needs a young generation no run
 * fills: node --expose-gc --min-semi-space-size=256 --max-semi-space-size=256 --import tsx
 * --import ./bench/compiled.mjs bench/parse.ts --alloc
 */
import type * as Driver from "@tether/core/Driver"
import { Claude, CodeBuddy, Codex, Cursor, Gemini } from "@tether/drivers"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
// The live protocols' parsers are internal: their drivers hand them a warm process's stdout.
import { PerformanceObserver } from "node:perf_hooks"
import * as v8 from "node:v8"
import * as AcpMap from "../packages/drivers/src/internal/acpMap.js"
import * as CodexLiveParse from "../packages/drivers/src/internal/codexLiveParse.js"
import { parseLines } from "../packages/drivers/src/internal/lines.js"
import { quartiles } from "./stats.js"

const fixtures = NodePath.resolve(import.meta.dirname, "../packages/drivers/test/fixtures")

export interface ParseRow {
  readonly driver: string
  readonly fixture: string
  readonly lines: number
  readonly megabytes: number
  /** Outputs the driver yielded for the whole transcript. */
  readonly outputs: number
  readonly driverMs: number
  readonly rawMs: number
  /** Driver throughput against the raw loop: the median over rounds of raw time / driver time. */
  readonly ratio: number
  /**
   * The first and third quartiles of those rounds' ratios: on a shared VM one round's ratio can
   * be far off, and this says how far the middle half of them spread around the median.
   */
  readonly ratioQuartiles: readonly [number, number]
}

const sources: ReadonlyArray<
  { readonly driver: string; readonly fixture: string; readonly parse: Driver.Driver["parse"] }
> = [
  { driver: "claude", fixture: "claude/mcp-partial.jsonl", parse: Claude.parse },
  { driver: "codex", fixture: "codex/mcp-tool.jsonl", parse: Codex.parse },
  { driver: "gemini", fixture: "gemini/tool.jsonl", parse: Gemini.parse },
  { driver: "cursor", fixture: "cursor/turn.jsonl", parse: Cursor.parse },
  { driver: "codebuddy", fixture: "codebuddy/mcp.jsonl", parse: CodeBuddy.parse },
  // Live protocols: Codex's app-server, and ACP (Gemini CLI's --experimental-acp). Claude Code's
  // live session maps its records with the Claude parser above (claudeParse.onRecord).
  {
    driver: "codex live",
    fixture: "codex-live/session.jsonl",
    parse: (lines, context) => CodexLiveParse.parse(lines, context)
  },
  {
    driver: "acp (gemini)",
    fixture: "gemini-acp/session.jsonl",
    parse: (lines, context) => AcpMap.parse(lines, context, AcpMap.genericNaming)
  }
]

/** First record, the body repeated up to ~`target` lines, the last (terminal) record. */
const transcript = (fixture: string, target: number): string => {
  const records = Fs.readFileSync(NodePath.join(fixtures, fixture), "utf8").split("\n").filter((l) => l !== "")
  const first = records[0]!
  const last = records.at(-1)!
  const body = records.slice(1, -1)
  const out = [first]
  while (out.length + body.length < target) out.push(...body)
  out.push(last)
  return `${out.join("\n")}\n`
}

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

const context: Driver.ParseContext = {
  hostedKey: "tether",
  session: { _tag: "New", id: "00000000-0000-4000-8000-000000000000" }
}

const rawLoop = (text: string): number => {
  let n = 0
  for (const line of text.split("\n")) {
    if (line === "") continue
    const record = JSON.parse(line) as { readonly type?: unknown }
    if (record.type !== undefined) n++
  }
  return n
}

/** The bytes of one read of a pipe (the transcripts are ASCII but for a few characters). */
const readBytes = 64 * 1024

/**
 * Where a run's reads cut the text into chunks of lines: for each read, the span of the text
 * holding the lines whose newline it holds (a line cut by a read goes with the read that ends it;
 * a read that ends no line hands over nothing), without that last newline. Found once per
 * transcript, outside the timings: where a read ends is the pipe's doing, not the reader's.
 */
const readsOf = (text: string): ReadonlyArray<readonly [number, number]> => {
  const lines = text.split("\n")
  const spans: Array<readonly [number, number]> = []
  let start = 0
  let read = 0
  let offset = 0
  for (let i = 0; i < lines.length; i++) {
    const lineStart = offset
    offset += lines[i]!.length + 1
    // The read that holds this line's newline.
    const holder = Math.floor((offset - 1) / readBytes)
    if (holder !== read) {
      if (lineStart > start) spans.push([start, lineStart - 1])
      start = lineStart
      read = holder
    }
  }
  spans.push([start, text.length])
  return spans
}

/**
 * The text's lines as a run's stdout reader hands them over: read by read, the read's lines
 * split out of its text when the parser pulls them (the reader splits each read as it comes, so
 * the lines of the reads already parsed are garbage; the raw loop's one split is the same work).
 */
const lineChunks = (text: string, reads: ReadonlyArray<readonly [number, number]>): Stream.Stream<string> =>
  Stream.unfoldChunk(0, (read) =>
    read === reads.length
      ? Option.none()
      : Option.some([Chunk.unsafeFromArray(text.slice(reads[read]![0], reads[read]![1]).split("\n")), read + 1]))

const driverRun = (
  parse: Driver.Driver["parse"],
  text: string,
  reads: ReadonlyArray<readonly [number, number]>
): Effect.Effect<number> =>
  Effect.suspend(() => {
    let outputs = 0
    // Drained chunk by chunk, as a run drains it (core's run.ts): every output is built and
    // counted when its chunk arrives. (`Stream.runFold` would add a recursive call per output, a
    // cost of the consumer.)
    return parse(lineChunks(text, reads), context).pipe(
      Stream.runForEachChunk((chunk) => {
        outputs += chunk.length
        return Effect.void
      }),
      Effect.orDie,
      Effect.map(() => outputs)
    )
  })

/** Measures every driver; `lines` per transcript (default 50,000), `rounds` (default 5). */
export const measure = (
  options: { readonly lines?: number; readonly rounds?: number } = {}
): Effect.Effect<ReadonlyArray<ParseRow>> =>
  Effect.gen(function*() {
    const target = options.lines ?? 50_000
    const rounds = options.rounds ?? 5
    const rows: Array<ParseRow> = []
    for (const source of sources) {
      const text = transcript(source.fixture, target)
      const reads = readsOf(text)
      const lines = text.split("\n").length - 1
      // Warm-up of both paths.
      rawLoop(text)
      let outputs = yield* driverRun(source.parse, text, reads)
      const driverTimes: Array<number> = []
      const rawTimes: Array<number> = []
      const ratios: Array<number> = []
      for (let round = 0; round < rounds; round++) {
        const timeDriver = Effect.suspend(() => {
          const start = performance.now()
          return Effect.map(driverRun(source.parse, text, reads), (n) => {
            outputs = n
            return performance.now() - start
          })
        })
        const timeRaw = Effect.sync(() => {
          const start = performance.now()
          rawLoop(text)
          return performance.now() - start
        })
        const [driverTime, rawTime] = round % 2 === 0
          ? yield* Effect.all([timeDriver, timeRaw])
          : yield* Effect.map(Effect.all([timeRaw, timeDriver]), ([raw, driver]) => [driver, raw] as const)
        driverTimes.push(driverTime)
        rawTimes.push(rawTime)
        ratios.push(rawTime / driverTime)
      }
      const driverMs = median(driverTimes)
      const rawMs = median(rawTimes)
      rows.push({
        driver: source.driver,
        fixture: source.fixture,
        lines,
        megabytes: Buffer.byteLength(text) / 1024 / 1024,
        outputs,
        driverMs,
        rawMs,
        ratio: median(ratios),
        ratioQuartiles: quartiles(ratios)
      })
    }
    return rows
  })

export interface BreakdownRow {
  readonly driver: string
  readonly lines: number
  /** Median ms of the raw loop, the stream loop with no output, the driver. */
  readonly rawMs: number
  readonly loopMs: number
  readonly driverMs: number
  /** Mean GC ms inside one run of each. */
  readonly rawGcMs: number
  readonly loopGcMs: number
  readonly driverGcMs: number
}

const none: ReadonlyArray<never> = []

/** `JSON.parse` of every line through `parseLines`, nothing output: the shared loop's own cost. */
const loopRun = (text: string, reads: ReadonlyArray<readonly [number, number]>): Effect.Effect<number> =>
  Effect.suspend(() => {
    let records = 0
    return parseLines(lineChunks(text, reads), () => (line) => {
      if (line !== "" && (JSON.parse(line) as { readonly type?: unknown }).type !== undefined) records++
      return none
    }).pipe(Stream.runDrain, Effect.orDie, Effect.map(() => records))
  })

/** Where the driver's time goes, per transcript (see the header). */
export const breakdown = (
  options: { readonly lines?: number; readonly rounds?: number } = {}
): Effect.Effect<ReadonlyArray<BreakdownRow>> =>
  Effect.gen(function*() {
    const target = options.lines ?? 50_000
    const rounds = options.rounds ?? 15
    const collections: Array<{ readonly start: number; readonly duration: number }> = []
    const observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) collections.push({ start: entry.startTime, duration: entry.duration })
    })
    observer.observe({ entryTypes: ["gc"] })
    yield* Effect.addFinalizer(() => Effect.sync(() => observer.disconnect()))
    const rows: Array<BreakdownRow> = []
    for (const source of sources) {
      const text = transcript(source.fixture, target)
      const reads = readsOf(text)
      const variants = [
        { name: "raw", run: Effect.sync(() => rawLoop(text)) },
        { name: "loop", run: loopRun(text, reads) },
        { name: "driver", run: driverRun(source.parse, text, reads) }
      ] as const
      const times = new Map<string, Array<number>>(variants.map((v) => [v.name, []]))
      const windows = new Map<string, Array<readonly [number, number]>>(variants.map((v) => [v.name, []]))
      for (const variant of variants) yield* variant.run
      for (let round = 0; round < rounds; round++) {
        const order = round % 2 === 0 ? variants : [...variants].reverse()
        for (const variant of order) {
          const start = performance.now()
          yield* variant.run
          const end = performance.now()
          times.get(variant.name)!.push(end - start)
          windows.get(variant.name)!.push([start, end])
        }
      }
      // The entries of the last collections are delivered after the synchronous runs.
      yield* Effect.sleep("50 millis")
      const gc = (name: string) =>
        collections.filter((c) => windows.get(name)!.some(([start, end]) => c.start >= start && c.start < end))
          .reduce((sum, c) => sum + c.duration, 0) / rounds
      rows.push({
        driver: source.driver,
        lines: text.split("\n").length - 1,
        rawMs: median(times.get("raw")!),
        loopMs: median(times.get("loop")!),
        driverMs: median(times.get("driver")!),
        rawGcMs: gc("raw"),
        loopGcMs: gc("loop"),
        driverGcMs: gc("driver")
      })
      collections.length = 0
    }
    return rows
  }).pipe(Effect.scoped)

/** The breakdown's table. */
export const formatBreakdown = (rows: ReadonlyArray<BreakdownRow>): string =>
  [
    "driver       lines   raw ms (gc)    parseLines, no output ms (gc)   driver ms (gc)",
    ...rows.map((r) =>
      `${r.driver.padEnd(13)}${String(r.lines).padEnd(8)}${
        `${r.rawMs.toFixed(1)} (${r.rawGcMs.toFixed(1)})`.padEnd(15)
      }${`${r.loopMs.toFixed(1)} (${r.loopGcMs.toFixed(1)})`.padEnd(32)}${r.driverMs.toFixed(1)} (${
        r.driverGcMs.toFixed(1)
      })`
    )
  ].join("\n")

/** The table; `judge: false` (CI's short run) leaves out the verdicts. */
export const format = (rows: ReadonlyArray<ParseRow>, judge = true): string =>
  [
    "driver       transcript                          driver ms   raw ms  throughput vs raw (target ≥ 0.90×)  middle half of rounds",
    ...rows.map((r) =>
      `${r.driver.padEnd(13)}${`${r.lines} lines, ${r.megabytes.toFixed(1)} MB, ${r.outputs} outputs`.padEnd(36)}${
        r.driverMs.toFixed(1).padStart(9)
      }${r.rawMs.toFixed(1).padStart(9)}  ${
        `${r.ratio.toFixed(2)}×${judge ? (r.ratio >= 0.9 ? " pass" : " miss") : ""}`.padEnd(37)
      }${r.ratioQuartiles[0].toFixed(2)}–${r.ratioQuartiles[1].toFixed(2)}×`
    )
  ].join("\n")

export interface AllocationRow {
  readonly driver: string
  /** KiB allocated per 10,000 lines: the raw loop, the stream loop with no output, the driver. */
  readonly rawKiB: number
  readonly loopKiB: number
  readonly driverKiB: number
}

/**
 * What each path allocates, per 10,000 lines (`--alloc`): young-generation bytes used after a
 * run less before it, with a full collection before each run (the median of `runs`). Needs
 * `--expose-gc` and a young generation large enough that no collection runs inside a run (256
 * MiB holds a 50,000-line run): a collection inside would hide what it freed.
 */
export const allocation = (
  gc: () => void,
  options: { readonly lines?: number; readonly runs?: number } = {}
): Effect.Effect<ReadonlyArray<AllocationRow>> =>
  Effect.gen(function*() {
    const target = options.lines ?? 50_000
    const runs = options.runs ?? 7
    const young = () => v8.getHeapSpaceStatistics().find((space) => space.space_name === "new_space")!.space_used_size
    const rows: Array<AllocationRow> = []
    for (const source of sources) {
      const text = transcript(source.fixture, target)
      const reads = readsOf(text)
      const lines = text.split("\n").length - 1
      const bytes = (run: Effect.Effect<unknown>) =>
        Effect.gen(function*() {
          yield* run // warm-up
          const sizes: Array<number> = []
          for (let i = 0; i < runs; i++) {
            gc()
            const before = young()
            yield* run
            sizes.push(young() - before)
          }
          return median(sizes) / lines * 10_000 / 1024
        })
      rows.push({
        driver: source.driver,
        rawKiB: yield* bytes(Effect.sync(() => rawLoop(text))),
        loopKiB: yield* bytes(loopRun(text, reads)),
        driverKiB: yield* bytes(driverRun(source.parse, text, reads))
      })
    }
    return rows
  })

/** The allocation table. */
export const formatAllocation = (rows: ReadonlyArray<AllocationRow>): string =>
  [
    "KiB allocated per 10,000 lines  raw loop   parseLines, no output   driver",
    ...rows.map((r) =>
      `${r.driver.padEnd(31)}${r.rawKiB.toFixed(0).padStart(8)}${r.loopKiB.toFixed(0).padStart(24)}${
        r.driverKiB.toFixed(0).padStart(9)
      }`
    )
  ].join("\n")

const isMain = process.argv[1] !== undefined && import.meta.url.endsWith(NodePath.basename(process.argv[1]))
if (isMain) {
  const gc = (globalThis as { readonly gc?: () => void }).gc
  if (process.argv.includes("--alloc")) {
    if (
      gc === undefined || v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space")!.space_size < 2 ** 27
    ) {
      process.stderr.write(
        "--alloc needs: node --expose-gc --min-semi-space-size=256 --max-semi-space-size=256 --import tsx --import ./bench/compiled.mjs bench/parse.ts --alloc\n"
      )
      process.exitCode = 1
    } else {
      Effect.runPromise(allocation(gc)).then((rows) => process.stdout.write(`${formatAllocation(rows)}\n`))
    }
  } else if (process.argv.includes("--breakdown")) {
    Effect.runPromise(breakdown()).then((rows) => process.stdout.write(`${formatBreakdown(rows)}\n`))
  } else {
    Effect.runPromise(measure()).then((rows) => process.stdout.write(`${format(rows)}\n`))
  }
}
