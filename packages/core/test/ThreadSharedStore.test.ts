// Two agents sharing one thread store, each on its own connection to one SQLite file (as two host
// processes would be), and one session store: leases, turn ids, delete, restarts, history and
// prune across them. (Forks across them: ThreadForkWhileRunning.)
import { describe, expect, it } from "@effect/vitest"
import { ThreadStore } from "@tether/core"
import { FakeCli } from "@tether/testing"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Threads from "./fixtures/threads.js"
import { record, startTurn, text, withThreads } from "./fixtures/threadTest.js"

/** A temp SQLite file for the test; the store of agent `a` comes from withThreads, agent `b`
 * gets a second connection (a second host) to the same file. */
const shared = <A, E>(
  body: (
    env: Parameters<Parameters<typeof withThreads>[1]>[0] & {
      readonly b: Effect.Effect.Success<ReturnType<Parameters<Parameters<typeof withThreads>[1]>[0]["make"]>>
      readonly storeB: ThreadStore.ThreadStore["Type"]
    }
  ) => Effect.Effect<A, E, any>
) =>
  Effect.gen(function*() {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-shared-"))
    const file = Path.join(dir, "threads.db")
    return yield* withThreads(() => Threads.sqliteLayer(file), (env) =>
      Effect.gen(function*() {
        const ctx = yield* Layer.build(Threads.sqliteLayer(file))
        const storeB = Context.get(ctx, ThreadStore.ThreadStore)
        const b = yield* env.make().pipe(Effect.provideService(ThreadStore.ThreadStore, storeB))
        return yield* body({ ...env, b, storeB })
      })).pipe(Effect.ensuring(Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))))
  })

describe("threads shared by two agents on one SQLite file", () => {
  it.live("a turn in A: B gets ThreadBusy for run and delete; B resumes after; turn ids are idempotent across agents", () =>
    shared(({ agent: a, b }) =>
      Effect.gen(function*() {
        const ta = yield* a.thread("k")
        yield* ta.run(text("one"))
        const tb = yield* b.thread("k")
        const fiber = yield* startTurn(ta.stream(FakeCli.script({ op: "sleep", ms: 700 }, { op: "text", text: "two" })))
        expect(yield* Effect.flip(tb.run(text("x")))).toMatchObject({ _tag: "ThreadBusy", key: "k" })
        expect(yield* Effect.flip(tb.delete)).toMatchObject({ _tag: "ThreadBusy", key: "k" })
        expect((yield* Fiber.join(fiber))._tag).toBe("Right")
        expect((yield* record(tb)).turns).toBe(2)
        const third = yield* tb.run({ input: text("three"), id: "turn-3" })
        expect(third.thread).toMatchObject({ mode: "resumed", fromTurns: 2 })
        // Redelivered to the other agent.
        expect(yield* Effect.flip(ta.run({ input: text("three again"), id: "turn-3" }))).toMatchObject({
          _tag: "TurnAlreadyCommitted",
          turn: "turn-3"
        })
        expect((yield* record(ta)).turns).toBe(3)
        // Delete in B, A starts fresh.
        const removed = yield* tb.delete
        expect(removed.length).toBe(1)
        expect(Option.isNone(yield* ta.snapshot)).toBe(true)
        expect((yield* ta.run(text("fresh"))).thread?.mode).toBe("started")
      })
    ))

  it.live("restarts across agents keep one history; prune in B while A's restart turn runs keeps A's new checkpoint", () =>
    shared(({ agent: a, b, make, sandbox, control }) =>
      Effect.gen(function*() {
        const sessions = Threads.sessionsOf(sandbox)
        const c = yield* make(Threads.driver(control), { model: "other-model" })
        const ta = yield* a.thread("k")
        const first = yield* ta.run(text("on A"))
        const tc = yield* c.thread("k")
        const second = yield* tc.run(text("on C"))
        expect(second.thread).toMatchObject({ mode: "restarted" })
        // A restarts again (C's record is incompatible with A) while B prunes the key.
        const running = yield* startTurn(
          ta.stream(FakeCli.script({ op: "sleep", ms: 400 }, { op: "text", text: "back on A" }))
        )
        const tb = yield* b.thread("k")
        const pruned = yield* tb.prune()
        expect(pruned.map((e) => e.record.session)).toEqual([first.session])
        expect((yield* Fiber.join(running))._tag).toBe("Right")
        const current = yield* record(tb)
        expect(current.fingerprint).toBe(a.fingerprint)
        expect((yield* tb.history).map((e) => e.record.session)).toEqual([second.session])
        expect((yield* ta.history).map((e) => e.record.session)).toEqual([second.session])
        expect(Threads.storedTranscript(sessions, current.session)).toContain("back on A")
        expect(Threads.storedTranscript(sessions, second.session!)).toContain("on C")
        expect((yield* tb.run(text("on B"))).thread).toMatchObject({ mode: "resumed", from: current.session })
      })
    ))
})
