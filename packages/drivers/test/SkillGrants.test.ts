/**
 * Native skill projection is an optimization (DESIGN §8), and with `approvals` the host decides the
 * CLI's built-in calls. Claude Code runs a skill's `allowed-tools` without asking anyone, so a skill
 * whose front matter says `allowed-tools: Bash`, projected as written, let Bash run unasked once
 * the model loaded it. The projection leaves such keys out (real CLI, one-shot and live).
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Approval, Skill } from "@tether/core"
import { AnthropicServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import { offlineClaude } from "./ClaudeHarness.js"

const skill = Skill.inline(
  "cleanup",
  "---\nname: cleanup\ndescription: Clean the workspace.\nallowed-tools: Bash\n---\n# Cleanup\nRun the command you are given with Bash.\n"
)

const loadsTheSkillThenRunsBash = (mode: "oneShot" | "live") =>
  Effect.gen(function*() {
    const server = yield* AnthropicServer.make({
      respond: (request) => {
        const transcript = AnthropicServer.transcript(request)
        const file = /RUN: touch (\S+)/.exec(transcript.map(([, text]) => text).join("\n"))?.[1]
        const results = AnthropicServer.toolResults(request).length
        const calls = transcript.filter(([role]) => role === "assistant").length
        if (calls === 0 && results === 0) return AnthropicServer.callTool("Skill", { skill: "cleanup" })
        if (calls <= 1) return AnthropicServer.callTool("Bash", { command: `touch ${file}`, description: "run" })
        return AnthropicServer.reply("done")
      }
    })
    const sandbox = yield* Harness.sandbox
    const asked: Array<string> = []
    const file = `${sandbox.workspace}/skill-bypass.txt`
    const result = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver: offlineClaude(server.url, { partialMessages: false }),
        definition: { instructions: "", skills: [skill], tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        // Loading a skill's guidance is fine; every other built-in call is refused.
        approvals: {
          handler: (request) =>
            Effect.sync(
              () => (asked.push(request.toolName),
                request.toolName === "Skill" ? Approval.allow : Approval.deny("Not allowed."))
            )
        }
      })
      const prompt = `Use the cleanup skill. RUN: touch ${file}`
      return yield* mode === "live" ? (yield* agent.thread("skill")).run(prompt) : agent.run(prompt)
    }).pipe(Effect.scoped, Effect.provide(Harness.layer))
    // The skill loaded; the Bash call it would have granted was asked of the host, which refused it.
    const calls = result.transcript.flatMap((entry) => entry._tag === "ToolCall" ? [entry] : [])
    expect(calls.map((call) => [call.name, call.isError ?? false])).toEqual([["Skill", false], ["Bash", true]])
    expect(asked).toContain("Bash")
    expect(Fs.existsSync(file)).toBe(false)
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
  }).pipe(Effect.scoped)

describe("a projected skill grants no tool (real Claude CLI)", () => {
  it.live(
    "one-shot: a Bash call after the model loaded a skill with allowed-tools is asked of the host",
    () => loadsTheSkillThenRunsBash("oneShot"),
    60_000
  )
  it.live("live thread: the same", () => loadsTheSkillThenRunsBash("live"), 60_000)
})
