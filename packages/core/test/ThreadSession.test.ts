import { describe, expect, it } from "@effect/vitest"
import { Agent as AgentModule } from "@tether/core"
import { FakeCli, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import * as Threads from "./fixtures/threads.js"
import { record, startTurn, text, withThreads } from "./fixtures/threadTest.js"

for (const [name, storeLayer] of Threads.stores) {
  describe(`Thread sessions (${name} store)`, () => {
    it.live("events carry every turn of the thread; close ends them and refuses turns, not the agent", () =>
      withThreads(storeLayer, ({ agent }) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("k")
          const subscribed = yield* Deferred.make<void>()
          const collected = yield* thread.events.pipe(
            Stream.onStart(Deferred.succeed(subscribed, undefined)),
            Stream.runCollect,
            Effect.fork
          )
          yield* Deferred.await(subscribed)
          const first = yield* thread.run(text("one"))
          yield* Effect.flip(thread.run(FakeCli.script({ op: "crash" })))
          const third = yield* thread.run(text("three"))
          yield* thread.close
          const events = Array.from(yield* Fiber.join(collected))
          const runs = events.filter((event) => event._tag === "RunFinished")
          expect(runs.map((event) => event.outcome)).toEqual(["success", "failure", "success"])
          expect(runs[0]!.result.runId).toBe(first.runId)
          expect(runs[2]!.result.runId).toBe(third.runId)
          expect(events.filter((event) => event._tag === "RunStarted")).toHaveLength(3)
          expect(yield* Effect.flip(thread.run(text("four")))).toMatchObject({ _tag: "ThreadClosed" })
          yield* thread.close
          // The agent and the record stay: a new handle resumes it.
          expect((yield* agent.run(text("agent"))).text).toBe("agent")
          yield* (yield* agent.thread("k", { resumeOnly: true })).run(text("four"))
          expect((yield* record(thread)).turns).toBe(3)
        })))

    it.live("close cancels a running turn of the thread", () =>
      withThreads(storeLayer, ({ agent }) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("k")
          yield* thread.run(text("healthy"))
          const healthy = yield* record(thread)
          const fiber = yield* startTurn(thread.stream(FakeCli.script({ op: "sleep", ms: 10_000 })))
          yield* thread.close
          const outcome = yield* Fiber.join(fiber)
          expect(outcome._tag === "Left" && outcome.left._tag).toBe("ThreadClosed")
          expect(yield* record(thread)).toEqual(healthy)
          // The lease was released: another handle runs at once.
          yield* (yield* agent.thread("k")).run(text("next"))
        })))

    it.live("the next turn on a key waits until the previous turn's CLI has exited, not its result", () =>
      withThreads(storeLayer, ({ agent }) =>
        Effect.gen(function*() {
          // The CLI keeps running 600 ms after its terminal record (still writing its session).
          const events = yield* Stream.runCollect(
            (yield* agent.thread("k")).stream(FakeCli.script({ op: "text", text: "one" }, { op: "linger", ms: 600 }))
          )
          const first = Array.from(events).find((event) => event._tag === "ProcessStarted")!
          expect(yield* Harness.isAlive(first.pid)).toBe(true)
          // Another handle of the same key: its process starts only once the first one is gone.
          let aliveAtNextStart: boolean | undefined
          yield* (yield* agent.thread("k")).stream(text("two")).pipe(
            Stream.tap((event) =>
              event._tag === "ProcessStarted"
                ? Effect.map(Harness.isAlive(first.pid), (alive) => (aliveAtNextStart = alive))
                : Effect.void
            ),
            Stream.runDrain
          )
          expect(aliveAtNextStart).toBe(false)
          expect((yield* record(yield* agent.thread("k"))).turns).toBe(2)
        })))

    it.live("an agent rebuilt with a new registration resumes the checkpoint", () =>
      withThreads(storeLayer, ({ agent, make, control }) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("k")
          const first = yield* thread.run(text("one"))
          const subscribed = yield* Deferred.make<void>()
          const watching = yield* thread.events.pipe(
            Stream.onStart(Deferred.succeed(subscribed, undefined)),
            Stream.runCollect,
            Effect.fork
          )
          yield* Deferred.await(subscribed)
          const running = yield* startTurn(thread.stream(FakeCli.script({ op: "sleep", ms: 10_000 })))
          yield* agent.close()
          // The agent's close cancels the thread's turn, then ends its events.
          const canceled = yield* Fiber.join(running)
          expect(canceled._tag === "Left" && canceled.left).toMatchObject({ _tag: "RunError", reason: "Canceled" })
          const seen = Array.from(yield* Fiber.join(watching))
          expect(seen.at(-1)).toMatchObject({ _tag: "RunFinished", outcome: "canceled" })
          expect(yield* Effect.flip(thread.run(text("late")))).toMatchObject({ _tag: "AgentClosed" })
          expect(yield* Effect.flip(agent.thread("k"))).toMatchObject({ _tag: "AgentClosed" })
          const rebuilt = yield* make(Threads.driver(control))
          expect(rebuilt.fingerprint).toBe(agent.fingerprint)
          yield* (yield* rebuilt.thread("k", { resumeOnly: true })).run(text("two"))
          expect(control.prepared.at(-1)).toEqual({ _tag: "Resume", id: first.session })
        })))
  })
}

