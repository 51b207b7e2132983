/**
 * Checks that a Claude Code run leaves the user's source profile, the real HOME and the workspace
 * alone and that its execution clone is removed, with the real CLI offline: a one-shot turn with
 * an approval allowed for the session, a live thread's turns, a structured-output turn, a skill
 * projection and the agent's close.
 */
import { describe, expect } from "@effect/vitest"
import { Agent } from "@tether/core"
import * as Approval from "@tether/core/Approval"
import { Claude } from "@tether/drivers"
import { AnthropicServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Fs from "node:fs"
import * as Path from "node:path"
import {
  definition,
  expectVerdict,
  itIsolated,
  linkSkills,
  threadTurns,
  Verdict,
  writerInto
} from "./IsolationHarness.js"

const model = () =>
  AnthropicServer.make({
    respond: AnthropicServer.roundTrip(
      (request) => {
        if (request.tools?.some((t) => t.name === "StructuredOutput") === true) {
          return AnthropicServer.callTool("StructuredOutput", { ok: true, label: "fine" })
        }
        const prompt = AnthropicServer.transcript(request).filter(([role]) => role === "user").at(-1)?.[1] ?? ""
        const command = /RUN: (.*)$/m.exec(prompt)?.[1]
        return command === undefined
          ? AnthropicServer.reply("No command.")
          : AnthropicServer.callTool("Bash", { command, description: "Run the command" })
      },
      (results) => AnthropicServer.reply(`TOOL: ${results[0]?.text}`)
    )
  })

/** A source profile as a Claude Code user has it, with links out of it. */
const populate = (source: string, outside: string) => {
  const w = writerInto(source)
  w("settings.json", JSON.stringify({ permissions: { allow: ["Bash(ls:*)"] }, theme: "dark" }), 0o600)
  w("settings.local.json", JSON.stringify({ permissions: { allow: [] } }), 0o600)
  w("CLAUDE.md", "# user memory\n")
  w(".claude.json", JSON.stringify({ numStartups: 3, hasCompletedOnboarding: true, mcpServers: {} }), 0o600)
  w(".credentials.json", JSON.stringify({ note: "not a real credential" }), 0o600)
  w("agents/reviewer.md", "---\nname: reviewer\ndescription: Reviews.\n---\nReview.\n")
  w("skills/mine/SKILL.md", "---\nname: mine\ndescription: A user skill.\n---\n# Mine\n")
  w("projects/-old/old-session.jsonl", "{}\n", 0o600)
  linkSkills(Path.join(source, "skills"), outside)
  Fs.writeFileSync(Path.join(outside, "commands.md"), "# a command\n")
  Fs.mkdirSync(Path.join(source, "commands"))
  Fs.symlinkSync(Path.join(outside, "commands.md"), Path.join(source, "commands/linked.md"))
  Fs.symlinkSync("../nowhere", Path.join(source, "commands/dangling.md"))
}

describe("Claude Code leaves the source profile, HOME and workspace alone", () => {
  itIsolated(
    "one-shot with allowForSession, live thread turns, runAs, a skill, close: source byte-identical, workspace only has the task's files, clone gone",
    { name: "claude-profile", populate, workspace: ["one.txt", "src", "three.txt", "two.txt"] },
    function*(sandbox, prepared) {
      const server = yield* model()
      const agent = yield* Agent.make({
        driver: Claude.driver({
          env: {
            ANTHROPIC_BASE_URL: server.url,
            ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
            CLAUDE_CODE_MAX_RETRIES: "0"
          }
        }),
        definition,
        workspace: sandbox.workspace,
        profile: prepared.selection,
        approvals: { handler: () => Effect.succeed(Approval.allowForSession) }
      })
      const one = yield* agent.run(`RUN: touch ${sandbox.workspace}/one.txt`)
      expect(one.text).toMatch(/^TOOL/)
      yield* threadTurns(agent, [
        `RUN: touch ${sandbox.workspace}/two.txt`,
        `RUN: touch ${sandbox.workspace}/three.txt`,
        "hello"
      ])
      yield* expectVerdict(agent.runAs(Verdict, "Judge."))
      yield* agent.close()
    },
    120_000
  )
})
