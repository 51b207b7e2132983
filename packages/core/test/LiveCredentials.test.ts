/**
 * DESIGN §12: each provider process runs on its own gateway credential, revoked when the process
 * ends; docs/threads.md: a live process ends after `live.idleTimeout` idle, past
 * `live.maxProcesses`, when its thread is closed or deleted, and a narrower policy replaces it.
 * Every warm process's credentials answer 401 after each of those ends.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, ThreadStore } from "@tether/core"
import { Gateway } from "@tether/gateway"
import { Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Tools, ToolsLive } from "./fixtures/threads.js"

const statuses = (credentials: ReadonlyArray<Harness.Observed>) => Effect.forEach(credentials, Harness.probe)

describe("live credentials at each end of a warm process", () => {
  it.live("policy change, thread close, thread delete, idle timeout and the cap revoke them", () => {
    const observed: Array<Harness.Observed> = []
    const credentials: Array<Harness.Observed> = []
    return Effect.gen(function*() {
      const gateway = yield* Gateway.Gateway
      // A bystander registration keeps the listener up, so a revoked token gets 401.
      yield* gateway.register(yield* Toolkit.executor(Tools))
      const sandbox = yield* Harness.sandbox
      const agent = yield* Agent.make({
        driver: Reference.driver({ live: true }),
        definition: { instructions: "", skills: [], tools: Tools },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        processes: { killGrace: "500 millis" },
        live: { idleTimeout: "3 seconds", maxProcesses: 2 }
      })
      const a = yield* agent.thread("a")
      yield* a.run("one")
      const first = credentials.slice()
      expect(first.length).toBeGreaterThan(0)
      expect(yield* statuses(first)).toEqual(first.map(() => 200))
      // A narrower policy: a new process; the old one's credentials are revoked.
      yield* a.run({ input: "two", toolPolicy: { allow: ["lookup_issue"] } })
      const second = credentials.slice(first.length)
      expect(second.length).toBeGreaterThan(0)
      expect({ policyChange: yield* statuses(first) }).toEqual({ policyChange: first.map(() => 401) })
      yield* a.close
      expect({ threadClose: yield* statuses(second) }).toEqual({ threadClose: second.map(() => 401) })
      const b = yield* agent.thread("b")
      let mark = credentials.length
      yield* b.run("three")
      const third = credentials.slice(mark)
      yield* b.delete
      expect({ threadDelete: yield* statuses(third) }).toEqual({ threadDelete: third.map(() => 401) })
      // The cap (2): c, d, then e shuts c's process down.
      mark = credentials.length
      yield* (yield* agent.thread("c")).run("four")
      const fourth = credentials.slice(mark)
      yield* (yield* agent.thread("d")).run("five")
      mark = credentials.length
      yield* (yield* agent.thread("e")).run("six")
      const sixth = credentials.slice(mark)
      expect({ cap: yield* statuses(fourth) }).toEqual({ cap: fourth.map(() => 401) })
      // Idle past the timeout.
      yield* Effect.sleep("4500 millis")
      expect({ idle: yield* statuses(sixth) }).toEqual({ idle: sixth.map(() => 401) })
      expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
      yield* agent.close()
    }).pipe(
      Effect.scoped,
      Effect.provide(
        Layer.mergeAll(ToolsLive, Harness.recordingLayer(observed, { credentials }), ThreadStore.layerMemory)
      )
    )
  }, 60_000)
})
