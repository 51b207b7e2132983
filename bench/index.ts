/**
 * The benchmark suite: every figure P1–P8, measured in one process, one after the other, each
 * against a baseline measured side by side in the same run; then one table with the ratio, the
 * target and pass/miss. Each section's own detail is printed as it completes.
 *
 *   P1  gateway p50 latency at concurrency 1 vs a bare MCP SDK server           bench/gateway.ts
 *   P2  gateway throughput at concurrency 32 vs a bare MCP SDK server           bench/gateway.ts
 *   P3  driver parse throughput vs a raw split + JSON.parse loop                 bench/parse.ts
 *   P4  run overhead (fake CLI, 10,000 events) vs raw spawn + readline           bench/core.ts
 *   P5  Agent.make → close with no run                                           bench/core.ts
 *   P6  1,000 idle agents on one gateway; memory per idle agent                  bench/agents.ts
 *       the redactor with 1,000 live tokens vs 2 (reported)                      bench/redact.ts
 *   P7  fingerprint scaling 1,000 → 10,000 tools                                 bench/tool.ts
 *   P8  Tether vs the raw CLI for the same offline Claude Code turn              bench/turn.ts
 *   P9  a live thread's warm turn vs the same thread turn one-shot               bench/liveThreads.ts
 *   P10 a thread turn's commit after its saved session vs a plain run's result   bench/threads.ts
 *
 * Run: npm run bench   (builds the packages, then node --import tsx --import ./bench/compiled.mjs bench/index.ts)
 * Bounded to a few minutes on a 2-core machine; a loaded machine skews every figure, so the
 * 1-minute load average is printed beside the table.
 *
 * `npm run bench -- --short` (CI): every section with few iterations, under a minute, so the
 * suite cannot rot; its figures are too few to judge, so no row is marked pass or miss. P9 and
 * P10 then run their three CLIs side by side (a cold CLI start takes seconds on a slow VM).
 */
import * as Effect from "effect/Effect"
import * as Os from "node:os"
import * as Agents from "./agents.js"
import * as Core from "./core.js"
import * as Gateway from "./gateway.js"
import * as LiveThreads from "./liveThreads.js"
import * as Parse from "./parse.js"
import * as Redact from "./redact.js"
import * as Threads from "./threads.js"
import * as Tool from "./tool.js"
import * as Turn from "./turn.js"

interface Figure {
  readonly id: string
  readonly what: string
  readonly measured: string
  /** The ratio against the figure's baseline, rendered. */
  readonly ratio: string
  readonly target: string
  /** `undefined`: informational, no target. */
  readonly pass: boolean | undefined
}

const short = process.argv.includes("--short")

/** Iterations per section: the full run, or CI's short one. */
const settings = short
  ? {
    parse: { lines: 5_000, rounds: 1 },
    gateway: { latencyCalls: 100, bursts: 2, perBurst: 64, warmUpCalls: 50 },
    core: { runs: 2, makeCloses: 5, scrubFiles: 500, gcRuns: 2 },
    agents: { agents: 100 },
    redact: { tokens: 100, rounds: 1 },
    turns: 1,
    claudeTurns: 1,
    laterTurns: 2
  }
  : {
    parse: { lines: 50_000, rounds: 9 },
    gateway: { latencyCalls: 600, bursts: 12, perBurst: 128 },
    // P4's margin (5%) is a few milliseconds a run, and one pair's ratio spreads ±5–10% on this
    // 2-core VM: 20 pairs' median moved from 0.99× to 1.07× within an hour on one build.
    core: { runs: 60, makeCloses: 30, scrubFiles: 5_000, gcRuns: 40 },
    agents: { agents: 1000 },
    redact: { tokens: 1000, rounds: 7 },
    turns: 5,
    // P8's target (3%) is finer than a Claude Code turn's spread from one round to the next
    // (about ±10% on this 2-core VM): more rounds for its median.
    claudeTurns: 11,
    laterTurns: 30
  }

const figures: Array<Figure> = []
const seconds: Array<readonly [string, number]> = []
const log = (text: string) => process.stdout.write(`${text}\n`)
const x = (ratio: number, digits = 2) => `${ratio.toFixed(digits)}×`

const section = <A, E>(name: string, measure: Effect.Effect<A, E>, report: (a: A) => void) =>
  Effect.gen(function*() {
    log(`\n── ${name}`)
    const start = performance.now()
    const value = yield* measure
    seconds.push([name, (performance.now() - start) / 1000])
    report(value)
  })

