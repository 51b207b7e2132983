import { describe, expect, it } from "@effect/vitest"
import { Agent, Event, Result } from "@tether/core"
import type { Driver } from "@tether/core"
import { FakeCli, Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Equal from "effect/Equal"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"

const withSandbox = <A, E>(
  body: (sandbox: Harness.Sandbox) => Effect.Effect<A, E, Agent.Requirements>
) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    return yield* body(sandbox).pipe(Effect.scoped, Effect.provide(Harness.layer))
  }).pipe(Effect.scoped)

const options = (sandbox: Harness.Sandbox, driver: Driver.Driver = Reference.driver()) => ({
  driver,
  definition: { instructions: "Be brief.", skills: [], tools: Toolkit.empty },
  workspace: sandbox.workspace,
  profile: sandbox.selection
})

const deltas = (count: number): ReadonlyArray<Reference.Step> => [
  { _tag: "SessionStarted", sessionId: "s", model: undefined },
  ...Array.from({ length: count }, (_, i): Reference.Step => ({ _tag: "TextDelta", text: `d${i} ` })),
  { _tag: "Message", role: "assistant", text: "all" },
  ...Reference.answer("all").slice(3)
]

describe("Agent.make validates and freezes the definition before any I/O", () => {
  it.live("invalid definitions and options are AgentConfigError, unsupported asks UnsupportedCapability", () =>
    withSandbox((sandbox) =>
      Effect.gen(function*() {
        const skills = yield* Effect.flip(Agent.make({
          ...options(sandbox),
          definition: {
            instructions: "",
            skills: [{ name: "x" }] as unknown as ReadonlyArray<never>,
            tools: Toolkit.empty
          }
        }))
        expect(skills).toMatchObject({ _tag: "AgentConfigError", reason: "InvalidDefinition" })
        const relative = yield* Effect.flip(Agent.make({ ...options(sandbox), workspace: "relative/dir" }))
        expect(relative).toMatchObject({ _tag: "AgentConfigError", reason: "InvalidOptions" })
        const missing = yield* Effect.flip(Agent.make({ ...options(sandbox), workspace: `${sandbox.base}/absent` }))
        expect(missing).toMatchObject({ _tag: "AgentConfigError", reason: "InvalidOptions" })
        const sandboxLevel = yield* Effect.flip(
          Agent.make({ ...options(sandbox), policy: { sandbox: "unrestricted" } })
        )
        expect(sandboxLevel).toMatchObject({ _tag: "UnsupportedCapability", capability: "sandbox" })
        const noHttp = Reference.driver({ capabilities: { mcpTransports: ["stdio"] } })
        const transport = yield* Effect.flip(Agent.make(options(sandbox, noHttp)))
        expect(transport).toMatchObject({ _tag: "UnsupportedCapability", capability: "mcpTransports" })
        // Malformed approvals are invalid options, named, before any capability check.
        for (
          const [approvals, named] of [
            [{ deadline: "soon" }, "approvals.deadline"],
            [{ deadline: -5 }, "approvals.deadline"],
            [{ fallback: { _tag: "Maybe" } }, "approvals.fallback"],
            [{ handler: "allow" }, "approvals.handler"]
          ] as const
        ) {
          const invalid = yield* Effect.flip(Agent.make({ ...options(sandbox), approvals: approvals as never }))
          expect(invalid).toMatchObject({ _tag: "AgentConfigError", reason: "InvalidOptions" })
          expect(invalid.message).toContain(named)
        }
        // The reference driver has no approval mechanism: approvals cannot be honoured.
        const approvals = yield* Effect.flip(Agent.make({ ...options(sandbox), approvals: {} }))
        expect(approvals).toMatchObject({ _tag: "UnsupportedCapability", capability: "approvals" })
        // Nothing was acquired by the refused constructions.
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
      })
    ))

  it.live("the definition view is deep-frozen and independent of the caller's object", () =>
    withSandbox((sandbox) =>
      Effect.gen(function*() {
        const definition = { instructions: "Original.", skills: [], tools: Toolkit.empty }
        const agent = yield* Agent.make({ ...options(sandbox), definition, identity: { id: "a-1", tenant: "t" } })
        ;(definition as { instructions: string }).instructions = "Changed."
        expect(agent.definition.instructions).toBe("Original.")
        expect(Object.isFrozen(agent.definition)).toBe(true)
        expect(Object.isFrozen(agent.definition.catalog)).toBe(true)
        expect(Object.isFrozen(agent.definition.catalog.descriptors)).toBe(true)
        expect(Object.isFrozen(agent.identity)).toBe(true)
        expect(agent.identity).toEqual({ id: "a-1", tenant: "t" })
        const result = yield* agent.run("hi")
        expect(result.instructions).toBe("Original.")
      })
    ))
})

describe("Agent.layer", () => {
  class Triage extends Context.Tag("test/Triage")<Triage, Agent.Agent>() {}
  it.live("gives the same agent as a scoped layer; closing the layer closes the agent", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const marker = yield* Effect.gen(function*() {
        const agent = yield* Triage
        expect((yield* agent.run("via layer")).text).toBe("via layer")
        return agent.marker
      }).pipe(Effect.provide(Agent.layer(Triage, options(sandbox)).pipe(Layer.provide(Harness.layer))))
      expect(yield* Harness.markedProcesses(marker)).toEqual([])
      expect(yield* Harness.entries(sandbox.root)).toEqual([])
    }).pipe(Effect.scoped))
})

