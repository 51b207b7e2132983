/**
 * The agent definition through `Agent.make` and the fake CLI: skills served by `read_skill`,
 * external sources and skills handed to the driver, what `Result` / `RunStarted` report, the
 * construction errors, and the view that no operation can change.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Mcp, Skill } from "@tether/core"
import type { Driver } from "@tether/core"
import { FakeCli, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"

const Lookup = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String }),
  revision: "lookup_issue/v1"
})
const Tools = Toolkit.make(Lookup)
const ToolsLive = Tools.toLayer({ lookup_issue: ({ key }) => Effect.succeed({ title: `Title of ${key}` }) })

const triage = "---\ndescription: Label new issues by area.\n---\n# Triage\nUse the area labels."

/** The fake CLI's driver, recording every request it prepares (with the skill files it found). */
const recordingDriver = (
  requests: Array<{ readonly request: Driver.InvocationRequest; readonly onDisk: ReadonlyArray<string> }>,
  capabilities?: Partial<Driver.Capabilities>
): Driver.Driver => {
  const driver = FakeCli.driver(capabilities === undefined ? {} : { capabilities })
  return {
    ...driver,
    prepare: (request) =>
      Effect.suspend(() => {
        const onDisk = request.skills.map((skill) => NodeFs.readFileSync(NodePath.join(skill.dir, "SKILL.md"), "utf8"))
        requests.push({ request, onDisk })
        return driver.prepare(request)
      })
  }
}

const provide = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(Effect.scoped, Effect.provide([ToolsLive, Harness.layer]))

