/**
 * Tool naming and policy through the public Agent API (fake CLI, real gateway): merged toolkits
 * with a duplicate name, an empty toolkit, `read_skill` narrowed like any tool, a wrongly cased name.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Skill } from "@tether/core"
import { FakeCli, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

const tool = (name: string) =>
  Tool.make(name, {
    description: `Tool ${name}.`,
    input: { key: Schema.String },
    output: Schema.Struct({ ok: Schema.Boolean }),
    revision: `${name}/v1`
  })

describe("tool naming through Agent.make", () => {
  it.live("duplicate names across merged toolkits fail Agent.make with a typed error naming the tool", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const A = Toolkit.make(tool("lookup"))
      const B = Toolkit.make(tool("lookup"), tool("other"))
      const merged = Toolkit.merge(A, B)
      const error = yield* Effect.flip(
        Agent.make({
          driver: FakeCli.driver(),
          definition: { instructions: "", skills: [], tools: merged },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        }).pipe(
          Effect.provide(merged.toLayer({
            lookup: () => Effect.succeed({ ok: true }),
            other: () => Effect.succeed({ ok: true })
          } as never))
        )
      )
      expect(error._tag).toBe("AgentConfigError")
      expect(error.message).toContain("lookup")
    }).pipe(Effect.scoped, Effect.provide(Harness.layer)))

  it.live("an empty toolkit: allow [] runs with no tools; any named tool is InvalidTurn; read_skill narrows like any tool", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const agent = yield* Agent.make({
        driver: FakeCli.driver(),
        definition: { instructions: "", skills: [Skill.inline("guide", "# Guide\nUse lookup.")], tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      const none = yield* agent.run({ input: FakeCli.script({ op: "list" }), toolPolicy: { allow: [] } })
      expect(none.effectiveTools).toEqual([])
      const all = yield* agent.run(FakeCli.script({ op: "list" }))
      expect(all.effectiveTools).toEqual(["read_skill"])
      const bad = yield* Effect.flip(agent.run({ input: "x", toolPolicy: { deny: ["Read_Skill"] } }))
      expect(bad).toMatchObject({ _tag: "InvalidTurn", reason: "UnknownTool" })
    }).pipe(Effect.scoped, Effect.provide(Harness.layer)))
})
