/**
 * @tether/core overhead:
 * - a run of the fake CLI emitting 10,000 events through `Agent.run`, against a raw
 *   `child_process.spawn` + `readline` loop (JSON.parse per line) over the same program and
 *   script, in pairs of one run of each (which goes first alternates); the ratio is the median
 *   over pairs of agent time / raw time within the pair, so a load swing from other processes
 *   weighs on both runs of a pair alike (target ≤ 1.05×);
 * - `Agent.make` → close with no run (target ≤ 10 ms);
 * - the garbage collection inside a run (reported): collections and their time per run of each
 *   path, each path measured in a process of its own (in one process the two would share the
 *   collections that either one's survivors cause);
 * - the scrub that follows every run (reported): the walk over the clone for the files the
 *   process wrote, in a clone holding `files` session files (a long-lived agent's clone keeps
 *   its threads' sessions, and what a CLI writes beside them: Claude Code an MCP log per run),
 *   against a bare `readdirSync` + `lstatSync` loop over the same directory; medians of 7
 *   alternating rounds.
 *
 * Run: node --import tsx --import ./bench/compiled.mjs bench/core.ts [--events <n>] [--phases [pairs]]
 * `--events <n>` (alone only; the suite's P4 is 10,000) sets the run's events: with `--events 10`
 * the same figures show the overhead a run costs whatever its output.
 * `--phases [pairs]` (alone only) prints instead where each path's time goes, phase by phase, in
 * P4's alternated pairs (default 40): from the call to the spawn, the synchronous `spawn` itself,
 * from the spawn to the first stdout line handled, from there to the terminal record, and from the
 * terminal record to the run's return; the medians of each path and of the paired differences.
 * It times `child_process.spawn` by wrapping it, and the lines through the fake CLI driver's own
 * line function, wrapped (a count and a check per line; the clock is read at the first line and at
 * the terminal record, as the raw loop then reads it at its first line and its result).
 * (`--gc-child agent|raw <runs>` is the child process of the collection figure.)
 */
import { Agent } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import { FakeCli, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as FsSync from "node:fs"
import * as Fs from "node:fs/promises"
import { createRequire, syncBuiltinESMExports } from "node:module"
import * as Os from "node:os"
import * as NodePath from "node:path"
import { PerformanceObserver } from "node:perf_hooks"
import * as Readline from "node:readline"
import { fileURLToPath } from "node:url"
// The line function a driver's parse was built from (the phases time each line through it).
import * as LineParser from "../packages/core/src/internal/lineParser.js"
// The scrub is internal: every run's end calls it on the agent's clone.
import * as ScrubFiles from "../packages/core/src/internal/scrubFiles.js"
import { quartiles } from "./stats.js"

export interface CoreFigures {
  readonly events: number
  readonly agentRunMs: number
  readonly rawRunMs: number
  /** The median over pairs of agent time / raw time within the pair. */
  readonly runRatio: number
  /** The first and third quartiles of those pairs' ratios (how far the middle half spread). */
  readonly runRatioQuartiles: readonly [number, number]
  /** Fastest of each (less sensitive to a loaded machine). */
  readonly agentRunMinMs: number
  readonly rawRunMinMs: number
  readonly minRatio: number
  readonly makeCloseMs: number
  readonly iterations: { readonly run: number; readonly makeClose: number }
  /** Collections inside a run, each path in a process of its own. */
  readonly gc: { readonly agent: GcFigures; readonly raw: GcFigures }
  /** The post-run scrub's walk of a clone holding `files` files (nothing to rewrite), and the bare loop's. */
  readonly scrub: { readonly files: number; readonly walkMs: number; readonly bareMs: number }
}

/** Garbage collection per run of one path, in a process running only that path. */
export interface GcFigures {
  readonly runs: number
  readonly collectionsPerRun: number
  readonly gcMsPerRun: number
  /** The process's CPU time per run (user + system), collections included. */
  readonly cpuMsPerRun: number
}

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** When a run's first stdout line and its terminal record were handled (`--phases`). */
interface LineMarks {
  first: number
  terminal: number
}

const rawRun = (input: string, home: string, cwd: string, marks?: LineMarks): Promise<number> =>
  new Promise((resolve, reject) => {
    const child = ChildProcess.spawn(process.execPath, [FakeCli.programPath], {
      cwd,
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: home, FAKE_CLI_HOME: home },
      stdio: ["pipe", "pipe", "pipe"],
      detached: true
    })
    let stderr = ""
    child.stderr.on("data", (chunk) => (stderr += chunk))
    let count = 0
    let done = false
    const lines = Readline.createInterface({ input: child.stdout })
    lines.on("line", (line) => {
      if (marks !== undefined && count === 0) marks.first = performance.now()
      const record = JSON.parse(line)
      count++
      if (record.type === "result") {
        if (marks !== undefined) marks.terminal = performance.now()
        done = true
        lines.close()
        resolve(count)
      }
    })
    child.on("error", reject)
    child.on("close", (code, signal) => {
      if (!done) reject(new Error(`raw run: exit ${code ?? signal} before the result: ${stderr.slice(-500)}`))
    })
    child.stdin.end(input)
  })

