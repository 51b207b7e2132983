/**
 * Harness.sandbox cleanup when the test body fails or is interrupted, and the conformance suite
 * against a user's broken driver: a clause whose turn never ends fails by name within
 * `clauseTimeout` (it hung until the test's timeout). Public exports of @tether/testing only.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Conformance, FakeCli, Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as NodeFs from "node:fs"

describe("Harness.sandbox", () => {
  it.live("is removed when the test body fails, and when it is interrupted mid-run", () =>
    Effect.gen(function*() {
      let failed = ""
      const exit = yield* Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        failed = sandbox.base
        NodeFs.writeFileSync(`${sandbox.workspace}/file.txt`, "x")
        return yield* Effect.fail("boom")
      }).pipe(Effect.scoped, Effect.exit)
      expect(exit._tag).toBe("Failure")
      expect(NodeFs.existsSync(failed)).toBe(false)

      let interrupted = ""
      const running = yield* Deferred.make<void>()
      const fiber = yield* Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        interrupted = sandbox.base
        const agent = yield* Agent.make({
          driver: FakeCli.driver(),
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        yield* Deferred.succeed(running, undefined)
        return yield* agent.run(FakeCli.script({ op: "text", text: "hi" }, { op: "sleep", ms: 60_000 }))
      }).pipe(Effect.scoped, Effect.provide(Harness.layer), Effect.fork)
      yield* Deferred.await(running)
      yield* Effect.sleep("1 second")
      yield* Fiber.interrupt(fiber)
      expect(interrupted).not.toBe("")
      expect(NodeFs.existsSync(interrupted)).toBe(false)
    }), 30_000)
})

describe("Conformance against a user's broken driver", () => {
  it.live(
    "a driver whose CLI never ends its plain turn: C1 fails with a ConformanceFailure instead of hanging",
    () =>
      Effect.gen(function*() {
        const hanging = Reference.driver({
          respond: (prompt) => prompt === "Say hi." ? [{ _tag: "$hang" }] : Reference.answer(prompt)
        })
        const subject: Conformance.Subject = {
          driver: hanging,
          plain: "Say hi.",
          slow: "Say hi.",
          clauseTimeout: "1 second"
        }
        const c1 = Conformance.clauses(subject).find((clause) => clause.id === "C1")!
        const outcome = yield* c1.run.pipe(Effect.flip, Effect.timeout("20 seconds"), Effect.option)
        expect(outcome).toMatchObject({
          _tag: "Some",
          value: { _tag: "ConformanceFailure", clause: "C1", detail: "not done within 1s" }
        })
      }),
    60_000
  )
})
