/**
 * How far `Approval.allowForSession` on one Codex file change (`acceptForSession`) reaches
 * on a live thread. docs/approvals.md: "file changes: `acceptForSession` (a later change of the
 * same file is not asked)". Real CLI (pinned 0.171.0) offline against the scripted Responses server.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Approval } from "@tether/core"
import { ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { denied, offlineCodex, withSandbox } from "./CodexHarness.js"

/** `PATCH:` then the patch body on the following lines: applied with apply_patch through exec_command. */
const script: ResponsesServer.Script = (request) => {
  const last = ResponsesServer.userTexts(request).at(-1) ?? ""
  if (last.startsWith(denied)) return ResponsesServer.text(`TOLD: ${last}`)
  const output = ResponsesServer.lastFunctionCallOutput(request)
  if (output !== undefined) return ResponsesServer.text(`TOOL: ${output.text}`)
  const body = /^PATCH:\n([\s\S]*)$/.exec(last)?.[1]
  const run = /RUN: (.*)$/m.exec(last)?.[1]
  const cmd = body !== undefined
    ? `apply_patch <<'EOF'\n*** Begin Patch\n${body}*** End Patch\nEOF\n`
    : run
  return cmd === undefined
    ? ResponsesServer.text(`PLAIN: ${last}`)
    : ResponsesServer.callTool({ name: "exec_command", input: { cmd, yield_time_ms: 10_000 } })
}

const walk = (dir: string): Array<string> =>
  Fs.existsSync(dir)
    ? Fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(Path.join(dir, e.name)) : [Path.join(dir, e.name)]
    )
    : []

describe("Codex acceptForSession reach", () => {
  it.live(
    "allowForSession on one file's change: a later change that also writes another file is asked; a new thread asks again",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          const server = yield* ResponsesServer.make({ script })
          const asked: Array<Approval.ApprovalRequest> = []
          const agent = yield* Agent.make({
            driver: offlineCodex(server.baseUrl),
            definition: { instructions: "", tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            policy: { sandbox: "workspaceWrite" },
            approvals: {
              // The first file change is allowed for the session; every later ask is denied.
              handler: (request) =>
                Effect.sync(() => {
                  asked.push(request)
                  return asked.length === 1 ? Approval.allowForSession : Approval.deny("No.")
                })
            }
          })
          const thread = yield* agent.thread("codex-scope")
          const a = `${sandbox.workspace}/granted.txt`
          yield* thread.run(`PATCH:\n*** Add File: ${a}\n+hello\n`)
          expect(Fs.readFileSync(a, "utf8")).toBe("hello\n")
          expect(asked.map((r) => r.paths)).toEqual([[a]])

          const results: Record<string, unknown> = {}
          // 1. The granted file, moved to another file of the same directory.
          Fs.writeFileSync(a, "hello\n")
          const moved = `${sandbox.workspace}/moved.txt`
          yield* thread.run(`PATCH:\n*** Update File: ${a}\n*** Move to: ${moved}\n@@\n-hello\n+world\n`)
          results["moveSameDir"] = { asks: asked.length, written: Fs.existsSync(moved) }
          // 2. The granted file changed together with a new file in the same patch.
          Fs.writeFileSync(a, "hello\n")
          const other = `${sandbox.workspace}/other.txt`
          yield* thread.run(`PATCH:\n*** Update File: ${a}\n@@\n-hello\n+world\n*** Add File: ${other}\n+sneaky\n`)
          results["addAlongside"] = { asks: asked.length, written: Fs.existsSync(other) }
          // 3. The granted file moved outside the workspace.
          Fs.writeFileSync(a, "hello\n")
          const outside = `${sandbox.base}/outside.txt`
          yield* thread.run(`PATCH:\n*** Update File: ${a}\n*** Move to: ${outside}\n@@\n-hello\n+world\n`)
          results["moveOutside"] = { asks: asked.length, written: Fs.existsSync(outside) }
          // 4. A command after the grant is still asked (and denied).
          const touched = `${sandbox.workspace}/touched.txt`
          yield* thread.run(`RUN: touch ${touched}`)
          results["command"] = { asks: asked.length, written: Fs.existsSync(touched) }
          // 5. Nothing persistent: no execpolicy rules in the clone, nothing new in the workspace.
          const persisted = walk(sandbox.root).filter((f) => /\/rules\//.test(f) || f.endsWith(".rules"))
          results["rules"] = persisted
          // 6. A new thread (a new Codex session) asks again for the same file.
          Fs.writeFileSync(a, "hello\n")
          const fresh = yield* agent.thread("codex-scope-2")
          yield* fresh.run(`PATCH:\n*** Update File: ${a}\n@@\n-hello\n+world\n`)
          results["newThread"] = { asks: asked.length, content: Fs.readFileSync(a, "utf8") }
          Fs.rmSync(outside, { force: true })
          expect(results).toEqual({
            moveSameDir: { asks: 2, written: false },
            addAlongside: { asks: 3, written: false },
            moveOutside: { asks: 4, written: false },
            command: { asks: 5, written: false },
            rules: [],
            newThread: { asks: 6, content: "hello\n" }
          })
        })
      ),
    180_000
  )
})
