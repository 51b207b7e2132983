/**
 * The delta state machine of `makeOutputScrubber` against a real gateway redactor, by property:
 * random interleavings of text and reasoning deltas (cut anywhere, empty ones, split surrogate
 * pairs, short token pieces, whole tokens) with other events.
 */
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Gateway } from "@tether/gateway"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Redacted from "effect/Redacted"
import * as Redaction from "../src/internal/redaction.js"

const marker = Gateway.redactionMarker

const liveTokens = (n: number) =>
  Effect.gen(function*() {
    const gateway = yield* Gateway.make()
    const tokens: Array<string> = []
    for (let i = 0; i < n; i++) {
      const registration = yield* gateway.register(yield* Toolkit.executor(Toolkit.empty))
      tokens.push(Redacted.value(registration.token))
    }
    return { redactor: gateway.redactor, tokens }
  })

type Kind = "TextDelta" | "ReasoningDelta"

const segment = (tokens: ReadonlyArray<string>) =>
  FastCheck.oneof(
    FastCheck.constantFrom("a", " ", "key=", "é", "😀", "\n", "-", "_", "x".repeat(9)),
    FastCheck.record({
      t: FastCheck.nat({ max: tokens.length - 1 }),
      from: FastCheck.nat({ max: 42 }),
      len: FastCheck.integer({ min: 1, max: 7 })
    })
      .map(({ from, len, t }) => tokens[t]!.slice(from, from + len)),
    FastCheck.nat({ max: tokens.length - 1 }).map((t) => ({ token: tokens[t]! }))
  )

const streamOf = (tokens: ReadonlyArray<string>) =>
  FastCheck.array(segment(tokens), { maxLength: 12 }).map((segments) => {
    let text = ""
    const at: Array<{ p: number; token: string }> = []
    for (const s of segments) {
      if (typeof s === "string") text += s
      else {
        at.push({ p: text.length, token: s.token })
        text += s.token
      }
    }
    return { text, at }
  })

/** `text` cut into `n` pieces at sorted code-unit positions (empty pieces and split surrogates included). */
const cutsOf = FastCheck.array(FastCheck.double({ min: 0, max: 1, noNaN: true }), { maxLength: 10 })
const cut = (text: string, fractions: ReadonlyArray<number>): Array<string> => {
  const points = fractions.map((f) => Math.floor(f * text.length)).sort((a, b) => a - b)
  const out: Array<string> = []
  let from = 0
  for (const p of points) {
    out.push(text.slice(from, p))
    from = p
  }
  out.push(text.slice(from))
  return out
}

const hasPieceOf8 = (text: string, tokens: ReadonlyArray<string>): boolean =>
  tokens.some((t) => {
    for (let i = 0; i + 8 <= 43; i++) if (text.includes(t.slice(i, i + 8))) return true
    return false
  })

const run = (
  redactor: Gateway.Redactor,
  text: ReadonlyArray<string>,
  reasoning: ReadonlyArray<string>,
  order: ReadonlyArray<number>,
  events: ReadonlyArray<"ToolCall" | "Notice" | "Usage" | "Terminal">,
  terminal: boolean
) => {
  const outputs: Array<Driver.Output> = []
  const sink = (o: Driver.Output) => outputs.push(o)
  const scrubber = Redaction.makeOutputScrubber(redactor)
  const queues = { TextDelta: [...text], ReasoningDelta: [...reasoning] }
  const sentIn = { TextDelta: "", ReasoningDelta: "" }
  // Per non-delta event: what of each kind the CLI wrote before it, and what had gone out before it.
  const checkpoints: Array<{ input: typeof sentIn; output: typeof sentIn }> = []
  const joined = (kind: Kind) => outputs.flatMap((o) => o._tag === kind ? [(o as { text: string }).text] : []).join("")
  let e = 0
  const event = (which: "ToolCall" | "Notice" | "Usage" | "Terminal"): Driver.Output =>
    which === "Terminal"
      ? { _tag: "Terminal", ok: true, text: "done", raw: {} } as never
      : which === "ToolCall"
      ? { _tag: "ToolCall", phase: "start", callId: "c", name: "env", source: "builtin", input: {} } as never
      : which === "Notice"
      ? { _tag: "Notice", level: "info", kind: "k", message: "m" } as never
      : { _tag: "Usage", usage: { inputTokens: 1 } } as never
  for (const o of order) {
    const kind: Kind | undefined = o % 3 === 0 ? "TextDelta" : o % 3 === 1 ? "ReasoningDelta" : undefined
    if (kind !== undefined) {
      const next = queues[kind].shift()
      if (next === undefined) continue
      sentIn[kind] += next
      scrubber.push({ _tag: kind, text: next }, sink)
    } else {
      const out = event(events[e++ % events.length] ?? "Usage")
      scrubber.push(out, sink)
      checkpoints.push({
        input: { ...sentIn },
        output: { TextDelta: joined("TextDelta"), ReasoningDelta: joined("ReasoningDelta") }
      })
    }
  }
  for (const kind of ["TextDelta", "ReasoningDelta"] as const) {
    for (const next of queues[kind]) scrubber.push({ _tag: kind, text: next }, sink)
  }
  if (terminal) scrubber.push({ _tag: "Terminal", ok: true, text: "done", raw: {} } as never, sink)
  scrubber.flush(sink)
  return { outputs, checkpoints, text: joined("TextDelta"), reasoning: joined("ReasoningDelta") }
}

