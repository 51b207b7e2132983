/**
 * SIGTERM to `npm run demo` mid-turn: the demo runs through `NodeRuntime.runMain`, so the signal
 * interrupts it and the agent's ordered close runs: no CLI process, no clone, no session store
 * and no temp directory of the demo is left. The demo's command line is read from package.json
 * (`scripts.demo`) and run with a private TMPDIR, where everything the demo creates lives.
 */
import { describe, expect, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "..")
const demo = (JSON.parse(Fs.readFileSync(Path.join(root, "package.json"), "utf8")) as {
  readonly scripts: { readonly demo: string }
}).scripts.demo.split(" ")

const alive = (pid: number): boolean => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3)
    return state !== "Z" && state !== "X"
  } catch {
    return false
  }
}

/** Live processes whose working directory lies under `dir`. */
const processesUnder = (dir: string): ReadonlyArray<number> =>
  Fs.readdirSync("/proc").filter((entry) => /^[0-9]+$/.test(entry)).flatMap((entry) => {
    try {
      return Fs.readlinkSync(`/proc/${entry}/cwd`).startsWith(dir) && alive(Number(entry)) ? [Number(entry)] : []
    } catch {
      return []
    }
  })

describe("npm run demo and host signals", () => {
  it("SIGTERM mid-turn closes the agent: no process, clone or session residue", async () => {
    expect(demo[0]).toBe("node")
    const tmp = Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-demo-signal-")))
    try {
      const child = spawn(process.execPath, demo.slice(1), {
        cwd: root,
        env: { ...process.env, NO_COLOR: "1", TMPDIR: tmp },
        stdio: ["ignore", "pipe", "pipe"],
        timeout: 90_000,
        killSignal: "SIGKILL"
      })
      let output = ""
      let cli: number | undefined
      const exited = new Promise<{ readonly code: number | null; readonly signal: string | null }>((resolve) =>
        child.on("close", (code, signal) => resolve({ code, signal }))
      )
      child.stderr.on("data", (chunk: Buffer) => output += chunk.toString("utf8"))
      child.stdout.on("data", (chunk: Buffer) => {
        output += chunk.toString("utf8")
        const started = /process (\d+) started/.exec(output)
        if (cli === undefined && started !== null) {
          // The CLI has just been spawned: the turn is under way.
          cli = Number(started[1])
          child.kill("SIGTERM")
        }
      })
      const { code, signal } = await exited
      expect(cli, output).toBeDefined()
      // Interrupted before the run finished, then exited on its own (not killed by the timeout).
      expect(output).not.toContain("■ success")
      expect(signal, output).toBeNull()
      expect(code, output).toBe(0)
      expect(alive(cli!)).toBe(false)
      expect(processesUnder(tmp)).toEqual([])
      // The demo keeps its workspace, clones and session store in one temp directory: gone.
      expect(Fs.readdirSync(tmp).filter((name) => name.startsWith("tether-"))).toEqual([])
    } finally {
      Fs.rmSync(tmp, { recursive: true, force: true })
    }
  }, 100_000)
})
