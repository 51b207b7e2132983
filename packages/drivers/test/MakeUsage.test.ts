import { describe, expect, it } from "@effect/vitest"
import { Usage } from "@tether/core/Result"
import * as Equal from "effect/Equal"
import * as Hash from "effect/Hash"
import * as Schema from "effect/Schema"
import { addUsage, withCost } from "../src/internal/claudeLiveFrames.js"
import { usageFrom } from "../src/internal/lines.js"

// The parsers build every `Usage` with `usageFrom`; it must be the very instance the class's
// constructor builds (no validation) for every shape a parser gives it, and stay so if `Usage`
// changes (a default added to a field would make `{}` differ).
interface UsageFields {
  readonly inputTokens?: number | undefined
  readonly outputTokens?: number | undefined
  readonly cachedInputTokens?: number | undefined
  readonly reasoningTokens?: number | undefined
  readonly costUsd?: number | undefined
}

const shapes: ReadonlyArray<UsageFields> = [
  {},
  { inputTokens: 10 },
  { inputTokens: 10, outputTokens: 3 },
  { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0, costUsd: 0 },
  { outputTokens: 7, costUsd: 0.000123 },
  { inputTokens: 1, outputTokens: undefined }
]

/** `fast` is the instance the class's constructor built (`built`): equal, hashed, encoded alike. */
const expectSameUsage = (fast: Usage, built: Usage) => {
  expect(fast).toBeInstanceOf(Usage)
  expect(Object.getPrototypeOf(fast)).toBe(Usage.prototype)
  expect(Reflect.ownKeys(fast)).toEqual(Reflect.ownKeys(built))
  expect(Equal.equals(fast, built)).toBe(true)
  expect(Hash.hash(fast)).toBe(Hash.hash(built))
  expect(Schema.is(Usage)(fast)).toBe(true)
  expect(Schema.encodeSync(Usage)(fast)).toEqual(Schema.encodeSync(Usage)(built))
  // And what decoding the encoded form gives back.
  expect(Equal.equals(Schema.decodeSync(Usage)(Schema.encodeSync(Usage)(fast)), built)).toBe(true)
}

describe("usageFrom", () => {
  it.each(shapes)("usageFrom builds what new Usage gives for the defined fields: %o", (fields) => {
    const fast = usageFrom(
      fields.inputTokens,
      fields.outputTokens,
      fields.cachedInputTokens,
      fields.reasoningTokens,
      fields.costUsd
    )
    // A field given as `undefined` is absent, as the parsers leave a count not reported.
    const defined = Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined))
    expectSameUsage(fast, new Usage(defined, true))
  })

  it("Claude's live usage sums and cost share build what new Usage builds", () => {
    const a = usageFrom(10, 3, undefined, undefined, 0.5)
    const b = usageFrom(5, undefined, 2)
    expectSameUsage(
      addUsage(a, b)!,
      new Usage({ inputTokens: 15, outputTokens: 3, cachedInputTokens: 2, costUsd: 0.5 }, true)
    )
    expect(addUsage(a, undefined)).toBe(a)
    expect(addUsage(undefined, b)).toBe(b)
    expectSameUsage(withCost(a, 0.1 + 0.2), new Usage({ inputTokens: 10, outputTokens: 3, costUsd: 0.3 }, true))
  })
})
