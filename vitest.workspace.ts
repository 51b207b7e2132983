import { defineWorkspace } from "vitest/config"

// One project per package. `@tether/source` makes every `@tether/*` import resolve to the
// package's TypeScript source, so `npm test` needs no prior build.
const project = (name: string, options: { readonly timeout?: number } = {}) => ({
  resolve: { conditions: ["@tether/source"] },
  ssr: { resolve: { conditions: ["@tether/source"] } },
  test: {
    name,
    root: `./packages/${name}`,
    include: ["test/**/*.test.ts"],
    globalSetup: ["../../scripts/testTmpdir.ts"],
    testTimeout: options.timeout ?? 30_000,
    hookTimeout: 60_000
  }
})

export default defineWorkspace([
  project("tool"),
  project("gateway"),
  project("profile"),
  project("core", { timeout: 120_000 }),
  project("drivers", { timeout: 180_000 }),
  project("testing", { timeout: 120_000 }),
  project("ai", { timeout: 120_000 }),
  {
    resolve: { conditions: ["@tether/source"] },
    ssr: { resolve: { conditions: ["@tether/source"] } },
    test: {
      name: "repo",
      root: "./test",
      include: ["**/*.test.ts"],
      globalSetup: ["../scripts/testTmpdir.ts"],
      testTimeout: 120_000
    }
  }
])
