import { defineWorkspace } from "vitest/config"

// One project per package. `@tether/source` makes every `@tether/*` import resolve to the
// package's TypeScript source, so `npm test` needs no prior build.
// `postgres`: the project's tests get a throwaway PostgreSQL server (`inject("postgresUrl")`).
const project = (
  name: string,
  options: { readonly timeout?: number; readonly postgres?: boolean; readonly alone?: boolean } = {}
) => ({
  resolve: { conditions: ["@tether/source"] },
  ssr: { resolve: { conditions: ["@tether/source"] } },
  test: {
    name,
    root: `./packages/${name}`,
    include: ["test/**/*.test.ts"],
    globalSetup: [...(options.postgres === true ? ["../../scripts/postgres.ts"] : []), "../../scripts/testTmpdir.ts"],
    testTimeout: options.timeout ?? 30_000,
    hookTimeout: 60_000,
    // `alone`: the project's files run in one process, one after the other, after every other
    // project's files (Vitest runs a pool's single-fork files once its parallel ones are done), each
    // with its modules loaded afresh (`isolate`; the other projects' files share loaded modules,
    // see vitest.config.ts).
    ...(options.alone === true ? { poolOptions: { forks: { singleFork: true, isolate: true } } } : {})
  }
})

export default defineWorkspace([
  project("tool"),
  project("gateway"),
  project("profile"),
  project("core", { timeout: 120_000, postgres: true }),
  project("drivers", { timeout: 180_000 }),
  project("http", { timeout: 120_000 }),
  project("testing", { timeout: 120_000 }),
  // Its runners hold 5-second leases: no other test file shares the cores with them.
  project("cluster", { timeout: 120_000, postgres: true, alone: true }),
  project("ai", { timeout: 120_000 }),
  {
    resolve: { conditions: ["@tether/source"] },
    ssr: { resolve: { conditions: ["@tether/source"] } },
    test: {
      name: "repo",
      root: "./test",
      include: ["**/*.test.ts"],
      globalSetup: ["../scripts/testTmpdir.ts", "../scripts/buildPackages.ts"],
      testTimeout: 120_000
    }
  }
])
