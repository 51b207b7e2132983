/**
 * `agent.pruneThreads` while a thread's first turn is between its session's save and its commit
 * (the store's commit held back: a slow database). The sweep of unreferenced session-store entries
 * took the committing session for a killed host's leftover (with `olderThan: 0`) and removed it:
 * the record then pointed at a session the store no longer held, and another agent's turn started
 * fresh. Entries saved within the lease's time to live are kept.
 */
import { describe, expect, it } from "@effect/vitest"
import { ThreadStore } from "@tether/core"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import { sessionsOf, storedTranscript } from "./fixtures/threads.js"
import { record, text, withThreads } from "./fixtures/threadTest.js"

describe("agent.pruneThreads while a thread's first turn commits", () => {
  it.live("does not drop the session a turn has saved and is committing", () => {
    // The store's commit of the first turn waits until the test lets it go (a slow database).
    const reached = Deferred.unsafeMake<void>(undefined as never)
    const go = Deferred.unsafeMake<void>(undefined as never)
    const slow = Layer.effect(
      ThreadStore.ThreadStore,
      Effect.map(ThreadStore.ThreadStore, (store) => ({
        ...store,
        commit: (lease: ThreadStore.Lease, next: ThreadStore.ThreadRecord, mode: ThreadStore.CommitMode) =>
          Deferred.succeed(reached, undefined).pipe(
            Effect.zipRight(Deferred.await(go)),
            Effect.zipRight(store.commit(lease, next, mode))
          )
      }))
    ).pipe(Layer.provideMerge(ThreadStore.layerMemory))
    return withThreads(() => slow, ({ agent, make, sandbox }) =>
      Effect.gen(function*() {
        const thread = yield* agent.thread("k")
        const turn = yield* Effect.fork(thread.run(text("remember the number 42")))
        yield* Deferred.await(reached)
        // Retention of every key, while the turn's session is saved and its commit in flight.
        const report = yield* agent.pruneThreads({ olderThan: 0 })
        yield* Deferred.succeed(go, undefined)
        const first = yield* Fiber.join(turn)
        const committed = yield* record(thread)
        expect(committed.session).toBe(first.session)
        // The committed checkpoint points at a session the session store still holds...
        expect(report.sessionEntries).toEqual([])
        expect(storedTranscript(sessionsOf(sandbox), committed.session)).not.toBe("")
        // ...so another host (an agent with a clone of its own) resumes it, not a fresh session.
        const other = yield* make()
        const next = yield* (yield* other.thread("k")).run(text("what was the number?"))
        expect(next.thread).toMatchObject({ mode: "resumed", from: committed.session })
      }))
  })
})
