/**
 * Checks that a Codex run leaves the user's source profile, the real HOME and the workspace alone
 * and that its execution clone is removed, with the real CLI offline: exec one-shot and structured
 * turns, then an app-server live thread with an approval allowed for the session, a skill
 * projection and the agent's close.
 */
import { describe, expect } from "@effect/vitest"
import { ResponsesServer } from "@tether/testing"
import * as Path from "node:path"
import { offlineCodex } from "./CodexHarness.js"
import { definition, itIsolated, linkSkills, oneShotThenLive, writerInto } from "./IsolationHarness.js"

const script: ResponsesServer.Script = (request) => {
  const last = ResponsesServer.userTexts(request).at(-1) ?? ""
  const output = ResponsesServer.lastFunctionCallOutput(request)
  if (output !== undefined) return ResponsesServer.text(`TOOL: ${output.text}`)
  if (last.includes("Judge.")) return ResponsesServer.text(JSON.stringify({ ok: true, label: "fine" }))
  const command = /RUN: (.*)$/m.exec(last)?.[1]
  return command === undefined
    ? ResponsesServer.text(`PLAIN: ${last}`)
    : ResponsesServer.callTool({ name: "exec_command", input: { cmd: command, yield_time_ms: 10_000 } })
}

const populate = (source: string, outside: string) => {
  const w = writerInto(source)
  w("config.toml", "model_reasoning_effort = \"low\"\n[tui]\nnotifications = false\n", 0o600)
  w("AGENTS.md", "# user agents\n")
  w("auth.json", JSON.stringify({ OPENAI_API_KEY: "sk-not-real" }), 0o600)
  w("prompts/p.md", "a prompt\n")
  w("skills/mine/SKILL.md", "---\nname: mine\ndescription: A user skill.\n---\n# Mine\n")
  w("sessions/2026/01/01/rollout-old.jsonl", "{}\n", 0o600)
  w("history.jsonl", "{}\n", 0o600)
  linkSkills(Path.join(source, "skills"), outside)
}

describe("Codex leaves the source profile, HOME and workspace alone", () => {
  itIsolated(
    "exec one-shot, runAs, app-server live thread with allowForSession, a skill, close: source byte-identical, workspace only has the task's files, clone gone",
    { name: "codex-profile", populate, workspace: ["one.txt", "src", "three.txt", "two.txt"] },
    function*(sandbox, prepared) {
      const server = yield* ResponsesServer.make({ script })
      const options = {
        driver: offlineCodex(server.baseUrl),
        definition,
        workspace: sandbox.workspace,
        profile: prepared.selection,
        policy: { sandbox: "workspaceWrite" as const }
      }
      yield* oneShotThenLive(
        options,
        `RUN: touch ${sandbox.workspace}/one.txt`,
        (text) => expect(text).toMatch(/^TOOL/),
        [`RUN: touch ${sandbox.workspace}/two.txt`, `RUN: touch ${sandbox.workspace}/three.txt`, "hello"]
      )
    },
    180_000
  )
})