/** The scrub's walk over `files` session files that predate the run, vs a bare loop (medians of 7). */
const measureScrub = (files: number) =>
  Effect.gen(function*() {
    const clone = yield* Effect.acquireRelease(
      Effect.promise(() => Fs.mkdtemp(NodePath.join(Os.tmpdir(), "tether-bench-scrub-"))),
      (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
    )
    const sessions = NodePath.join(clone, "sessions")
    FsSync.mkdirSync(sessions)
    for (let i = 0; i < files; i++) FsSync.writeFileSync(NodePath.join(sessions, `${i}.jsonl`), `{"run":${i}}\n`)
    // A run that started after every one of them: the walk reads and rewrites nothing.
    const options = {
      roots: [clone],
      since: Date.now() + 60_000,
      skip: new Set<string>(),
      redact: (b: Uint8Array) => b
    }
    const bare = () => {
      for (const entry of FsSync.readdirSync(sessions, { withFileTypes: true })) {
        FsSync.lstatSync(NodePath.join(sessions, entry.name))
      }
    }
    yield* ScrubFiles.scrub(options)
    bare()
    const walkTimes: Array<number> = []
    const bareTimes: Array<number> = []
    for (let i = 0; i < 7; i++) {
      const timeWalk = Effect.suspend(() => {
        const start = performance.now()
        return Effect.map(ScrubFiles.scrub(options), () => walkTimes.push(performance.now() - start))
      })
      const timeBare = Effect.sync(() => {
        const start = performance.now()
        bare()
        bareTimes.push(performance.now() - start)
      })
      yield* i % 2 === 0 ? Effect.zipRight(timeWalk, timeBare) : Effect.zipRight(timeBare, timeWalk)
    }
    return { files, walkMs: median(walkTimes), bareMs: median(bareTimes) }
  }).pipe(Effect.scoped)

const isMain = process.argv[1] !== undefined && import.meta.url.endsWith(NodePath.basename(process.argv[1]))
const eventsFlag = process.argv.indexOf("--events")
const events = isMain && eventsFlag !== -1 ? Number(process.argv[eventsFlag + 1]) : 10_000
if (!Number.isInteger(events) || events < 2) {
  throw new Error(
    `--events takes a whole number of at least 2 (the session and result records), got ${process.argv[eventsFlag + 1]}`
  )
}

/**
 * The two paths P4 compares over the same program and script: an agent's run (of `driver`, the
 * fake CLI's) and the raw loop (marking its first line and result in `marks`, for `--phases`).
 * Every run is bounded: a stuck one fails the benchmark instead of hanging it.
 */
const pathsOf = (driver: Driver.Driver = FakeCli.driver(), marks?: LineMarks) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const input = FakeCli.script({ op: "deltas", count: events - 2 })
    const home = yield* Effect.acquireRelease(
      Effect.promise(() => Fs.mkdtemp(NodePath.join(Os.tmpdir(), "tether-bench-"))),
      (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
    )
    const agentOptions = {
      driver,
      definition: { instructions: "", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection
    }
    const agent = yield* Agent.make(agentOptions)
    return {
      agentOptions,
      agentRun: agent.run(input).pipe(Effect.timeout("60 seconds")),
      raw: Effect.tryPromise(() => rawRun(input, home, sandbox.workspace, marks)).pipe(Effect.timeout("60 seconds"))
    }
  })

const paths = pathsOf()

/** Pair `i` of the two paths: the agent's run first in even pairs, the raw run first in odd ones. */
const pair = <A, E1, E2>(agent: Effect.Effect<A, E1>, raw: Effect.Effect<A, E2>, i: number) =>
  i % 2 === 0
    ? Effect.all([agent, raw])
    : Effect.map(Effect.all([raw, agent]), ([r, a]): readonly [A, A] => [a, r])

/** One phase of a run, for `--phases`: each path's median and the median of the paired differences. */
export interface Phase {
  readonly name: string
  readonly agentMs: number
  readonly rawMs: number
  readonly differenceMs: number
}

const phaseNames = [
  "call → spawn",
  "spawn (synchronous)",
  "spawned → first line",
  "first line → terminal record",
  "terminal record → returned",
  "whole run"
] as const

/**
 * Where each path's time goes (`--phases`): `pairs` alternated pairs of P4's two paths, each run's
 * phases read from the clock at its call, around `child_process.spawn`, at its first line and its
 * terminal record, and at its return.
 */
const measurePhases = (pairs: number) =>
  Effect.gen(function*() {
    const marks: LineMarks & { spawnCalled: number; spawnReturned: number } = {
      first: 0,
      terminal: 0,
      spawnCalled: 0,
      spawnReturned: 0
    }
    // The builtin module's `spawn` wrapped, and the ESM bindings (what the runner imports) synced.
    const childProcess = createRequire(import.meta.url)("node:child_process") as typeof ChildProcess
    const spawnBefore = childProcess.spawn
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        childProcess.spawn = function(this: unknown, ...args: Parameters<typeof ChildProcess.spawn>) {
          marks.spawnCalled = performance.now()
          try {
            return spawnBefore.apply(this, args)
          } finally {
            marks.spawnReturned = performance.now()
          }
        } as typeof ChildProcess.spawn
        syncBuiltinESMExports()
      }),
      () =>
        Effect.sync(() => {
          childProcess.spawn = spawnBefore
          syncBuiltinESMExports()
        })
    )
    const fake = FakeCli.driver()
    const lineFunction = LineParser.lineFunctionOf(fake.parse)
    if (lineFunction === undefined) return yield* Effect.dieMessage("the fake CLI driver has no line function")
    let seen = 0
    const driver = {
      ...fake,
      parse: LineParser.fromLines((context) => {
        const onLine = lineFunction(context)
        return (line) => {
          if (seen++ === 0) marks.first = performance.now()
          const outputs = onLine(line)
          if ((outputs as { readonly _tag?: string })._tag === "Terminal") marks.terminal = performance.now()
          else if (Array.isArray(outputs) && outputs.some((output) => output._tag === "Terminal")) {
            marks.terminal = performance.now()
          }
          return outputs
        }
      })
    }
    const { agentRun: agentPath, raw: rawPath } = yield* pathsOf(driver, marks)
    /** The run's phases, in `phaseNames`' order. */
    const timed = (run: Effect.Effect<unknown, unknown>) =>
      Effect.suspend(() => {
        seen = 0
        const start = performance.now()
        return Effect.map(run, (): ReadonlyArray<number> => {
          const end = performance.now()
          return [
            marks.spawnCalled - start,
            marks.spawnReturned - marks.spawnCalled,
            marks.first - marks.spawnReturned,
            marks.terminal - marks.first,
            end - marks.terminal,
            end - start
          ]
        })
      })
    const agentRun = timed(agentPath)
    const raw = timed(rawPath)
    yield* agentRun
    yield* raw
    const agentPhases: Array<ReadonlyArray<number>> = []
    const rawPhases: Array<ReadonlyArray<number>> = []
    for (let i = 0; i < pairs; i++) {
      const [a, r] = yield* pair(agentRun, raw, i)
      agentPhases.push(a)
      rawPhases.push(r)
    }
    return phaseNames.map((name, k): Phase => ({
      name,
      agentMs: median(agentPhases.map((phases) => phases[k]!)),
      rawMs: median(rawPhases.map((phases) => phases[k]!)),
      differenceMs: median(agentPhases.map((phases, i) => phases[k]! - rawPhases[i]![k]!))
    }))
  }).pipe(Effect.scoped, Effect.provide(Harness.layer))

