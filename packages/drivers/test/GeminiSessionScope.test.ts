/**
 * How far `Approval.allowForSession` on one Gemini CLI shell command reaches on a live thread:
 * this call only (docs/approvals.md). The driver picks Gemini's `proceed_always` ("Allow for this
 * session"), but Gemini records it as a session rule ranked below the driver's own `ask_user` rule
 * for commands (priority 999, which keeps every command the host's to decide), so the next command,
 * of the same root command too, is asked again; nothing is persisted. Real CLI (pinned 0.61.0)
 * offline against the scripted Gemini server. If a Gemini release ranks the session rule higher,
 * this fails: docs/approvals.md's row must then say what it reaches.
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

/** The model runs the JSON-encoded command after `RUNJSON: ` with run_shell_command. */
const modelOf = () =>
  GeminiServer.make({
    respond: GeminiServer.roundTrip((request) => {
      const prompt = GeminiServer.transcript(request).filter(([role]) => role === "user").at(-1)?.[1] ?? ""
      const json = /RUNJSON: (.*)$/m.exec(prompt)?.[1]
      return json === undefined
        ? GeminiServer.reply("No command.")
        : GeminiServer.callTool("run_shell_command", { command: JSON.parse(json) as string })
    }, (responses) => GeminiServer.reply(`TOOL: ${responses.map((r) => r.output).join("|")}`))
  })

const walk = (dir: string): Array<string> =>
  Fs.existsSync(dir)
    ? Fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(Path.join(dir, e.name)) : [Path.join(dir, e.name)]
    )
    : []

describe("Gemini allowForSession on a command (real CLI)", () => {
  it.live(
    "allowForSession on `touch …` is this call only: a later `touch` is asked again; nothing persisted",
    () =>
      Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        yield* Effect.gen(function*() {
          const server = yield* modelOf()
          const asked: Array<string> = []
          const agent = yield* Agent.make({
            driver: Gemini.driver({
              model: "gemini-2.5-flash",
              env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
            }),
            definition: { instructions: "", tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            approvals: {
              handler: (request) =>
                Effect.sync(() => {
                  asked.push(request.command ?? request.toolName)
                  return asked.length === 1 ? Approval.allowForSession : Approval.deny("No.")
                })
            }
          })
          const thread = yield* agent.thread("gemini-scope")
          const w = sandbox.workspace
          const run = (command: string) => thread.run(`RUNJSON: ${JSON.stringify(command)}`)
          yield* run(`touch ${w}/granted.txt`)
          expect(Fs.existsSync(`${w}/granted.txt`)).toBe(true)
          expect(asked).toHaveLength(1)
          // The same root command is asked again (and denied).
          yield* run(`touch ${w}/control`)
          const control = { ran: Fs.existsSync(`${w}/control`), asks: asked.length }
          // Nothing persisted: no policy file or settings written in the clone or the workspace.
          const after = walk(sandbox.root).filter((f) =>
            /polic/i.test(f) ||
            (!/\/(chats|tmp|logs)\//.test(f) && Fs.statSync(f).size < 1_000_000 &&
              /commandPrefix|"touch/.test(Fs.readFileSync(f, "utf8")))
          )
          const workspaceGemini = walk(Path.join(w, ".gemini"))
          yield* agent.close()
          expect({ control, after, workspaceGemini }).toEqual({
            control: { ran: false, asks: 2 },
            after: [],
            workspaceGemini: []
          })
        }).pipe(Effect.scoped, Effect.provide(Harness.layer))
      }).pipe(Effect.scoped),
    240_000
  )
})
