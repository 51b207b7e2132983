/**
 * `runAs` with Schemas whose JSON Schema uses `$ref` (recursion through `$defs`) and unions, on
 * each driver's one-shot and live-thread paths (real CLIs, offline). docs/structured-output.md:
 * "Tether decodes every value with the Schema [...] Nothing unvalidated reaches the caller", and a
 * Schema a provider would refuse goes by instruction; never a defect or a hang.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Gemini } from "@tether/drivers"
import { AnthropicServer, GeminiServer, Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { offlineClaude } from "./ClaudeHarness.js"
import { offlineCodex } from "./CodexHarness.js"

type Expr =
  | { readonly _tag: "Num"; readonly value: number }
  | { readonly _tag: "Add"; readonly left: Expr; readonly right: Expr; readonly note?: string | undefined }
const Expr: Schema.Schema<Expr> = Schema.Union(
  Schema.TaggedStruct("Num", { value: Schema.Number }),
  Schema.TaggedStruct("Add", {
    left: Schema.suspend((): Schema.Schema<Expr> => Expr),
    right: Schema.suspend((): Schema.Schema<Expr> => Expr),
    note: Schema.optional(Schema.String)
  })
).annotations({ identifier: "Expr" })
const Tree = Schema.Struct({ root: Expr, all: Schema.Array(Expr) })
const value: Expr = {
  _tag: "Add",
  left: { _tag: "Num", value: 1 },
  right: { _tag: "Add", left: { _tag: "Num", value: 2 }, right: { _tag: "Num", value: 3 } }
}
const tree = { root: value, all: [value, { _tag: "Num", value: 4 }] }
// What a strict model answers: optional properties present as null.
const strictValue = {
  _tag: "Add",
  left: { _tag: "Num", value: 1 },
  note: null,
  right: { _tag: "Add", note: null, left: { _tag: "Num", value: 2 }, right: { _tag: "Num", value: 3 } }
}
const strictTree = { root: strictValue, all: [strictValue, { _tag: "Num", value: 4 }] }

const run = <A, E>(body: (sandbox: Harness.Sandbox) => Effect.Effect<A, E, any>) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const out = yield* body(sandbox).pipe(Effect.scoped, Effect.provide(Harness.layer)) as Effect.Effect<A, E>
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    return out
  }).pipe(Effect.scoped)

describe("runAs with recursive/union Schemas", () => {
  it.live("Claude: one-shot and live thread", () =>
    run((sandbox) =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          respond: (request) => {
            const tool =
              (request.tools as ReadonlyArray<{ readonly name: string; readonly input_schema?: any }> | undefined)
                ?.find((t) => t.name === "StructuredOutput")
            if (tool === undefined) return AnthropicServer.reply("ok")
            return AnthropicServer.callTool(
              "StructuredOutput",
              tool.input_schema?.properties?.result === undefined ? tree : { result: value }
            )
          }
        })
        const agent = yield* Agent.make({
          driver: offlineClaude(server.url),
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        const one = yield* agent.runAs(Tree, "Parse.", { repairs: 0 }).pipe(Effect.timeout("60 seconds"), Effect.either)
        const thread = yield* agent.thread("rec")
        yield* thread.run("hello")
        const two = yield* thread.runAs(Expr, "Parse.", { repairs: 0 }).pipe(
          Effect.timeout("60 seconds"),
          Effect.either
        )
        expect(one._tag === "Right" ? one.right.value : one.left).toEqual(tree)
        expect(two._tag === "Right" ? two.right.value : two.left).toEqual(value)
      })
    ), 150_000)

  it.live("Codex: one-shot and live thread", () =>
    run((sandbox) =>
      Effect.gen(function*() {
        const server = yield* ResponsesServer.make({
          script: (request) => {
            const format = (request.body as { text?: { format?: { type?: string } } }).text?.format
            return ResponsesServer.text(
              format?.type === "json_schema" ? JSON.stringify(strictTree) : "Here: " + JSON.stringify(tree)
            )
          }
        })
        const agent = yield* Agent.make({
          driver: offlineCodex(server.baseUrl),
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        const one = yield* agent.runAs(Tree, "Parse.", { repairs: 0 }).pipe(Effect.timeout("60 seconds"), Effect.either)
        const thread = yield* agent.thread("rec")
        yield* thread.run("hello")
        const two = yield* thread.runAs(Tree, "Parse.", { repairs: 0 }).pipe(
          Effect.timeout("60 seconds"),
          Effect.either
        )
        // Both attempts were native (strict text.format), not instruction.
        const formats = (yield* server.requests).map((r) =>
          (r.body as { text?: { format?: { type?: string } } }).text?.format?.type ?? null
        )
        expect(formats.filter((f) => f === "json_schema")).toHaveLength(2)
        expect(one._tag === "Right" ? one.right.value : one.left).toEqual(tree)
        expect(two._tag === "Right" ? two.right.value : two.left).toEqual(tree)
      })
    ), 150_000)

  it.live("Gemini: one-shot and live thread", () =>
    run((sandbox) =>
      Effect.gen(function*() {
        const server = yield* GeminiServer.make({
          respond: () => GeminiServer.reply("```json\n" + JSON.stringify(tree) + "\n```")
        })
        const agent = yield* Agent.make({
          driver: Gemini.driver({
            model: "gemini-2.5-flash",
            env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
          }),
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        const one = yield* agent.runAs(Tree, "Parse.", { repairs: 0 }).pipe(Effect.timeout("60 seconds"), Effect.either)
        const thread = yield* agent.thread("rec")
        const two = yield* thread.runAs(Tree, "Parse.", { repairs: 0 }).pipe(
          Effect.timeout("60 seconds"),
          Effect.either
        )
        expect(one._tag === "Right" ? one.right.value : one.left).toEqual(tree)
        expect(two._tag === "Right" ? two.right.value : two.left).toEqual(tree)
      })
    ), 150_000)
})
