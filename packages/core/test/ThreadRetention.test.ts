// Retention: the checkpoints a restart replaced and the provider sessions they point at stay until
// the host prunes them (by key, by age) or deletes the thread; nothing else is kept.
// Once the agent is closed, `thread.prune` refuses (`AgentClosed`) before removing anything, as
// `thread.delete` and `Agent.pruneThreads` do: it could not drop the records' provider sessions.
import { describe, expect, it } from "@effect/vitest"
import { Agent, ThreadStore } from "@tether/core"
import { FakeCli, Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Threads from "./fixtures/threads.js"
import { storedTranscript } from "./fixtures/threads.js"
import { record, startTurn, text, withThreads } from "./fixtures/threadTest.js"

/** The session entries of every identity store under `sessions` (relative to the profile). */
const stored = (sessions: string): ReadonlyArray<string> =>
  (Fs.existsSync(sessions) ? Fs.readdirSync(sessions) : []).flatMap((store) => {
    const dir = Path.join(sessions, store, "profile")
    return Fs.existsSync(dir)
      ? (Fs.readdirSync(dir, { recursive: true, withFileTypes: true }) as Array<Fs.Dirent>)
        .filter((entry) => entry.isFile())
        .map((entry) => Path.relative(dir, Path.join(entry.parentPath, entry.name)))
      : []
  }).sort()

for (const [name, storeLayer] of Threads.stores) {
  describe(`Thread retention (${name} store)`, () => {
    it.live("only thread sessions reach the session store: a plain run's transcript is never kept", () =>
      withThreads(storeLayer, ({ agent, sandbox }) =>
        Effect.gen(function*() {
          const plain = yield* agent.run(text("plain"))
          const turn = yield* (yield* agent.thread("k")).run(text("thread"))
          yield* agent.close()
          expect(stored(Threads.sessionsOf(sandbox))).toEqual([`sessions/${turn.session}.jsonl`])
          expect(plain.session).not.toBe(turn.session)
        })))

    it.live("thread.prune drops the superseded checkpoints of its key and their sessions; the current one stays", () =>
      withThreads(storeLayer, ({ agent, make, control, sandbox }) =>
        Effect.gen(function*() {
          const sessions = Threads.sessionsOf(sandbox)
          const first = yield* (yield* agent.thread("k")).run(text("one"))
          const other = yield* make(Threads.driver(control), { model: "other-model" })
          const thread = yield* other.thread("k")
          const second = yield* thread.run(text("two"))
          yield* (yield* agent.thread("k2")).run(text("elsewhere"))
          const kept = yield* record(yield* agent.thread("k2"))
          expect(storedTranscript(sessions, first.session!)).not.toBe("")
          // Nothing is old enough yet.
          expect(yield* thread.prune({ olderThan: "1 hour" })).toEqual([])
          const removed = yield* thread.prune()
          expect(removed.map((entry) => entry.record.session)).toEqual([first.session])
          expect(yield* thread.history).toEqual([])
          expect(storedTranscript(sessions, first.session!)).toBe("")
          expect(storedTranscript(sessions, second.session!)).not.toBe("")
          expect(storedTranscript(sessions, kept.session)).not.toBe("")
          // The current checkpoint still resumes.
          expect((yield* thread.run(text("three"))).thread?.mode).toBe("resumed")
        })))

    it.live("thread.delete removes the checkpoint, its history and their sessions; ThreadBusy while a turn runs", () =>
      withThreads(storeLayer, ({ agent, make, control, sandbox }) =>
        Effect.gen(function*() {
          const sessions = Threads.sessionsOf(sandbox)
          const first = yield* (yield* agent.thread("k")).run(text("one"))
          const other = yield* make(Threads.driver(control), { model: "other-model" })
          const thread = yield* other.thread("k")
          const second = yield* thread.run(text("two"))
          const neighbour = yield* (yield* other.thread("k2")).run(text("neighbour"))
          const running = yield* startTurn(
            thread.stream(FakeCli.script({ op: "sleep", ms: 600 }, { op: "text", text: "x" }))
          )
          expect(yield* Effect.flip(thread.delete)).toMatchObject({ _tag: "ThreadBusy", key: "k" })
          yield* Fiber.join(running)
          const removed = yield* thread.delete
          expect(removed.map((r) => r.session)).toEqual([second.session, first.session])
          expect(Option.isNone(yield* thread.snapshot)).toBe(true)
          expect(yield* thread.history).toEqual([])
          expect(storedTranscript(sessions, first.session!)).toBe("")
          expect(storedTranscript(sessions, second.session!)).toBe("")
          expect(storedTranscript(sessions, neighbour.session!)).not.toBe("")
          // A later turn starts afresh.
          expect((yield* thread.run(text("again"))).thread?.mode).toBe("started")
        })))

    it.live("agent.pruneThreads prunes by age: old superseded checkpoints and sessions no record refers to", () =>
      withThreads(storeLayer, ({ agent, make, control, sandbox }) =>
        Effect.gen(function*() {
          const sessions = Threads.sessionsOf(sandbox)
          const first = yield* (yield* agent.thread("k")).run(text("one"))
          const other = yield* make(Threads.driver(control), { model: "other-model" })
          const second = yield* (yield* other.thread("k")).run(text("two"))
          // A session saved by a host that died before its commit: no record refers to it.
          const identityStore = Path.join(sessions, Fs.readdirSync(sessions)[0]!, "profile")
          const orphan = Path.join(identityStore, "sessions", "00000000-0000-4000-8000-000000000000.jsonl")
          Fs.writeFileSync(orphan, "{}\n")
          // Saved two minutes ago: past the lease's time to live (30 s), so no turn is between its
          // save and its commit (one saved within it is kept, see ThreadPruneInFlight.test.ts).
          const twoMinutesAgo = new Date(Date.now() - 120_000)
          Fs.utimesSync(orphan, twoMinutesAgo, twoMinutesAgo)
          expect(yield* other.pruneThreads({ olderThan: "1 hour" })).toEqual({ records: [], sessionEntries: [] })
          yield* Effect.sleep("20 millis")
          const report = yield* other.pruneThreads({ olderThan: "10 millis" })
          expect(report.records.map((entry) => entry.record.session)).toEqual([first.session])
          expect(report.sessionEntries).toEqual([
            "sessions/00000000-0000-4000-8000-000000000000.jsonl",
            `sessions/${first.session}.jsonl`
          ].sort())
          expect(stored(sessions)).toEqual([`sessions/${second.session}.jsonl`])
        })))
  })
}

describe("Thread retention after the agent closed", () => {
  it.live(
    "thread.prune fails AgentClosed before removing anything, as delete and pruneThreads do",
    () =>
      Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        const outcome = yield* Effect.gen(function*() {
          const make = (instructions: string) =>
            Agent.make({
              driver: Reference.driver({ capabilities: { resume: true } }),
              definition: { instructions, tools: Toolkit.empty },
              workspace: sandbox.workspace,
              profile: sandbox.selection
            })
          const first = yield* make("first")
          yield* (yield* first.thread("k")).run("one")
          yield* first.close()
          // Another definition: its turn restarts the thread, the first record is superseded.
          const second = yield* make("second")
          const thread = yield* second.thread("k")
          const result = yield* thread.run("two")
          expect(result.thread?.mode).toBe("restarted")
          const before = yield* thread.history
          expect(before).toHaveLength(1)
          yield* second.close()
          const deleted = yield* Effect.either(thread.delete)
          const pruned = yield* Effect.either(thread.prune())
          const after = yield* thread.history
          return { deleted, pruned, before: before.length, after: after.length }
        }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(Harness.layer, ThreadStore.layerMemory)))
        expect(Either.isLeft(outcome.deleted) && outcome.deleted.left._tag).toBe("AgentClosed")
        const pruned = outcome.pruned
        const summary = Either.isLeft(pruned)
          ? `failed ${pruned.left._tag} (${pruned.left.message}); history ${outcome.before} -> ${outcome.after}`
          : `pruned ${pruned.right.length}; history ${outcome.before} -> ${outcome.after}`
        // Refused with nothing removed (the closed agent cannot drop the records' provider sessions).
        expect(summary).toMatch(/^failed AgentClosed .*; history 1 -> 1$/)
      }).pipe(Effect.scoped),
    30_000
  )
})