/**
 * Measures the figures above; `runs` pairs / `makeCloses` iterations / `scrubFiles` files in the
 * scrubbed clone / `gcRuns` runs per path for the collection figure (defaults 60 / 30 / 5,000 / 40).
 */
export const measure = (
  options: {
    readonly runs?: number
    readonly makeCloses?: number
    readonly scrubFiles?: number
    readonly gcRuns?: number
  } = {}
) =>
  Effect.gen(function*() {
    const runs = options.runs ?? 60
    const makeCloses = options.makeCloses ?? 30
    const { agentOptions, agentRun, raw } = yield* paths
    const agentTimes: Array<number> = []
    const rawTimes: Array<number> = []
    // Warm-up of both paths.
    yield* agentRun
    yield* raw
    const ratios: Array<number> = []
    const timeAgent = Effect.suspend(() => {
      const start = performance.now()
      return agentRun.pipe(
        Effect.flatMap((result) =>
          result.text === undefined ? Effect.dieMessage("no result") : Effect.succeed(performance.now() - start)
        )
      )
    })
    const timeRaw = Effect.suspend(() => {
      const start = performance.now()
      return Effect.map(raw, () => performance.now() - start)
    })
    for (let i = 0; i < runs; i++) {
      const [agentTime, rawTime] = yield* pair(timeAgent, timeRaw, i)
      agentTimes.push(agentTime)
      rawTimes.push(rawTime)
      ratios.push(agentTime / rawTime)
    }
    const makeCloseTimes: Array<number> = []
    for (let i = 0; i < makeCloses; i++) {
      const start = performance.now()
      yield* Effect.scoped(Agent.make(agentOptions)).pipe(Effect.timeout("60 seconds"))
      makeCloseTimes.push(performance.now() - start)
    }
    const gc = {
      agent: yield* measureGc("agent", options.gcRuns ?? 40),
      raw: yield* measureGc("raw", options.gcRuns ?? 40)
    }
    const scrub = yield* measureScrub(options.scrubFiles ?? 5_000)
    const agentRunMs = median(agentTimes)
    const rawRunMs = median(rawTimes)
    return {
      events,
      agentRunMs,
      rawRunMs,
      runRatio: median(ratios),
      runRatioQuartiles: quartiles(ratios),
      agentRunMinMs: Math.min(...agentTimes),
      rawRunMinMs: Math.min(...rawTimes),
      minRatio: Math.min(...agentTimes) / Math.min(...rawTimes),
      makeCloseMs: median(makeCloseTimes),
      iterations: { run: runs, makeClose: makeCloses },
      gc,
      scrub
    } satisfies CoreFigures
  }).pipe(Effect.scoped, Effect.provide(Harness.layer))

