/**
 * Each TetherLanguageModel call on the reference driver (a real process replaying scripted
 * driver outputs) is its own agent: concurrent calls get their own answers, a consumer that stops
 * early leaves no process, and a request that cannot be served is an AiError, never a defect.
 */
import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as AiTool from "@effect/ai/Tool"
import * as AiTools from "@effect/ai/Toolkit"
import { describe, expect, it } from "@effect/vitest"
import { TetherLanguageModel } from "@tether/ai"
import { Harness, Reference } from "@tether/testing"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { agentProcesses } from "./fixtures/processes.js"

const modelLayer = (respond: (prompt: string) => ReadonlyArray<Reference.Step>, workspace?: string) =>
  Layer.unwrapScoped(Effect.map(Harness.sandbox, (sandbox) =>
    TetherLanguageModel.layer({
      driver: Reference.driver({ respond }),
      workspace: workspace ?? sandbox.workspace,
      profile: sandbox.selection
    }))).pipe(Layer.provide(Harness.layer))

const echo = modelLayer((prompt) => Reference.answer(prompt))

/** The tag of the AiError `effect` fails with; any other ending fails the test. */
const aiErrorOf = <A, R>(effect: Effect.Effect<A, AiError.AiError, R>) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(effect)
    expect(Exit.isFailure(exit)).toBe(true)
    const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : undefined
    expect(failure?._tag, Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "").toBe("Some")
    const error = (failure as { readonly value: unknown }).value
    expect(AiError.isAiError(error)).toBe(true)
    return (error as AiError.AiError)._tag
  })

/** A call with a one-tool toolkit and its handler. */
const withTool = (tool: AiTool.Any) => {
  const toolkit = AiTools.make(tool)
  return LanguageModel.generateText({ prompt: "hi", toolkit }).pipe(
    Effect.provide(toolkit.toLayer({ [tool.name]: () => Effect.void } as never))
  )
}

describe("TetherLanguageModel calls on the reference driver", () => {
  it.live("concurrent calls on one model each get their own answer", () =>
    Effect.gen(function*() {
      const prompts = ["one", "two", "three", "four"]
      const responses = yield* Effect.forEach(prompts, (prompt) => LanguageModel.generateText({ prompt }), {
        concurrency: "unbounded"
      })
      expect(responses.map((r) => r.text)).toEqual(prompts)
      expect(yield* agentProcesses).toEqual([])
    }).pipe(Effect.provide(echo)))

  it.live("a streamText consumer that takes the first delta and stops leaves no process", () =>
    Effect.gen(function*() {
      const parts = yield* LanguageModel.streamText({ prompt: "x" }).pipe(
        Stream.takeUntil((p) => p.type === "text-delta"),
        Stream.runCollect,
        Effect.map(Chunk.toReadonlyArray)
      )
      expect(parts.at(-1)?.type).toBe("text-delta")
      expect(yield* agentProcesses).toEqual([])
    }).pipe(Effect.provide(modelLayer(() => [
      { _tag: "SessionStarted", sessionId: "s-1", model: "reference-model" },
      { _tag: "TextDelta", text: "partial" },
      { _tag: "$hang" }
    ]))), 30_000)

  it.live("a workspace that does not exist is MalformedInput", () =>
    Effect.gen(function*() {
      expect(yield* aiErrorOf(LanguageModel.generateText({ prompt: "x" }))).toBe("MalformedInput")
    }).pipe(Effect.provide(modelLayer((prompt) => Reference.answer(prompt), "/nonexistent/workspace"))))

  it.live("a NUL in a system message, an invalid tool name, a tool without a description or JSON Schema: MalformedInput", () =>
    Effect.gen(function*() {
      expect(
        yield* aiErrorOf(LanguageModel.generateText({
          prompt: [{ role: "system", content: "a\0b" }, { role: "user", content: "hi" }]
        }))
      ).toBe("MalformedInput")
      expect(
        yield* aiErrorOf(withTool(AiTool.make("get weather", { description: "x", parameters: { a: Schema.String } })))
      ).toBe("MalformedInput")
      expect(yield* aiErrorOf(withTool(AiTool.make("nodesc", { parameters: { a: Schema.String } })))).toBe(
        "MalformedInput"
      )
      expect(
        yield* aiErrorOf(withTool(AiTool.make("big", { description: "x", parameters: { a: Schema.BigIntFromSelf } })))
      ).toBe("MalformedInput")
      expect(
        yield* aiErrorOf(
          LanguageModel.generateObject({ prompt: "hi", schema: Schema.Struct({ at: Schema.DateFromSelf }) })
        )
      ).toBe("MalformedInput")
    }).pipe(Effect.provide(echo)))
})
