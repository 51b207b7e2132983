/**
 * A skill with `$ARGUMENTS` in its body (and no "!`command`"): CodeBuddy Code 2.117.0's Skill tool
 * puts the model's `args` in place of `$ARGUMENTS`, then runs every "!`command`" of the result
 * through its shell, asking no permission, and reads its `@path` references; so the CLI gets no
 * copy of such a skill (docs/skills-and-mcp.md) and the model's args run nothing, read nothing.
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

/**
 * A turn whose model calls the `greet` skill (`Greet $ARGUMENTS politely.`) with `args`, then
 * answers; the last model request's tool results.
 */
const greetWith = (sandbox: Harness.Sandbox, args: string) =>
  Effect.gen(function*() {
    const server = yield* ChatCompletionsServer.make({
      script: (request) =>
        ChatCompletionsServer.toolResults(request).length === 0
          ? ChatCompletionsServer.callTool("Skill", { skill: "greet", args })
          : ChatCompletionsServer.text("done")
    })
    const dir = NodePath.join(sandbox.base, "skill-src", "greet")
    Fs.mkdirSync(dir, { recursive: true })
    Fs.writeFileSync(
      NodePath.join(dir, "SKILL.md"),
      `---\nname: greet\ndescription: Greet someone.\n---\n# Greet\nGreet $ARGUMENTS politely.\n`
    )
    yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver: CodeBuddy.driver({
          endpoint: { baseUrl: server.baseUrl, apiKey: Redacted.make("sk-x") },
          builtinTools: ["Skill"]
        }),
        definition: { instructions: "", skills: [Skill.dir(dir)], tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      yield* agent.run("Greet the user.")
    }).pipe(Effect.scoped, Effect.provide(Harness.layer))
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    // The model's Skill call was answered.
    const results = ChatCompletionsServer.toolResults((yield* server.requests).at(-1)!)
    expect(results.length).toBe(1)
    return results
  })

describe("CodeBuddy: a skill with $ARGUMENTS (real CLI)", () => {
  it.live("the model's args run no shell command", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const marker = NodePath.join(sandbox.base, "skill-args-shell-ran.txt")
      yield* greetWith(sandbox, `!\`touch ${marker}\``)
      expect(Fs.existsSync(marker)).toBe(false)
    }).pipe(Effect.scoped), 120_000)

  it.live("the model's args read no file named as @path (no Read tool offered)", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const secret = NodePath.join(sandbox.base, "secret.txt")
      Fs.writeFileSync(secret, "SECRET-9c2\n")
      expect(JSON.stringify(yield* greetWith(sandbox, `@${secret}`))).not.toContain("SECRET-9c2")
    }).pipe(Effect.scoped), 120_000)
})
