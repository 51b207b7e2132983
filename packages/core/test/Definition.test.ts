import { describe, expect, it } from "@effect/vitest"
import { Mcp, Skill } from "@tether/core"
import type { Driver } from "@tether/core"
import * as Gateway from "@tether/gateway/Gateway"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Schema from "effect/Schema"
import * as Definition from "../src/internal/definition.js"

const Lookup = Tool.make("lookup", {
  description: "Look up a thing.",
  input: { key: Schema.String },
  output: Schema.String,
  revision: "lookup/v1"
})
const Tools = Toolkit.make(Lookup)

const capabilities: Driver.Capabilities = {
  resume: true,
  fork: false,
  mcpTransports: ["http", "stdio"],
  instructions: true,
  skillsProjection: false,
  sandbox: [],
  toolAllowList: true,
  streamingInput: false,
  structuredOutput: "instruction",
  persistentProcess: false
}

const gatewayVariable = /^TETHER_MCP_/
const rules = (overrides: Partial<Driver.Capabilities> = {}): Definition.Rules => ({
  driver: "test",
  capabilities: { ...capabilities, ...overrides },
  hostedKey: "tether",
  reservedVariable: (name) => gatewayVariable.test(name)
})

const validate = (input: Partial<Definition.Input>, overrides: Partial<Driver.Capabilities> = {}) =>
  Definition.validate({ instructions: "", tools: Tools, ...input }, rules(overrides))

const configError = (input: Partial<Definition.Input>, overrides: Partial<Driver.Capabilities> = {}) =>
  Effect.flip(validate(input, overrides))

