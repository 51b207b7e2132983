/**
 * A long-running host: many live thread keys on one agent (the reference driver's
 * live member: one warm process per thread), handles closed and not closed, some turns canceled.
 * Processes stay within `live.maxProcesses`, all go after the idle timeout, and no listener
 * warning is emitted.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"

const processes = () => process.getActiveResourcesInfo().filter((name) => name === "ProcessWrap").length

const respond = (prompt: string): ReadonlyArray<Reference.Step> =>
  prompt === "slow" ? [{ _tag: "$sleep", ms: 10_000 }, ...Reference.answer(prompt)] : Reference.answer(prompt)

describe("many live keys", () => {
  it.live("processes stay within the cap and go when idle; no listener warnings", () =>
    Effect.gen(function*() {
      const warnings: Array<string> = []
      const onWarning = (warning: Error) => warnings.push(warning.name)
      process.on("warning", onWarning)
      yield* Effect.addFinalizer(() => Effect.sync(() => process.off("warning", onWarning)))
      const sandbox = yield* Harness.sandbox
      const agent = yield* Agent.make({
        driver: Reference.driver({ live: true, respond }),
        definition: { instructions: "", skills: [], tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        live: { maxProcesses: 3, idleTimeout: "300 millis" },
        processes: { killGrace: "500 millis", exitGrace: "500 millis" }
      })
      const baseline = processes()
      let peak = 0
      for (let i = 0; i < 40; i++) {
        const thread = yield* agent.thread(`key-${i}`)
        for (let turn = 0; turn < 3; turn++) {
          const result = yield* thread.run(`hello ${i}/${turn}`)
          expect(result.text).toBe(`hello ${i}/${turn}`)
        }
        if (i % 5 === 0) {
          const cancel = yield* Deferred.make<void>()
          const fiber = yield* Effect.fork(Effect.flip(thread.run({ input: "slow", cancel: Deferred.await(cancel) })))
          yield* Effect.sleep("100 millis")
          yield* Deferred.succeed(cancel, undefined)
          const error = yield* fiber.await
          expect(error._tag).toBe("Success")
        }
        peak = Math.max(peak, processes() - baseline)
        if (i % 2 === 0) yield* thread.close
      }
      expect(peak).toBeLessThanOrEqual(3)
      yield* Effect.sync(() => processes() - baseline).pipe(
        Effect.repeat({
          until: (n) => n <= 0,
          schedule: Schedule.spaced("100 millis").pipe(Schedule.upTo("5 seconds"))
        })
      )
      expect(processes() - baseline).toBeLessThanOrEqual(0)
      expect(warnings).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(Harness.layer)), 60_000)
})
