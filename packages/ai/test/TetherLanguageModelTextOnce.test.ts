/**
 * The streamed answer text reaches @effect/ai once. The reference driver replays what the ACP
 * mapper emits for an agent that streams a preamble, then reasoning, before the preamble's
 * `Message` (codex-acp does: see TetherLanguageModelCodexAcp.test.ts): the `Message` closes a
 * block its deltas already streamed, so it must not become a second text block.
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import { describe, expect, it } from "@effect/vitest"
import { TetherLanguageModel } from "@tether/ai"
import type { Driver } from "@tether/core"
import { Harness, Reference } from "@tether/testing"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"

const terminal = (text: string): Driver.Output => ({
  _tag: "Terminal",
  ok: true,
  text,
  usage: { inputTokens: 3, outputTokens: 2 },
  model: "reference-model",
  session: "s-1",
  error: undefined,
  raw: {}
})

const steps: ReadonlyArray<Reference.Step> = [
  { _tag: "SessionStarted", sessionId: "s-1", model: "reference-model" },
  { _tag: "TextDelta", text: "I will " },
  { _tag: "TextDelta", text: "look." },
  { _tag: "ReasoningDelta", text: "Read the file first." },
  { _tag: "Message", role: "assistant", text: "I will look." },
  { _tag: "TextDelta", text: "Done." },
  { _tag: "Message", role: "assistant", text: "Done." },
  terminal("Done.")
]

const model = Layer.unwrapScoped(Effect.map(Harness.sandbox, (sandbox) =>
  TetherLanguageModel.layer({
    driver: Reference.driver({ respond: () => steps }),
    workspace: sandbox.workspace,
    profile: sandbox.selection
  }))).pipe(Layer.provide(Harness.layer))

describe("TetherLanguageModel text blocks", () => {
  it.live("generateText: text streamed before reasoning is not repeated by its Message", () =>
    Effect.gen(function*() {
      const response = yield* LanguageModel.generateText({ prompt: "Go." })
      expect(response.reasoningText).toBe("Read the file first.")
      expect(response.text).toBe("I will look.Done.")
    }).pipe(Effect.provide(model)))

  it.live("streamText: the deltas add up to the answer once", () =>
    Effect.gen(function*() {
      const parts = Chunk.toReadonlyArray(yield* LanguageModel.streamText({ prompt: "Go." }).pipe(Stream.runCollect))
      const text = parts.flatMap((part) => part.type === "text-delta" ? [part.delta] : []).join("")
      expect(text).toBe("I will look.Done.")
    }).pipe(Effect.provide(model)))
})
