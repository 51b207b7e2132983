/**
 * Extraction of the JSON value from an instruction driver's answer (docs/structured-output.md:
 * "the whole text, else the last JSON code block, else the last JSON object or array in it"),
 * through `agent.runAs` with the reference driver (a real process per attempt).
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type { Driver } from "@tether/core"
import { Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

const Review = Schema.Struct({
  verdict: Schema.Literal("draft", "final"),
  summary: Schema.String
})
const draft = { verdict: "draft", summary: "plain" }
// A markdown summary holding a code fence: its JSON string contains "```".
const final = { verdict: "final", summary: "Run:\n```sh\nnpm test\n```" }

/** The reference driver answering `texts` in turn, recording each invocation's prompt. */
const scripted = (texts: ReadonlyArray<string>) => {
  const prompts: Array<string> = []
  const base = Reference.driver({
    capabilities: { resume: true },
    respond: () => Reference.answer(texts[prompts.length - 1] ?? "", "session-1")
  })
  const driver: Driver.Driver = {
    ...base,
    prepare: (request) =>
      Effect.suspend(() => {
        prompts.push(request.prompt)
        return base.prepare(request)
      })
  }
  return { driver, prompts }
}

const runAs = (text: string) =>
  Effect.gen(function*() {
    const { driver, prompts } = scripted([text])
    const sandbox = yield* Harness.sandbox
    const agent = yield* Agent.make({
      driver,
      definition: { instructions: "Be brief.", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection
    })
    const outcome = yield* Effect.either(agent.runAs(Review, "Review the change.", { repairs: 0 }))
    return { outcome, prompts }
  }).pipe(Effect.scoped, Effect.provide(Harness.layer))

describe("JSON extraction from an instruction answer", () => {
  it.live("the last JSON code block wins when a JSON string in it holds ```", () =>
    Effect.gen(function*() {
      const text = `Draft:\n\`\`\`json\n${JSON.stringify(draft)}\n\`\`\`\nFinal:\n\`\`\`json\n${
        JSON.stringify(final)
      }\n\`\`\``
      const { outcome, prompts } = yield* runAs(text)
      expect(prompts).toHaveLength(1)
      expect(outcome._tag).toBe("Right")
      // The last JSON code block is the final one: the draft must not reach the caller.
      if (outcome._tag === "Right") expect(outcome.right.value).toEqual(final)
    }))

  it.live("a JSON code block holding ``` in a string is taken before a bracket in the prose after it", () =>
    Effect.gen(function*() {
      const text = `\`\`\`json\n${JSON.stringify(final)}\n\`\`\`\nSources: [1]`
      const { outcome } = yield* runAs(text)
      expect(outcome._tag === "Left" ? outcome.left.message : "decoded").toBe("decoded")
      if (outcome._tag === "Right") expect(outcome.right.value).toEqual(final)
    }))

  it.live("the last JSON object is found after many bracketed fragments of prose", () =>
    Effect.gen(function*() {
      const links = Array.from({ length: 70 }, (_, i) => `[doc ${i}](https://example.invalid/${i})`).join(", ")
      const text = `I read ${links}.\n\n${JSON.stringify(final)}`
      const { outcome } = yield* runAs(text)
      expect(outcome._tag === "Left" ? outcome.left.message : "decoded").toBe("decoded")
      if (outcome._tag === "Right") expect(outcome.right.value).toEqual(final)
    }))
})