describe("Thread (definition checks)", () => {
  const Unrevisioned = Tool.make("unrevisioned", {
    description: "No revision.",
    input: { key: Schema.String },
    output: Schema.String
  })
  const Kit = Toolkit.make(Unrevisioned)
  const KitLive = Kit.toLayer({ unrevisioned: ({ key }) => Effect.succeed(key) })

  it.live("every tool of a thread needs a revision: refused before any process starts", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const control = Threads.makeControl()
      yield* Effect.gen(function*() {
        const agent = yield* AgentModule.make({
          driver: Threads.driver(control),
          definition: { instructions: "", skills: [], tools: Kit },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        expect(yield* Effect.flip(agent.thread("k"))).toMatchObject({
          _tag: "ToolRevisionMissing",
          tools: ["unrevisioned"]
        })
        // Plain runs of the agent are not threads: they still work.
        expect((yield* agent.run(text("plain"))).text).toBe("plain")
        expect(control.prepared.map((session) => session._tag)).toEqual(["New"])
      }).pipe(
        Effect.scoped,
        Effect.provide(Layer.merge(KitLive, Harness.layer))
      )
    }).pipe(Effect.scoped))
})

describe("Thread (sqlite store across host processes)", () => {
  it.live("a turn committed by one host process is resumed by the next", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const filename = Path.join(sandbox.base, "threads.db")
      const key = "tenant\u0000λ/issue-7"
      const child = Path.join(import.meta.dirname, "fixtures/threadChild.ts")
      const output = yield* Effect.promise(() =>
        new Promise<string>((resolve, reject) =>
          ChildProcess.execFile(
            process.execPath,
            [
              "--conditions=@tether/source",
              "--import",
              "tsx",
              child,
              filename,
              sandbox.source,
              sandbox.root,
              sandbox.workspace,
              JSON.stringify(key)
            ],
            { encoding: "utf8" },
            (error, stdout) => (error === null ? resolve(stdout) : reject(error))
          )
        )
      )
      const written = JSON.parse(output.trim().split("\n").at(-1)!) as { fingerprint: string; session: string }
      const control = Threads.makeControl()
      yield* Effect.gen(function*() {
        const agent = yield* Threads.makeAgent(sandbox, Threads.driver(control))
        expect(agent.fingerprint).toBe(written.fingerprint)
        const thread = yield* agent.thread(key, { resumeOnly: true })
        expect(yield* record(thread)).toMatchObject({ key, session: written.session, turns: 1 })
        yield* thread.run(text("from the second host"))
        expect(control.prepared).toEqual([{ _tag: "Resume", id: written.session }])
        expect(yield* record(thread)).toMatchObject({ session: written.session, turns: 2 })
      }).pipe(
        Effect.scoped,
        Effect.provide(Layer.mergeAll(Threads.ToolsLive, Harness.layer, Threads.sqliteLayer(filename)))
      )
      expect(yield* Harness.entries(sandbox.root)).toEqual([])
    }).pipe(Effect.scoped))
})
