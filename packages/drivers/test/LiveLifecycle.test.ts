/**
 * The lifecycle property of live threads, on the real Claude Code CLI offline: random
 * interleavings of turns, sends during a tool call, interrupts, tool-policy changes and crashes on
 * two threads of one agent, then its close. Invariants: every operation ends as it must (success,
 * `RunFinished(canceled)`, `RunError`), at most one live process (process group) per thread at
 * every pause, and after close no process of the agent, no clone, the agent's token revoked (401).
 * Bounded: a few sequences of a few operations (each real turn costs a CLI round trip); the many
 * cases run on the live reference driver in core's Lifecycle property.
 *
 * A `thread.send` still on its way when its turn ends: the agent's close cancels the turn and
 * shuts the process down, so the send fails `AgentClosed` (Thread.ts `SendFailure`); a plain
 * interrupt keeps the warm process, and input it reported `Queued` reaches the model.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Event from "@tether/core/Event"
import { Gateway } from "@tether/gateway"
import { AnthropicServer, Conformance, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import { driverFor, respond } from "./ClaudeLiveHarness.js"

const Tools = Conformance.liveTools
const ToolsLive = Tools.toLayer({
  wait: ({ ms }) => Effect.as(Effect.sleep(ms), { waited: ms }),
  echo: ({ text }) => Effect.succeed(`ECHO:${text}`)
})

type Op =
  | { readonly _tag: "Turn"; readonly thread: number }
  | { readonly _tag: "Send"; readonly thread: number }
  | { readonly _tag: "Interrupt"; readonly thread: number }
  | { readonly _tag: "Policy"; readonly thread: number }
  | { readonly _tag: "Crash"; readonly thread: number }

const thread = FastCheck.integer({ min: 0, max: 1 })
const op: FastCheck.Arbitrary<Op> = FastCheck.oneof(
  ...(["Turn", "Send", "Interrupt", "Policy", "Crash"] as const).map((tag) =>
    FastCheck.record({ _tag: FastCheck.constant(tag), thread }) as FastCheck.Arbitrary<Op>
  )
)
const sequences = FastCheck.sample(FastCheck.array(op, { minLength: 3, maxLength: 5 }), { numRuns: 2, seed: 18 })

/** The process groups (pgid) of the given pids. */
const groups = (pids: ReadonlyArray<number>) =>
  new Set(pids.flatMap((pid) => {
    try {
      const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
      return [Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2])]
    } catch {
      return []
    }
  }))

const finishedOf = (events: ReadonlyArray<Event.Event>) => {
  const last = events.filter((e): e is Event.RunFinished => e._tag === "RunFinished").at(-1)
  if (last === undefined) throw new Error("no RunFinished")
  return last
}

/** A turn's events (into `events`, readable while it runs), also when it fails. */
const collect = (stream: Stream.Stream<Event.Event, unknown>, events: Array<Event.Event> = []) =>
  Effect.suspend(() => {
    return stream.pipe(
      Stream.runForEach((event) => Effect.sync(() => events.push(event))),
      Effect.either,
      Effect.map((outcome) => ({ events, outcome }))
    )
  })

const eventually = (what: string, check: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 30_000
    while (!(yield* check)) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.sleep("25 millis")
    }
  })

describe("live thread lifecycle (Claude Code, real CLI)", () => {
  sequences.forEach((ops, index) =>
    it.live(`sequence ${index}: ${ops.map((o) => `${o._tag}(${o.thread})`).join(" ")}`, () => {
      const observed: Array<Harness.Observed> = []
      return Effect.gen(function*() {
        const server = yield* AnthropicServer.make({ respond })
        const gateway = yield* Gateway.Gateway
        yield* gateway.register(yield* Toolkit.executor(Tools))
        const sandbox = yield* Harness.sandbox
        const marker = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: driverFor(server),
            definition: { instructions: "", skills: [], tools: Tools },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            processes: { killGrace: "1 second", exitGrace: "2 seconds" }
          })
          const threads = [yield* agent.thread("zero"), yield* agent.thread("one")]
          const narrowed = [false, false]
          const policy = (i: number) => narrowed[i] ? { toolPolicy: { allow: ["wait"] } } : {}
          const requests = Effect.map(server.messages, (all) => all.length)
          const pidOf = (events: ReadonlyArray<Event.Event>) =>
            events.flatMap((e) => e._tag === "ProcessStarted" ? [e.pid] : []).at(-1)
          for (const o of ops) {
            const t = threads[o.thread]!
            switch (o._tag) {
              case "Turn":
              case "Policy": {
                if (o._tag === "Policy") narrowed[o.thread] = !narrowed[o.thread]
                const done = yield* collect(t.stream({ input: "hello", ...policy(o.thread) }))
                expect(finishedOf(done.events).outcome).toBe("success")
                break
              }
              case "Send": {
                const events: Array<Event.Event> = []
                const turn = yield* Effect.fork(collect(t.stream({ input: "CALL 1500", ...policy(o.thread) }), events))
                yield* eventually("the tool call", Effect.sync(() => events.some((e) => e._tag === "ToolCall")))
                const delivery = yield* t.send("steered")
                const done = yield* Fiber.join(turn)
                expect(finishedOf(done.events).outcome).toBe("success")
                expect(done.events.filter((e) => e._tag === "InputDelivered")).toMatchObject([{ delivery }])
                break
              }
              case "Interrupt":
              case "Crash": {
                const before = yield* requests
                const cancel = yield* Deferred.make<void>()
                const events: Array<Event.Event> = []
                const turn = yield* Effect.fork(
                  collect(
                    t.stream({ input: "SLOW 60000", cancel: Deferred.await(cancel), ...policy(o.thread) }),
                    events
                  )
                )
                yield* eventually("the slow request", Effect.map(requests, (n) => n > before))
                if (o._tag === "Interrupt") {
                  yield* Deferred.succeed(cancel, undefined)
                } else {
                  const pid = pidOf(events)!
                  yield* Effect.sync(() => process.kill(-pid, "SIGKILL"))
                }
                const done = yield* Fiber.join(turn)
                expect(finishedOf(done.events).outcome).toBe(o._tag === "Interrupt" ? "canceled" : "failure")
                break
              }
            }
            // At a pause: at most one live process group per thread.
            const live = groups(yield* Harness.markedProcesses(agent.marker))
            expect(live.size).toBeLessThanOrEqual(threads.length)
          }
          return agent.marker
        }).pipe(Effect.scoped)
        expect(yield* Harness.markedProcesses(marker)).toEqual([])
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
        expect(yield* Harness.probe(observed[1]!)).toBe(401)
      }).pipe(Effect.scoped, Effect.provide([ToolsLive, Harness.recordingLayer(observed)]))
    }, 180_000)
  )
})

