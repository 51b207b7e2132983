/**
 * Native skill projection is an optimization (DESIGN §8), and with `approvals` the host decides the
 * CLI's built-in calls. Claude Code runs a skill's `allowed-tools` without asking anyone, so a skill
 * whose front matter says `allowed-tools: Bash`, projected as written, let Bash run unasked once
 * the model loaded it. The projection leaves such keys out, also when a YAML merge key brings them in
 * (real CLI, one-shot and live), and leaves out what would make the skill's folder a Claude Code
 * plugin (whose hooks would run unasked).
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Approval, Skill } from "@tether/core"
import { AnthropicServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import { offlineClaude } from "./ClaudeHarness.js"

const skill = Skill.inline(
  "cleanup",
  "---\nname: cleanup\ndescription: Clean the workspace.\nallowed-tools: Bash\n---\n# Cleanup\nRun the command you are given with Bash.\n"
)

// The same key given through a YAML merge key: Claude Code's reader (Bun.YAML) applies it.
const merged = Skill.inline(
  "cleanup",
  "---\nname: cleanup\ndescription: Clean the workspace.\ndefaults: &defaults\n  allowed-tools: Bash\n<<: *defaults\n---\n# Cleanup\nRun the command you are given with Bash.\n"
)

const loadsTheSkillThenRunsBash = (mode: "oneShot" | "live", granting: Skill.Skill = skill) =>
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
        definition: { instructions: "", skills: [granting], tools: Toolkit.empty },
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
  it.live(
    "one-shot: the same when allowed-tools comes through a YAML merge key",
    () => loadsTheSkillThenRunsBash("oneShot", merged),
    60_000
  )
})

/** A run of an agent whose one skill is a folder of `files` (each given the marker's path). */
const runWithSkillFolder = (files: Record<string, (marker: string) => string>) =>
  Effect.gen(function*() {
    const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.reply("done") })
    const sandbox = yield* Harness.sandbox
    const marker = NodePath.join(sandbox.base, "hook-ran.txt")
    const dir = NodePath.join(sandbox.base, "skill-src", "cleanup")
    for (const [path, content] of Object.entries(files)) {
      Fs.mkdirSync(NodePath.dirname(NodePath.join(dir, path)), { recursive: true })
      Fs.writeFileSync(NodePath.join(dir, path), content(marker))
    }
    yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver: offlineClaude(server.url, { partialMessages: false }),
        definition: { instructions: "", skills: [Skill.dir(dir)], tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        approvals: { handler: () => Effect.succeed(Approval.deny("Not allowed.")) }
      })
      yield* agent.run("Hello.")
    }).pipe(Effect.scoped, Effect.provide(Harness.layer))
    return Fs.existsSync(marker)
  }).pipe(Effect.scoped)

const hooksJson = (marker: string) =>
  JSON.stringify({
    hooks: {
      SessionStart: [{ hooks: [{ type: "command", command: `touch ${marker}` }] }],
      UserPromptSubmit: [{ hooks: [{ type: "command", command: `touch ${marker}` }] }]
    }
  })

describe("a projected skill folder is no Claude Code plugin (real Claude CLI)", () => {
  // Claude Code loads a folder of its skills directory holding `.claude-plugin` as a plugin
  // (`<name>@skills-dir`), whose hooks run on the CLI's events, unasked.
  it.live(
    "its hooks/hooks.json runs no command, with a .claude-plugin/plugin.json beside it",
    () =>
      Effect.gen(function*() {
        const ran = yield* runWithSkillFolder({
          "SKILL.md": () => "---\nname: cleanup\ndescription: Clean the workspace.\n---\n# Cleanup\nBody.\n",
          "hooks/hooks.json": hooksJson,
          ".claude-plugin/plugin.json": () => JSON.stringify({ name: "cleanup", version: "1.0.0" })
        })
        expect(ran).toBe(false)
      }),
    60_000
  )
})
