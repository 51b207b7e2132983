import { describe, expect, it } from "@effect/vitest"
import { Tool, Toolkit } from "@tether/tool"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import { executorFrom } from "../src/internal/toolkit.js"

class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { key: Schema.String }) {}

class Issues extends Context.Tag("test/Issues")<Issues, {
  readonly find: (key: string) => Effect.Effect<{ readonly title: string; readonly state: string }, NotFound>
}>() {}

class Clock extends Context.Tag("test/Clock")<Clock, { readonly now: Effect.Effect<number> }>() {}

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String, state: Schema.String }),
  title: "Issue lookup",
  revision: "lookup_issue/v1",
  annotations: { readOnly: true, idempotent: true }
})
const Now = Tool.make("now", { description: "The time.", input: {}, output: Schema.Number, revision: "now/v1" })
const IssueTools = Toolkit.make(LookupIssue, Now)

const IssuesLive = Layer.succeed(Issues, {
  find: (key) =>
    key === "ISSUE-42" ? Effect.succeed({ title: "Crash", state: "open" }) : Effect.fail(new NotFound({ key }))
})
const ClockLive = Layer.succeed(Clock, { now: Effect.succeed(1234) })

// Handlers are services: built from an effect that uses `Issues`; `now` uses `Clock` directly.
const IssueToolsLive = IssueTools.toLayer(Effect.gen(function*() {
  const issues = yield* Issues
  return {
    lookup_issue: ({ key }) =>
      issues.find(key).pipe(
        Effect.catchTag("NotFound", () => Tool.reject("not_found", "Choose an issue key that exists."))
      ),
    now: () => Effect.flatMap(Clock, (clock) => clock.now)
  }
}))

