/**
 * Every example runs offline, as a user runs it (`node --conditions=@tether/source --import tsx
 * examples/<file>`), so none rots: each must exit 0 and print its closing `✓` line (every
 * example checks its own claims and exits non-zero otherwise). Bounded: each run is killed
 * after 100 s.
 */
import { describe, expect, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "..")
const examples = Fs.readdirSync(Path.join(root, "examples")).filter((name) => name.endsWith(".ts")).sort()

const runExample = (file: string, args: ReadonlyArray<string>, env: { readonly [name: string]: string } = {}) =>
  new Promise<{ readonly code: number | null; readonly signal: string | null; readonly output: string }>(
    (resolve) => {
      const child = spawn(
        process.execPath,
        ["--conditions=@tether/source", "--import", "tsx", Path.join("examples", file), ...args],
        {
          cwd: root,
          env: { ...process.env, NO_COLOR: "1", ...env },
          stdio: ["ignore", "pipe", "pipe"],
          timeout: 100_000,
          killSignal: "SIGKILL"
        }
      )
      let output = ""
      child.stdout.on("data", (chunk: Buffer) => output += chunk.toString("utf8"))
      child.stderr.on("data", (chunk: Buffer) => output += chunk.toString("utf8"))
      child.on("close", (code, signal) => resolve({ code, signal, output }))
    }
  )

const runs: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
  ...examples.map((file) => [file, []] as const),
  ["quickstart.ts", ["--driver", "codex"]],
  ["quickstart.ts", ["--driver", "gemini"]]
]

describe("examples run offline", () => {
  it("the examples folder has the quick start and one example per capability", () => {
    expect(examples).toContain("quickstart.ts")
    expect(examples.length).toBeGreaterThan(1)
  })

  for (const [file, args] of runs) {
    it(`examples/${file} ${args.join(" ")}`.trim(), async () => {
      const { code, signal, output } = await runExample(file, args)
      expect({ code, signal }, output).toEqual({ code: 0, signal: null })
      expect(output).toMatch(/^✓ /m)
    }, 110_000)
  }

  // A driver the examples have no scripted model for is refused before anything is acquired: the
  // refusal used to exit from inside the running program, past its finalizers (temp directories).
  for (const file of ["threads.ts", "managed-runtime.ts"]) {
    it(`examples/${file} --driver cursor exits 2 and leaves no temp directory`, async () => {
      const tmp = Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-examples-")))
      try {
        const { code, output } = await runExample(file, ["--driver", "cursor"], { TMPDIR: tmp })
        expect({ code, refused: output.includes("--driver must be one of claude, codex, gemini") }, output)
          .toEqual({ code: 2, refused: true })
        // tsx keeps its compile cache in TMPDIR.
        expect(Fs.readdirSync(tmp).filter((name) => name.startsWith("tether-"))).toEqual([])
      } finally {
        Fs.rmSync(tmp, { recursive: true, force: true })
      }
    }, 110_000)
  }
})