/** The agent's path or the raw loop, `runs` times after 5 warm-up runs, in this process alone. */
const gcChild = (path: "agent" | "raw", runs: number) =>
  Effect.gen(function*() {
    const { agentRun, raw } = yield* paths
    const once = path === "agent" ? Effect.asVoid(agentRun) : Effect.asVoid(raw)
    for (let i = 0; i < 5; i++) yield* once
    let collections = 0
    let gcMs = 0
    const observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        collections++
        gcMs += entry.duration
      }
    })
    observer.observe({ entryTypes: ["gc"] })
    const cpu = process.cpuUsage()
    for (let i = 0; i < runs; i++) yield* once
    const used = process.cpuUsage(cpu)
    // The observer's entries arrive after the collection: let the last ones in.
    yield* Effect.sleep("50 millis")
    observer.disconnect()
    return {
      runs,
      collectionsPerRun: collections / runs,
      gcMsPerRun: gcMs / runs,
      cpuMsPerRun: (used.user + used.system) / 1000 / runs
    } satisfies GcFigures
  }).pipe(Effect.scoped, Effect.provide(Harness.layer))

/** Runs `gcChild` in a process of its own (this file, with this process's flags). */
const measureGc = (path: "agent" | "raw", runs: number) =>
  Effect.promise(() =>
    new Promise<GcFigures>((resolve, reject) => {
      ChildProcess.execFile(
        process.execPath,
        [
          ...process.execArgv,
          fileURLToPath(import.meta.url),
          "--gc-child",
          path,
          String(runs),
          "--events",
          String(events)
        ],
        { timeout: 120_000 },
        (error, stdout) => {
          if (error !== null) return reject(error)
          resolve(JSON.parse(stdout.trim().split("\n").at(-1)!) as GcFigures)
        }
      )
    })
  )

