import { describe, expect, it } from "@effect/vitest"
import { Agent as AgentModule, ThreadStore } from "@tether/core"
import { FakeCli, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import * as Threads from "./fixtures/threads.js"
import { storedTranscript } from "./fixtures/threads.js"
import { record, startTurn, text, watch, withThreads } from "./fixtures/threadTest.js"

for (const [name, storeLayer] of Threads.stores) {
  describe(`Thread sessions (${name} store)`, () => {
    it.live("events carry every turn of the thread; close ends them and refuses turns, not the agent", () =>
      withThreads(storeLayer, ({ agent }) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("k")
          const collected = yield* watch(thread.events)
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
          // A resuming turn is shown from the provider's first answer on.
          const fiber = yield* startTurn(
            thread.stream(FakeCli.script({ op: "text", text: "on it" }, { op: "sleep", ms: 10_000 }))
          )
          yield* thread.close
          const outcome = yield* Fiber.join(fiber)
          expect(outcome._tag === "Left" && outcome.left._tag).toBe("ThreadClosed")
          expect(yield* record(thread)).toEqual(healthy)
          // The lease was released: another handle runs at once.
          yield* (yield* agent.thread("k")).run(text("next"))
        })))

    it.live("a checkpoint is committed only once its CLI has exited and its session is saved in the store", () => {
      // At each commit, what the session store holds of the session being committed.
      const atCommit: Array<string> = []
      let sessions = ""
      const checking = Layer.effect(
        ThreadStore.ThreadStore,
        Effect.map(ThreadStore.ThreadStore, (store) => ({
          ...store,
          commit: (lease: ThreadStore.Lease, next: ThreadStore.ThreadRecord, mode: ThreadStore.CommitMode) =>
            Effect.suspend(() => {
              atCommit.push(storedTranscript(sessions, next.session))
              return store.commit(lease, next, mode)
            })
        }))
      ).pipe(Layer.provideMerge(storeLayer()))
      return withThreads(() => checking, ({ agent, sandbox }) =>
        Effect.gen(function*() {
          sessions = Threads.sessionsOf(sandbox)
          const thread = yield* agent.thread("k")
          // The CLI writes the last line of its transcript 400 ms after its terminal record.
          const events = yield* Stream.runCollect(
            thread.stream(FakeCli.script({ op: "text", text: "one" }, { op: "linger", ms: 400 }))
          )
          const started = Array.from(events).find((event) => event._tag === "ProcessStarted")!
          // The result waited for the CLI: it is gone when the turn ends.
          expect(yield* Harness.isAlive(started.pid)).toBe(false)
          expect(atCommit).toHaveLength(1)
          expect(atCommit[0]!.trim().split("\n").map((line) => JSON.parse(line).type)).toEqual([
            "turn",
            "message",
            "closed"
          ])
          yield* thread.run(FakeCli.script({ op: "text", text: "two" }, { op: "linger", ms: 200 }))
          expect(atCommit[1]!.trim().split("\n").filter((line) => line.includes("\"closed\""))).toHaveLength(2)
          expect((yield* record(thread)).turns).toBe(2)
        }))
    })

    it.live("an agent rebuilt with a new registration resumes the checkpoint", () =>
      withThreads(storeLayer, ({ agent, make, control }) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("k")
          const first = yield* thread.run(text("one"))
          const watching = yield* watch(thread.events)
          const running = yield* startTurn(
            thread.stream(FakeCli.script({ op: "text", text: "on it" }, { op: "sleep", ms: 10_000 }))
          )
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

/** Runs `fixtures/threadChild.ts` as another host; resolves with its stdout, whatever its exit. */
const childHost = (sandbox: Harness.Sandbox, filename: string, key: string, mode?: string) =>
  Effect.promise(() =>
    new Promise<string>((resolve) =>
      ChildProcess.execFile(
        process.execPath,
        [
          "--conditions=@tether/source",
          "--import",
          "tsx",
          Path.join(import.meta.dirname, "fixtures/threadChild.ts"),
          filename,
          sandbox.source,
          sandbox.root,
          sandbox.workspace,
          JSON.stringify(key),
          ...(mode === undefined ? [] : [mode])
        ],
        { encoding: "utf8" },
        (_error, stdout) => resolve(stdout)
      )
    )
  ).pipe(
    Effect.map((stdout) => JSON.parse(stdout.trim().split("\n").at(-1)!) as { fingerprint: string; session: string })
  )

describe("Thread (sqlite store across host processes)", () => {
  it.live("a host killed between saving a turn's session and committing it leaves the previous record", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const filename = Path.join(sandbox.base, "threads.db")
      const written = yield* childHost(sandbox, filename, "k", "crash-at-commit")
      const control = Threads.makeControl()
      yield* Effect.gen(function*() {
        const agent = yield* Threads.makeAgent(sandbox, Threads.driver(control))
        const thread = yield* agent.thread("k", { resumeOnly: true })
        // The first turn's checkpoint, whole; the killed turn committed nothing.
        expect(yield* record(thread)).toMatchObject({ session: written.session, turns: 1 })
        // The killed turn's session was saved before its commit was attempted.
        const transcript = storedTranscript(Threads.sessionsOf(sandbox), written.session)
        expect(transcript.split("\n").filter((line) => line.includes(`"closed"`))).toHaveLength(2)
        // Its session is in the store (with the uncommitted turn in it): it still resumes, once
        // the dead host's lease expired.
        const next = yield* thread.run(text("after the crash")).pipe(
          Effect.retry({ while: (error) => error._tag === "ThreadBusy", schedule: Schedule.spaced("100 millis") })
        )
        expect(next.thread).toMatchObject({ mode: "resumed", from: written.session })
        expect(yield* record(thread)).toMatchObject({ session: written.session, turns: 2 })
      }).pipe(
        Effect.scoped,
        Effect.provide(Layer.mergeAll(Threads.ToolsLive, Harness.layer, Threads.sqliteLayer(filename)))
      )
      expect(yield* Harness.entries(sandbox.root)).toEqual([])
    }).pipe(Effect.scoped))

  it.live("a turn committed by one host process is resumed by the next", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const filename = Path.join(sandbox.base, "threads.db")
      const key = "tenant\u0000λ/issue-7"
      const written = yield* childHost(sandbox, filename, key)
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

describe("Thread (close of a running turn and of one waiting to run)", () => {
  it.live("a turn the close cancels shows its RunFinished(canceled), then fails ThreadClosed", () =>
    withThreads(Threads.stores[0]![1], ({ agent }) =>
      Effect.gen(function*() {
        const thread = yield* agent.thread("k")
        const seen: Array<string> = []
        const started = yield* Deferred.make<void>()
        const turn = yield* thread.stream(FakeCli.script({ op: "text", text: "on it" }, { op: "sleep", ms: 10_000 }))
          .pipe(
            Stream.tap((event) =>
              Effect.sync(() => seen.push(event._tag === "RunFinished" ? `RunFinished(${event.outcome})` : event._tag))
                .pipe(
                  Effect.zipRight(event._tag === "ProcessStarted" ? Deferred.succeed(started, undefined) : Effect.void)
                )
            ),
            Stream.runDrain,
            Effect.either,
            Effect.fork
          )
        yield* Deferred.await(started)
        yield* thread.close
        const outcome = yield* Fiber.join(turn)
        expect(outcome._tag === "Left" && outcome.left._tag).toBe("ThreadClosed")
        expect(seen.at(-1)).toBe("RunFinished(canceled)")
        expect(seen.filter((tag) => tag === "RunStarted")).toHaveLength(1)
      })))

  it.live("the waiting turn fails ThreadClosed at once, its wait cut, while that CLI still runs", () =>
    withThreads(Threads.stores[0]![1], ({ agent }) =>
      Effect.gen(function*() {
        const thread = yield* agent.thread("k")
        // The first turn's CLI answers, then keeps running for seconds (writing its session, as
        // far as the thread knows); its turn is left while the thread waits for that exit.
        let lingering: number | undefined
        const answered = yield* Deferred.make<void>()
        const first = yield* thread.stream(
          FakeCli.script({ op: "text", text: "answered" }, { op: "result", text: "answered" }, {
            op: "linger",
            ms: 4000
          })
        ).pipe(
          Stream.tap((event) =>
            event._tag === "ProcessStarted"
              ? Effect.sync(() => (lingering = event.pid))
              : event._tag === "Message"
              ? Deferred.succeed(answered, undefined)
              : Effect.void
          ),
          Stream.runDrain,
          Effect.fork
        )
        yield* Deferred.await(answered)
        // The terminal record follows the message: once it is read, the turn waits for the exit.
        yield* Effect.sleep("300 millis")
        yield* Fiber.interrupt(first)
        const second = yield* thread.run(text("second")).pipe(Effect.either, Effect.fork)
        yield* Effect.sleep("200 millis")
        yield* thread.close
        const outcome = yield* Fiber.join(second)
        expect(outcome._tag === "Left" && outcome.left._tag).toBe("ThreadClosed")
        // It did not wait for the first CLI's exit: that CLI is still running.
        expect(lingering).toBeTypeOf("number")
        expect(() => process.kill(lingering!, 0)).not.toThrow()
      }), { processes: { exitGrace: "10 seconds", killGrace: "300 millis" } }))
})
