/**
 * P3 — driver parse throughput, one-shot and live protocols. A large transcript per parser is
 * generated from the records recorded from the real CLIs (packages/drivers/test/fixtures): the
 * first record, the body repeated until the transcript has ~`lines` lines, and the last record.
 * Compared, in the same process, in rounds of one run of each (which goes first alternates):
 * - the driver: split the text into lines, `Driver.parse` as a `Stream`, every output drained;
 * - the baseline: a raw loop, `text.split("\n")` + `JSON.parse` per line.
 * Throughput ratio = the median over rounds of baseline time / driver time within the round
 * (target ≥ 0.9×): the two runs of a round are side by side, so a load swing from other
 * processes weighs on both alike; the median round times are printed beside it.
 *
 * Run: node --conditions=@tether/source --import tsx bench/parse.ts
 */
import type * as Driver from "@tether/core/Driver"
import { Claude, CodeBuddy, Codex, Cursor, Gemini } from "@tether/drivers"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
// The live protocols' parsers are internal: their drivers hand them a warm process's stdout.
import * as AcpMap from "../packages/drivers/src/internal/acpMap.js"
import * as CodexLiveParse from "../packages/drivers/src/internal/codexLiveParse.js"

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

const driverRun = (parse: Driver.Driver["parse"], text: string): Effect.Effect<number> =>
  Effect.suspend(() => {
    const lines = text.split("\n").filter((line) => line !== "")
    let outputs = 0
    // Drained chunk by chunk, as a run drains it (core's run.ts): every output is built and
    // counted. (`Stream.runFold` would add a recursive call per output, a cost of the consumer.)
    return parse(Stream.fromIterable(lines), context).pipe(
      Stream.runForEachChunk((chunk) => Effect.sync(() => outputs += chunk.length)),
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
      const lines = text.split("\n").length - 1
      // Warm-up of both paths.
      rawLoop(text)
      let outputs = yield* driverRun(source.parse, text)
      const driverTimes: Array<number> = []
      const rawTimes: Array<number> = []
      const ratios: Array<number> = []
      for (let round = 0; round < rounds; round++) {
        const timeDriver = Effect.suspend(() => {
          const start = performance.now()
          return Effect.map(driverRun(source.parse, text), (n) => {
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
        ratio: median(ratios)
      })
    }
    return rows
  })

/** The table; `judge: false` (CI's short run) leaves out the verdicts. */
export const format = (rows: ReadonlyArray<ParseRow>, judge = true): string =>
  [
    "driver       transcript                          driver ms   raw ms  throughput vs raw (target ≥ 0.90×)",
    ...rows.map((r) =>
      `${r.driver.padEnd(13)}${`${r.lines} lines, ${r.megabytes.toFixed(1)} MB, ${r.outputs} outputs`.padEnd(36)}${
        r.driverMs.toFixed(1).padStart(9)
      }${r.rawMs.toFixed(1).padStart(9)}  ${r.ratio.toFixed(2)}×${judge ? (r.ratio >= 0.9 ? " pass" : " miss") : ""}`
    )
  ].join("\n")

const isMain = process.argv[1] !== undefined && import.meta.url.endsWith(NodePath.basename(process.argv[1]))
if (isMain) {
  Effect.runPromise(measure()).then((rows) => process.stdout.write(`${format(rows)}\n`))
}
