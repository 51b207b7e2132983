/**
 * What the redactor scrubs however a token is hidden: nested deeper than its recursion goes (a
 * model nests a tool call's input as deep as it likes), in an error's `cause` chain (Effect's
 * loggers render it), and a tool call's log lines are no events of its span.
 */
import { describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as HashSet from "effect/HashSet"
import * as Logger from "effect/Logger"
import { randomBytes } from "node:crypto"
import * as Redact from "../src/internal/redact.js"

const marker = Gateway.redactionMarker
const fresh = () => randomBytes(32).toString("base64url")

/** A redactor over one live token. */
const withToken = () => {
  const tokens = new Redact.Tokens()
  const token = fresh()
  tokens.add(token)
  return { token, redactor: Redact.make(tokens) }
}

/** `leaf` inside `depth` levels, alternating arrays and objects. */
const nest = (leaf: unknown, depth: number): unknown => {
  let value = leaf
  for (let i = 0; i < depth; i++) value = i % 2 === 0 ? [value] : { level: value }
  return value
}
const leafOf = (value: unknown, depth: number): unknown => {
  let at = value
  for (let i = depth - 1; i >= 0; i--) at = i % 2 === 0 ? (at as Array<unknown>)[0] : (at as { level: unknown }).level
  return at
}

describe("Redaction past the depth of its recursion", () => {
  it("scrubs a token nested deeper than 256 levels, in values and keys, without exhausting the stack", () => {
    const { redactor, token } = withToken()
    for (const depth of [255, 257, 300, 1000, 100_000]) {
      const input = nest({ key: `refused ${token}`, [token]: 1, other: [`${token}!`, 2, null] }, depth)
      const out = redactor.value(input)
      // Compared by identity only: matchers walk a value this deep recursively.
      expect(out === input, `depth ${depth}`).toBe(false)
      expect(leafOf(out, depth), `depth ${depth}`).toEqual({
        key: `refused ${marker}`,
        [marker]: 1,
        other: [`${marker}!`, 2, null]
      })
      // The input is left as it was.
      expect((leafOf(input, depth) as { key: string }).key).toBe(`refused ${token}`)
      if (depth <= 1000) expect(JSON.stringify(out)).not.toContain(token)
    }
  })

  it("keeps a deep value with nothing to replace as the same reference, siblings shared", () => {
    const { redactor, token } = withToken()
    const clean = nest({ key: "nothing here", list: [1, "two", { three: 3 }] }, 2000)
    expect(redactor.value(clean) === clean).toBe(true)
    const shared = { untouched: ["a"] }
    const input = nest([shared, `x${token}`], 600)
    const out = leafOf(redactor.value(input), 600) as ReadonlyArray<unknown>
    expect(out[0]).toBe(shared)
    expect(out[1]).toBe(`x${marker}`)
  })

  it("ends on a cycle below the depth cap", () => {
    const { redactor, token } = withToken()
    const cyclic: { self?: unknown; key: string } = { key: token }
    cyclic.self = cyclic
    const out = redactor.value(cyclic) as { key: string }
    expect(out.key).toBe(marker)
  })
})

describe("Redaction of a cause chain", () => {
  it.effect("a token in an error's cause reaches no logger: the line is checked as loggers render it", () =>
    Effect.gen(function*() {
      const { redactor, token } = withToken()
      const lines: Array<string> = []
      const capture = Logger.make(({ cause }) => {
        lines.push(Cause.pretty(cause, { renderErrorCause: true }))
      })
      const logfmt = Logger.map(Logger.logfmtLogger, (line) => {
        lines.push(line)
      })
      const error = new Error("lookup failed", { cause: new Error(`upstream refused key ${token}`) })
      yield* Effect.logWarning("tool handler failed", Cause.fail(error)).pipe(
        redactor.logs,
        Effect.locally(FiberRef.currentLoggers, HashSet.make(capture, logfmt))
      )
      expect(lines).toHaveLength(2)
      for (const line of lines) {
        expect(line).toContain("lookup failed")
        expect(line).toContain(`upstream refused key ${marker}`)
        expect(line).not.toContain(token)
      }
      // A cause without a token is passed on as it is.
      let seen: Cause.Cause<unknown> | undefined
      const clean = Cause.fail(new Error("lookup failed", { cause: new Error("upstream refused") }))
      yield* Effect.logWarning("tool handler failed", clean).pipe(
        redactor.logs,
        Effect.locally(FiberRef.currentLoggers, HashSet.make(Logger.make(({ cause }) => (seen = cause))))
      )
      expect(seen).toBe(clean)
    }))
})

describe("A tool call's log lines", () => {
  it.effect("are no span events: Effect's tracer logger is left out, also where a redactor wrapped it", () =>
    Effect.gen(function*() {
      const { redactor } = withToken()
      const loggers = HashSet.make(Logger.defaultLogger, Logger.tracerLogger)
      expect([...Redact.withoutSpanEvents(loggers)]).toEqual([Logger.defaultLogger])
      const wrapped = yield* redactor.logs(FiberRef.get(FiberRef.currentLoggers)).pipe(
        Effect.locally(FiberRef.currentLoggers, loggers)
      )
      expect(HashSet.size(wrapped)).toBe(2)
      expect(HashSet.size(Redact.withoutSpanEvents(wrapped))).toBe(1)
      expect(HashSet.has(Redact.withoutSpanEvents(wrapped), Logger.tracerLogger)).toBe(false)
    }))
})
