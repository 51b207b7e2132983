import { describe, expect, it } from "@effect/vitest"
import { CursorAgent } from "@tether/testing"
import * as Effect from "effect/Effect"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

/** Runs the fake with `args` and `stdin` in a fresh config directory; removes it afterwards. */
const runFake = (args: ReadonlyArray<string>, stdin: string, env: { readonly [name: string]: string } = {}) =>
  Effect.acquireUseRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-cursor-fake-"))),
    (dir) =>
      Effect.async<
        {
          readonly code: number | null
          readonly stdout: string
          readonly stderr: string
          readonly files: ReadonlyArray<string>
        }
      >(
        (resume) => {
          const child = spawn(process.execPath, [CursorAgent.path, ...args], {
            cwd: dir,
            env: { PATH: process.env["PATH"] ?? "", CURSOR_CONFIG_DIR: dir, ...env },
            stdio: ["pipe", "pipe", "pipe"]
          })
          let stdout = ""
          let stderr = ""
          child.stdout.on("data", (d: Buffer) => (stdout += d.toString()))
          child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
          child.stdin.end(stdin)
          child.on("close", (code) =>
            resume(Effect.succeed({
              code,
              stdout,
              stderr,
              files: (Fs.readdirSync(dir, { recursive: true }) as Array<string>).sort()
            })))
        }
      ),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )

const headless = (dir: string) => ["-p", "--output-format", "stream-json", "--workspace", dir, "--trust"]

describe("CursorAgent (fake Cursor CLI)", () => {
  it("exposes an executable program path and a driver configuration running it with this Node", () => {
    expect(Fs.statSync(CursorAgent.path).mode & 0o111).not.toBe(0)
    expect(CursorAgent.config({ model: "m" })).toEqual({
      model: "m",
      binary: process.execPath,
      binaryArgs: [CursorAgent.path]
    })
    expect(CursorAgent.call("lookup", { key: "A" })).toBe(`@call lookup {"key":"A"}`)
  })

  it.live("a plain turn without MCP servers: init, user, assistant, result, and a chat file", () =>
    Effect.gen(function*() {
      const workspace = Fs.realpathSync(Os.tmpdir())
      const run = yield* runFake([...headless(workspace), "--model", "m1"], "@say hello there\n")
      expect(run.code).toBe(0)
      const records = run.stdout.trim().split("\n").map((line) => JSON.parse(line))
      expect(records.map((r) => r.subtype === undefined ? r.type : `${r.type}/${r.subtype}`)).toEqual([
        "system/init",
        "user",
        "assistant",
        "result/success"
      ])
      expect(records[0]).toMatchObject({ cwd: workspace, model: "m1", apiKeySource: "login" })
      expect(records[3]).toMatchObject({ is_error: false, result: "hello there", session_id: records[0].session_id })
      expect(run.files.filter((f) => f.endsWith(".json"))).toEqual([
        expect.stringMatching(new RegExp(`^chats/[0-9a-f]{32}/${records[0].session_id}\\.json$`))
      ])
    }))

  it.live("refuses what the real headless CLI refuses: no --trust, unknown options, no prompt, an unknown session", () =>
    Effect.gen(function*() {
      const workspace = Os.tmpdir()
      const untrusted = yield* runFake(["-p", "--output-format", "stream-json", "--workspace", workspace], "hi")
      expect(untrusted.code).toBe(1)
      expect(untrusted.stderr).toContain("Workspace Trust Required")
      const unknown = yield* runFake([...headless(workspace), "--yolo"], "hi")
      expect(unknown.stderr).toContain("unknown option '--yolo'")
      const empty = yield* runFake(headless(workspace), "  ")
      expect(empty.stderr).toContain("no prompt")
      const missing = yield* runFake([...headless(workspace), "--resume", "00000000-0000-4000-8000-000000000000"], "hi")
      expect(missing.code).toBe(1)
      expect(missing.stderr).toContain("session 00000000-0000-4000-8000-000000000000 not found")
      expect(missing.stdout).toBe("")
    }))

  it.live("an unset bearer variable leaves the server out; the turn still completes", () =>
    Effect.gen(function*() {
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-cursor-mcp-"))
      Fs.writeFileSync(
        Path.join(dir, "mcp.json"),
        JSON.stringify({
          mcpServers: { t: { url: "http://127.0.0.1:9/mcp", headers: { Authorization: "Bearer ${env:UNSET_VAR_X}" } } }
        })
      )
      const run = yield* runFake([...headless(Os.tmpdir()), "--approve-mcps"], CursorAgent.call("echo"), {
        CURSOR_CONFIG_DIR: dir
      }).pipe(Effect.ensuring(Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))))
      expect(run.code).toBe(0)
      expect(run.stderr).toContain("environment variable UNSET_VAR_X is not set")
      expect(run.stdout).toContain("echo -> unavailable")
    }))
})
