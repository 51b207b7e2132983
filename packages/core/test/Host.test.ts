import { describe, expect, it } from "@effect/vitest"
import { Harness } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as ChildProcess from "node:child_process"
import * as NodePath from "node:path"
import * as Readline from "node:readline"

const host = NodePath.join(import.meta.dirname, "fixtures", "host.ts")

const runHost = (signal: NodeJS.Signals, sandbox: Harness.Sandbox) =>
  Effect.async<{ readonly markers: ReadonlyArray<string>; readonly code: number | null; readonly stderr: string }>(
    (resume) => {
      const child = ChildProcess.spawn(
        process.execPath,
        ["--conditions=@tether/source", "--import", "tsx", host, sandbox.root, sandbox.source, sandbox.workspace],
        { stdio: ["ignore", "pipe", "pipe"] }
      )
      let stderr = ""
      child.stderr.on("data", (chunk) => (stderr += chunk))
      let markers: ReadonlyArray<string> = []
      Readline.createInterface({ input: child.stdout }).once("line", (line) => {
        markers = JSON.parse(line).markers
        child.kill(signal)
      })
      child.on("exit", (code) => resume(Effect.succeed({ markers, code, stderr })))
      return Effect.sync(() => child.kill("SIGKILL"))
    }
  )

describe("a host process receiving a signal closes every agent", () => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it.live(`${signal}: every CLI and grandchild reaped, every clone removed`, () =>
      Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        const before = yield* Harness.treeDigest(sandbox.source)
        const { markers, stderr } = yield* runHost(signal, sandbox)
        expect(markers, stderr).toHaveLength(2)
        for (const marker of markers) expect(yield* Harness.markedProcesses(marker)).toEqual([])
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
        expect(yield* Harness.treeDigest(sandbox.source)).toBe(before)
      }).pipe(Effect.scoped))
  }
})
