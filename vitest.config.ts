import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { defineConfig } from "vitest/config"
import { BaseSequencer, type TestSpecification } from "vitest/node"

// The projects are in vitest.workspace.ts; this holds what applies to the whole run.
// Most test files wait on real CLI processes, servers and timers, so on a 2-core machine two files
// run at a time (Vitest's own default there is one, which leaves a core idle much of the time);
// on more cores, one file per core less one (Vitest's default). The `cluster` project's files run
// one after the other once every other file is done (`singleFork` in vitest.workspace.ts): their
// runners hold 5-second leases that a second file's CLIs on the same cores can starve.
const workers = Math.max(2, Os.availableParallelism() - 1)

// The files that take longest (seconds in CI, run 142), started first so that no long file starts
// last and runs alone on one core while the other idles (each project's files all end before the
// next project's start: see `isolate` below). CI installs afresh, so Vitest has no timings of an
// earlier run and would order by file size. A file missing here runs after these, largest first.
const slowest: Record<string, number> = {
  "drivers:test/AcpConformance.test.ts": 86,
  "drivers:test/AcpAgents.test.ts": 60,
  "core:test/Lifecycle.test.ts": 59,
  "repo:examples.test.ts": 50,
  "drivers:test/LiveThread.test.ts": 44,
  "core:test/Thread.test.ts": 40,
  "drivers:test/CodeBuddyAgent.test.ts": 33,
  "repo:packaging.test.ts": 33,
  "repo:docsSite.test.ts": 33,
  "drivers:test/CodeBuddyConformance.test.ts": 32,
  "core:test/ThreadStore.test.ts": 28,
  "drivers:test/GeminiAgent.test.ts": 26,
  "http:test/AgentHttp.test.ts": 25,
  "repo:WebExampleResilience.test.ts": 24,
  "core:test/ThreadProperty.test.ts": 21,
  "drivers:test/ClaudeApprovals.test.ts": 20
}

class SlowestFirst extends BaseSequencer {
  override sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const weight = (spec: TestSpecification) => {
      const key = `${spec.project.name}:${
        Path.relative(spec.project.config.root, spec.moduleId).split(Path.sep).join("/")
      }`
      return [slowest[key] ?? 0, Fs.statSync(spec.moduleId).size] as const
    }
    const weights = new Map(files.map((spec) => [spec, weight(spec)]))
    return Promise.resolve(
      [...files].sort((a, b) => {
        const [slowA, sizeA] = weights.get(a)!
        const [slowB, sizeB] = weights.get(b)!
        return slowB - slowA || sizeB - sizeA
      })
    )
  }
}

export default defineConfig({
  test: {
    maxWorkers: workers,
    minWorkers: workers,
    // A project's files reuse their worker processes and the modules already loaded there (effect,
    // the packages' sources) instead of a fresh process importing them all again per file: that
    // import ("collect") was about a fifth of the run's CPU. Vitest still gives each project its own
    // workers (a project's files all run before the next project's start). No test file relies on
    // a fresh process: the few that change process.env, globalThis.fetch or timers restore them.
    // A project whose files must not share module state sets `isolate: true` (vitest.workspace.ts).
    poolOptions: { forks: { isolate: false } },
    sequence: { sequencer: SlowestFirst }
  }
})
