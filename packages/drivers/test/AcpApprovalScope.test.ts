/**
 * `allowForSession` through the ACP driver never grants more than the same kind of call for the
 * rest of the provider session (core's `Approval.AllowForSession`; docs/approvals.md), with the
 * real adapters offline:
 * - claude-agent-acp 0.23.1 answers its `allow_always` with Claude Code's own suggestions, for a
 *   file write the session's `acceptEdits` mode, under which Claude Code also runs `rm`, `mv`, …
 *   unasked: a file change allowed for the session is allowed this once.
 * - claude-agent-acp's "Always Allow" for a command makes Claude Code save its suggested rule to
 *   the workspace's `.claude/settings.local.json`: past the session, so this call only.
 * - codex-acp 0.16.0 offers one `allow_always` for a command, `approved-execpolicy-amendment`
 *   ("Yes, and don't ask again for commands that start with …"), which writes an allow rule into
 *   Codex's `rules/` that every later session reads: it is never picked.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Approval, ThreadStore } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import { AnthropicServer, Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as H from "./AcpHarness.js"

/** Waits (bounded) until no process of the agent's marker is left, and checks that none is. */
const noneLeft = (marker: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 100 && (yield* Harness.markedProcesses(marker)).length > 0; i++) {
      yield* Effect.sleep("50 millis")
    }
    expect(yield* Harness.markedProcesses(marker)).toEqual([])
  })

/** `WRITE: <path>` writes `hello` there with Write; `RUN: <cmd>` runs it with Bash. */
const model = () =>
  AnthropicServer.make({
    respond: AnthropicServer.roundTrip(
      (request) => {
        const prompt = AnthropicServer.transcript(request).filter(([role]) => role === "user").at(-1)?.[1] ?? ""
        const write = /WRITE: (\S+)/.exec(prompt)?.[1]
        if (write !== undefined) return AnthropicServer.callTool("Write", { file_path: write, content: "hello" })
        const command = /RUN: (.*)$/m.exec(prompt)?.[1]
        return command === undefined
          ? AnthropicServer.reply("No command.")
          : AnthropicServer.callTool("Bash", { command, description: "Run the command" })
      },
      (results) => AnthropicServer.reply(`TOOL ${results[0]?.isError === true ? "ERROR" : "OK"}: ${results[0]?.text}`)
    )
  })

const scenario = (onWrite: Approval.Decision) => () =>
  Effect.gen(function*() {
    const server = yield* model()
    const sandbox = yield* Harness.sandbox
    const asked: Array<Approval.ApprovalRequest> = []
    const marker = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver: H.claudeAgentDriver(server.url),
        definition: { instructions: "", skills: [], tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        approvals: {
          deadline: "1 minute",
          handler: (request) =>
            Effect.sync(() => {
              asked.push(request)
              return request.kind === "fileChange" ? onWrite : Approval.deny("No.")
            })
        }
      })
      const thread = yield* agent.thread("acp-session-write")
      const written = `${sandbox.workspace}/session-write.txt`
      yield* thread.run(`WRITE: ${written}`)
      expect(Fs.readFileSync(written, "utf8")).toBe("hello")
      expect(asked.map((r) => r.kind)).toEqual(["fileChange"])
      // A command the host decided nothing about: it must be asked (and is denied).
      const precious = `${sandbox.workspace}/precious.txt`
      Fs.writeFileSync(precious, "keep me")
      const removed = yield* thread.run(`RUN: rm ${precious}`)
      expect({
        preciousKept: Fs.existsSync(precious),
        asked: asked.map((r) => r.kind),
        text: removed.text
      }).toEqual({ preciousKept: true, asked: ["fileChange", "command"], text: expect.stringMatching(/^TOOL ERROR/) })
      return agent.marker
    }).pipe(Effect.scoped)
    yield* noneLeft(marker)
  }).pipe(Effect.scoped, Effect.provide([Harness.layer, ThreadStore.layerMemory]))

const listFiles = (dir: string): ReadonlyArray<string> => {
  const out: Array<string> = []
  const walk = (d: string) => {
    for (const entry of Fs.readdirSync(d, { withFileTypes: true })) {
      const full = Path.join(d, entry.name)
      if (entry.isDirectory()) walk(full)
      else out.push(full)
    }
  }
  if (Fs.existsSync(dir)) walk(dir)
  return out
}