/**
 * A thread's turn whose model request hangs for a minute (forked), and `thread.send(input)` forked
 * once that request is in flight, then left 1.5 s to wait for the CLI.
 */
const sendDuringSlowTurn = (server: AnthropicServer.AnthropicServer, sandbox: Harness.Sandbox, input: string) =>
  Effect.gen(function*() {
    const agent = yield* Agent.make({
      driver: driverFor(server),
      definition: { instructions: "", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection,
      processes: { killGrace: "1 second" }
    })
    const thread = yield* agent.thread("k")
    const started = yield* Deferred.make<void>()
    const turn = yield* thread.stream("SLOW 60000").pipe(
      Stream.tap((e: Event.Event) => e._tag === "ProcessStarted" ? Deferred.succeed(started, undefined) : Effect.void),
      Stream.runDrain,
      Effect.either,
      Effect.fork
    )
    yield* Deferred.await(started)
    for (let i = 0; i < 300 && (yield* server.messages).length === 0; i++) yield* Effect.sleep("50 millis")
    expect((yield* server.messages).length).toBeGreaterThan(0)
    const send = yield* Effect.fork(Effect.either(thread.send(input)))
    yield* Effect.sleep("1500 millis")
    // Still waiting for the CLI to take it.
    expect((yield* Fiber.poll(send))._tag).toBe("None")
    return { agent, thread, turn, send }
  })

describe("thread.send in flight when its turn ends (Claude Code, real CLI)", () => {
  it.live(
    "the agent's close: the send fails AgentClosed, the turn canceled, nothing left",
    () =>
      Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        const outcome = yield* Effect.gen(function*() {
          const server = yield* AnthropicServer.make({ respond })
          const { agent, send, turn } = yield* sendDuringSlowTurn(server, sandbox, "one more thing")
          yield* agent.close()
          const sent = yield* Fiber.join(send).pipe(Effect.timeout("10 seconds"))
          const ended = yield* Fiber.join(turn)
          return { sent, ended, marker: agent.marker }
        }).pipe(Effect.scoped, Effect.provide(Harness.layer))
        expect(Either.isLeft(outcome.ended)).toBe(true)
        expect(yield* Harness.markedProcesses(outcome.marker)).toEqual([])
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
        const sent = outcome.sent
        // The turn was canceled and nothing of it committed: the input will never be answered.
        expect(Either.isLeft(sent) ? sent.left._tag : `delivered ${String(sent.right)}`).toBe("AgentClosed")
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "an interrupt: the send is delivered and the model reads it on the warm process's next turn (the thread keeps it)",
    () =>
      Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        const outcome = yield* Effect.gen(function*() {
          const server = yield* AnthropicServer.make({ respond })
          const { send, thread, turn } = yield* sendDuringSlowTurn(server, sandbox, "STEERED-INPUT-7")
          yield* Fiber.interrupt(turn)
          const sent = yield* Fiber.join(send).pipe(Effect.timeout("15 seconds"))
          // The next turn on the warm process: the model reads the input.
          yield* thread.run("hello")
          const seen = JSON.stringify(yield* server.messages).includes("STEERED-INPUT-7")
          return { sent, seen }
        }).pipe(Effect.scoped, Effect.provide(Harness.layer))
        const sent = outcome.sent
        expect({ delivered: Either.isRight(sent), modelReadIt: outcome.seen }).toEqual({
          delivered: true,
          modelReadIt: true
        })
      }).pipe(Effect.scoped),
    90_000
  )
})
