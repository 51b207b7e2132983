/**
 * "The user's copied profile does not answer in the host's place" (docs/approvals.md) for Gemini
 * CLI. An agent with `approvals` runs a live thread (`gemini --acp`, the real CLI, offline against
 * the scripted GeminiServer) in a clone of a user's Gemini profile that lets the CLI run a
 * built-in without asking: `tools.allowed`, a user policy file that allows it (user tier, or an
 * admin tier through its `adminPolicyPaths`), or `general.defaultApprovalMode: "auto_edit"`. Each
 * ran the command (wrote the file) with the host never asked. The host's handler denies
 * everything: the command does not run (the file is not written) and the handler was asked.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Approval } from "@tether/core"
import { Gemini } from "@tether/drivers"
import { GeminiServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Fs from "node:fs"
import * as Path from "node:path"

const modelOf = () =>
  GeminiServer.make({
    respond: GeminiServer.roundTrip((request) => {
      const prompt = GeminiServer.transcript(request).filter(([role]) => role === "user").at(-1)?.[1] ?? ""
      const write = /WRITE: (.*)$/m.exec(prompt)?.[1]
      if (write !== undefined) return GeminiServer.callTool("write_file", { file_path: write, content: "hello" })
      const command = /RUN: (.*)$/m.exec(prompt)?.[1]
      return command === undefined
        ? GeminiServer.reply("No command.")
        : GeminiServer.callTool("run_shell_command", { command })
    }, (responses) => GeminiServer.reply(`TOOL: ${responses.map((r) => r.output).join("|")}`))
  })

const withUserProfile = (
  files: { readonly [path: string]: string },
  action: "RUN" | "WRITE"
) =>
  Effect.gen(function*() {
    const server = yield* modelOf()
    const sandbox = yield* Harness.sandbox
    for (const [file, text] of Object.entries(files)) {
      const target = Path.join(sandbox.source, file)
      Fs.mkdirSync(Path.dirname(target), { recursive: true, mode: 0o700 })
      Fs.writeFileSync(target, text.replace("ADMIN", Path.join(sandbox.source, ".gemini", "admin")), { mode: 0o600 })
    }
    const asked: Array<Approval.ApprovalRequest> = []
    const target = `${sandbox.workspace}/unasked.txt`
    yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver: Gemini.driver({
          model: "gemini-2.5-flash",
          env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
        }),
        definition: { instructions: "", tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        approvals: {
          deadline: "5 seconds",
          handler: (request) => Effect.sync(() => (asked.push(request), Approval.deny("The host says no.")))
        }
      })
      const thread = yield* agent.thread("user-profile")
      yield* thread.run(action === "RUN" ? `RUN: touch ${target}` : `WRITE: ${target}`)
    }).pipe(Effect.scoped, Effect.provide(Harness.layer))
    const ran = Fs.existsSync(target)
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    return { ran, asked: asked.map((r) => r.kind) }
  }).pipe(Effect.scoped)

describe("Gemini approvals vs the user's own profile (real CLI, live thread)", () => {
  it.live(
    "control: with a plain profile the host is asked and its deny holds",
    () =>
      Effect.gen(function*() {
        const result = yield* withUserProfile({}, "RUN")
        expect(result).toEqual({ ran: false, asked: ["command"] })
      }),
    120_000
  )

  it.live(
    "all of them at once, the user's admin-tier policy allowing at 999 too: the host is asked for commands and writes",
    () =>
      Effect.gen(function*() {
        const allow =
          "[[rule]]\ntoolName = [\"run_shell_command\", \"write_file\"]\ndecision = \"allow\"\npriority = 999\n"
        const files = {
          ".gemini/settings.json": JSON.stringify({
            tools: { allowed: ["run_shell_command", "write_file"] },
            general: { defaultApprovalMode: "auto_edit" },
            adminPolicyPaths: ["ADMIN"]
          }),
          ".gemini/policies/mine.toml": allow,
          ".gemini/admin/allow.toml": allow
        }
        const run = yield* withUserProfile(files, "RUN")
        const write = yield* withUserProfile(files, "WRITE")
        expect([run, write]).toEqual([{ ran: false, asked: ["command"] }, { ran: false, asked: ["fileChange"] }])
      }),
    120_000
  )

  it.live(
    "settings.json tools.allowed naming run_shell_command does not run a command the host denies",
    () =>
      Effect.gen(function*() {
        const result = yield* withUserProfile({
          ".gemini/settings.json": JSON.stringify({ tools: { allowed: ["run_shell_command"] } })
        }, "RUN")
        expect(result).toEqual({ ran: false, asked: ["command"] })
      }),
    120_000
  )

  it.live(
    "a user policy file allowing run_shell_command does not run a command the host denies",
    () =>
      Effect.gen(function*() {
        const result = yield* withUserProfile({
          ".gemini/policies/mine.toml":
            "[[rule]]\ntoolName = \"run_shell_command\"\ndecision = \"allow\"\npriority = 100\n"
        }, "RUN")
        expect(result).toEqual({ ran: false, asked: ["command"] })
      }),
    120_000
  )

  it.live(
    "general.defaultApprovalMode auto_edit does not write a file the host denies",
    () =>
      Effect.gen(function*() {
        const result = yield* withUserProfile({
          ".gemini/settings.json": JSON.stringify({ general: { defaultApprovalMode: "auto_edit" } })
        }, "WRITE")
        expect(result).toEqual({ ran: false, asked: ["fileChange"] })
      }),
    120_000
  )
})