/**
 * A command that writes the workspace's `repeat.txt` (`prompt` of that path), run on one thread with
 * the host answering `allowForSession`, then on another thread (another process, another session),
 * where the host denies it: what was asked, whether each run wrote the file. The agent is closed
 * (no process left) before this returns.
 */
const commandOnTwoSessions = (driver: Driver.Driver, prompt: (target: string) => string) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const target = Path.join(sandbox.workspace, "repeat.txt")
    const asked: Array<Approval.ApprovalRequest> = []
    const { marker, firstWrote, secondWrote } = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver,
        definition: { instructions: "", skills: [], tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        approvals: {
          deadline: "1 minute",
          handler: (request) =>
            Effect.sync(() => {
              asked.push(request)
              return asked.length === 1 ? Approval.allowForSession : Approval.deny("No.")
            })
        }
      })
      const first = yield* agent.thread("first")
      yield* first.run(prompt(target))
      const firstWrote = Fs.existsSync(target)
      yield* first.close
      Fs.rmSync(target, { force: true })
      const second = yield* agent.thread("second")
      yield* Effect.exit(second.run(prompt(target)))
      return { marker: agent.marker, firstWrote, secondWrote: Fs.existsSync(target) }
    }).pipe(Effect.scoped)
    yield* noneLeft(marker)
    return { asked, firstWrote, secondWrote, sandbox }
  })

describe("ACP allowForSession stays within the call's kind and the provider session (real adapters)", () => {
  it.live(
    "claude-agent-acp: allowForSession on a file write does not let a later rm run unasked",
    scenario(Approval.allowForSession),
    120_000
  )

  it.live(
    "claude-agent-acp: a command allowed for the session is this call only; no rule lands in the workspace",
    () =>
      Effect.gen(function*() {
        const server = yield* model()
        const { asked, firstWrote, secondWrote, sandbox } = yield* commandOnTwoSessions(
          H.claudeAgentDriver(server.url),
          (target) => `RUN: touch ${target}`
        )
        expect({ asked: asked.map((r) => r.kind), firstWrote, secondWrote }).toEqual({
          asked: ["command", "command"],
          firstWrote: true,
          secondWrote: false
        })
        // Claude Code saves an "Always Allow" for a command to the workspace's .claude/settings.local.json.
        const settings = listFiles(sandbox.workspace).filter((f) => f.includes(".claude"))
          .map((f) => `${Path.relative(sandbox.workspace, f)}: ${Fs.readFileSync(f, "utf8").replace(/\s+/g, " ")}`)
        expect(settings).toEqual([])
      }).pipe(Effect.scoped, Effect.provide([Harness.layer, ThreadStore.layerMemory])),
    120_000
  )

  it.live(
    "codex-acp: a command allowed for one thread's session is asked again on another thread, and no rule is written",
    () =>
      Effect.gen(function*() {
        const model = yield* ResponsesServer.make({
          script: (request) => {
            const output = ResponsesServer.lastFunctionCallOutput(request)
            if (output !== undefined) return ResponsesServer.text(`FINAL: ${output.text}`)
            const last = ResponsesServer.userTexts(request).at(-1) ?? ""
            if (last.includes("[touch]")) {
              return ResponsesServer.callTool({
                name: "exec_command",
                input: {
                  cmd: "echo ran > repeat.txt",
                  sandbox_permissions: "require_escalated",
                  justification: "write"
                }
              })
            }
            return ResponsesServer.text("reply")
          }
        })
        const { asked, firstWrote, secondWrote, sandbox } = yield* commandOnTwoSessions(
          H.codexAgentDriver(model.baseUrl),
          () => "write it [touch]"
        )
        const rules = listFiles(sandbox.root).filter((f) => f.includes(`${Path.sep}rules${Path.sep}`))
          .map((f) => `${Path.basename(f)}: ${Fs.readFileSync(f, "utf8").trim()}`)
        expect({
          options: asked[0]?.options?.map((o) => o.id),
          asked: asked.length,
          firstWrote,
          secondWrote,
          rules
        }).toEqual({
          options: ["approved", "approved-execpolicy-amendment", "abort"],
          asked: 2,
          firstWrote: true,
          secondWrote: false,
          rules: []
        })
      }).pipe(Effect.scoped, Effect.provide([Harness.layer, ThreadStore.layerMemory])),
    120_000
  )
})
