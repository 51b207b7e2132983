// A live turn interrupted while its freshly opened process waits for room in the pool (the least
// recently used idle process being shut down for `live.maxProcesses`) leaves that process in the
// pool, released: the idle timeout ends it. Before, it stayed outside the pool, busy, until the
// agent closed: neither the idle timeout nor the cap ever ended it.
//
// A warm process that dies on its own while idle between turns (a crash, the OOM killer) is shut
// down when it ends: its credentials are revoked and what its group left running is reaped (DESIGN
// §12: "minted at spawn, revoked when the process ends"), not at the idle timeout, the cap, the
// thread's next turn or the agent's close.
import { describe, expect, it } from "@effect/vitest"
import { Agent, ThreadStore } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import type * as Event from "@tether/core/Event"
import { Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { withThreads } from "./fixtures/threadTest.js"

describe("the live pool", () => {
  it.live("a turn interrupted while its new process waits for room leaves no live process behind", () => {
    const driver = Reference.driver({
      live: true,
      // "slow-exit": answers, then its CLI ignores the end of stdin and SIGTERM (a CLI slow to shut
      // down), so shutting it down for room takes the kill grace twice.
      respond: (prompt) =>
        prompt === "slow-exit" ? [...Reference.answer(prompt), { _tag: "$hang" }] : Reference.answer(prompt)
    })
    return withThreads(() => ThreadStore.layerMemory, ({ make }) =>
      Effect.gen(function*() {
        const agent = yield* make(driver, {
          live: { maxProcesses: 1, idleTimeout: "1 second" },
          processes: { killGrace: "1 second" }
        })
        const a = yield* agent.thread("a")
        yield* a.run("slow-exit")
        const [slow] = yield* Harness.markedProcesses(agent.marker)
        expect(slow).toBeDefined()
        const b = yield* agent.thread("b")
        // b's first turn opens a second process; adding it shuts a's (idle) one down for room.
        const turn = yield* Effect.fork(Effect.either(b.run("hello")))
        while ((yield* Harness.markedProcesses(agent.marker)).length < 2) yield* Effect.sleep("20 millis")
        yield* Effect.sleep("300 millis")
        // a's process is still being shut down (SIGTERM ignored): b's turn waits for room.
        expect(yield* Harness.markedProcesses(agent.marker)).toHaveLength(2)
        yield* Fiber.interrupt(turn)
        // a's process is gone once killed; b's is released to the pool, and its idle timeout (1 s)
        // ends it: with every turn ended, nothing live is left well within 8 s.
        for (let i = 0; i < 80 && (yield* Harness.markedProcesses(agent.marker)).length > 0; i++) {
          yield* Effect.sleep("100 millis")
        }
        expect(yield* Harness.isAlive(slow!)).toBe(false)
        expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
      }))
  }, 60_000)
})

/** The reference live driver, its CLI started by a shell that leaves a background helper behind. */
const withHelper = (base: Driver.Driver): Driver.Driver => ({
  ...base,
  live: {
    ...base.live!,
    open: (request) =>
      Effect.map(base.live!.open(request), (invocation) => ({
        ...invocation,
        command: "/bin/sh",
        args: [
          "-c",
          // A helper the CLI started (an MCP server, a watcher): detached from stdout, so the pipe ends with the CLI.
          `sleep 300 </dev/null >/dev/null 2>&1 & exec "$0" "$@"`,
          invocation.command,
          ...invocation.args
        ]
      }))
  }
})

describe("the live pool: a warm process that ends between turns", () => {
  it.live(
    "is shut down when it ends (credentials revoked, group reaped), not at the idle timeout",
    () =>
      Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        const observed: Array<Harness.Observed> = []
        const credentials: Array<Harness.Observed> = []
        const outcome = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: withHelper(Reference.driver({ live: true })),
            definition: { instructions: "", tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            live: { idleTimeout: "5 minutes" },
            processes: { killGrace: "500 millis" }
          })
          const thread = yield* agent.thread("k")
          const events = Array.from(yield* Stream.runCollect(thread.stream("hello")))
          const started = events.find((e): e is Event.ProcessStarted => e._tag === "ProcessStarted")!
          expect(events.at(-1)).toMatchObject({ _tag: "RunFinished", outcome: "success" })
          const before = yield* Harness.markedProcesses(agent.marker)
          expect(before).toContain(started.pid)
          expect(before.length).toBeGreaterThanOrEqual(2) // the CLI and its helper
          expect(credentials.length).toBeGreaterThan(0)
          for (const credential of credentials) expect(yield* Harness.probe(credential)).toBe(200)
          // The warm CLI dies on its own while idle.
          process.kill(started.pid, "SIGKILL")
          yield* Effect.sleep("3 seconds")
          const statuses: Array<number> = []
          for (const credential of credentials) statuses.push(yield* Harness.probe(credential))
          const left = yield* Harness.markedProcesses(agent.marker)
          yield* agent.close()
          return { statuses, left }
        }).pipe(
          Effect.scoped,
          Effect.provide(Layer.mergeAll(Harness.recordingLayer(observed, { credentials }), ThreadStore.layerMemory))
        )
        expect({ credentials: outcome.statuses, leftoverProcesses: outcome.left.length }).toEqual({
          credentials: outcome.statuses.map(() => 401),
          leftoverProcesses: 0
        })
      }).pipe(Effect.scoped),
    30_000
  )
})