/** The collection figure as one line. */
export const formatGc = (gc: CoreFigures["gc"]): string =>
  `garbage collection inside a run, each path in its own process (${gc.agent.runs} runs): agent ${
    gc.agent.gcMsPerRun.toFixed(2)
  } ms in ${gc.agent.collectionsPerRun.toFixed(2)} collections per run (CPU ${
    gc.agent.cpuMsPerRun.toFixed(1)
  } ms/run), raw ${gc.raw.gcMsPerRun.toFixed(2)} ms in ${gc.raw.collectionsPerRun.toFixed(2)} (CPU ${
    gc.raw.cpuMsPerRun.toFixed(1)
  } ms/run)`

/** The scrub figure as one line. */
export const formatScrub = (scrub: CoreFigures["scrub"]): string =>
  `scrub after a run, clone of ${scrub.files} session files: walk ${scrub.walkMs.toFixed(1)} ms, bare readdir + lstat ${
    scrub.bareMs.toFixed(1)
  } ms = ${(scrub.walkMs / scrub.bareMs).toFixed(2)}× (medians of 7)`

const child = process.argv.indexOf("--gc-child")
const phasesFlag = process.argv.indexOf("--phases")
if (isMain && phasesFlag !== -1) {
  const pairs = /^\d+$/.test(process.argv[phasesFlag + 1] ?? "") ? Number(process.argv[phasesFlag + 1]) : 40
  const phases = await Effect.runPromise(measurePhases(pairs))
  console.log(`run of ${events} events, ${pairs} alternated pairs: medians (ms)`)
  console.log(`${"phase".padEnd(30)} ${"agent".padStart(8)} ${"raw".padStart(8)} ${"paired difference".padStart(18)}`)
  for (const phase of phases) {
    console.log(
      `${phase.name.padEnd(30)} ${phase.agentMs.toFixed(2).padStart(8)} ${phase.rawMs.toFixed(2).padStart(8)} ${
        phase.differenceMs.toFixed(2).padStart(18)
      }`
    )
  }
} else if (isMain && child !== -1) {
  const path = process.argv[child + 1] === "raw" ? "raw" : "agent"
  const figures = await Effect.runPromise(gcChild(path, Number(process.argv[child + 2] ?? 40)))
  console.log(JSON.stringify(figures))
} else if (isMain) {
  const figures = await Effect.runPromise(measure())
  console.log(
    `run of ${figures.events} events: agent ${figures.agentRunMs.toFixed(1)} ms, raw spawn+readline ${
      figures.rawRunMs.toFixed(1)
    } ms, paired ratio ${figures.runRatio.toFixed(3)}× (middle half of pairs ${
      figures.runRatioQuartiles[0].toFixed(3)
    }–${
      figures.runRatioQuartiles[1].toFixed(3)
    }×; target ≤ 1.05×; medians of ${figures.iterations.run} pairs); fastest ${figures.agentRunMinMs.toFixed(1)} / ${
      figures.rawRunMinMs.toFixed(1)
    } ms = ${figures.minRatio.toFixed(3)}×`
  )
  console.log(
    `Agent.make → close, no run: ${
      figures.makeCloseMs.toFixed(1)
    } ms (target ≤ 10 ms; median of ${figures.iterations.makeClose})`
  )
  console.log(formatGc(figures.gc))
  console.log(formatScrub(figures.scrub))
}