describe("Toolkit", () => {
  it.effect("runs handlers provided as services by toLayer, with their own dependencies", () =>
    Effect.gen(function*() {
      const executor = yield* Toolkit.executor(IssueTools)
      expect(yield* executor.execute("lookup_issue", { key: "ISSUE-42" })).toMatchObject({
        _tag: "Success",
        structuredContent: { title: "Crash", state: "open" }
      })
      expect(yield* executor.execute("lookup_issue", { key: "ISSUE-1" })).toStrictEqual({
        _tag: "Rejected",
        code: "not_found",
        message: "Choose an issue key that exists."
      })
      expect(yield* executor.execute("now", {})).toMatchObject({ structuredContent: { result: 1234 } })
      expect(executor.catalog).toBe(yield* Toolkit.catalog(IssueTools))
    }).pipe(Effect.provide(IssueToolsLive.pipe(Layer.provide([IssuesLive, ClockLive])))))

  it.effect("a handler service missing at run time is a MissingHandler error naming the tool", () =>
    Effect.gen(function*() {
      const partial = IssueTools.toLayer({ lookup_issue: () => Tool.reject("x", "y") } as never) as Layer.Layer<never>
      const result = yield* Effect.either(
        Toolkit.executor(IssueTools).pipe(Effect.provide(partial)) as Effect.Effect<unknown, Tool.ToolDefinitionError>
      )
      expect(Either.isLeft(result) && [result.left.reason, result.left.tool]).toStrictEqual(["MissingHandler", "now"])
      const direct = yield* Effect.either(
        executorFrom(IssueTools, { lookup_issue: () => Tool.reject("x", "y") } as never)
      )
      expect(Either.isLeft(direct) && direct.left.reason).toBe("MissingHandler")
    }))

  it.effect("a handler provided for another definition of the same name is a HandlerMismatch", () =>
    Effect.gen(function*() {
      const Other = Tool.make("now", { description: "Another now.", input: {}, output: Schema.Number })
      const otherLayer = Toolkit.make(Other).toLayer({ now: () => Effect.succeed(1) })
      const result = yield* Effect.either(
        Toolkit.executor(Toolkit.make(Now)).pipe(Effect.provide(otherLayer)) as Effect.Effect<
          unknown,
          Tool.ToolDefinitionError
        >
      )
      expect(Either.isLeft(result) && [result.left.reason, result.left.tool]).toStrictEqual(["HandlerMismatch", "now"])
    }))

  it.effect("the empty toolkit needs no handler services", () =>
    Effect.gen(function*() {
      const executor = yield* Toolkit.executor(Toolkit.empty)
      expect(executor.catalog.descriptors).toStrictEqual([])
      expect(executor.catalog.fingerprint).toMatch(/^[0-9a-f]{64}$/)
      expect(yield* executor.execute("anything", {})).toMatchObject({ code: "invalid_input" })
    }))

  it.effect("a merged toolkit runs handlers from a layer and from a context built from plain handlers", () =>
    Effect.gen(function*() {
      const ReadSkill = Tool.make("read_skill", {
        description: "Reads a skill.",
        input: { name: Schema.String },
        output: Schema.String,
        revision: "read_skill/v1"
      })
      const Skills = Toolkit.make(ReadSkill)
      const merged = Toolkit.merge(IssueTools, Skills)
      const skillContext = yield* Skills.toContext({ read_skill: ({ name }) => Effect.succeed(`# ${name}`) })
      const executor = yield* Toolkit.executor(merged).pipe(Effect.provide(skillContext))
      expect(executor.catalog.descriptors.map((d) => d.name)).toStrictEqual(["lookup_issue", "now", "read_skill"])
      expect(yield* executor.execute("read_skill", { name: "triage" })).toMatchObject({
        structuredContent: { result: "# triage" }
      })
      expect(yield* executor.execute("now", {})).toMatchObject({ structuredContent: { result: 1234 } })
      const skillsOnly = yield* executorFrom(Skills, { read_skill: ({ name }) => Effect.succeed(name) })
      expect(yield* skillsOnly.execute("read_skill", { name: "x" })).toMatchObject({
        structuredContent: { result: "x" }
      })
    }).pipe(Effect.provide(IssueToolsLive.pipe(Layer.provide([IssuesLive, ClockLive])))))

  it.effect("builds handlers once per layer build and shares them between executors", () =>
    Effect.gen(function*() {
      const builds = yield* Ref.make(0)
      const layer = Toolkit.make(Now).toLayer(
        Effect.as(Ref.update(builds, (n) => n + 1), { now: () => Effect.succeed(7) })
      )
      yield* Effect.gen(function*() {
        const a = yield* Toolkit.executor(Toolkit.make(Now))
        const b = yield* Toolkit.executor(Toolkit.make(Now))
        expect(yield* a.execute("now", {})).toMatchObject({ structuredContent: { result: 7 } })
        expect(yield* b.execute("now", {})).toMatchObject({ structuredContent: { result: 7 } })
      }).pipe(Effect.provide(layer))
      expect(yield* Ref.get(builds)).toBe(1)
    }))

  it.effect("a tool without parameters publishes a closed empty object and accepts only {}", () =>
    Effect.gen(function*() {
      const executor = yield* executorFrom(Toolkit.make(Now), { now: () => Effect.succeed(1) })
      expect(executor.catalog.descriptors[0]!.inputSchema).toStrictEqual({
        type: "object",
        properties: {},
        additionalProperties: false
      })
      expect(yield* executor.execute("now", {})).toMatchObject({ _tag: "Success" })
      expect(yield* executor.execute("now", { extra: 1 })).toStrictEqual({
        _tag: "Failed",
        code: "invalid_input",
        message: "The tool input is invalid at extra."
      })
      expect(yield* executor.execute("now", [])).toMatchObject({ code: "invalid_input" })
    }))

  it.effect("wraps recursive and overridden non-object outputs with references that still resolve", () =>
    Effect.gen(function*() {
      interface Tree {
        readonly name: string
        readonly children: ReadonlyArray<Tree>
      }
      const Tree: Schema.Schema<Tree> = Schema.Struct({
        name: Schema.String,
        children: Schema.Array(Schema.suspend(() => Tree))
      }).annotations({ identifier: "Tree" })
      const Forest = Tool.make("forest", { description: "Trees.", input: {}, output: Schema.Array(Tree) })
      const Tagged = Tool.make("tagged", {
        description: "Tags.",
        input: {},
        output: Schema.Array(Schema.String),
        outputSchemaJson: {
          type: "array",
          items: { $ref: "#/$defs/tag" },
          $defs: { tag: { type: "string", minLength: 1 } }
        }
      })
      const forest = [{ name: "a", children: [{ name: "b", children: [] }] }]
      let tags: Array<string> = ["x"]
      const executor = yield* executorFrom(Toolkit.make(Forest, Tagged), {
        forest: () => Effect.succeed(forest),
        tagged: () => Effect.sync(() => tags)
      })
      const [forestDescriptor, taggedDescriptor] = executor.catalog.descriptors
      expect(JSON.stringify(forestDescriptor!.outputSchema)).toContain("\"#/properties/result/$defs/Tree\"")
      expect(taggedDescriptor!.outputSchema).toMatchObject({
        properties: { result: { items: { $ref: "#/properties/result/$defs/tag" } } }
      })
      expect(yield* executor.execute("forest", {})).toMatchObject({ structuredContent: { result: forest } })
      expect(yield* executor.execute("tagged", {})).toMatchObject({ structuredContent: { result: ["x"] } })
      tags = [""]
      expect(yield* executor.execute("tagged", {})).toMatchObject({ code: "invalid_output" })
    }))

  it("is plain about itself", () => {
    expect(JSON.parse(JSON.stringify(IssueTools))).toStrictEqual({
      _id: "@tether/tool/Toolkit",
      tools: ["lookup_issue", "now"]
    })
    expect(Toolkit.isToolkit(IssueTools)).toBe(true)
    expect(Toolkit.isToolkit({ tools: {} })).toBe(false)
    expect(Object.keys(IssueTools.tools)).toStrictEqual(["lookup_issue", "now"])
  })
})
