/**
 * Checks that a Gemini CLI run leaves the user's source profile, the real HOME and the workspace
 * alone and that its execution clone is removed, with the real CLI offline: one-shot and
 * structured turns, then an --acp live thread with an approval allowed for the session, a skill
 * projection and the agent's close.
 */
import { describe, expect } from "@effect/vitest"
import { Gemini } from "@tether/drivers"
import { GeminiServer } from "@tether/testing"
import * as Redacted from "effect/Redacted"
import * as Path from "node:path"
import { definition, itIsolated, linkSkills, oneShotThenLive, writerInto } from "./IsolationHarness.js"

const modelOf = () =>
  GeminiServer.make({
    respond: GeminiServer.roundTrip((request) => {
      const prompt = GeminiServer.transcript(request).filter(([role]) => role === "user").at(-1)?.[1] ?? ""
      if (prompt.includes("Judge.")) return GeminiServer.reply(JSON.stringify({ ok: true, label: "fine" }))
      const write = /WRITE: (.*)$/m.exec(prompt)?.[1]
      if (write !== undefined) return GeminiServer.callTool("write_file", { file_path: write, content: "hello" })
      const command = /RUN: (.*)$/m.exec(prompt)?.[1]
      return command === undefined
        ? GeminiServer.reply("No command.")
        : GeminiServer.callTool("run_shell_command", { command })
    }, (responses) => GeminiServer.reply(`TOOL: ${responses.map((r) => r.output).join("|")}`))
  })

const populate = (source: string, outside: string) => {
  const w = writerInto(source)
  w(
    ".gemini/settings.json",
    JSON.stringify({ ui: { theme: "Default" }, security: { auth: { selectedType: "oauth-personal" } } }),
    0o600
  )
  w(".gemini/GEMINI.md", "# user memory\n")
  w(".gemini/oauth_creds.json", JSON.stringify({ access_token: "not-real", expiry_date: 1 }), 0o600)
  w(".gemini/google_accounts.json", JSON.stringify({ active: "me@example.com", old: [] }), 0o600)
  w(".gemini/installation_id", "11111111-2222-3333-4444-555555555555")
  w(".gemini/commands/hi.toml", "prompt = \"hi\"\n")
  w(".gemini/skills/mine/SKILL.md", "---\nname: mine\ndescription: A user skill.\n---\n# Mine\n")
  w(".gemini/tmp/old/chats/session-x.json", "{}\n", 0o600)
  linkSkills(Path.join(source, ".gemini/skills"), outside)
}

describe("Gemini CLI leaves the source profile, HOME and workspace alone", () => {
  itIsolated(
    "one-shot, runAs, --acp live thread with allowForSession, a skill, close: source byte-identical, workspace only has the task's files, clone gone",
    { name: "gemini-home", populate, workspace: ["src", "three.txt", "two.txt"] },
    function*(sandbox, prepared) {
      const server = yield* modelOf()
      const driver = Gemini.driver({
        model: "gemini-2.5-flash",
        authType: "gemini-api-key",
        env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
      })
      yield* oneShotThenLive(
        { driver, definition, workspace: sandbox.workspace, profile: prepared.selection },
        "hello",
        (text) => expect(text).toBe("No command."),
        [`WRITE: ${sandbox.workspace}/two.txt`, `RUN: touch ${sandbox.workspace}/three.txt`, "hello"]
      )
    },
    240_000
  )
})
