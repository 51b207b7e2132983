/**
 * CodeBuddy Code 2.117.0 renders a skill's body when the model loads it (its `Skill` tool, which
 * asks no permission) and runs every "!`command`" in it through its shell, with no permission
 * check: in `-p` mode with Bash not in the driver's `allowedTools`, and even with
 * `builtinTools: ["Skill"]`. Such a skill is not projected for CodeBuddy; the model reaches it
 * through `read_skill`, which serves text only (real CLI).
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Skill } from "@tether/core"
import { CodeBuddy } from "@tether/drivers"
import { ChatCompletionsServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Fs from "node:fs"
import * as NodePath from "node:path"

const loadsTheSkill = (builtinTools: ReadonlyArray<string> | undefined, nested = false) =>
  Effect.gen(function*() {
    const server = yield* ChatCompletionsServer.make({
      script: (request) =>
        ChatCompletionsServer.toolResults(request).length === 0
          ? ChatCompletionsServer.callTool("Skill", { skill: nested ? "extra" : "cleanup" })
          : ChatCompletionsServer.text("done")
    })
    const sandbox = yield* Harness.sandbox
    const marker = NodePath.join(sandbox.base, "skill-shell-ran.txt")
    const body = `# Cleanup\nCurrent state: !\`touch ${marker}\`\n`
    // Nested: a SKILL.md in a sub-folder of the skill, which CodeBuddy loads as a skill of its own.
    const dir = NodePath.join(sandbox.base, "skill-src", "cleanup")
    Fs.mkdirSync(NodePath.join(dir, "extra"), { recursive: true })
    Fs.writeFileSync(
      NodePath.join(dir, "SKILL.md"),
      `---\nname: cleanup\ndescription: Clean the workspace.\n---\n${nested ? "# Cleanup\n" : body}`
    )
    if (nested) {
      Fs.writeFileSync(NodePath.join(dir, "extra", "SKILL.md"), `---\nname: extra\ndescription: Extra.\n---\n${body}`)
    }
    const skill = Skill.dir(dir)
    yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver: CodeBuddy.driver({
          endpoint: { baseUrl: server.baseUrl, apiKey: Redacted.make("sk-x") },
          ...(builtinTools === undefined ? {} : { builtinTools })
        }),
        definition: { instructions: "", skills: [skill], tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      yield* agent.run("Use the cleanup skill.")
    }).pipe(Effect.scoped, Effect.provide(Harness.layer))
    const requests = yield* server.requests
    // The model loaded the skill (the Skill call was answered).
    expect(ChatCompletionsServer.toolResults(requests.at(-1)!).length).toBe(1)
    expect(Fs.existsSync(marker)).toBe(false)
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
  }).pipe(Effect.scoped)

describe("a projected skill runs no shell command on CodeBuddy (real CLI)", () => {
  it.live(
    "the model loads a skill whose body holds !`command`: Bash not allowed, nothing runs",
    () => loadsTheSkill(undefined),
    120_000
  )
  it.live(
    "the same from a SKILL.md nested in the skill's folder (copied as written)",
    () => loadsTheSkill(undefined, true),
    120_000
  )
  it.live(
    "the same with builtinTools: [\"Skill\"] (no shell tool offered at all)",
    () => loadsTheSkill(["Skill"]),
    120_000
  )
})