/** What the packages run as here: their compiled build (as installed), or their sources through tsx. */
const packagesRun = (): string => {
  const core = import.meta.resolve("@tether/core")
  const internal = import.meta.resolve("../packages/core/src/internal/scrubFiles.js")
  return core.includes("/build/esm/") && internal.includes("/build/esm/")
    ? "packages: compiled build/esm"
    : "packages: sources through tsx, not as installed (run npm run bench)"
}

const program = Effect.gen(function*() {
  const loadBefore = Os.loadavg()[0]!
  const started = performance.now()
  log(
    `Tether benchmarks${
      short ? " (short: CI's smoke run, no verdicts)" : ""
    } · ${packagesRun()} · Node ${process.version} · ${Os.cpus().length} cores · load ${loadBefore.toFixed(2)}`
  )

  yield* section("P7 catalog and fingerprint (bench/tool.ts)", Effect.promise(Tool.run), (rows) => {
    log(Tool.format(rows.filter((row) => row.group !== "execute")))
    const fingerprint = (n: string) => rows.find((row) => row.name === `fingerprint of ${n} tools`)!
    const large = fingerprint("10,000")
    figures.push({
      id: "P7",
      what: "fingerprint, 1,000 → 10,000 tools",
      measured: `${(large.micros / 1000).toFixed(1)} ms for 10,000 (${
        (fingerprint("1,000").micros / 1000).toFixed(1)
      } ms for 1,000)`,
      ratio: `${x(large.ratio)} growth`,
      // Linear: ten times the tools, about ten times the time (13× leaves room for noise).
      target: "≤ 50 ms, growth ≤ 13×",
      pass: large.micros <= 50_000 && large.ratio <= 13
    })
  })

  yield* section(
    "P3 driver parse throughput (bench/parse.ts)",
    // With where the driver's time goes: the shared stream loop alone, and the GC in each.
    Effect.zip(Parse.measure(settings.parse), Parse.breakdown(settings.parse)),
    ([rows, parts]) => {
      log(Parse.format(rows, !short))
      log(`\n${Parse.formatBreakdown(parts)}`)
      for (const row of rows) {
        figures.push({
          id: "P3",
          what: `${row.driver} parse vs split + JSON.parse`,
          measured: `${(row.lines / row.driverMs).toFixed(0)} lines/ms (raw ${(row.lines / row.rawMs).toFixed(0)})`,
          ratio: x(row.ratio),
          target: "≥ 0.90×",
          pass: row.ratio >= 0.9
        })
      }
      // The baseline splits the whole text at once and keeps every line through its loop; a run's
      // reader splits each read as it comes. Against the same reads parsed with no output (the
      // breakdown's stream loop), what the drivers themselves cost shows apart from that.
      const own = parts.map((part) => ({ driver: part.driver, ratio: part.loopMs / part.driverMs }))
        .sort((a, b) => a.ratio - b.ratio)
      figures.push({
        id: "P3",
        what: "parsers vs JSON.parse of the same reads, no output",
        measured: `lowest ${own[0]!.driver}, highest ${own.at(-1)!.driver}`,
        ratio: `${x(own[0]!.ratio)}–${x(own.at(-1)!.ratio)}`,
        target: "(reported)",
        pass: undefined
      })
    }
  )

  yield* section(
    "P1/P2 gateway vs bare MCP SDK (bench/gateway.ts)",
    Gateway.measure(settings.gateway),
    (f) => {
      log(Gateway.format(f, !short))
      figures.push({
        id: "P1",
        what: "gateway p50 latency, concurrency 1",
        measured: `${f.gateway.p50Ms.toFixed(2)} ms (bare SDK ${f.bareSdk.p50Ms.toFixed(2)})`,
        ratio: x(f.p50Ratio),
        target: "≤ 0.85×",
        pass: f.p50Pass
      })
      figures.push({
        id: "P2",
        what: "gateway throughput, concurrency 32",
        measured: `${f.gateway.callsPerSecond.toFixed(0)} calls/s (bare SDK ${f.bareSdk.callsPerSecond.toFixed(0)})`,
        ratio: x(f.throughputRatio),
        target: "≥ 1.25×",
        pass: f.throughputPass
      })
    }
  )

  yield* section("P4/P5 run overhead and make → close (bench/core.ts)", Core.measure(settings.core), (f) => {
    log(
      `run of ${f.events} events: agent ${f.agentRunMs.toFixed(1)} ms, raw spawn+readline ${
        f.rawRunMs.toFixed(1)
      } ms ` +
        `(medians of ${f.iterations.run} pairs; paired ratio ${f.runRatio.toFixed(3)}×, middle half of pairs ${
          f.runRatioQuartiles[0].toFixed(3)
        }–${f.runRatioQuartiles[1].toFixed(3)}×); fastest ${f.agentRunMinMs.toFixed(1)} / ${
          f.rawRunMinMs.toFixed(1)
        } ms`
    )
    log(`Agent.make → close, no run: ${f.makeCloseMs.toFixed(1)} ms (median of ${f.iterations.makeClose})`)
    log(Core.formatGc(f.gc))
    log(Core.formatScrub(f.scrub))
    figures.push({
      id: "P4",
      what: "run of 10,000 events vs raw spawn + readline",
      measured: `${f.agentRunMs.toFixed(0)} ms (raw ${f.rawRunMs.toFixed(0)})`,
      ratio: x(f.runRatio),
      target: "≤ 1.05×",
      pass: f.runRatio <= 1.05
    })
    figures.push({
      id: "P4",
      what: "garbage collection inside a run, each path in its own process",
      measured: `${f.gc.agent.gcMsPerRun.toFixed(1)} ms/run (raw ${f.gc.raw.gcMsPerRun.toFixed(1)})`,
      ratio: "—",
      target: "(reported)",
      pass: undefined
    })
    figures.push({
      id: "P4",
      what: `scrub after a run, clone of ${f.scrub.files} files, vs bare readdir + lstat`,
      measured: `${f.scrub.walkMs.toFixed(1)} ms (bare ${f.scrub.bareMs.toFixed(1)})`,
      ratio: x(f.scrub.walkMs / f.scrub.bareMs),
      target: "(reported)",
      pass: undefined
    })
    figures.push({
      id: "P5",
      what: "Agent.make → close, no run",
      measured: `${f.makeCloseMs.toFixed(1)} ms`,
      ratio: "—",
      target: "≤ 10 ms",
      pass: f.makeCloseMs <= 10
    })
  })

  yield* section("P6 agents per process (bench/agents.ts)", Agents.measure(settings.agents), (f) => {
    log(Agents.format(f))
    figures.push({
      id: "P6",
      what: `${f.agents} idle agents on one gateway`,
      measured: `${f.serving} serving, ${f.clonesLeft} clones left; make ${(f.makeMs / f.agents).toFixed(2)} ms/agent`,
      ratio: `${x(f.makeMs / f.registerMs, 1)} reg.`,
      target: `≤ 2 ms/agent, all ${f.agents} serve, none left`,
      pass: f.makeMs / f.agents <= 2 && f.serving === f.agents && f.clonesLeft === 0
    })
    figures.push({
      id: "P6",
      what: "entries each make creates, and one mkdir here",
      measured: `${f.entriesPerAgent.toFixed(1)} entries; mkdir ${f.mkdirMicros[0].toFixed(0)} / ${
        f.mkdirMicros[1].toFixed(0)
      } µs before / after`,
      ratio: "—",
      target: "(reported)",
      pass: undefined
    })
    figures.push({
      id: "P6",
      what: "file-system floor of a make: the same entries, bare loop",
      measured: `${f.floorMs.toFixed(2)} ms/clone; make less floor ${(f.makeMs / f.agents - f.floorMs).toFixed(2)} ms`,
      ratio: "—",
      target: "(reported)",
      pass: undefined
    })
    figures.push({
      id: "P6",
      what: "Effect's run-loop steps per Agent.make",
      measured: `${f.stepsPerMake.toFixed(0)} steps`,
      ratio: "—",
      target: "(reported)",
      pass: undefined
    })
    figures.push({
      id: "P6",
      what: "memory per idle agent",
      measured: `${f.heapPerAgentKiB.toFixed(1)} KiB heap+ext (RSS ${f.rssBeforeMiB.toFixed(0)} → ${
        f.rssIdleMiB.toFixed(0)
      } MiB)`,
      ratio: "—",
      target: "(reported)",
      pass: undefined
    })
  })

  yield* section(
    "P6 the redactor with a fleet's live tokens (bench/redact.ts)",
    Redact.measure(settings.redact),
    (f) => {
      log(Redact.format(f))
      figures.push({
        id: "P6",
        what: `a text delta scrubbed with ${f.tokens} live tokens vs 2`,
        measured: `${f.many[0].toFixed(2)} µs (2 tokens: ${f.two[0].toFixed(2)} µs)`,
        ratio: x(f.many[0] / f.two[0], 1),
        target: "(reported)",
        pass: undefined
      })
      figures.push({
        id: "P6",
        what: `a file scrubbed with ${f.tokens} live tokens vs 2`,
        measured: `${f.many[1].toFixed(1)} ms/MiB words, ${f.many[2].toFixed(1)} base64 (2: ${f.two[1].toFixed(1)}, ${
          f.two[2].toFixed(1)
        })`,
        ratio: x(f.many[1] / f.two[1], 1),
        target: "(reported)",
        pass: undefined
      })
    }
  )

  yield* section(
    "P8 Tether vs raw Claude Code CLI, same offline turn (bench/turn.ts)",
    Turn.measure(settings.claudeTurns),
    (f) => {
      log(Turn.format(f))
      figures.push({
        id: "P8",
        what: "agent.run vs the raw CLI given Tether's invocation",
        measured: `${f.tetherMs.toFixed(0)} ms (raw ${f.rawTetherMs.toFixed(0)} to result)`,
        ratio: x(f.ratio),
        target: "≤ 1.03×",
        pass: f.ratio <= 1.03
      })
      figures.push({
        id: "P8",
        what: "the same vs the raw CLI with the MCP declaration, own profile",
        measured: `raw CLI ${f.rawMcpMs.toFixed(0)} ms to result`,
        ratio: x(f.ratioMcp),
        target: "(reported)",
        pass: undefined
      })
      figures.push({
        id: "P8",
        what: "the same vs the raw CLI without the MCP declaration",
        measured: `raw CLI ${f.rawMs.toFixed(0)} ms to result, ${f.rawExitMs.toFixed(0)} to exit`,
        ratio: x(f.ratioNoMcp),
        target: "(reported)",
        pass: undefined
      })
    }
  )

  yield* section(
    "P9 live thread: warm turn vs cold turn (bench/liveThreads.ts)",
    LiveThreads.measure(settings.turns, settings.laterTurns, { concurrent: short }),
    (rows) => {
      log(LiveThreads.format(rows))
      for (const row of rows) {
        figures.push({
          id: "P9",
          what: `${row.driver} thread turn on its warm live process vs a cold one`,
          measured: `${row.warmMs.toFixed(0)} ms vs ${row.coldMs.toFixed(0)} ms`,
          ratio: x(row.ratio),
          target: `≤ ${row.target}×`,
          pass: row.ratio <= row.target
        })
      }
    }
  )

  yield* section(
    "P10 thread checkpoint after the saved session (bench/threads.ts)",
    Threads.measure(settings.turns, { concurrent: short }),
    (rows) => {
      log(Threads.format(rows))
      for (const row of rows) {
        figures.push({
          id: "P10",
          what: `${row.driver} thread turn: terminal record → RunFinished`,
          measured: `${row.threadTailMs.toFixed(0)} ms (plain run ${row.plainTailMs.toFixed(0)} ms)`,
          ratio: `+${(row.threadTailMs - row.plainTailMs).toFixed(0)} ms`,
          target: "(reported)",
          pass: undefined
        })
      }
    }
  )

  const total = (performance.now() - started) / 1000
  const header = ["", "figure", "measured", "ratio", "target", ""]
  const rows = figures.map((f) => [
    f.id,
    f.what,
    f.measured,
    f.ratio,
    f.target,
    f.pass === undefined || short ? "info" : f.pass ? "pass" : "MISS"
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)))
  const render = (cells: ReadonlyArray<string>) => cells.map((cell, i) => cell.padEnd(widths[i]!)).join("  ").trimEnd()
  log("\n══ Tether benchmark summary")
  log(render(header))
  log(render(widths.map((w) => "─".repeat(w))))
  for (const row of rows) log(render(row))
  const missed = figures.filter((f) => f.pass === false).map((f) => `${f.id} ${f.what}`)
  log(
    short
      ? "\nshort run: too few iterations to judge a target"
      : `\n${figures.filter((f) => f.pass === true).length} of ${figures.length} rows pass` +
        (missed.length === 0 ? "" : `; missed: ${missed.join("; ")}`)
  )
  log(
    `${total.toFixed(0)} s in all (${
      seconds.map(([name, s]) => `${name.split(" ")[0]} ${s.toFixed(0)} s`).join(", ")
    })` +
      ` · load average ${loadBefore.toFixed(2)} → ${Os.loadavg()[0]!.toFixed(2)} on ${Os.cpus().length} cores`
  )
})

Effect.runPromise(program).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
