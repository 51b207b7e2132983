import * as Os from "node:os"
import { defineConfig } from "vitest/config"

// The projects are in vitest.workspace.ts; this holds what applies to the whole run.
// Most test files wait on real CLI processes, servers and timers. Vitest's default on a 2-core
// machine is one file at a time, which leaves a core idle much of the time: two at a time took
// the suite from 1,611 s to 1,246 s on a 2-core VM (every test passing). On more cores, one file
// per core less one (Vitest's own default there).
const workers = Math.max(2, Os.availableParallelism() - 1)

export default defineConfig({
  test: {
    maxWorkers: workers,
    minWorkers: workers
  }
})
