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
import { signalGroup } from "../src/internal/procfs.js"
import { seeded } from "./fixtures/seeded.js"

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

/**
 * Lines of words, multi-byte characters and bytes that are not UTF-8 (a lead byte, a lone
 * continuation, cut sequences, an overlong form, a surrogate, a code point past U+10FFFF), some
 * ending in CR LF, some blank; the last one without its
 * newline; with `overLong`, one line of 2,000 bytes in the middle.
 */
const output = (random: () => number, overLong: boolean): Buffer => {
  const parts = [
    Buffer.from("word "),
    Buffer.from("é"),
    Buffer.from("€"),
    Buffer.from("😀"),
    Buffer.from([0xFF]),
    Buffer.from([0x80]),
    Buffer.from([0xE2, 0x82]),
    Buffer.from([0xC0, 0x80]),
    Buffer.from([0xED, 0xA0, 0x80]),
    Buffer.from([0xF4, 0x90, 0x80, 0x80]),
    Buffer.from([0xF0, 0x9F]),
    Buffer.from("{\"k\":1}")
  ]
  const out: Array<Buffer> = []
  for (let line = 0; line < 400; line++) {
    if (overLong && line === 200) out.push(Buffer.alloc(2000, 0x78))
    const count = random() < 0.1 ? 0 : Math.floor(random() * 60)
    for (let i = 0; i < count; i++) out.push(parts[Math.floor(random() * parts.length)]!)
    if (random() < 0.05) out.push(Buffer.from("  "))
    if (line < 399) out.push(Buffer.from(random() < 0.2 ? "\r\n" : "\n"))
  }
  return Buffer.concat(out)
}

/** The lines the reader hands over: split at LF, one CR dropped, blank ones skipped. */
const linesOf = (bytes: Buffer): Array<string> => {
  const lines: Array<string> = []
  let start = 0
  while (start < bytes.length) {
    let end = bytes.indexOf(10, start)
    if (end === -1) end = bytes.length
    let line = bytes.subarray(start, end)
    if (line.length > 0 && line[line.length - 1] === 13) line = line.subarray(0, -1)
    const text = new TextDecoder().decode(line)
    if (text.trim() !== "") lines.push(text)
    start = end + 1
  }
  return lines
}

/** Writes the bytes of its stdin's `data` in pieces of `cuts` bytes, a pause after each. */
const cutWriter = `
let input = ""
process.stdin.on("data", (b) => (input += b))
process.stdin.on("end", () => {
  const { data, cuts } = JSON.parse(input)
  const bytes = Buffer.from(data, "base64")
  let at = 0
  let i = 0
  const next = () => {
    if (at >= bytes.length) return
    const piece = bytes.subarray(at, at + cuts[i++])
    at += piece.length
    process.stdout.write(piece, () => setTimeout(next, 1))
  }
  next()
})
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
        const before = running.stdoutTail().total
        expect(before).toBeGreaterThan(0)
        expect(before).toBeLessThan(64 * 64 * 1024 + 1024 * 1024)
        yield* Effect.sleep("200 millis")
        expect(running.stdoutTail().total).toBe(before)
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

  it.live(
    "the raw tail keeps the last maxRawBytes of stdout, decoded as a whole, however the reads cut lines and characters",
    () =>
      Effect.gen(function*() {
        // Cases: the line reader's fast path (a whole read decoded at once), its slow path (reads
        // longer than maxLineBytes, decoded line by line) and an over-long line that ends the
        // lines; each with tails that cut the output anywhere, characters included.
        const cases = [
          { seed: 1, maxLineBytes: 1024 * 1024, overLong: false },
          { seed: 2, maxLineBytes: 1024 * 1024, overLong: false },
          { seed: 3, maxLineBytes: 700, overLong: false },
          { seed: 4, maxLineBytes: 700, overLong: true },
          { seed: 5, maxLineBytes: 1024 * 1024, overLong: false }
        ]
        for (const { maxLineBytes, overLong, seed } of cases) {
          const random = seeded(seed)
          const bytes = output(random, overLong)
          // The writes' sizes: from a byte to a few KiB, a pause after each (one read each).
          const cuts: Array<number> = []
          for (let at = 0; at < bytes.length;) {
            const size = 1 + Math.floor(random() * (random() < 0.3 ? 16 : 3000))
            cuts.push(size)
            at += size
          }
          for (const maxRawBytes of [-1, 0, 1, 5, 333, 4096, 50_000, 1024 * 1024]) {
            const input = JSON.stringify({ data: bytes.toString("base64"), cuts })
            const running = yield* Effect.orDie(Process.spawn(
              node(cutWriter, { stdin: input }),
              {},
              { ...limits, maxLineBytes, maxRawBytes }
            ))
            const lines = yield* Stream.runCollect(running.lines).pipe(Effect.either)
            yield* running.exit
            const tail = running.stdoutTail()
            yield* running.close("2 seconds")
            const where = `seed ${seed}, maxLineBytes ${maxLineBytes}, maxRawBytes ${maxRawBytes}`
            expect(tail.total, where).toBe(bytes.length)
            expect(tail.length, where).toBe(Math.max(0, Math.min(bytes.length, maxRawBytes)))
            expect(tail.chunks.reduce((sum, chunk) => sum + chunk.length, 0), where).toBe(tail.length)
            expect(Process.decodeTail(tail), where).toBe(
              bytes.subarray(Math.max(0, bytes.length - maxRawBytes)).toString("utf8")
            )
            const expected = linesOf(bytes)
            if (overLong) {
              expect(lines._tag, where).toBe("Left")
            } else {
              expect(lines._tag === "Right" && Chunk.toReadonlyArray(lines.right), where).toEqual(expected)
            }
          }
        }
      }),
    60_000
  )

  it.live("a process group is signalled while it lives and told gone after; the host's stack trace limit stays", () =>
    Effect.gen(function*() {
      const host = Error.stackTraceLimit
      Error.stackTraceLimit = 37
      try {
        const running = yield* Effect.orDie(Process.spawn(node("setTimeout(() => {}, 30_000)"), {}, limits))
        expect(signalGroup(running.pid, 0)).toBe(true)
        expect(Error.stackTraceLimit).toBe(37)
        yield* running.close("2 seconds")
        // Gone: Node throws, the answer is false, and the limit set around the throw is undone.
        expect(signalGroup(running.pid, 0)).toBe(false)
        expect(Error.stackTraceLimit).toBe(37)
      } finally {
        Error.stackTraceLimit = host
      }
    }))

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
