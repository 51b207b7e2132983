/**
 * P6 — agents per process and memory per idle agent: 1,000 agents made in one process on one
 * gateway (each with its own registration, token and execution clone), every registration then
 * answering `tools/list` with its token, then all closed. Memory is sampled after a forced GC
 * before the first agent and with all of them idle: heap used + external (the JS-visible cost)
 * and RSS (the process), divided by the number of agents.
 * The baseline of the make time is `Toolkit.executor` + `Gateway.register` alone (what every
 * agent must do), measured for the same number of registrations in the same process.
 * Also reported, to read the make time by: the directory entries each make created (counted in the
 * clone root with every agent idle), and what creating one costs on this machine at that moment
 * (the median `mkdir` of 200 directories beside the clone root, before the makes and after the close):
 * on a VM whose file system makes creation slow, they bound the make time from below.
 * And the file-system floor of a make, measured the same way in the same run: a bare loop of
 * synchronous calls that does what every clone must (list the source profile, read the settings
 * file it copies, create the clone directory with its marker, `profile/` and `home/`, the settings
 * copy and the auth link), for as many clones, in a fresh directory beside the clone root, just
 * before the makes (removed after the agents' close: a removal of thousands of entries right
 * before the makes would weigh on them). The make time less this floor is Tether's own cost per
 * agent.
 * And Effect's steps per make (the run loop's instructions, counted by a supervisor with op
 * supervision on, for `Agent.make` alone): what the interpreter does for a make, the same on any
 * machine, so a change that adds steps shows however noisy the timings are. Counted after the
 * timed makes are closed, over a tenth as many makes (at most 100), less the steps the counting's
 * own wrapping takes around an empty effect.
 *
 * Run: node --import tsx --import ./bench/compiled.mjs bench/agents.ts [agents=1000]
 */
import { Agent } from "@tether/core"
import { Gateway } from "@tether/gateway"
import { FakeCli, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Logger from "effect/Logger"
import * as RuntimeFlags from "effect/RuntimeFlags"
import * as RuntimeFlagsPatch from "effect/RuntimeFlagsPatch"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Supervisor from "effect/Supervisor"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import * as V8 from "node:v8"
import * as Vm from "node:vm"

export interface AgentsFigures {
  readonly agents: number
  /** Registrations that answered `tools/list` with 200 while every agent was idle. */
  readonly serving: number
  readonly makeMs: number
  /** `Toolkit.executor` + `Gateway.register` alone, for as many registrations. */
  readonly registerMs: number
  readonly closeMs: number
  readonly heapPerAgentKiB: number
  /** Process RSS before the first agent and with every agent idle (RSS also moves with GC). */
  readonly rssBeforeMiB: number
  readonly rssIdleMiB: number
  /** Clone directories left after close (expected 0). */
  readonly clonesLeft: number
  /** Directory entries (directories, files, links) in the clone root per idle agent. */
  readonly entriesPerAgent: number
  /** The median `mkdir` of a new directory beside the clone root, in microseconds: before the makes, after the close. */
  readonly mkdirMicros: readonly [number, number]
  /** The bare loop's ms per clone: the same entries and source reads, nothing else (see above). */
  readonly floorMs: number
  /** Effect's run-loop steps per `Agent.make` (see above). */
  readonly stepsPerMake: number
}

/** Counts the run loop's steps of the fibers it supervises (with op supervision on). */
class StepCounter extends Supervisor.AbstractSupervisor<void> {
  steps = 0
  readonly value = Effect.void
  override onEffect(): void {
    this.steps++
  }
}

/** The steps `effect` takes, less the counting's own around an empty effect. */
const countSteps = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<number, E, R> => {
  const counted = <A2, E2, R2>(inner: Effect.Effect<A2, E2, R2>, counter: StepCounter) =>
    inner.pipe(
      Effect.supervised(counter),
      Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision))
    )
  const empty = new StepCounter()
  const full = new StepCounter()
  return Effect.zipRight(counted(Effect.void, empty), counted(effect, full)).pipe(
    Effect.map(() => full.steps - empty.steps)
  )
}

