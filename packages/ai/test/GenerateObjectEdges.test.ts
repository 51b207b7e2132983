/**
 * generateObject's edges on the reference driver (a real process replaying scripted driver
 * outputs), as TetherLanguageModel.test.ts sets it up: a number JSON cannot hold, a Schema that
 * only decodes, a class and a top-level union.
 */
import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import { describe, expect, it } from "@effect/vitest"
import { TetherLanguageModel } from "@tether/ai"
import type { Driver } from "@tether/core"
import { Harness, Reference } from "@tether/testing"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { agentProcesses } from "./fixtures/processes.js"

const terminal = (text: string): Driver.Output => ({
  _tag: "Terminal",
  ok: true,
  text,
  usage: { inputTokens: 12, outputTokens: 5 },
  model: "reference-model",
  session: "s-1",
  error: undefined,
  raw: {}
})

const said = (text: string): ReadonlyArray<Reference.Step> => [
  { _tag: "SessionStarted", sessionId: "s-1", model: "reference-model" },
  { _tag: "TextDelta", text },
  { _tag: "Message", role: "assistant", text },
  terminal(text)
]

const modelLayer = (
  respond: (prompt: string) => ReadonlyArray<Reference.Step>,
  capabilities?: Partial<Driver.Capabilities>
) =>
  Layer.unwrapScoped(Effect.map(Harness.sandbox, (sandbox) =>
    TetherLanguageModel.layer({
      driver: Reference.driver({ respond, ...(capabilities === undefined ? {} : { capabilities }) }),
      workspace: sandbox.workspace,
      profile: sandbox.selection
    }))).pipe(Layer.provide(Harness.layer))

const Answer = Schema.Struct({ count: Schema.Number, word: Schema.String })

describe("TetherLanguageModel generateObject edges", () => {
  it.live("an answer whose number overflows JSON (1e999) gets the repair turn, as any invalid value does", () =>
    Effect.gen(function*() {
      const prompts: Array<string> = []
      const exit = yield* Effect.exit(LanguageModel.generateObject({ prompt: "Count abc.", schema: Answer })).pipe(
        Effect.provide(modelLayer((prompt) => {
          prompts.push(prompt)
          return prompt.startsWith("Your previous answer")
            ? said("{\"count\":3,\"word\":\"abc\"}")
            : said("{\"count\":1e999,\"word\":\"abc\"}")
        }, { resume: true }))
      )
      expect(prompts.length).toBe(2)
      expect(Exit.isSuccess(exit) && exit.value.value).toEqual({ count: 3, word: "abc" })
      expect(yield* agentProcesses).toEqual([])
    }))

  it.live("without a repair turn, an overflowing number fails as MalformedOutput whose cause is the StructuredOutputError", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(LanguageModel.generateObject({ prompt: "Count abc.", schema: Answer }))
      expect(error._tag).toBe("MalformedOutput")
      const cause = (error as AiError.MalformedOutput).cause as { readonly _tag?: string } | undefined
      expect(cause?._tag).toBe("StructuredOutputError")
    }).pipe(Effect.provide(modelLayer(() => said("{\"count\":-1e999,\"word\":\"abc\"}")))))

  it.live("a schema whose encoding fails is a typed AiError, not a defect", () =>
    Effect.gen(function*() {
      // A one-way schema: @effect/ai only ever decodes what a model generated.
      const Parsed = Schema.transformOrFail(Schema.String, Schema.Number, {
        strict: true,
        decode: (s, _, ast) => {
          const n = Number(s)
          return Number.isNaN(n) ? ParseResult.fail(new ParseResult.Type(ast, s)) : ParseResult.succeed(n)
        },
        encode: (n, _, ast) => ParseResult.fail(new ParseResult.Forbidden(ast, n, "one-way"))
      })
      const OneWay = Schema.Struct({ count: Parsed })
      const exit = yield* Effect.exit(LanguageModel.generateObject({ prompt: "Count.", schema: OneWay }))
      // A failure @effect/ai's callers can catch (an AiError), not a defect.
      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(false)
      const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) as AiError.AiError : undefined
      expect(error?._tag).toBe("MalformedOutput")
      expect((error as AiError.MalformedOutput).description).toContain("does not encode with the Schema")
      expect(yield* agentProcesses).toEqual([])
    }).pipe(Effect.provide(modelLayer(() => said("{\"count\":\"3\"}")))))
})

// A Schema whose encoded side is `Unknown` (JSON Schema `{}`): its value encodes to a bigint,
// which JSON has no text for.
const Big = Schema.Struct({
  n: Schema.transform(Schema.Unknown, Schema.BigIntFromSelf, {
    strict: true,
    decode: (u) => BigInt(String(u)),
    encode: (b) => b
  })
})

describe("TetherLanguageModel generateObject, a value with no JSON text", () => {
  it.live("fails with MalformedOutput, never a defect", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(LanguageModel.generateObject({ prompt: "Count.", schema: Big }))
      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(false)
      const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) as AiError.AiError : undefined
      expect(error?._tag).toBe("MalformedOutput")
      expect((error as AiError.MalformedOutput).description).toContain("encodes to no JSON")
      expect(yield* agentProcesses).toEqual([])
    }).pipe(Effect.provide(modelLayer(() => said("{\"n\":5}"), { resume: true }))))
})

class Forecast extends Schema.Class<Forecast>("Forecast")({ city: Schema.String, celsius: Schema.Number }) {}
const Shape = Schema.Union(
  Schema.TaggedStruct("circle", { radius: Schema.Number }),
  Schema.TaggedStruct("square", { side: Schema.Number })
)

describe("TetherLanguageModel generateObject schemas", () => {
  it.live("a Schema.Class and a top-level union of tagged structs decode through both sides", () =>
    Effect.gen(function*() {
      const forecast = yield* LanguageModel.generateObject({ prompt: "Forecast.", schema: Forecast })
      expect(forecast.value).toBeInstanceOf(Forecast)
      expect(forecast.value.celsius).toBe(21)
      const shape = yield* LanguageModel.generateObject({ prompt: "Shape.", schema: Shape })
      expect(shape.value).toEqual({ _tag: "square", side: 2 })
      expect(yield* agentProcesses).toEqual([])
    }).pipe(Effect.provide(modelLayer((prompt) =>
      prompt.startsWith("Forecast.")
        ? said("{\"city\":\"Paris\",\"celsius\":21}")
        : said("{\"result\":{\"_tag\":\"square\",\"side\":2}}")
    ))))
})