describe("definition validation", () => {
  it.effect("accepts a full definition and returns the frozen view and the skill snapshots", () =>
    Effect.gen(function*() {
      const skill = Skill.inline("triage", "# Triage\nLabel issues.")
      const source = Mcp.stdio("docs", "node", ["server.js"], { LEVEL: "1" })
      const validated = yield* validate({ instructions: "Be brief.", skills: [skill], mcp: [source] })
      expect(validated.view).toEqual({ instructions: "Be brief.", skills: [skill], tools: Tools, mcp: [source] })
      expect(validated.view.skills[0]).toBe(skill)
      expect(validated.view.tools).toBe(Tools)
      expect(validated.skills.map((s) => s.name)).toEqual(["triage"])
      expect(validated.catalog.descriptors.map((d) => d.name)).toEqual(["lookup"])
      expect(Object.isFrozen(validated.view)).toBe(true)
      expect(Object.isFrozen(validated.view.mcp)).toBe(true)
      expect(Object.isFrozen(validated.view.mcp[0])).toBe(true)
      const hosted = Definition.hostedToolkit(validated)
      expect(hosted.toolkit.toolList.map((t) => t.name)).toEqual(["lookup", "read_skill"])
      const without = yield* validate({})
      expect(Definition.hostedToolkit(without)).toEqual({ toolkit: Tools, context: undefined })
    }))

  it.effect("refuses the hosted key as an external source's key", () =>
    Effect.gen(function*() {
      const error = yield* configError({ mcp: [Mcp.http("tether", "http://127.0.0.1:1/mcp")] })
      expect(error).toMatchObject({ _tag: "AgentConfigError", reason: "InvalidDefinition" })
      expect(error.message).toContain("ReservedKey")
      expect((error as { cause?: unknown }).cause).toMatchObject({ _tag: "McpSourceError", reason: "ReservedKey" })
    }))

  it.scoped("refuses a source that names or references the gateway's token variable", () =>
    Effect.gen(function*() {
      // The name the real gateway gives a registration: any such name must be refused.
      const gateway = yield* Gateway.make()
      const registration = yield* gateway.register(yield* Toolkit.executor(Toolkit.empty))
      const variable = registration.tokenVariable
      const sources = [
        Mcp.http("a", "http://127.0.0.1:1/mcp", { bearerTokenEnv: variable }),
        Mcp.stdio("b", "node", [], { [variable]: "x" }),
        Mcp.stdio("c", "node", [], { TOKEN: `\${${variable}}` }),
        Mcp.http("d", "http://127.0.0.1:1/mcp", { headers: { Authorization: `Bearer \${${variable}}` } })
      ]
      for (const source of sources) {
        const error = yield* configError({ mcp: [source] })
        expect(error.message).toContain("ReservedVariable")
      }
      // Another rule for the token variable is honoured too.
      const custom = yield* Effect.flip(
        Definition.validate(
          {
            instructions: "",
            tools: Tools,
            mcp: [Mcp.http("a", "http://127.0.0.1:1/mcp", { bearerTokenEnv: "HOST_TOKEN" })]
          },
          { ...rules(), reservedVariable: (name) => name === "HOST_TOKEN" }
        )
      )
      expect(custom.message).toContain("ReservedVariable")
    }))

  it.effect("refuses duplicate source keys naming both", () =>
    Effect.gen(function*() {
      const error = yield* configError({
        mcp: [
          Mcp.stdio("docs", "node"),
          Mcp.http("search", "http://127.0.0.1:1/mcp"),
          Mcp.http("Docs", "http://127.0.0.1:2/mcp")
        ]
      })
      expect(error.message).toContain("mcp[0] \"docs\" (stdio)")
      expect(error.message).toContain("mcp[2] \"Docs\" (http)")
      expect((error as { cause?: unknown }).cause).toMatchObject({ reason: "DuplicateKey" })
    }))

  it.effect("refuses a transport the driver cannot use", () =>
    Effect.gen(function*() {
      const error = yield* configError({ mcp: [Mcp.sse("legacy", "http://127.0.0.1:1/sse")] })
      expect(error).toMatchObject({ _tag: "UnsupportedCapability", driver: "test", capability: "mcpTransports" })
      expect(error.message).toContain("legacy")
      const stdio = yield* configError({ mcp: [Mcp.stdio("docs", "node")] }, { mcpTransports: ["http"] })
      expect(stdio).toMatchObject({ _tag: "UnsupportedCapability", capability: "mcpTransports" })
    }))

  it.effect("refuses duplicate tool names across direct tools and known MCP tools, naming both owners", () =>
    Effect.gen(function*() {
      const direct = yield* configError({ mcp: [Mcp.stdio("docs", "node", [], {}, { tools: ["lookup"] })] })
      expect(direct.message).toContain("\"lookup\" is defined twice: by the direct tools and by mcp[0] \"docs\"")
      const sources = yield* configError({
        mcp: [
          Mcp.stdio("docs", "node", [], {}, { tools: ["search"] }),
          Mcp.http("web", "http://127.0.0.1:1/mcp", { tools: ["fetch", "search"] })
        ]
      })
      expect(sources.message).toContain("by mcp[0] \"docs\" (stdio) and by mcp[1] \"web\" (http)")
      expect(yield* validate({ mcp: [Mcp.stdio("docs", "node", [], {}, { tools: ["search"] })] })).toBeDefined()
    }))

  it.effect("refuses a user tool named read_skill, with or without skills", () =>
    Effect.gen(function*() {
      const ReadSkill = Tool.make("read_skill", { description: "Mine.", input: {}, output: Schema.String })
      for (const skills of [[], [Skill.inline("triage", "# T\nx")]]) {
        const error = yield* configError({ tools: Toolkit.make(Lookup, ReadSkill), skills })
        expect(error.message).toContain("\"read_skill\" is reserved")
      }
      const viaMcp = yield* configError({ mcp: [Mcp.stdio("docs", "node", [], {}, { tools: ["read_skill"] })] })
      expect(viaMcp.message).toContain("reserved")
    }))

  it.effect("refuses instructions on a driver without the capability; empty instructions pass", () =>
    Effect.gen(function*() {
      const error = yield* configError({ instructions: "Be brief." }, { instructions: false })
      expect(error).toMatchObject({ _tag: "UnsupportedCapability", capability: "instructions" })
      expect(yield* validate({ instructions: "" }, { instructions: false })).toBeDefined()
      const notString = yield* configError({ instructions: 42 as unknown as string })
      expect(notString).toMatchObject({ reason: "InvalidDefinition" })
    }))

  it.effect("refuses duplicate and invalid skills and values that are not skills or sources", () =>
    Effect.gen(function*() {
      const duplicate = yield* configError({
        skills: [Skill.inline("triage", "# a\nb"), Skill.dir("/srv/x/review"), Skill.inline("triage", "# c\nd")]
      })
      expect(duplicate.message).toContain("skills[0] and skills[2] are both named \"triage\"")
      const missing = yield* configError({ skills: [Skill.dir("/nonexistent/tether/review")] })
      expect((missing as { cause?: unknown }).cause).toMatchObject({ _tag: "SkillError", reason: "NotFound" })
      const fake = yield* configError({
        skills: [{ _tag: "Inline", name: "x", markdown: "y" } as unknown as Skill.Skill]
      })
      expect(fake.message).toContain("skills[0] is not a skill")
      const notSource = yield* configError({ mcp: [null as unknown as Mcp.Source] })
      expect(notSource.message).toContain("mcp[0] is not an MCP source")
      const broken = yield* configError({
        mcp: [{ _tag: "stdio", key: "x", command: "node" } as unknown as Mcp.Source]
      })
      expect(broken.message).toContain("InvalidCommand")
      const invalidTools = yield* configError({
        tools: Toolkit.make(Tool.make("bad name", { description: "x", input: {}, output: Schema.String }))
      })
      expect((invalidTools as { cause?: unknown }).cause).toMatchObject({ _tag: "ToolDefinitionError" })
    }))
})

// -- the view can never change ------------------------------------------------------------------

const skillName = FastCheck.stringMatching(/^[a-z0-9](?:[a-z0-9-]{0,8}[a-z0-9])?$/)
const text = FastCheck.string({ maxLength: 20 })
const variable = FastCheck.stringMatching(/^[A-SU-Z][A-Z0-9_]{0,8}$/)

