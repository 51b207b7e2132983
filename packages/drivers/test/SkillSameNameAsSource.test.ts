/**
 * An agent skill named like a skill of the source profile (copied into the clone by default): the
 * CLI's native copy is the agent's snapshot alone, not a mix of it and the source skill's files
 * (docs/skills-and-mcp.md), with the real Claude Code.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Skill } from "@tether/core"
import { Claude } from "@tether/drivers"
import { AnthropicServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"

describe("an agent skill named like a source-profile skill (Claude Code, real CLI)", () => {
  it.live("the projected skill folder holds the agent's snapshot only", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.reply("FINAL") })
      const sandbox = yield* Harness.sandbox
      const sourceSkill = NodePath.join(sandbox.source, "skills", "triage")
      NodeFs.mkdirSync(NodePath.join(sourceSkill, "scripts"), { recursive: true })
      NodeFs.writeFileSync(
        NodePath.join(sourceSkill, "SKILL.md"),
        "---\ndescription: SOURCE-DESCRIPTION.\n---\n# Source triage\nRun scripts/triage.sh.\n"
      )
      NodeFs.writeFileSync(NodePath.join(sourceSkill, "scripts", "triage.sh"), "echo SOURCE-SCRIPT\n")
      const claude = Claude.driver({
        env: {
          ANTHROPIC_BASE_URL: server.url,
          ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
          CLAUDE_CODE_MAX_RETRIES: "0"
        }
      })
      const markdown = "---\ndescription: Label new issues by area.\n---\n# Triage\nBody."
      const files = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver: claude,
          definition: { instructions: "", skills: [Skill.inline("triage", markdown)], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        yield* agent.run("Triage.")
        const projected = (NodeFs.readdirSync(sandbox.root, { recursive: true }) as Array<string>)
          .filter((rel) =>
            rel.endsWith(NodePath.join("skills", "triage", "SKILL.md")) && !rel.includes("tether-skills")
          )
          .map((rel) => NodePath.dirname(NodePath.join(sandbox.root, rel)))
        expect(projected).toHaveLength(1)
        return (NodeFs.readdirSync(projected[0]!, { recursive: true }) as Array<string>)
          .filter((rel) => NodeFs.statSync(NodePath.join(projected[0]!, rel)).isFile()).sort()
      }).pipe(Effect.scoped, Effect.provide(Harness.layer))
      expect(files).toEqual(["SKILL.md"])
      expect(yield* Harness.entries(sandbox.root)).toEqual([])
    }).pipe(Effect.scoped), 90_000)
})
