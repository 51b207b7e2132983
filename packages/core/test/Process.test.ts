/**
 * The process runner on real child processes: stdout's lines whole and in order however the pipe
 * cuts them, stdout paused (not buffered) while nobody reads the lines, stdin given at once or
 * kept open, and a spawn that fails explained.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as NodePath from "node:path"
import type { Invocation } from "../src/Driver.js"
import * as Process from "../src/internal/process.js"

const limits: Process.Limits = {
  maxLineBytes: 1024 * 1024,
  maxRawBytes: 64 * 1024,
  afterExit: Duration.millis(500)
}

const node = (script: string, options: { readonly stdin?: string; readonly cwd?: string } = {}): Invocation => ({
  command: process.execPath,
  args: ["-e", script],
  env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" },
  cwd: options.cwd ?? Os.tmpdir(),
  stdin: options.stdin,
  files: []
})

/** Spawns, and closes the process when the scope closes. */
const spawned = (invocation: Invocation, options: { readonly input?: "open" } = {}) =>
  Effect.acquireRelease(
    Effect.orDie(Process.spawn(invocation, {}, limits, options)),
    (running) => running.close("2 seconds")
  )

const lineCount = 60_000
// Lines of varied lengths, written in pieces that cut lines (and a multi-byte character) in two.
const writer = `
const lines = []
for (let i = 0; i < ${lineCount}; i++) lines.push(JSON.stringify({ i, pad: "é".repeat(i % 37) + "x".repeat(240) }))
const text = lines.join("\\n") + "\\n"
let at = 0
const step = () => {
  while (at < text.length) {
    const piece = text.slice(at, at + 1000 + (at % 7919))
    at += piece.length
    if (!process.stdout.write(piece)) return process.stdout.once("drain", step)
  }
}
step()
`

describe("Process", () => {
  it.scopedLive(
    "stdout's lines arrive whole and in order; while nobody reads them the child waits",
    () =>
      Effect.gen(function*() {
        const running = yield* spawned(node(writer))
        // Nobody reads the lines yet: the buffer fills (64 takes of at most a 64 KiB read each),
        // stdout pauses, the pipe fills, and the child blocks on its writes, far short of its ~17 MB.
        yield* Effect.sleep("1 second")
        const before = running.raw().stdoutBytes
        expect(before).toBeGreaterThan(0)
        expect(before).toBeLessThan(64 * 64 * 1024 + 1024 * 1024)
        yield* Effect.sleep("200 millis")
        expect(running.raw().stdoutBytes).toBe(before)
        const lines = Chunk.toReadonlyArray(yield* Stream.runCollect(running.lines))
        expect(lines.length).toBe(lineCount)
        const wrong = lines.findIndex((line, i) =>
          line !== JSON.stringify({ i, pad: "é".repeat(i % 37) + "x".repeat(240) })
        )
        expect(wrong).toBe(-1)
        expect((yield* running.exit).exitCode).toBe(0)
      }),
    30_000
  )

  it.scopedLive(
    "a one-shot process gets its stdin at once, a live one keeps it open for its frames",
    () =>
      Effect.gen(function*() {
        const echo =
          `process.stdin.on("data", (b) => process.stdout.write(b)); process.stdin.on("end", () => process.stdout.write("end\\n"))`
        const oneShot = yield* spawned(node(echo, { stdin: "a\nb\n" }))
        expect(Chunk.toReadonlyArray(yield* Stream.runCollect(oneShot.lines))).toEqual(["a", "b", "end"])
        expect(oneShot.input).toBeUndefined()

        const live = yield* spawned(node(echo), { input: "open" })
        expect(yield* live.input!.write("one\n")).toBe(true)
        expect(yield* live.input!.write("two\n")).toBe(true)
        yield* live.input!.close
        expect(yield* live.input!.write("three\n")).toBe(false)
        expect(Chunk.toReadonlyArray(yield* Stream.runCollect(live.lines))).toEqual(["one", "two", "end"])
      }),
    30_000
  )

  it.live("a spawn that fails says why: a missing command, a missing working directory", () =>
    Effect.gen(function*() {
      const missingCommand = yield* Effect.flip(
        Process.spawn({ ...node(""), command: "/nonexistent/tether-cli" }, {}, limits)
      )
      expect(missingCommand._tag).toBe("SpawnFailed")
      expect(missingCommand.message).toContain("/nonexistent/tether-cli ENOENT")
      expect(missingCommand.message).not.toContain("working directory")
      const gone = NodePath.join(Fs.mkdtempSync(NodePath.join(Os.tmpdir(), "tether-process-")), "gone")
      const missingCwd = yield* Effect.flip(Process.spawn(node("", { cwd: gone }), {}, limits))
      expect(missingCwd.message).toContain(`the working directory ${gone} does not exist`)
      Fs.rmdirSync(NodePath.dirname(gone))
    }))
})
