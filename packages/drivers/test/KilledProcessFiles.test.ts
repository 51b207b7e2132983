/**
 * A CLI killed before its own clean-up (by the exit grace, a cancel, a close, or from outside)
 * leaves what it wrote for itself alone in the agent's clone: its entry in the registry of running
 * processes (`sessions/<pid>.json`, Claude Code and CodeBuddy Code), CodeBuddy's shell snapshot,
 * traces and day log. Each driver's layout names them as per-process logs (`ProfileLayout.logs`),
 * so a long-lived agent's clone does not keep one per killed process. Real CLIs, offline: the
 * scripted model answers too late, and the CLI is killed mid-turn once it wrote those files.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import { Claude, CodeBuddy } from "@tether/drivers"
import { AnthropicServer, ChatCompletionsServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"

interface Case {
  readonly name: string
  /** The driver, its scripted model answering in a minute. */
  readonly driver: Effect.Effect<Driver.Driver, unknown, Scope.Scope>
  /** The profile's files (relative paths) one process writes for itself alone. */
  readonly perProcess: RegExp
  /** Whether the process `pid` wrote what the kill must catch, given the profile's files. */
  readonly wrote: (files: ReadonlyArray<string>, pid: number) => boolean
}

const cases: ReadonlyArray<Case> = [
  {
    name: "Claude Code",
    driver: Effect.map(
      AnthropicServer.make({ respond: () => AnthropicServer.delayed(60_000, AnthropicServer.reply("too late")) }),
      (server) =>
        Claude.driver({
          env: {
            ANTHROPIC_BASE_URL: server.url,
            ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
            CLAUDE_CODE_MAX_RETRIES: "0"
          }
        })
    ),
    perProcess: /^sessions\/[^/]+\.json$/,
    wrote: (files, pid) => files.includes(`sessions/${pid}.json`)
  },
  {
    name: "CodeBuddy Code",
    driver: Effect.map(
      ChatCompletionsServer.make({
        script: () => ChatCompletionsServer.delayed(60_000, ChatCompletionsServer.text("too late"))
      }),
      (server) =>
        CodeBuddy.driver({ endpoint: { baseUrl: server.baseUrl, apiKey: Redacted.make("sk-fake-codebuddy") } })
    ),
    perProcess: /^(sessions\/[^/]+\.json|shell-snapshots\/.+|traces\/.+|logs\/.+)$/,
    // Its shell snapshot comes a few seconds after its start; it removes it itself only when it exits on its own.
    wrote: (files, pid) =>
      files.includes(`sessions/${pid}.json`) && files.some((file) => file.startsWith("shell-snapshots/"))
  }
]

const definition = { instructions: "", skills: [], tools: Toolkit.empty }

/** Waits (polling, at most 30 s) until `condition` holds; dies naming `what` otherwise. */
const until = (what: string, condition: () => boolean) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 30_000
    while (!condition()) {
      if (Date.now() > deadline) return yield* Effect.dieMessage(`no ${what} within 30 s`)
      yield* Effect.sleep("50 millis")
    }
  })

/**
 * The files under `dir`, relative to it. The CLI and the agent's scrub add and remove files while
 * this reads (Claude Code writes `.claude.json` through a temporary file), so the entries' types
 * come with the listing, and a directory that goes while the walk reads it means reading again.
 */
const filesUnder = (dir: string): ReadonlyArray<string> => {
  for (let attempt = 1;; attempt++) {
    try {
      return (Fs.readdirSync(dir, { recursive: true, withFileTypes: true }) as Array<Fs.Dirent>)
        .filter((entry) => entry.isFile())
        .map((entry) => Path.relative(dir, Path.join(entry.parentPath, entry.name)))
    } catch (error) {
      if (attempt === 5 || (error as NodeJS.ErrnoException).code !== "ENOENT") throw error
    }
  }
}

describe("a CLI killed mid-turn leaves none of its per-process files in the clone (real CLIs)", () => {
  for (const subject of cases) {
    it.live(subject.name, () =>
      Effect.gen(function*() {
        const driver = yield* subject.driver
        const sandbox = yield* Harness.sandbox
        const agent = yield* Agent.make({
          driver,
          definition,
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        const clones = Fs.readdirSync(sandbox.root).filter((entry) => entry.startsWith("c-"))
        expect(clones).toHaveLength(1)
        const profile = Path.join(sandbox.root, clones[0]!, "profile")
        const perProcess = () => filesUnder(profile).filter((file) => subject.perProcess.test(file))
        const error = yield* agent.stream("Say something plain.").pipe(
          Stream.runForEach((event) =>
            event._tag !== "ProcessStarted"
              ? Effect.void
              : until("file of the process's own", () => subject.wrote(perProcess(), event.pid)).pipe(
                Effect.zipRight(Effect.sync(() => process.kill(-event.pid, "SIGKILL")))
              )
          ),
          Effect.flip
        )
        expect(error._tag === "RunError" ? error.reason : error._tag).toBe("ExitedWithoutResult")
        // Once no process of the agent runs, what the killed one wrote for itself is scrubbed and removed.
        yield* until("removal of the killed process's own files", () => perProcess().length === 0)
        expect(perProcess()).toEqual([])
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)), 90_000)
  }
})