describe("The output scrubber's deltas", () => {
  for (const n of [1, 10]) {
    it.live(`${n} live token(s): clean text unchanged and in order; a whole token has no piece past its 7th character`, () =>
      Effect.gen(function*() {
        const { redactor, tokens } = yield* liveTokens(n)
        FastCheck.assert(
          FastCheck.property(
            streamOf(tokens),
            streamOf(tokens),
            cutsOf,
            cutsOf,
            FastCheck.array(FastCheck.nat({ max: 2 }), { maxLength: 30 }),
            FastCheck.array(FastCheck.constantFrom("ToolCall" as const, "Notice" as const, "Usage" as const), {
              minLength: 1
            }),
            FastCheck.boolean(),
            (ts, rs, tc, rc, order, events, terminal) => {
              const result = run(redactor, cut(ts.text, tc), cut(rs.text, rc), order, events, terminal)
              for (const [input, output] of [[ts, result.text], [rs, result.reasoning]] as const) {
                if (input.at.length === 0 && !hasPieceOf8(input.text, tokens)) {
                  // Ordinary text comes out exactly as written, joined.
                  expect(output).toBe(input.text)
                }
                for (const { p } of input.at) {
                  // Every character of the token from the 8th on went out as the marker's.
                  expect(output.slice(p + 7, p + 43)).toBe(marker.slice(7))
                }
                for (const t of tokens) expect(output.includes(t)).toBe(false)
              }
              if (!hasPieceOf8(ts.text + "\u0000" + rs.text, tokens) && ts.at.length + rs.at.length === 0) {
                // Nothing held back past an event: all that came before it went out before it.
                for (const c of result.checkpoints) {
                  expect(c.output.TextDelta).toBe(c.input.TextDelta)
                  expect(c.output.ReasoningDelta).toBe(c.input.ReasoningDelta)
                }
              }
            }
          ),
          { numRuns: 3000 }
        )
      }).pipe(Effect.scoped))
  }

  it.live("10 live tokens, a terminal record anywhere: no 8-character piece of a whole token written goes out", () =>
    Effect.gen(function*() {
      const { redactor, tokens } = yield* liveTokens(10)
      const plain = FastCheck.array(
        FastCheck.oneof(
          FastCheck.constantFrom("a", " ", "é", "😀", "-", "_"),
          FastCheck.nat({ max: 9 }).map((t) => ({ token: tokens[t]! }))
        ),
        { maxLength: 8 }
      ).map((segments) => segments.map((s) => typeof s === "string" ? s : s.token).join(""))
      FastCheck.assert(
        FastCheck.property(
          plain,
          plain,
          cutsOf,
          cutsOf,
          FastCheck.array(FastCheck.nat({ max: 2 }), { maxLength: 30 }),
          FastCheck.array(FastCheck.constantFrom("ToolCall" as const, "Terminal" as const, "Usage" as const), {
            minLength: 1
          }),
          (ts, rs, tc, rc, order, events) => {
            const result = run(redactor, cut(ts, tc), cut(rs, rc), order, events, false)
            expect(hasPieceOf8(result.text, tokens)).toBe(false)
            expect(hasPieceOf8(result.reasoning, tokens)).toBe(false)
          }
        ),
        { numRuns: 5000 }
      )
    }).pipe(Effect.scoped))
})
