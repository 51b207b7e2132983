/**
 * The native skills projection: the projected SKILL.md carries a front matter the CLIs load
 * (valid YAML with `name` and `description`) whenever core accepted the skill, whatever the
 * style of the mapping it was written in.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Skill } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import { Gemini } from "@tether/drivers"
import { GeminiServer, Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import { load } from "../../core/src/internal/skill.js"
import * as Skills from "../src/internal/skills.js"
import { offlineCodex } from "./CodexHarness.js"

const projectedFrontMatter = (markdown: string) =>
  Effect.gen(function*() {
    // Core accepts the skill: its front matter is a valid YAML mapping.
    const loaded = yield* load(Skill.inline("triage", markdown))
    const [projected] = Skills.project([{ ...loaded, dir: "/clone/tether-skills/triage" }], "skills")
    const read = Skill.frontMatter(projected!.content)
    return Either.isLeft(read)
      ? { error: read.left, content: projected!.content }
      : { data: read.right?.data, content: projected!.content }
  })

describe("the projected front matter", () => {
  it.effect("a flow-style front matter missing `name` is projected as valid YAML with name and description", () =>
    Effect.gen(function*() {
      const outcome = yield* projectedFrontMatter("---\n{ description: Flow style. }\n---\n# Triage\nBody.")
      expect(outcome).toMatchObject({ data: { name: "triage", description: "Flow style." } })
    }))

  it.effect("an indented block mapping missing `name` is projected as valid YAML with name and description", () =>
    Effect.gen(function*() {
      const outcome = yield* projectedFrontMatter("---\n  description: Indented.\n---\n# Triage\nBody.")
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
})