const Lookup = Tool.make("lookup", {
  description: "Look up a key.",
  input: { key: Schema.String },
  output: Schema.Struct({ value: Schema.String }),
  revision: "lookup/v1"
})
const Store = Tool.make("store", {
  description: "Store a value under a key.",
  input: { key: Schema.String, value: Schema.String },
  output: Schema.Struct({ stored: Schema.Boolean }),
  revision: "store/v1"
})
const Tools = Toolkit.make(Lookup, Store)
const ToolsLive = Tools.toLayer({
  lookup: ({ key }) => Effect.succeed({ value: key }),
  store: () => Effect.succeed({ stored: true })
})

V8.setFlagsFromString("--expose-gc")
const gc = Vm.runInNewContext("gc") as () => void

const memory = () => {
  gc()
  gc()
  const usage = process.memoryUsage()
  return { heap: usage.heapUsed + usage.external, rss: usage.rss }
}

/** Every entry under `dir` (not following links). */
const countEntries = (dir: string): number => (Fs.readdirSync(dir, { recursive: true }) as Array<string>).length

/** The median microseconds of `mkdir` for 200 new directories in `root` (removed after). */
const mkdirCost = (root: string): number => {
  const dir = Fs.mkdtempSync(NodePath.join(root, "mkdir-cost-"))
  try {
    const times: Array<number> = []
    for (let i = 0; i < 200; i++) {
      const start = performance.now()
      Fs.mkdirSync(NodePath.join(dir, String(i)))
      times.push((performance.now() - start) * 1000)
    }
    return times.sort((a, b) => a - b)[100]!
  } finally {
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}

/**
 * The bare loop (see the module documentation): `count` clones of `source` in `dir`, timed; ms
 * per clone.
 */
const bareClones = (dir: string, source: string, count: number): number => {
  const start = performance.now()
  for (let i = 0; i < count; i++) {
    const names = Fs.readdirSync(source, { withFileTypes: true })
    const clone = Fs.mkdtempSync(NodePath.join(dir, ".clone-"))
    Fs.writeFileSync(NodePath.join(clone, "marker.json"), JSON.stringify({ version: 1, pid: process.pid, i }), {
      flag: "wx",
      mode: 0o600
    })
    const profile = NodePath.join(clone, "profile")
    Fs.mkdirSync(profile, { mode: 0o700 })
    Fs.mkdirSync(NodePath.join(clone, "home"), { mode: 0o700 })
    for (const entry of names) {
      const from = NodePath.join(source, entry.name)
      if (entry.name === "auth.json") Fs.symlinkSync(from, NodePath.join(profile, entry.name))
      else Fs.writeFileSync(NodePath.join(profile, entry.name), Fs.readFileSync(from), { flag: "wx", mode: 0o600 })
    }
  }
  return (performance.now() - start) / count
}

/** Makes `agents` (default 1,000) idle agents on one gateway and measures the figures above. */
export const measure = (options: { readonly agents?: number } = {}): Effect.Effect<AgentsFigures> =>
  Effect.gen(function*() {
    const count = options.agents ?? 1000
    const sandbox = yield* Harness.sandbox
    const observed: Array<Harness.Observed> = []
    const figures = yield* Effect.gen(function*() {
      // Baseline: the registrations alone, on the same gateway, released before the agents.
      const gateway = yield* Gateway.Gateway
      const executor = yield* Toolkit.executor(Tools)
      const registrations = yield* Scope.make()
      let start = performance.now()
      for (let i = 0; i < count; i++) yield* gateway.register(executor).pipe(Scope.extend(registrations))
      const registerMs = performance.now() - start
      // A bystander keeps the listener up between the baseline and the agents.
      yield* gateway.register(executor)
      yield* Scope.close(registrations, Exit.void)
      observed.length = 0

      const mkdirBefore = mkdirCost(NodePath.dirname(sandbox.root))
      const bare = yield* Effect.acquireRelease(
        Effect.sync(() => Fs.mkdtempSync(NodePath.join(NodePath.dirname(sandbox.root), "bare-clones-"))),
        (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
      )
      const floorMs = bareClones(bare, sandbox.source, count)
      const before = memory()
      const agentsScope = yield* Scope.make()
      start = performance.now()
      for (let i = 0; i < count; i++) {
        yield* Agent.make({
          driver: FakeCli.driver(),
          definition: { instructions: `agent ${i}`, skills: [], tools: Tools },
          workspace: sandbox.workspace,
          profile: sandbox.selection,
          identity: { id: `agent-${i}` }
        }).pipe(Scope.extend(agentsScope))
      }
      const makeMs = performance.now() - start
      const entriesPerAgent = countEntries(sandbox.root) / count
      const idle = memory()
      const statuses = yield* Effect.forEach(observed, Harness.probe, { concurrency: 16 })
      start = performance.now()
      yield* Scope.close(agentsScope, Exit.void)
      const closeMs = performance.now() - start
      const clonesLeft = (yield* Harness.entries(sandbox.root)).length
      const counted = Math.max(1, Math.min(100, Math.floor(count / 10)))
      const countScope = yield* Scope.make()
      let steps = 0
      for (let i = 0; i < counted; i++) {
        steps += yield* countSteps(
          Agent.make({
            driver: FakeCli.driver(),
            definition: { instructions: `counted agent ${i}`, skills: [], tools: Tools },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            identity: { id: `counted-${i}` }
          }).pipe(Scope.extend(countScope))
        )
      }
      yield* Scope.close(countScope, Exit.void)
      return {
        agents: count,
        serving: statuses.filter((s) => s === 200).length,
        makeMs,
        registerMs,
        closeMs,
        heapPerAgentKiB: (idle.heap - before.heap) / count / 1024,
        rssBeforeMiB: before.rss / 1024 / 1024,
        rssIdleMiB: idle.rss / 1024 / 1024,
        clonesLeft,
        entriesPerAgent,
        mkdirMicros: [mkdirBefore, mkdirCost(NodePath.dirname(sandbox.root))] as const,
        floorMs,
        stepsPerMake: steps / counted
      }
    }).pipe(Effect.provide(Harness.recordingLayer(observed)))
    return figures
  }).pipe(
    Effect.scoped,
    Effect.provide(ToolsLive),
    Effect.provide(Logger.replace(Logger.defaultLogger, Logger.none)),
    Effect.orDie
  )

/** The lines printed when run directly. */
export const format = (f: AgentsFigures): string =>
  [
    `${f.agents} agents on one gateway: ${f.serving} serving tools/list while idle; clones left after close: ${f.clonesLeft}`,
    `make all: ${f.makeMs.toFixed(0)} ms (${(f.makeMs / f.agents).toFixed(2)} ms per agent; registrations alone ${
      (f.registerMs / f.agents).toFixed(2)
    } ms, ratio ${(f.makeMs / f.registerMs).toFixed(1)}×); close all: ${f.closeMs.toFixed(0)} ms`,
    `each make created ${f.entriesPerAgent.toFixed(1)} directory entries; a mkdir here takes ${
      f.mkdirMicros[0].toFixed(0)
    } µs before the makes, ${f.mkdirMicros[1].toFixed(0)} µs after the close (medians of 200)`,
    `file-system floor (a bare loop creating the same entries for ${f.agents} clones): ${
      f.floorMs.toFixed(2)
    } ms per clone; make less the floor: ${(f.makeMs / f.agents - f.floorMs).toFixed(2)} ms per agent`,
    `Effect's steps per Agent.make: ${f.stepsPerMake.toFixed(0)}`,
    `memory per idle agent: ${f.heapPerAgentKiB.toFixed(1)} KiB heap+external; process RSS ${
      f.rssBeforeMiB.toFixed(0)
    } MiB before, ${f.rssIdleMiB.toFixed(0)} MiB with every agent idle`
  ].join("\n")

const isMain = process.argv[1] !== undefined && import.meta.url.endsWith(NodePath.basename(process.argv[1]))
if (isMain) {
  Effect.runPromise(measure({ agents: Number(process.argv[2] ?? 1000) })).then((f) =>
    process.stdout.write(`${format(f)}\n`)
  )
}
