import { describe, expect, it } from "@effect/vitest"
import { Conformance, FakeCli, Reference } from "@tether/testing"
import * as Effect from "effect/Effect"

describe("the reference driver passes the conformance suite", () => {
  const subject: Conformance.Subject = {
    driver: Reference.driver({
      respond: (prompt) =>
        prompt === "slow"
          ? [{ _tag: "SessionStarted", sessionId: "s", model: undefined }, { _tag: "$sleep", ms: 60_000 }]
          : prompt === "crash"
          ? [{ _tag: "Message", role: "assistant", text: "partial" }, { _tag: "$exit", code: 9 }]
          : Reference.answer(prompt)
    }),
    plain: "hello",
    plainText: "hello",
    slow: "slow",
    crash: "crash"
  }
  const clauses = Conformance.clauses(subject)
  it("has the eight numbered clauses", () => {
    expect(clauses.map((clause) => clause.id)).toEqual(["C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8"])
  })
  for (const clause of clauses) it.live(`${clause.id} ${clause.title}`, () => clause.run)
})

describe("the fake CLI driver passes the conformance suite", () => {
  const subject: Conformance.Subject = {
    driver: FakeCli.driver(),
    plain: FakeCli.script({ op: "text", text: "plain answer" }),
    plainText: "plain answer",
    slow: FakeCli.script({ op: "sleep", ms: 60_000 }),
    crash: FakeCli.script({ op: "text", text: "partial" }, { op: "crash", code: 4 })
  }
  for (const clause of Conformance.clauses(subject)) it.live(`${clause.id} ${clause.title}`, () => clause.run)
})

describe("the suite can fail", () => {
  it.live("a driver that loses its terminal record fails C2", () =>
    Effect.gen(function*() {
      const broken = Reference.driver({ respond: (prompt) => Reference.answer(prompt).slice(0, 3) })
      const clause = Conformance.clauses({ driver: broken, plain: "x", slow: "x" }).find((c) => c.id === "C2")!
      const error = yield* Effect.flip(clause.run)
      expect(error).toMatchObject({ _tag: "RunError", reason: "ExitedWithoutResult" })
    }))
})
