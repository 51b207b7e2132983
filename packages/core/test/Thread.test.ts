import { describe, expect, it } from "@effect/vitest"
import type { Event } from "@tether/core"
import { ThreadStore } from "@tether/core"
import * as SqlThreadStore from "@tether/core/SqlThreadStore"
import { FakeCli } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Postgres from "./fixtures/postgres.js"
import * as Threads from "./fixtures/threads.js"
import { record, startTurn, text, withThreads } from "./fixtures/threadTest.js"

// The thread contract on every store, PostgreSQL included (the run's throwaway server).
const stores: ReadonlyArray<readonly [string, () => Layer.Layer<ThreadStore.ThreadStore>]> = [
  ...Threads.stores,
  ["postgres", () => SqlThreadStore.layer.pipe(Layer.provide(Postgres.layer()), Layer.orDie)]
]

for (const [name, storeLayer] of stores) {
  describe(`Thread (${name} store)`, () => {
    it.live("continue-or-start: the first turn starts a session, the next resumes the committed one", () =>
      withThreads(storeLayer, ({ agent, control }) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("tenant-42/issue-123")
          expect(Option.isNone(yield* thread.snapshot)).toBe(true)
          const first = yield* thread.run(text("hello"))
          expect(first.text).toBe("hello")
          const committed = yield* record(thread)
          expect(committed).toMatchObject({
            key: "tenant-42/issue-123",
            provider: "fake-cli",
            session: first.session,
            fingerprint: agent.fingerprint,
            turns: 1
          })
          expect(control.prepared[0]?._tag).toBe("New")
          const events = yield* Stream.runCollect(thread.stream(text("again")))
          const started = Array.from(events).find((event) => event._tag === "SessionStarted")
          expect(started).toMatchObject({ sessionId: first.session, resumed: true })
          expect(control.prepared[1]).toEqual({ _tag: "Resume", id: first.session })
          expect(yield* record(thread)).toMatchObject({ session: first.session, turns: 2 })
        })))

    it.live("onCommit runs after each commit, before RunFinished, and never for a failed turn", () =>
      withThreads(storeLayer, ({ agent }) =>
        Effect.gen(function*() {
          const seen: Array<string> = []
          const thread = yield* agent.thread("k", {
            onCommit: ({ record: committed, result }) =>
              Effect.sync(() => seen.push(`${committed.turns}:${committed.turn}:${result.text}`))
          })
          const events = yield* Stream.runCollect(
            thread.stream({ input: text("one"), id: "t1" }).pipe(
              Stream.tap((event) => Effect.sync(() => event._tag === "RunFinished" && seen.push("RunFinished")))
            )
          )
          expect(Array.from(events).at(-1)?._tag).toBe("RunFinished")
          expect(seen).toEqual(["1:t1:one", "RunFinished"])
          yield* Effect.flip(thread.run(FakeCli.script({ op: "result", ok: false, error: "boom" })))
          expect(seen).toEqual(["1:t1:one", "RunFinished"])
          // A failing onCommit is logged; the commit stands.
          const failing = yield* agent.thread("k", { onCommit: () => Effect.die("onCommit broke") })
          yield* failing.run({ input: text("two"), id: "t2" })
          expect(yield* record(thread)).toMatchObject({ turns: 2, turn: "t2" })
        })))

    it.live("a turn whose id the committed record carries is not run again (a redelivered turn)", () =>
      withThreads(storeLayer, ({ agent, control }) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("k")
          yield* thread.run({ input: text("first"), id: "turn-1" })
          const committed = yield* record(thread)
          expect(committed).toMatchObject({ turns: 1, turn: "turn-1" })
          const spawned = control.prepared.length
          const again = yield* Effect.flip(thread.run({ input: text("first"), id: "turn-1" }))
          expect(again).toMatchObject({ _tag: "TurnAlreadyCommitted", key: "k", turn: "turn-1" })
          expect(control.prepared.length).toBe(spawned)
          expect(yield* record(thread)).toEqual(committed)
          yield* thread.run({ input: text("second"), id: "turn-2" })
          expect(yield* record(thread)).toMatchObject({ turns: 2, turn: "turn-2" })
          // A turn without an id always runs, and its commit carries none.
          yield* thread.run(text("third"))
          const third = yield* record(thread)
          expect(third.turns).toBe(3)
          expect(third.turn).toBeUndefined()
        })))

    it.live("a turn id cut through an emoji (not well-formed UTF-16) commits, and the turn delivered again is not run", () =>
      withThreads(storeLayer, ({ agent, control, sandbox }) =>
        Effect.gen(function*() {
          const id = "order-😀".slice(0, 7) // "order-\ud83d"
          const thread = yield* agent.thread("k")
          yield* thread.run({ input: text("one"), id })
          const committed = yield* record(thread)
          expect(committed).toMatchObject({ turns: 1, turn: id })
          // The committed session stays in the session store.
          expect(Threads.storedTranscript(Threads.sessionsOf(sandbox), committed.session)).not.toBe("")
          const spawned = control.prepared.length
          const again = yield* Effect.flip(thread.run({ input: text("one again"), id }))
          expect(again).toMatchObject({ _tag: "TurnAlreadyCommitted", key: "k", turn: id })
          expect(control.prepared.length).toBe(spawned)
          expect(yield* record(thread)).toEqual(committed)
        })))

    it.live("keys are opaque strings: Unicode and NUL keys are stored and compared as given", () =>
      withThreads(storeLayer, ({ agent }) =>
        Effect.gen(function*() {
          const keys = ["a\u0000b", "a", "a\u0000", "日本語/😀", " a"]
          for (const key of keys) yield* (yield* agent.thread(key)).run(text(`for ${key}`))
          const sessions = new Set<string>()
          for (const key of keys) {
            const committed = yield* record(yield* agent.thread(key, { resumeOnly: true }))
            expect(committed.key).toBe(key)
            sessions.add(committed.session)
          }
          expect(sessions.size).toBe(keys.length)
        })))

    it.live("failures, non-zero exits and cancellations never overwrite a healthy record", () =>
      withThreads(storeLayer, ({ agent, control }) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("k")
          yield* thread.run(text("healthy"))
          const healthy = yield* record(thread)
          const crashed = yield* Effect.flip(thread.run(FakeCli.script({ op: "text", text: "x" }, { op: "crash" })))
          expect(crashed).toMatchObject({ _tag: "RunError", reason: "ExitedWithoutResult", exitCode: 3 })
          const failed = yield* Effect.flip(thread.run(FakeCli.script({ op: "result", ok: false, error: "boom" })))
          expect(failed).toMatchObject({ _tag: "RunError", reason: "ProviderFailed" })
          // A non-zero exit after an ok terminal record (a crash while the CLI wrote its session).
          const late = yield* Effect.flip(
            thread.run(FakeCli.script({ op: "text", text: "x" }, { op: "result", ok: true }, { op: "crash", code: 7 }))
          )
          expect(late).toMatchObject({ _tag: "RunError", reason: "CheckpointFailed", exitCode: 7 })
          // Cancellation: the consumer stops at the provider's first answer (a resuming turn's
          // events are shown from there on).
          yield* thread.stream(FakeCli.script({ op: "text", text: "x" }, { op: "sleep", ms: 5_000 })).pipe(
            Stream.takeUntil((event) => event._tag === "TextDelta"),
            Stream.runDrain
          )
          expect(yield* record(thread)).toEqual(healthy)
          // Each of them resumed the healthy session, and it still resumes.
          expect(control.prepared.slice(1).map((session) => session._tag)).toEqual([
            "Resume",
            "Resume",
            "Resume",
            "Resume"
          ])
          yield* thread.run(text("still"))
          expect(yield* record(thread)).toMatchObject({ session: healthy.session, turns: 2 })
        })))

    it.live("resumeOnly fails with ThreadNotFound and ThreadIncompatible; continue-or-start replaces", () =>
      withThreads(storeLayer, ({ agent, make, control }) =>
        Effect.gen(function*() {
          expect(yield* Effect.flip(agent.thread("absent", { resumeOnly: true }))).toMatchObject({
            _tag: "ThreadNotFound",
            key: "absent"
          })
          const thread = yield* agent.thread("k")
          yield* thread.run(text("one"))
          const healthy = yield* record(thread)
          // Another agent with other instructions shares the store: another fingerprint.
          const other = yield* make(Threads.driver(control), {
            definition: { instructions: "You write release notes.", skills: [], tools: Threads.Tools }
          })
          expect(other.fingerprint).not.toBe(agent.fingerprint)
          expect(yield* Effect.flip(other.thread("k", { resumeOnly: true }))).toMatchObject({
            _tag: "ThreadIncompatible",
            reason: "Fingerprint"
          })
          expect(yield* record(thread)).toEqual(healthy)
          // A failed fresh start keeps the old record; a clean one replaces it.
          const otherThread = yield* other.thread("k")
          yield* Effect.flip(otherThread.run(FakeCli.script({ op: "crash" })))
          expect(yield* record(thread)).toEqual(healthy)
          const fresh = yield* otherThread.run(text("two"))
          expect(control.prepared.at(-1)?._tag).toBe("New")
          expect(yield* record(thread)).toMatchObject({
            session: fresh.session,
            fingerprint: other.fingerprint,
            turns: 1
          })
          expect(fresh.session).not.toBe(healthy.session)
        })))

    it.live.each(["exit", "stream"] as const)(
      "a rejected resume (%s): resumeOnly fails with ResumeRejected, continue-or-start retries fresh once",
      (rejectBy) =>
        withThreads(storeLayer, ({ agent, control }) =>
          Effect.gen(function*() {
            const thread = yield* agent.thread("k")
            const first = yield* thread.run(text("one"))
            const healthy = yield* record(thread)
            control.rejected.add(first.session!)
            control.rejectBy = rejectBy
            const strict = yield* agent.thread("k", { resumeOnly: true })
            expect(yield* Effect.flip(strict.run(text("two")))).toMatchObject({ _tag: "ResumeRejected", key: "k" })
            expect(yield* record(thread)).toEqual(healthy)
            const before = control.prepared.length
            const events = Array.from(yield* Stream.runCollect(thread.stream(text("three"))))
            expect(control.prepared.slice(before).map((session) => session._tag)).toEqual(["Resume", "New"])
            // The rejected attempt is not seen: one run, which restarted.
            const finished = events.filter((event) => event._tag === "RunFinished")
            expect(finished.map((event) => event.outcome)).toEqual(["success"])
            expect(events.filter((event) => event._tag === "RunStarted")).toHaveLength(1)
            expect(finished[0]!.result.thread?.mode).toBe("restarted")
            const replaced = yield* record(thread)
            expect(replaced.session).toBe(finished[0]!.result.session)
            expect(replaced.session).not.toBe(healthy.session)
            expect(replaced.turns).toBe(1)
            // The fresh session resumes normally from now on.
            yield* thread.run(text("four"))
            expect(control.prepared.at(-1)).toEqual({ _tag: "Resume", id: replaced.session })
          }))
    )

    it.live("a resume rejected after the provider answered is not retried: the turn fails as it is, the record stays", () =>
      withThreads(storeLayer, ({ agent, control }) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("k")
          const first = yield* thread.run(text("one"))
          const healthy = yield* record(thread)
          control.rejected.add(first.session!)
          control.rejectBy = "late"
          const before = control.prepared.length
          const events: Array<Event.Event> = []
          const failure = yield* thread.stream(text("two")).pipe(
            Stream.runForEach((event) => Effect.sync(() => events.push(event))),
            Effect.flip
          )
          expect(failure).toMatchObject({ _tag: "RunError", reason: "ProtocolError" })
          expect(control.prepared.slice(before).map((session) => session._tag)).toEqual(["Resume"])
          // What the consumer was shown stands, in one run.
          expect(events.map((event) => event._tag)).toContain("TextDelta")
          expect(events.filter((event) => event._tag === "RunStarted")).toHaveLength(1)
          expect(events.flatMap((event) => event._tag === "ThreadOpened" ? [event.opening.mode] : [])).toEqual([
            "resumed"
          ])
          expect(yield* record(thread)).toEqual(healthy)
        })))

    it.live("one run per thread at a time: a second run fails fast with ThreadBusy", () =>
      withThreads(storeLayer, ({ agent }) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("k")
          const fiber = yield* startTurn(
            thread.stream(FakeCli.script({ op: "sleep", ms: 800 }, { op: "text", text: "a" }))
          )
          expect(yield* Effect.flip(thread.run(text("b")))).toMatchObject({ _tag: "ThreadBusy", key: "k" })
          const same = yield* agent.thread("k")
          expect(yield* Effect.flip(same.run(text("c")))).toMatchObject({ _tag: "ThreadBusy" })
          // Other keys are not blocked.
          yield* (yield* agent.thread("other")).run(text("d"))
          const first = yield* Fiber.join(fiber)
          expect(first._tag).toBe("Right")
          expect((yield* record(thread)).turns).toBe(1)
          yield* thread.run(text("e"))
          expect((yield* record(thread)).turns).toBe(2)
        })))

    it.live("a turn that outlasts its lease's time to live keeps renewing it: no takeover, the turn commits", () =>
      withThreads(storeLayer, ({ agent }) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("k")
          // A first turn: its events are not held back until a resume is accepted.
          const fiber = yield* startTurn(
            thread.stream(FakeCli.script({ op: "sleep", ms: 2_500 }, { op: "text", text: "x" }))
          )
          // Three times the lease's time to live: only its renewals keep another host out.
          yield* Effect.sleep("1800 millis")
          const store = yield* ThreadStore.ThreadStore
          expect(yield* Effect.flip(store.acquire("k", "1 minute"))).toMatchObject({ _tag: "ThreadBusy", key: "k" })
          expect((yield* Fiber.join(fiber))._tag).toBe("Right")
          expect((yield* record(thread)).turns).toBe(1)
          // Released with the turn: another host may take the thread now.
          yield* store.release(yield* store.acquire("k", "1 minute"))
        }), { threads: { leaseTtl: "600 millis" } }))

    it.live("a lost lease persists nothing: the run fails with CheckpointFailed", () =>
      Effect.gen(function*() {
        const paused = { renewals: false }
        // A store whose renewals stall (a partitioned database): the lease expires mid-run.
        const stalling = Layer.effect(
          ThreadStore.ThreadStore,
          Effect.map(ThreadStore.ThreadStore, (store) => ({
            ...store,
            renew: (lease: ThreadStore.Lease, ttl: Parameters<typeof store.renew>[1]) =>
              paused.renewals ? Effect.void : store.renew(lease, ttl)
          }))
        ).pipe(Layer.provideMerge(storeLayer()))
        yield* withThreads(() => stalling, ({ agent }) =>
          Effect.gen(function*() {
            const thread = yield* agent.thread("k")
            yield* thread.run(text("healthy"))
            const healthy = yield* record(thread)
            paused.renewals = true
            const fiber = yield* startTurn(
              thread.stream(FakeCli.script({ op: "sleep", ms: 900 }, { op: "text", text: "x" }))
            )
            yield* Effect.sleep("450 millis")
            // The lease expired: another host takes the thread over.
            const store = yield* ThreadStore.ThreadStore
            const lease = yield* store.acquire("k", "1 minute")
            const outcome = yield* Fiber.join(fiber)
            expect(outcome._tag).toBe("Left")
            if (outcome._tag === "Left") {
              expect(outcome.left).toMatchObject({ _tag: "RunError", reason: "CheckpointFailed" })
              expect((outcome.left as { readonly cause?: unknown }).cause).toMatchObject({ _tag: "LeaseLost" })
            }
            expect(yield* record(thread)).toEqual(healthy)
            yield* store.release(lease)
          }), { threads: { leaseTtl: "300 millis" } })
      }))

    it.live(
      "a turn whose lease was taken over saves nothing over the new holder's committed session",
      () =>
        Effect.gen(function*() {
          const partition = { on: false }
          // A store this host cannot reach for a while (its renewals fail), then can again.
          const partitioned = Layer.effect(
            ThreadStore.ThreadStore,
            Effect.map(ThreadStore.ThreadStore, (store) => ({
              ...store,
              renew: (lease: ThreadStore.Lease, ttl: Parameters<typeof store.renew>[1]) =>
                partition.on
                  ? Effect.fail(new ThreadStore.ThreadStoreError({ operation: "renew", cause: "partitioned" }))
                  : store.renew(lease, ttl)
            }))
          ).pipe(Layer.provideMerge(storeLayer()))
          yield* withThreads(() => partitioned, ({ agent, make, sandbox }) =>
            Effect.gen(function*() {
              const sessions = Threads.sessionsOf(sandbox)
              const a = yield* agent.thread("k")
              yield* a.run(text("turn one"))
              // Another host, on the same stores (its own renewals reach the store).
              const other = yield* make()
              partition.on = true
              // (A resumed turn shows its events only once the provider answered: not waited for.)
              const lost = yield* Effect.fork(Effect.either(Stream.runDrain(
                a.stream(FakeCli.script({ op: "sleep", ms: 2_500 }, { op: "text", text: "from the lost lease" }))
              )))
              yield* Effect.sleep("700 millis")
              partition.on = false
              const b = yield* other.thread("k")
              yield* b.run(text("from the new holder"))
              const committed = yield* record(b)
              const outcome = yield* Fiber.join(lost)
              expect(outcome._tag).toBe("Left")
              if (outcome._tag === "Left") {
                expect(outcome.left).toMatchObject({ _tag: "RunError", reason: "CheckpointFailed" })
                expect((outcome.left as { readonly cause?: unknown }).cause).toMatchObject({ _tag: "LeaseLost" })
              }
              expect(yield* record(b)).toEqual(committed)
              const stored = Threads.storedTranscript(sessions, committed.session)
              expect(stored).toContain("from the new holder")
              expect(stored).not.toContain("from the lost lease")
            }), { threads: { leaseTtl: "300 millis" } })
        }),
      30_000
    )

    // Two long-lived hosts (agents, each with its own clone) on one thread store and one session
    // store: each turn resumes the checkpoint committed last, whichever host committed it.
    it.live("hosts taking turns on one thread each resume the checkpoint the other committed", () =>
      withThreads(storeLayer, ({ agent: hostX, make, sandbox }) =>
        Effect.gen(function*() {
          const sessions = Threads.sessionsOf(sandbox)
          // Made before any turn: its clone holds no session of the thread.
          const hostY = yield* make()
          yield* (yield* hostX.thread("k")).run(text("turn 1 on X"))
          const second = yield* (yield* hostY.thread("k")).run(text("turn 2 on Y"))
          expect(second.thread).toMatchObject({ mode: "resumed", fromTurns: 1 })
          const third = yield* (yield* hostX.thread("k")).run(text("turn 3 on X"))
          expect(third.thread).toMatchObject({ mode: "resumed", fromTurns: 2 })
          // A host whose clone was seeded after turn 3 falls behind by one turn, then catches up.
          const hostZ = yield* make()
          yield* (yield* hostX.thread("k")).run(text("turn 4 on X"))
          const fifth = yield* (yield* hostZ.thread("k")).run(text("turn 5 on Z"))
          expect(fifth.thread).toMatchObject({ mode: "resumed", fromTurns: 4 })
          const last = yield* record(yield* hostZ.thread("k"))
          expect(last.turns).toBe(5)
          const stored = Threads.storedTranscript(sessions, last.session)
          for (const turn of ["turn 1 on X", "turn 2 on Y", "turn 3 on X", "turn 4 on X", "turn 5 on Z"]) {
            expect(stored).toContain(turn)
          }
        })))

    // A fork on a host whose clone never held the source's session forks the committed one.
    it.live("a host forks the checkpoint another host committed", () =>
      withThreads(storeLayer, ({ agent: hostX, make, sandbox, control }) =>
        Effect.gen(function*() {
          const sessions = Threads.sessionsOf(sandbox)
          const hostY = yield* make()
          yield* (yield* hostX.thread("source")).run(text("turn 1 on X"))
          yield* (yield* hostX.thread("source")).run(text("turn 2 on X"))
          const origin = yield* record(yield* hostX.thread("source"))
          const forked = yield* (yield* hostY.thread("source")).fork("copy")
          const branch = yield* forked.run(text("branch on Y"))
          expect(branch.thread).toMatchObject({ mode: "forked", from: origin.session, fromTurns: 2 })
          expect(control.prepared.at(-1)).toMatchObject({ _tag: "Fork", from: origin.session })
          const copy = yield* record(forked)
          expect(copy.turns).toBe(3)
          const stored = Threads.storedTranscript(sessions, copy.session)
          for (const turn of ["turn 1 on X", "turn 2 on X", "branch on Y"]) expect(stored).toContain(turn)
          // The source is untouched, and host X resumes it as it committed it.
          expect(yield* record(yield* hostX.thread("source"))).toEqual(origin)
        })))

    it.live("fork: the target must be absent; its first turn forks the committed session", () =>
      withThreads(storeLayer, ({ agent, control }) =>
        Effect.gen(function*() {
          expect(yield* Effect.flip((yield* agent.thread("nothing")).fork("x"))).toMatchObject({
            _tag: "ThreadNotFound",
            key: "nothing"
          })
          const source = yield* agent.thread("source")
          yield* source.run(text("one"))
          yield* source.run(text("two"))
          const origin = yield* record(source)
          yield* (yield* agent.thread("taken")).run(text("taken"))
          expect(yield* Effect.flip(source.fork("taken"))).toMatchObject({ _tag: "ThreadAlreadyExists", key: "taken" })
          const forked = yield* source.fork("copy")
          expect(Option.isNone(yield* forked.snapshot)).toBe(true)
          // A failed first turn leaves the target absent.
          yield* Effect.flip(forked.run(FakeCli.script({ op: "crash" })))
          expect(Option.isNone(yield* forked.snapshot)).toBe(true)
          const result = yield* forked.run(text("branch"))
          const prepared = control.prepared.at(-1)!
          expect(prepared).toMatchObject({ _tag: "Fork", from: origin.session })
          const copy = yield* record(forked)
          expect(copy).toMatchObject({ key: "copy", session: result.session, turns: 3, fingerprint: agent.fingerprint })
          expect(copy.session).not.toBe(origin.session)
          expect(yield* record(source)).toEqual(origin)
          // Afterwards the fork resumes its own session; forking onto it again is refused.
          yield* forked.run(text("more"))
          expect(control.prepared.at(-1)).toEqual({ _tag: "Resume", id: copy.session })
          expect(yield* Effect.flip(source.fork("copy"))).toMatchObject({ _tag: "ThreadAlreadyExists" })
        })))

    it.live("fork, resume and revisions are checked before any process starts", () =>
      withThreads(storeLayer, ({ agent, make, control }) =>
        Effect.gen(function*() {
          const source = yield* agent.thread("source")
          yield* source.run(text("one"))
          const count = control.prepared.length
          const noFork = yield* make(Threads.driver(control, { fork: false }))
          const thread = yield* noFork.thread("other")
          yield* thread.run(text("x"))
          expect(yield* Effect.flip(thread.fork("target"))).toMatchObject({
            _tag: "UnsupportedCapability",
            capability: "fork"
          })
          const noResume = yield* make(Threads.driver(control, { resume: false }))
          expect(yield* Effect.flip(noResume.thread("k"))).toMatchObject({
            _tag: "UnsupportedCapability",
            capability: "resume"
          })
          expect(control.prepared.length).toBe(count + 1)
        })))
  })
}
