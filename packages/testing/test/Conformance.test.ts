import { describe, expect, it } from "@effect/vitest"
import type { Driver } from "@tether/core"
import { ProtocolError } from "@tether/core/Driver"
import { Conformance, FakeCli, Reference } from "@tether/testing"
import * as Effect from "effect/Effect"

/** The live reference driver's provider: `slow` works a minute, `CALL <ms>` calls `wait`. */
const liveRespond = (prompt: string): ReadonlyArray<Reference.Step> => {
  const call = /^CALL (\d+)$/.exec(prompt)
  return prompt === "slow"
    ? [{ _tag: "$sleep", ms: 60_000 }]
    : prompt === "crash"
    ? [{ _tag: "Message", role: "assistant", text: "partial" }, { _tag: "$exit", code: 9 }]
    : call !== null
    ? [{ _tag: "$call", tool: "wait", input: { ms: Number(call[1]) } }, ...Reference.answer("FINAL")]
    : Reference.answer(prompt)
}
const liveReference = Reference.driver({ live: true, respond: liveRespond })
const liveSubject: Conformance.Subject = {
  driver: liveReference,
  plain: "hello",
  plainText: "hello",
  slow: "slow",
  crash: "crash",
  live: { callWait: (ms) => `CALL ${ms}` }
}

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
  it("has the ten numbered clauses", () => {
    expect(clauses.map((clause) => clause.id)).toEqual(["C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9", "C10"])
  })
  for (const clause of clauses) it.live(`${clause.id} ${clause.title}`, () => clause.run)
})

describe("the live reference driver passes the conformance suite, live clauses included", () => {
  const clauses = Conformance.clauses(liveSubject)
  it("has the ten numbered clauses and the five live ones", () => {
    expect(clauses.map((clause) => clause.id)).toEqual([
      ...["C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9", "C10"],
      ...["L1", "L2", "L3", "L4", "L5"]
    ])
  })
  for (const clause of clauses) it.live(`${clause.id} ${clause.title}`, () => clause.run, 30_000)
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

/** The fake CLI, but its CLI appends to its materialized `mcp.json` first: core keeps the clone. */
const cloneKeeping = (): Driver.Driver => {
  const fake = FakeCli.driver()
  return {
    ...fake,
    prepare: (request) =>
      Effect.map(fake.prepare(request), (spec) => ({
        ...spec,
        command: "/bin/sh",
        args: ["-c", `printf '\\n' >> "$${FakeCli.selectorEnv}/mcp.json" && exec "$0" "$@"`, spec.command, ...spec.args]
      }))
  }
}

describe("the suite can fail", () => {
  it.live("a driver whose CLI changes its materialized file (the clone is retained) fails C4", () =>
    Effect.gen(function*() {
      const subject: Conformance.Subject = {
        driver: cloneKeeping(),
        plain: FakeCli.script({ op: "text", text: "plain answer" }),
        slow: FakeCli.script({ op: "sleep", ms: 60_000 })
      }
      const clause = Conformance.clauses(subject).find((c) => c.id === "C4")!
      const error = yield* Effect.flip(clause.run)
      expect(error).toMatchObject({ _tag: "ConformanceFailure", clause: "C4" })
      expect(String((error as Conformance.ConformanceFailure).detail)).toMatch(/^clones left: /)
    }))

  it.live("a driver that loses its terminal record fails C2", () =>
    Effect.gen(function*() {
      const broken = Reference.driver({ respond: (prompt) => Reference.answer(prompt).slice(0, 3) })
      const clause = Conformance.clauses({ driver: broken, plain: "x", slow: "x" }).find((c) => c.id === "C2")!
      const error = yield* Effect.flip(clause.run)
      expect(error).toMatchObject({ _tag: "RunError", reason: "ExitedWithoutResult" })
    }))

  it.live("a live driver whose interrupt does not keep the process fails L2", () =>
    Effect.gen(function*() {
      const live = liveReference.live!
      const broken = {
        ...liveReference,
        live: {
          ...live,
          attach: (...args: Parameters<typeof live.attach>) =>
            Effect.map(live.attach(...args), (session) => ({
              ...session,
              interrupt: Effect.fail(new ProtocolError({ reason: "ProviderError", detail: "no interrupt" }))
            }))
        }
      }
      const clause = Conformance.clauses({ ...liveSubject, driver: broken }).find((c) => c.id === "L2")!
      const error = yield* Effect.flip(clause.run)
      expect(error).toMatchObject({ _tag: "ConformanceFailure", clause: "L2" })
    }), 30_000)
})
