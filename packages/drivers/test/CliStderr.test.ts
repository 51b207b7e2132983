/**
 * A CLI that exits non-zero with only stderr (a bad flag, a disabled account, a broken
 * install), and an agent command that is missing, through the public Agent API, one-shot runs and
 * threads (live processes). docs/drivers.md: "A run that ends without its terminal record fails
 * with `ExitedWithoutResult` and the last lines of the CLI's stderr"; "A CLI that cannot be
 * started fails with `SpawnFailed` naming the executable it tried and how to install it".
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import { Acp, Claude, CodeBuddy, Codex, Gemini } from "@tether/drivers"
import { Harness } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { NoopTools, NoopToolsLive } from "./fixtures/noopTools.js"

const said = "STDERR-MARKER-9: your organization has been disabled"

/** A fake CLI: prints one line on stderr and exits 3, whatever it is asked. */
const fakeCli = Effect.acquireRelease(
  Effect.sync(() => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-stderr-cli-"))
    const file = Path.join(dir, "cli")
    Fs.writeFileSync(file, `#!/bin/sh\necho "${said}" >&2\nexit 3\n`, { mode: 0o755 })
    return { dir, file }
  }),
  ({ dir }) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
)

const failureOf = (driver: Driver.Driver, mode: "run" | "thread") =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const error = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver,
        definition: { instructions: "", skills: [], tools: NoopTools },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      if (mode === "run") return yield* Effect.flip(agent.run("Hello?"))
      const thread = yield* agent.thread("stderr")
      return yield* Effect.flip(thread.run("Hello?"))
    }).pipe(Effect.scoped)
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    return error
  }).pipe(Effect.scoped, Effect.provide([NoopToolsLive, Harness.layer]))

const drivers = (file: string): ReadonlyArray<Driver.Driver> => [
  Claude.driver({ binary: file, env: { ANTHROPIC_API_KEY: Redacted.make("k") } }),
  Codex.driver({ binary: file, settings: Codex.offlineSettings }),
  Gemini.driver({ binary: file, env: { GEMINI_API_KEY: Redacted.make("k") } }),
  CodeBuddy.driver({ binary: file, endpoint: { baseUrl: "http://127.0.0.1:1/v1", apiKey: Redacted.make("k") } }),
  Acp.driver({ name: "some-acp", command: file, layout: Claude.layout })
]

describe("a CLI that exits non-zero with only stderr", () => {
  for (const mode of ["run", "thread"] as const) {
    for (const [index, name] of ["claude", "codex", "gemini", "codebuddy", "acp (some-acp)"].entries()) {
      it.live(
        `${name} ${mode}: the RunError quotes the CLI's stderr, not a crash of Tether's own`,
        () =>
          Effect.gen(function*() {
            const cli = yield* fakeCli
            const driver = drivers(cli.file)[index]!
            const error = yield* failureOf(driver, mode)
            expect(error._tag).toBe("RunError")
            expect({
              driver: driver.name,
              quotes: error.message.includes("STDERR-MARKER-9"),
              runnerCrashed: error.message.includes("EPIPE")
            }).toEqual({ driver: driver.name, quotes: true, runnerCrashed: false })
          }).pipe(Effect.scoped),
        30_000
      )
    }
  }
})

describe("an ACP agent command that does not exist", () => {
  for (const mode of ["run", "thread"] as const) {
    it.live(`${mode}: SpawnFailed naming the command and the install hint`, () =>
      Effect.gen(function*() {
        const driver = Acp.driver({
          name: "some-acp",
          command: "/nonexistent/some-acp-agent",
          layout: Claude.layout,
          install: "INSTALL-HINT: npm install some-acp"
        })
        const error = yield* failureOf(driver, mode)
        expect(error._tag).toBe("RunError")
        if (error._tag !== "RunError") return
        expect({
          reason: error.reason,
          names: error.detail.includes("/nonexistent/some-acp-agent"),
          hint: error.detail.includes("INSTALL-HINT")
        }).toEqual({ reason: "SpawnFailed", names: true, hint: true })
      }), 30_000)
  }
})
