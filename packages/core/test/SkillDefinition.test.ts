/**
 * Skills in an agent definition: the compatibility fingerprint follows their content, not where
 * they were read from or the list's order (as a toolkit's); the definition is fixed once built;
 * `Skill.dir` given a path that is not a string fails the agent's construction, never throws.
 */
import { describe, expect, it } from "@effect/vitest"
import { Skill } from "@tether/core"
import { Harness } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Threads from "./fixtures/threads.js"

const writeSkill = (root: string, name: string, body: string) => {
  const dir = Path.join(root, name)
  Fs.mkdirSync(dir, { recursive: true })
  Fs.writeFileSync(Path.join(dir, "SKILL.md"), `---\ndescription: ${name} skill\n---\n${body}\n`)
  return dir
}

const fingerprintOf = (sandbox: Harness.Sandbox, skills: ReadonlyArray<Skill.Skill>) =>
  Threads.makeAgent(sandbox, Threads.driver(Threads.makeControl()), {
    definition: { instructions: "You triage issues.", skills, tools: Threads.Tools }
  }).pipe(
    Effect.map((agent) => agent.fingerprint),
    Effect.scoped,
    Effect.provide(Layer.merge(Threads.ToolsLive, Harness.layer))
  )

describe("skills and the compatibility fingerprint", () => {
  it.live("same skills from another folder: same fingerprint; changed content: another", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const one = Path.join(sandbox.base, "skills-1")
      const two = Path.join(sandbox.base, "skills-2")
      const a1 = writeSkill(one, "alpha", "Do A.")
      const b1 = writeSkill(one, "beta", "Do B.")
      const a2 = writeSkill(two, "alpha", "Do A.")
      const b2 = writeSkill(two, "beta", "Do B.")
      const reference = yield* fingerprintOf(sandbox, [Skill.dir(a1), Skill.dir(b1)])
      expect(yield* fingerprintOf(sandbox, [Skill.dir(a2), Skill.dir(b2)])).toBe(reference)
      Fs.writeFileSync(Path.join(b2, "notes.md"), "more\n")
      expect(yield* fingerprintOf(sandbox, [Skill.dir(a2), Skill.dir(b2)])).not.toBe(reference)
      expect(yield* fingerprintOf(sandbox, [Skill.dir(a1)])).not.toBe(reference)
    }).pipe(Effect.scoped))

  it.live("a reordered skills list keeps the fingerprint (as a reordered toolkit does)", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const root = Path.join(sandbox.base, "skills")
      const a = writeSkill(root, "alpha", "Do A.")
      const b = writeSkill(root, "beta", "Do B.")
      const reference = yield* fingerprintOf(sandbox, [Skill.dir(a), Skill.dir(b)])
      expect(yield* fingerprintOf(sandbox, [Skill.dir(b), Skill.dir(a)])).toBe(reference)
    }).pipe(Effect.scoped))
})

describe("the definition is fixed at construction", () => {
  it.live("changing the caller's skills array and skill folder after Agent.make changes nothing", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const root = Path.join(sandbox.base, "skills")
      const a = writeSkill(root, "alpha", "Do A.")
      const skills: Array<Skill.Skill> = [Skill.dir(a)]
      const agent = yield* Threads.makeAgent(sandbox, Threads.driver(Threads.makeControl()), {
        definition: { instructions: "You triage issues.", skills, tools: Threads.Tools }
      })
      const before = agent.fingerprint
      const tools = agent.definition.catalog.descriptors.map((d) => d.name)
      skills.push(Skill.inline("gamma", "# G\nDo G."))
      skills[0] = Skill.inline("alpha", "# changed")
      Fs.writeFileSync(Path.join(a, "SKILL.md"), "# changed on disk\n")
      expect(agent.definition.skills.map((s) => s.name)).toEqual(["alpha"])
      expect(agent.definition.skills[0]!._tag).toBe("Dir")
      expect(agent.fingerprint).toBe(before)
      expect(agent.definition.catalog.descriptors.map((d) => d.name)).toEqual(tools)
      const description = agent.definition.catalog.descriptors.find((d) => d.name === "read_skill")!.description
      expect(description).not.toContain("gamma")
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(Threads.ToolsLive, Harness.layer))))

  it.live("Skill.dir with a path that is not a string fails Agent.make with a typed error, never throws", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const exit = yield* Effect.exit(
        Effect.suspend(() =>
          Threads.makeAgent(sandbox, Threads.driver(Threads.makeControl()), {
            definition: {
              instructions: "",
              skills: [Skill.dir(process.env["TETHER_TEST_UNSET_SKILL_DIR"] as unknown as string)],
              tools: Threads.Tools
            }
          })
        ).pipe(Effect.catchAllDefect((defect) => Effect.die(defect)))
      )
      expect(exit._tag).toBe("Failure")
      if (exit._tag === "Failure") expect(exit.cause._tag).toBe("Fail")
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(Threads.ToolsLive, Harness.layer))))
})