const sourceArb = (key: string): FastCheck.Arbitrary<Mcp.Source> =>
  FastCheck.oneof(
    FastCheck.record({
      command: FastCheck.constantFrom("node", "/usr/bin/env"),
      args: FastCheck.array(text, { maxLength: 3 }),
      env: FastCheck.dictionary(variable, text, { maxKeys: 3 })
    }).map(({ args, command, env }): Mcp.Source => ({ _tag: "stdio", key, command, args, env })),
    FastCheck.record({
      port: FastCheck.integer({ min: 1, max: 65535 }),
      headers: FastCheck.dictionary(FastCheck.constantFrom("X-A", "X-B"), FastCheck.stringMatching(/^[a-z]{0,6}$/)),
      bearerTokenEnv: FastCheck.option(variable, { nil: undefined })
    }).map(({ bearerTokenEnv, headers, port }): Mcp.Source => ({
      _tag: "http",
      key,
      url: `http://127.0.0.1:${port}/mcp`,
      headers,
      bearerTokenEnv
    }))
  )

const definitionArb = FastCheck.record({
  instructions: FastCheck.string({ maxLength: 40 }).filter((s) => !s.includes("\u0000")),
  skills: FastCheck.uniqueArray(FastCheck.tuple(skillName, FastCheck.string({ minLength: 1, maxLength: 30 })), {
    selector: ([name]) => name,
    maxLength: 3
  }).map((pairs) => pairs.map(([name, body]) => Skill.inline(name, `# ${name}\n${body}`))),
  mcp: FastCheck.uniqueArray(FastCheck.stringMatching(/^[a-z]{1,6}$/).filter((k) => k !== "tether"), { maxLength: 3 })
    .chain((keys) => FastCheck.tuple(...keys.map(sourceArb)))
})

type Operation = (view: Definition.View, input: { instructions: string; mcp: Array<Mcp.Source> }) => void

const operationArb: FastCheck.Arbitrary<Operation> = FastCheck.oneof(
  FastCheck.constant<Operation>((view) => {
    ;(view as { instructions: string }).instructions = "changed"
  }),
  FastCheck.constant<Operation>((view) => {
    delete (view as { instructions?: string }).instructions
  }),
  FastCheck.constant<Operation>((view) => {
    ;(view.skills as Array<Skill.Skill>).push(Skill.inline("extra", "# x\ny"))
  }),
  FastCheck.constant<Operation>((view) => {
    ;(view.mcp as Array<Mcp.Source>).splice(0, 1)
  }),
  FastCheck.constant<Operation>((view) => {
    ;(view as { tools: unknown }).tools = Toolkit.empty
  }),
  FastCheck.constant<Operation>((view) => {
    Object.defineProperty(view, "model", { value: "other" })
  }),
  FastCheck.constant<Operation>((view) => {
    const first = view.mcp[0]
    if (first !== undefined) (first as { key: string }).key = "renamed"
  }),
  FastCheck.constant<Operation>((view) => {
    const first = view.mcp[0]
    if (first?._tag === "stdio") (first.args as Array<string>).push("--evil")
    if (first?._tag === "http") (first.headers as Record<string, string>)["X-Evil"] = "1"
  }),
  FastCheck.constant<Operation>((view) => {
    const first = view.mcp[0]
    if (first?._tag === "stdio") (first.env as Record<string, string>).EVIL = "1"
  }),
  FastCheck.constant<Operation>((view) => {
    const first = view.skills[0]
    if (first !== undefined) (first as { name: string }).name = "renamed"
  }),
  // The caller's own objects stay theirs: changing them after construction changes nothing.
  FastCheck.constant<Operation>((_, input) => {
    input.instructions = "changed by the caller"
  }),
  FastCheck.constant<Operation>((_, input) => {
    const first = input.mcp[0]
    if (first?._tag === "stdio") (first.args as Array<string>).push("--caller")
    if (first?._tag === "http") (first as { url: string }).url = "http://127.0.0.1:1/other"
    input.mcp.pop()
  })
)

describe("definition view", () => {
  it.effect.prop(
    "any sequence of operations leaves the view deep-equal to what was passed in",
    [definitionArb, FastCheck.array(operationArb, { maxLength: 8 })],
    ([definition, operations]) =>
      Effect.gen(function*() {
        const input = { instructions: definition.instructions, mcp: [...definition.mcp] }
        const expected = {
          instructions: definition.instructions,
          skills: [...definition.skills],
          tools: Tools,
          mcp: JSON.parse(JSON.stringify(definition.mcp))
        }
        const { view } = yield* Definition.validate(
          { instructions: input.instructions, skills: definition.skills, tools: Tools, mcp: input.mcp },
          rules()
        )
        expect(view).toEqual(expected)
        for (const operation of operations) {
          try {
            operation(view, input)
          } catch (error) {
            // Strict mode: writing to a frozen object throws a TypeError and changes nothing.
            expect(error).toBeInstanceOf(TypeError)
          }
          expect(view).toEqual(expected)
        }
        expect(view.skills.every((skill, i) => skill === expected.skills[i])).toBe(true)
        expect(view.tools).toBe(Tools)
      }),
    { fastCheck: { numRuns: 40 } }
  )
})
