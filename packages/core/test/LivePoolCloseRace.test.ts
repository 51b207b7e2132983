// The agent's close while a turn's freshly opened live process waits for room in the pool
// (maxProcesses 1: the idle one is being shut down). The close's retireAll runs before that
// process is in the pool: the close still leaves no process, and its credentials are refused.
import { describe, expect, it } from "@effect/vitest"
import { Agent, ThreadStore } from "@tether/core"
import { Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"

describe("the live pool at the agent's close", () => {
  it.live("a process added while the close ran is shut down by the close", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const observed: Array<Harness.Observed> = []
      const credentials: Array<Harness.Observed> = []
      const outcome = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver: Reference.driver({
            live: true,
            respond: (prompt) =>
              prompt === "slow-exit" ? [...Reference.answer(prompt), { _tag: "$hang" }] : Reference.answer(prompt)
          }),
          definition: { instructions: "", tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection,
          live: { maxProcesses: 1, idleTimeout: "5 minutes" },
          processes: { killGrace: "1 second" }
        })
        const a = yield* agent.thread("a")
        yield* a.run("slow-exit")
        const b = yield* agent.thread("b")
        const turn = yield* Effect.fork(Effect.either(b.run("hello")))
        while ((yield* Harness.markedProcesses(agent.marker)).length < 2) yield* Effect.sleep("20 millis")
        yield* Effect.sleep("300 millis")
        const started = Date.now()
        const closed = yield* Effect.either(agent.close())
        yield* Fiber.await(turn)
        const left = yield* Harness.markedProcesses(agent.marker)
        const statuses: Array<number> = []
        for (const credential of credentials) statuses.push(yield* Harness.probe(credential))
        return { closed: closed._tag, left, statuses, took: Date.now() - started }
      }).pipe(
        Effect.scoped,
        Effect.provide(Layer.mergeAll(Harness.recordingLayer(observed, { credentials }), ThreadStore.layerMemory))
      )
      expect({ closed: outcome.closed, left: outcome.left, statuses: outcome.statuses }).toEqual({
        closed: "Right",
        left: [],
        statuses: outcome.statuses.map((s) => (s === 0 ? 0 : 401))
      })
    }).pipe(Effect.scoped), 60_000)
})
