import { describe, expect, it } from "@effect/vitest"
import { Tool, Toolkit } from "@tether/tool"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { executorFrom } from "../src/internal/toolkit.js"

class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { key: Schema.String }) {}

class Issues extends Context.Tag("test/Issues")<Issues, {
  readonly find: (key: string) => Effect.Effect<{ readonly title: string; readonly state: string }, NotFound>
}>() {}

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String, state: Schema.String }),
  revision: "lookup_issue/v1",
  annotations: { readOnly: true, idempotent: true }
})
const Count = Tool.make("count", {
  description: "Counts.",
  input: { n: Schema.NumberFromString },
  output: Schema.Number
})
const IssueTools = Toolkit.make(LookupIssue, Count)

const IssueToolsLive = IssueTools.toLayer(Effect.gen(function*() {
  const issues = yield* Issues
  return {
    lookup_issue: ({ key }) =>
      issues.find(key).pipe(
        Effect.catchTag("NotFound", () => Tool.reject("not_found", "Choose an issue key that exists."))
      ),
    count: ({ n }) => Effect.succeed(n + 1)
  }
}))

const layerType: Layer.Layer<
  Tool.HandlerService<"lookup_issue"> | Tool.HandlerService<"count">,
  never,
  Issues
> = IssueToolsLive

const executorEffect: Effect.Effect<
  unknown,
  Tool.ToolDefinitionError,
  Toolkit.HandlerServices<typeof IssueTools>
> = Toolkit.executor(IssueTools)

const emptyExecutor: Effect.Effect<unknown, Tool.ToolDefinitionError, never> = Toolkit.executor(Toolkit.empty)

// @ts-expect-error a missing handler is a compile error
IssueTools.toLayer({ lookup_issue: () => Effect.succeed({ title: "t", state: "open" }) })

IssueTools.toLayer({
  lookup_issue: () => Effect.succeed({ title: "t", state: "open" }),
  // @ts-expect-error a misspelled handler is a compile error
  cuont: () => Effect.succeed(1)
})

IssueTools.toLayer({
  lookup_issue: () => Effect.succeed({ title: "t", state: "open" }),
  // @ts-expect-error the output type is inferred from the output schema
  count: () => Effect.succeed("one")
})

// Never called: only its type matters.
export const typeOnly = () =>
  // @ts-expect-error an executor without its handler services cannot run
  Effect.runPromise(Toolkit.executor(IssueTools))

executorFrom(IssueTools, {
  lookup_issue: () => Effect.succeed({ title: "t", state: "open" }),
  count: ({ n }) => Effect.succeed(n),
  // @ts-expect-error executorFrom rejects handlers for tools the toolkit does not have
  extra: () => Effect.succeed(1)
})

executorFrom(IssueTools, {
  lookup_issue: () => Effect.succeed({ title: "t", state: "open" }),
  // @ts-expect-error executorFrom takes handlers that need no services
  count: () => Effect.flatMap(Issues, () => Effect.succeed(1))
})

// Merging keeps every tool's handler requirement.
const merged = Toolkit.merge(
  IssueTools,
  Toolkit.make(Tool.make("other", { description: "d", input: {}, output: Schema.String }))
)
const mergedServices: Effect.Effect<unknown, Tool.ToolDefinitionError, Toolkit.HandlerServices<typeof merged>> = Toolkit
  .executor(merged)
// @ts-expect-error the merged toolkit needs the handler of `other` too
const notEnough: Effect.Effect<unknown, Tool.ToolDefinitionError, Toolkit.HandlerServices<typeof IssueTools>> = Toolkit
  .executor(merged)

// A handler may fail with a rejection or the declared failure; other typed errors do not compile.
const Strict = Tool.make("strict", {
  description: "d",
  input: {},
  output: Schema.String,
  failure: NotFound
})
Toolkit.make(Strict).toLayer({ strict: () => Effect.fail(new NotFound({ key: "k" })) })
Toolkit.make(Strict).toLayer({ strict: () => Tool.reject("x", "y") })
// @ts-expect-error an undeclared typed failure is a compile error when the tool declares `failure`
Toolkit.make(Strict).toLayer({ strict: () => Effect.fail("boom") })

describe("types", () => {
  it("compiles", () => {
    expect([layerType, executorEffect, emptyExecutor, mergedServices, notEnough].length).toBe(5)
  })
})
