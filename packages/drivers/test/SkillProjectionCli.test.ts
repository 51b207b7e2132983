/**
 * The native skills projection as the real CLIs see it: the projected SKILL.md carries a front
 * matter the CLIs load (valid YAML with `name` and `description`) whenever core accepted the
 * skill, whatever the style of the mapping it was written in; and a projection the CLI edited is
 * the agent's again when the next run's CLI starts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Skill } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import { Claude, Gemini } from "@tether/drivers"
import { AnthropicServer, GeminiServer, Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Skills from "../src/internal/skills.js"
import { offlineCodex } from "./CodexHarness.js"

const projectedFrontMatter = (markdown: string, description: string) =>
  Effect.sync(() => {
    // Core accepts the skill: its front matter is a valid YAML mapping.
    expect(Either.isRight(Skill.frontMatter(markdown))).toBe(true)
    const skill = {
      name: "triage",
      description,
      dir: "/clone/tether-skills/triage",
      files: [{ path: "SKILL.md", content: markdown }]
    }
    const [projected] = Skills.project([skill], "skills")
    const read = Skill.frontMatter(projected!.content)
    return Either.isLeft(read)
      ? { error: read.left, content: projected!.content }
      : { data: read.right?.data, content: projected!.content }
  })

describe("the projected front matter", () => {
  it.effect("a flow-style front matter missing `name` is projected as valid YAML with name and description", () =>
    Effect.gen(function*() {
      const outcome = yield* projectedFrontMatter(
        "---\n{ description: Flow style. }\n---\n# Triage\nBody.",
        "Flow style."
      )
      expect(outcome).toMatchObject({ data: { name: "triage", description: "Flow style." } })
    }))

  it.effect("an indented block mapping missing `name` is projected as valid YAML with name and description", () =>
    Effect.gen(function*() {
      const outcome = yield* projectedFrontMatter("---\n  description: Indented.\n---\n# Triage\nBody.", "Indented.")
      expect(outcome).toMatchObject({ data: { name: "triage", description: "Indented." } })
    }))
})

describe("the projection through the real CLIs", () => {
  const flowSkill = Skill.inline("triage", "---\n{ description: Label new issues by area. }\n---\n# Triage\nBody.")
  // Control: the same skill with a block-style front matter, listed by both CLIs.
  const controlSkill = Skill.inline("control", "---\ndescription: Control skill.\n---\n# Control\nBody.")
  const runOnce = (driver: Driver.Driver) =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver,
          definition: { instructions: "", skills: [controlSkill, flowSkill], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        yield* agent.run("Triage.")
      }).pipe(Effect.scoped, Effect.provide(Harness.layer))
      expect(yield* Harness.entries(sandbox.root)).toEqual([])
    }).pipe(Effect.scoped)

  it.live("a skill with a flow-style front matter is listed natively by Gemini and Codex", () =>
    Effect.gen(function*() {
      const gemini = yield* GeminiServer.make({ respond: () => GeminiServer.reply("FINAL") })
      yield* runOnce(Gemini.driver({
        model: "gemini-2.5-flash",
        env: { GOOGLE_GEMINI_BASE_URL: gemini.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
      }))
      const responses = yield* ResponsesServer.make({ script: () => ResponsesServer.text("FINAL") })
      yield* runOnce(offlineCodex(responses.baseUrl))
      const generations = yield* gemini.generations
      const requests = yield* responses.requests
      expect(GeminiServer.systemText(generations[0]!)).toMatch(/<name>control<\/name>/)
      expect(JSON.stringify(ResponsesServer.inputItems(requests[0]!))).toMatch(/- control: Control skill\./)
      expect(GeminiServer.systemText(generations[0]!)).toMatch(/<name>triage<\/name>/)
      expect(JSON.stringify(ResponsesServer.inputItems(requests[0]!))).toMatch(/- triage: /)
    }).pipe(Effect.scoped))

  it.live("a projected SKILL.md the CLI edited is the agent's again when the next run's Claude starts", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.reply("FINAL") })
      const sandbox = yield* Harness.sandbox
      const markdown = "---\ndescription: Label new issues by area.\n---\n# Triage\nBody."
      const claude = Claude.driver({
        env: {
          ANTHROPIC_BASE_URL: server.url,
          ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
          CLAUDE_CODE_MAX_RETRIES: "0"
        }
      })
      const restored = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver: claude,
          definition: { instructions: "", skills: [Skill.inline("triage", markdown)], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        yield* agent.run("First.")
        // Claude's own skills folder in the clone (not the agent's tether-skills snapshot).
        const projected = (NodeFs.readdirSync(sandbox.root, { recursive: true }) as Array<string>)
          .filter((rel) =>
            rel.endsWith(NodePath.join("skills", "triage", "SKILL.md")) && !rel.includes("tether-skills")
          )
          .map((rel) => NodePath.join(sandbox.root, rel))
        expect(projected).toHaveLength(1)
        // What the CLI (its Write tool, a shell the model runs) can do to its own skills folder.
        NodeFs.writeFileSync(projected[0]!, "---\ndescription: EDITED-BY-THE-CLI.\n---\n# Triage\nOther body.")
        yield* agent.run("Second.")
        return NodeFs.readFileSync(projected[0]!, "utf8")
      }).pipe(Effect.scoped, Effect.provide(Harness.layer))
      const messages = yield* server.messages
      expect(messages.length).toBe(2)
      // The CLI's own listing stays what read_skill serves.
      for (const message of messages) {
        expect(JSON.stringify(message)).toMatch(/- triage: Label new issues by area\./)
        expect(JSON.stringify(message)).not.toContain("EDITED-BY-THE-CLI")
      }
      expect(restored).not.toContain("EDITED-BY-THE-CLI")
      // Restored, so the close removed the clone.
      expect(yield* Harness.entries(sandbox.root)).toEqual([])
    }).pipe(Effect.scoped))
})