describe("runs", () => {
  it.live("run is stream drained: the Result equals the RunFinished result, field for field", () =>
    withSandbox((sandbox) =>
      Effect.gen(function*() {
        const agent = yield* Agent.make(options(sandbox))
        const events = Array.from(yield* Stream.runCollect(agent.stream("same")))
        const finished = events[events.length - 1]
        if (finished?._tag !== "RunFinished") return expect.fail("no RunFinished last")
        const result = yield* agent.run("same")
        const { raw: rawA, runId: idA, ...a } = finished.result
        const { raw: rawB, runId: idB, ...b } = result
        expect(a).toEqual(b)
        expect(idA).not.toBe(idB)
        expect(rawA.terminal).toEqual(rawB.terminal)
        expect(result.text).toBe("same")
        expect(result.usage).toEqual(new Result.Usage({ inputTokens: 4, outputTokens: 4 }))
        // Content deltas (built on a fast path) are indistinguishable from constructed ones.
        const delta = events.find((event) => event._tag === "TextDelta")!
        expect(delta).toBeInstanceOf(Event.TextDelta)
        expect(Object.keys(delta)).toEqual(Object.keys(new Event.TextDelta({ ...delta })))
        expect(Equal.equals(delta, new Event.TextDelta({ ...delta }))).toBe(true)
        // Events and results are encodable with their schemas.
        expect(() => Schema.encodeSync(Schema.Array(Event.Event))(events)).not.toThrow()
        expect(() => Schema.encodeSync(Result.Result)(result)).not.toThrow()
      })
    ))

  it.live("a slow consumer loses only content deltas, counted in a Dropped before the next critical event", () =>
    withSandbox((sandbox) =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({
          ...options(sandbox, Reference.driver({ respond: () => deltas(3000) })),
          events: { buffer: 1 }
        })
        const events: Array<Event.Event> = []
        yield* agent.stream("x").pipe(
          Stream.runForEach((event) =>
            Effect.sync(() => events.push(event)).pipe(
              Effect.zipRight(events.length === 3 ? Effect.sleep("300 millis") : Effect.void)
            )
          )
        )
        const dropped = events.filter((event) => event._tag === "Dropped")
        expect(dropped.length).toBeGreaterThan(0)
        const lost = dropped.reduce((sum, event) => sum + (event._tag === "Dropped" ? event.count : 0), 0)
        const kept = events.filter((event) => event._tag === "TextDelta").length
        expect(lost + kept).toBe(3000)
        for (const event of dropped) expect(event._tag === "Dropped" && event.kinds).toEqual(["TextDelta"])
        events.forEach((event, i) => {
          if (event._tag === "Dropped") expect(Event.isDroppable(events[i + 1]!)).toBe(false)
        })
        expect(events.map((event) => event.sequence)).toEqual(events.map((_, i) => i))
        expect(events.map((event) => event._tag).filter((tag) => tag !== "TextDelta" && tag !== "Dropped")).toEqual([
          "RunStarted",
          "ProcessStarted",
          "SessionStarted",
          "Message",
          "RunFinished"
        ])
      })
    ))

  it.live("in blocking mode nothing is dropped", () =>
    withSandbox((sandbox) =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({
          ...options(sandbox, Reference.driver({ respond: () => deltas(3000) })),
          events: { buffer: 1, blocking: true }
        })
        const events = Array.from(
          yield* agent.stream("x").pipe(
            Stream.tap((event) => event.sequence === 3 ? Effect.sleep("300 millis") : Effect.void),
            Stream.runCollect
          )
        )
        expect(events.filter((event) => event._tag === "Dropped")).toEqual([])
        expect(events.filter((event) => event._tag === "TextDelta")).toHaveLength(3000)
      })
    ))
})

describe("close", () => {
  it.live("a close whose deadline expires fails with CloseTimeout and a later close completes it", () =>
    withSandbox((sandbox) =>
      Effect.gen(function*() {
        const agent = yield* Agent.make({
          ...options(sandbox, FakeCli.driver()),
          definition: {
            instructions: "",
            skills: [],
            tools: Toolkit.empty
          },
          processes: { killGrace: "300 millis" }
        })
        const busy = yield* agent.stream(FakeCli.script({ op: "text", text: "x" }, { op: "hang" })).pipe(
          Stream.runDrain,
          Effect.fork
        )
        yield* Effect.sleep("400 millis")
        const timeout = yield* Effect.flip(agent.close({ timeout: "0 millis" }))
        expect(timeout._tag).toBe("CloseTimeout")
        expect(timeout.pending.length).toBeGreaterThan(0)
        expect(timeout.pending[timeout.pending.length - 1]).toBe("revoke-registration")
        // Admission is already fenced.
        expect((yield* Effect.flip(agent.run("late")))._tag).toBe("AgentClosed")
        // Two concurrent closes: both complete.
        yield* Effect.all([agent.close(), agent.close()], { concurrency: 2 })
        yield* Fiber.await(busy)
        expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
        yield* agent.close()
      })
    ))
})