describe("Agent definition", () => {
  it.live("read_skill serves the skills; the driver gets the skills and sources; results report what was sent", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const skillRoot = NodePath.join(sandbox.base, "skills", "review")
      NodeFs.mkdirSync(NodePath.join(skillRoot, "rules"), { recursive: true })
      NodeFs.writeFileSync(NodePath.join(skillRoot, "SKILL.md"), "# Review\nCheck the rules.")
      NodeFs.writeFileSync(NodePath.join(skillRoot, "rules", "style.md"), "Use tabs.")
      const requests: Array<{ readonly request: Driver.InvocationRequest; readonly onDisk: ReadonlyArray<string> }> = []
      const definition = {
        instructions: "You triage issues.",
        skills: [Skill.dir(skillRoot), Skill.inline("triage", triage)],
        tools: Tools,
        mcp: [Mcp.http("docs", "http://127.0.0.1:9/mcp", { bearerTokenEnv: "DOCS_TOKEN" })]
      }
      const { events, result, view } = yield* provide(Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver: recordingDriver(requests),
          definition,
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        // Changes on disk after construction never reach the agent.
        NodeFs.writeFileSync(NodePath.join(skillRoot, "rules", "style.md"), "CHANGED")
        const events = Array.from(
          yield* agent.stream(FakeCli.script(
            { op: "call", tool: "read_skill", input: {} },
            { op: "call", tool: "read_skill", input: { skill: "triage" } },
            { op: "call", tool: "read_skill", input: { skill: "review", path: "rules/style.md" } },
            { op: "call", tool: "read_skill", input: { skill: "review", path: "../triage/SKILL.md" } },
            { op: "text", text: "done" }
          )).pipe(Stream.runCollect)
        )
        const finished = events.at(-1)
        return {
          events,
          result: finished?._tag === "RunFinished" ? finished.result : undefined,
          view: agent.definition
        }
      }))
      expect(view.catalog.descriptors.map((d) => d.name)).toEqual(["lookup_issue", "read_skill"])
      expect(view).toMatchObject({ instructions: definition.instructions, skills: definition.skills, tools: Tools })
      expect(view.mcp).toEqual(definition.mcp)

      const ends = events.filter((e) => e._tag === "ToolCall" && e.phase === "end")
      expect(ends.map((e) => e._tag === "ToolCall" && e.name)).toEqual(Array(4).fill("read_skill"))
      const outputs = ends.map((e) => (e._tag === "ToolCall" ? e.output : undefined))
      expect(outputs[0]).toMatchObject({
        skills: [
          { name: "review", description: "Check the rules.", files: ["SKILL.md", "rules/style.md"] },
          { name: "triage", description: "Label new issues by area.", files: ["SKILL.md"] }
        ]
      })
      expect(outputs[1]).toMatchObject({ skill: "triage", path: "SKILL.md", content: triage })
      expect(outputs[2]).toMatchObject({ content: "Use tabs." })
      expect(ends[3]!._tag === "ToolCall" && ends[3]!.isError).toBe(true)
      expect(JSON.stringify(outputs[3])).toContain("invalid_path")

      const started = events[0]
      expect(started?._tag).toBe("RunStarted")
      expect(result?.effectiveTools).toEqual(["lookup_issue", "read_skill"])
      expect(result?.instructions).toBe("You triage issues.")
      expect(started?._tag === "RunStarted" && [started.effectiveTools, started.instructions]).toEqual([
        result?.effectiveTools,
        result?.instructions
      ])

      expect(requests).toHaveLength(1)
      const { onDisk, request } = requests[0]!
      expect(request.instructions).toBe("You triage issues.")
      expect(request.hosted.tools).toEqual(["lookup_issue", "read_skill"])
      expect(request.mcp).toEqual(definition.mcp)
      expect(request.skills.map((s) => [s.name, s.description, s.files.map((f) => f.path)])).toEqual([
        ["review", "Check the rules.", ["SKILL.md", "rules/style.md"]],
        ["triage", "Label new issues by area.", ["SKILL.md"]]
      ])
      expect(request.skills[0]!.files[1]!.content).toBe("Use tabs.")
      // The snapshot is in the clone (not the source directory) and equals what read_skill serves.
      expect(request.skills.every((s) => s.dir.startsWith(request.profileDir))).toBe(true)
      expect(onDisk).toEqual(["# Review\nCheck the rules.", triage])
      expect(yield* Harness.entries(sandbox.root)).toEqual([])
    }).pipe(Effect.scoped))

  it.live("construction errors fail before anything is acquired", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const make = (definition: Agent.Definition<Toolkit.Any>, capabilities?: Partial<Driver.Capabilities>) =>
        provide(Effect.flip(Agent.make({
          driver: recordingDriver([], capabilities),
          definition: definition as Agent.Definition<typeof Tools>,
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })))
      const cases: ReadonlyArray<
        readonly [Agent.Definition<Toolkit.Any>, (Partial<Driver.Capabilities> | undefined)?, string?]
      > = [
        [{ instructions: "", tools: Tools, mcp: [Mcp.http("tether", "http://127.0.0.1:9/mcp")] }],
        [{
          instructions: "",
          tools: Tools,
          mcp: [Mcp.http("a", "http://127.0.0.1:9/mcp", { bearerTokenEnv: "TETHER_MCP_X" })]
        }],
        [{ instructions: "", tools: Tools, mcp: [Mcp.stdio("a", "node", [], { TETHER_AGENT_MARKER: "x" })] }],
        [{
          instructions: "",
          tools: Tools,
          mcp: [Mcp.http("a", "http://127.0.0.1:9/mcp"), Mcp.http("a", "http://127.0.0.1:8/mcp")]
        }],
        [{ instructions: "", tools: Tools, mcp: [Mcp.stdio("a", "node")] }, undefined, "UnsupportedCapability"],
        [{ instructions: "Be brief.", tools: Tools }, { instructions: false }, "UnsupportedCapability"],
        [{ instructions: "", tools: Tools, skills: [Skill.inline("x", "# x\ny"), Skill.inline("x", "# x\nz")] }],
        [{ instructions: "", tools: Tools, skills: [Skill.dir(NodePath.join(sandbox.base, "missing"))] }],
        [{
          instructions: "",
          tools: Toolkit.make(
            Lookup,
            Tool.make("read_skill", { description: "Mine.", input: {}, output: Schema.String })
          ),
          skills: []
        }]
      ]
      for (const [definition, capabilities, tag] of cases) {
        const error = yield* make(definition, capabilities)
        expect(error._tag).toBe(tag ?? "AgentConfigError")
      }
      expect(yield* Harness.entries(sandbox.root)).toEqual([])
    }).pipe(Effect.scoped))

  it.live("the driver, the default model and the agent object cannot change after construction", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const options = {
        driver: { ...FakeCli.driver() },
        definition: { instructions: "You triage issues.", skills: [], tools: Tools },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        model: "model-one"
      }
      const started = yield* provide(Effect.gen(function*() {
        const agent = yield* Agent.make(options)
        options.model = "model-two"
        ;(options.driver as { prepare: Driver.Driver["prepare"] }).prepare = () => Effect.die("replaced")
        options.definition.instructions = "changed"
        expect(() => {
          ;(agent as { definition: unknown }).definition = { instructions: "other" }
        }).toThrow(TypeError)
        expect(() => {
          ;(agent as { provider: string }).provider = "other"
        }).toThrow(TypeError)
        const events = Array.from(
          yield* agent.stream(FakeCli.script({ op: "text", text: "ok" })).pipe(Stream.runCollect)
        )
        return events[0]
      }))
      expect(started?._tag === "RunStarted" && [started.model, started.instructions]).toEqual([
        "model-one",
        "You triage issues."
      ])
    }).pipe(Effect.scoped))

  it.live("the sandbox ceiling is the one given to make: widening the caller's policy later changes nothing", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const requests: Array<{ readonly request: Driver.InvocationRequest; readonly onDisk: ReadonlyArray<string> }> = []
      const policy: { sandbox: Driver.SandboxLevel } = { sandbox: "readOnly" }
      const refused = yield* provide(Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver: recordingDriver(requests),
          definition: { instructions: "", skills: [], tools: Tools },
          workspace: sandbox.workspace,
          profile: sandbox.selection,
          policy
        })
        const fingerprint = agent.fingerprint
        policy.sandbox = "unrestricted"
        const refused = yield* Effect.flip(agent.run({
          input: FakeCli.script({ op: "text", text: "ok" }),
          builtinTools: { sandbox: "workspaceWrite" }
        }))
        yield* agent.run(FakeCli.script({ op: "text", text: "ok" }))
        expect(agent.fingerprint).toBe(fingerprint)
        return refused
      }))
      expect(refused).toMatchObject({ _tag: "InvalidTurn", reason: "PolicyWidened" })
      expect(requests.map(({ request }) => request.sandbox)).toEqual(["readOnly"])
    }).pipe(Effect.scoped))

  it.live("the skills are read from the caller's array once: a skill added while they load is not in the agent", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      // Enough files that loading the skill takes many turns of the event loop.
      const dir = NodePath.join(sandbox.base, "big-skill")
      NodeFs.mkdirSync(dir)
      NodeFs.writeFileSync(NodePath.join(dir, "SKILL.md"), "# Big\nA big skill.\n")
      for (let i = 0; i < 200; i++) NodeFs.writeFileSync(NodePath.join(dir, `f${i}.md`), `file ${i}\n`)
      const skills: Array<Skill.Skill> = [Skill.dir(dir)]
      const added = new Promise<void>((resolve) =>
        setTimeout(() => {
          skills.push(Skill.inline("big-skill", "# Other\nAnother skill of the same name."))
          resolve()
        }, 0)
      )
      const names = yield* provide(Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver: FakeCli.driver(),
          definition: { instructions: "", skills, tools: Tools },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        yield* Effect.promise(() => added)
        return agent.definition.skills.map((skill) => skill.name)
      }))
      expect(skills).toHaveLength(2)
      expect(names).toEqual(["big-skill"])
    }).pipe(Effect.scoped))

  it.live("the thread fingerprint follows skill content (not location) and the external sources", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const write = (dir: string, body: string) => {
        NodeFs.mkdirSync(dir, { recursive: true })
        NodeFs.writeFileSync(NodePath.join(dir, "SKILL.md"), body)
        return dir
      }
      const a = write(NodePath.join(sandbox.base, "a", "review"), "# Review\nCheck.")
      const b = write(NodePath.join(sandbox.base, "b", "review"), "# Review\nCheck.")
      const c = write(NodePath.join(sandbox.base, "c", "review"), "# Review\nCheck twice.")
      const docs = Mcp.http("docs", "http://127.0.0.1:9/mcp")
      const fingerprint = (skills: ReadonlyArray<Skill.Skill>, mcp: ReadonlyArray<Mcp.Source>) =>
        provide(
          Effect.map(
            Agent.make({
              driver: FakeCli.driver(),
              definition: { instructions: "", skills, tools: Tools, mcp },
              workspace: sandbox.workspace,
              profile: sandbox.selection
            }),
            (agent) => agent.fingerprint
          )
        )
      const base = yield* fingerprint([Skill.dir(a)], [docs])
      expect(yield* fingerprint([Skill.dir(b)], [docs])).toBe(base)
      expect(yield* fingerprint([Skill.dir(c)], [docs])).not.toBe(base)
      expect(yield* fingerprint([Skill.dir(a)], [])).not.toBe(base)
      expect(yield* fingerprint([Skill.dir(a)], [Mcp.http("docs", "http://127.0.0.1:10/mcp")])).not.toBe(base)
    }).pipe(Effect.scoped))

  const definitionArb = FastCheck.record({
    instructions: FastCheck.string({ maxLength: 30 }).filter((s) => !s.includes("\u0000")),
    skills: FastCheck.uniqueArray(FastCheck.stringMatching(/^[a-z]{1,8}$/), { maxLength: 2 })
      .map((names) => names.map((name) => Skill.inline(name, `# ${name}\nUse ${name}.`))),
    mcp: FastCheck.uniqueArray(FastCheck.stringMatching(/^[a-s]{1,6}$/), { maxLength: 2 })
      .map((keys) =>
        keys.map((key, i): Mcp.Source => ({
          _tag: "http",
          key,
          url: `http://127.0.0.1:${9 + i}/mcp`,
          headers: { "X-Key": key },
          bearerTokenEnv: undefined
        }))
      )
  })
  type Operation = "run" | "mutate-view" | "mutate-input" | "read-skill"
  const operations = FastCheck.array(
    FastCheck.constantFrom<Operation>("run", "mutate-view", "mutate-input", "read-skill"),
    { minLength: 1, maxLength: 4 }
  )

  it.live.prop(
    "any sequence of operations on an agent leaves agent.definition deep-equal to what was passed in",
    [definitionArb, operations],
    ([generated, ops]) =>
      Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        // Mutable copies the caller keeps: changing them later must not reach the agent.
        const input = {
          instructions: generated.instructions,
          skills: [...generated.skills],
          tools: Tools,
          mcp: generated.mcp.map((source) => ({
            ...source,
            headers: { ...(source._tag === "stdio" ? {} : source.headers) }
          }))
        }
        const expected = {
          instructions: generated.instructions,
          skills: [...generated.skills],
          tools: Tools,
          mcp: JSON.parse(JSON.stringify(input.mcp))
        }
        yield* provide(Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: FakeCli.driver(),
            definition: input as Agent.Definition<typeof Tools>,
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          const view = () => {
            const { catalog: _, ...rest } = agent.definition
            return rest
          }
          expect(view()).toEqual(expected)
          for (const op of ops) {
            switch (op) {
              case "run": {
                const result = yield* agent.run(FakeCli.script({ op: "text", text: "ok" }))
                expect(result.instructions).toBe(expected.instructions)
                break
              }
              case "read-skill": {
                const name = expected.skills[0]?.name
                yield* agent.run(
                  FakeCli.script({ op: "call", tool: "read_skill", input: name === undefined ? {} : { skill: name } })
                )
                break
              }
              case "mutate-view": {
                const target = agent.definition as unknown as Record<string, unknown>
                for (
                  const attempt of [
                    () => (target["instructions"] = "changed"),
                    () => (agent.definition.skills as Array<unknown>).push(Skill.inline("zz", "# z\nz")),
                    () => ((agent.definition.mcp[0] as { key: string } | undefined) ?? target)["key"] = "x",
                    () => delete target["tools"]
                  ]
                ) {
                  expect(attempt).toThrow(TypeError)
                }
                break
              }
              case "mutate-input": {
                input.instructions = "changed by the caller"
                input.skills.push(Skill.inline("late", "# late\nx"))
                const first = input.mcp[0]
                if (first !== undefined) (first.headers as Record<string, string>)["X-Late"] = "1"
                input.mcp.pop()
                break
              }
            }
            expect(view()).toEqual(expected)
          }
        }))
      }).pipe(Effect.scoped),
    { fastCheck: { numRuns: 8 } }
  )
})
