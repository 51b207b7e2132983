import * as Os from "node:os"
import { defineConfig } from "vitest/config"

// The projects are in vitest.workspace.ts; this holds what applies to the whole run.
// Most test files wait on real CLI processes, servers and timers, so on a 2-core machine two files
// run at a time (Vitest's own default there is one, which leaves a core idle much of the time);
// on more cores, one file per core less one (Vitest's default). The `cluster` project's files run
// one after the other once every other file is done (`singleFork` in vitest.workspace.ts): their
// runners hold 5-second leases that a second file's CLIs on the same cores can starve.
const workers = Math.max(2, Os.availableParallelism() - 1)

export default defineConfig({
  test: {
    maxWorkers: workers,
    minWorkers: workers
  }
})
