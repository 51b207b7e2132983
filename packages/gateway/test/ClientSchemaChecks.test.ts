/**
 * Outputs Effect encodes and Tether answers as a success must pass the real MCP SDK client's own
 * check of `structuredContent` (a Draft-07 Ajv, code points, exact `multipleOf`), which Gemini CLI
 * bundles too: tuples, astral strings under `minLength`, fractional multiples.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { expectNoTokenInLogs, listedClient, logLayer, settle } from "./fixtures/harness.js"

// A tool whose output holds a tuple: Effect encodes it, Tether validates it against the output
// schema it publishes, and a real MCP SDK client (the one Claude Code bundles) validates it too.
const Locate = Tool.make("locate", {
  description: "Locate a point.",
  input: { key: Schema.String },
  output: Schema.Struct({ point: Schema.Tuple(Schema.Number, Schema.Number) }),
  revision: "locate/v1"
})
const Label = Tool.make("label", {
  description: "A label and its counts.",
  input: {},
  output: Schema.Struct({ entry: Schema.Tuple([Schema.String], Schema.Number) }),
  revision: "label/v1"
})
// Effect counts a string's length in UTF-16 code units and checks `multipleOf` within
// floating-point error; Tether's own output validator does likewise (jsonSchema.ts), the client not.
const Initials = Tool.make("initials", {
  description: "Two-unit initials.",
  input: {},
  output: Schema.Struct({ initials: Schema.String.pipe(Schema.minLength(2)) }),
  revision: "initials/v1"
})
const Price = Tool.make("price", {
  description: "A price in tenths.",
  input: {},
  output: Schema.Struct({ amount: Schema.Number.pipe(Schema.multipleOf(0.1)) }),
  revision: "price/v1"
})
const Tools = Toolkit.make(Locate, Label, Initials, Price)
const ToolsLive = Tools.toLayer({
  locate: () => Effect.succeed({ point: [1, 2] as const }),
  label: () => Effect.succeed({ entry: ["a", 1, 2] as const }),
  initials: () => Effect.succeed({ initials: "\u{1F600}" }),
  price: () => Effect.succeed({ amount: 0.3 })
})

describe("tool outputs the real MCP SDK client accepts", () => {
  it.live("a tuple output reaches an official SDK client as a valid result", () =>
    Effect.gen(function*() {
      const client = yield* listedClient(Tools)
      const located = yield* settle(() => client.callTool({ name: "locate", arguments: { key: "k" } }))
      expect(located.ok ? located.value.structuredContent : String(located.error)).toEqual({ point: [1, 2] })
      const labelled = yield* settle(() => client.callTool({ name: "label", arguments: {} }))
      expect(labelled.ok ? labelled.value.structuredContent : String(labelled.error)).toEqual({ entry: ["a", 1, 2] })
    }).pipe(Effect.scoped, Effect.provide([ToolsLive, Gateway.layer()]), Effect.provide(logLayer)))

  it.live("a string Effect measures in UTF-16 units, and a fractional multipleOf, reach the client as valid results", () =>
    Effect.gen(function*() {
      const client = yield* listedClient(Tools)
      const initials = yield* settle(() => client.callTool({ name: "initials", arguments: {} }))
      expect(initials.ok ? initials.value.structuredContent : String(initials.error)).toEqual({ initials: "\u{1F600}" })
      const price = yield* settle(() => client.callTool({ name: "price", arguments: {} }))
      expect(price.ok ? price.value.structuredContent : String(price.error)).toEqual({ amount: 0.3 })
    }).pipe(Effect.scoped, Effect.provide([ToolsLive, Gateway.layer()]), Effect.provide(logLayer)))
})

afterAll(() => expectNoTokenInLogs())
