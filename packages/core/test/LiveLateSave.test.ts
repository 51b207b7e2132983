// A live thread's checkpoint is committed right after its terminal record and the session's
// save; "once the CLI has stopped writing the turn [...] the session is saved again in the
// background, so another host resuming the thread gets the whole turn". That late save happens
// after the turn released its lease: it must never put an older copy of the session over what a
// later turn (another agent or host on the same stores) committed meanwhile.
import { describe, expect, it } from "@effect/vitest"
import type { Driver } from "@tether/core"
import { ThreadStore } from "@tether/core"
import { Reference } from "@tether/testing"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as NodeProcess from "node:process"
import * as Threads from "./fixtures/threads.js"
import { type Env, record, withThreads } from "./fixtures/threadTest.js"

const file = (session: string) => `"$REFERENCE_HOME/sessions/${session}.jsonl"`

/** The reference driver with a session file: its live CLI keeps appending to the session's file
 * (a CLI still writing the turn after its terminal record); a one-shot turn appends one line. */
const driver = (): Driver.Driver => {
  const base = Reference.driver({ live: true })
  const live = base.live!
  return {
    ...base,
    layout: {
      ...base.layout,
      classes: { ...base.layout.classes, sessions: ["sessions/**"] },
      sessionOf: (path: string) => /^sessions\/(.+)\.jsonl$/.exec(path)?.[1]
    },
    prepare: (request) =>
      Effect.map(
        Reference.driver({ respond: (prompt) => Reference.answer(prompt, request.session.id) }).prepare(request),
        (invocation) => ({
          ...invocation,
          command: "/bin/sh",
          args: [
            "-c",
            `mkdir -p "$REFERENCE_HOME/sessions"; echo one-shot-turn >> ${file(request.session.id)}; exec "$0" "$@"`,
            invocation.command,
            ...invocation.args
          ]
        })
      ),
    live: {
      ...live,
      open: (request) =>
        Effect.map(live.open(request), (invocation) => ({
          ...invocation,
          command: "/bin/sh",
          args: [
            "-c",
            `mkdir -p "$REFERENCE_HOME/sessions"; (while :; do echo live-late-write >> ${
              file("$REFERENCE_SESSION")
            }; sleep 0.05; done) & exec "$0" "$@"`,
            NodeProcess.execPath,
            ...invocation.args
          ]
        }))
    }
  }
}

/**
 * One agent over the thread store whose thread `k` committed a live turn, its late save's check
 * (a store read) held open until `answer` (a remote database, a busy event loop).
 */
const heldLateSave = (make: Env["make"], drv: Driver.Driver) =>
  Effect.gen(function*() {
    const store = yield* ThreadStore.ThreadStore
    const armed = { on: false }
    const checking = yield* Deferred.make<void>()
    const answer = yield* Deferred.make<void>()
    const slow: ThreadStore.ThreadStore["Type"] = {
      ...store,
      get: (key) =>
        Effect.flatMap(store.get(key), (value) =>
          !armed.on ? Effect.succeed(value) : Effect.gen(function*() {
            armed.on = false
            yield* Deferred.succeed(checking, undefined)
            yield* Deferred.await(answer)
            return value
          }))
    }
    const agent = yield* make(drv, { processes: { exitGrace: "1 second", killGrace: "500 millis" } }).pipe(
      Effect.provideService(ThreadStore.ThreadStore, slow)
    )
    const thread = yield* agent.thread("k")
    const first = yield* thread.run("one")
    armed.on = true
    yield* Deferred.await(checking).pipe(Effect.timeout("10 seconds"))
    return { store, thread, session: first.session!, answer: Deferred.succeed(answer, undefined) }
  })

describe("a live turn's late session save", () => {
  it.live("never overwrites the session a later turn of another agent committed", () =>
    withThreads(() => ThreadStore.layerMemory, ({ make, sandbox }) =>
      Effect.gen(function*() {
        const drv = driver()
        const a = yield* make(drv, { processes: { exitGrace: "2 seconds", killGrace: "500 millis" } })
        const b = yield* make(drv, { live: { threads: false } })
        expect(b.fingerprint).toBe(a.fingerprint)
        const first = yield* (yield* a.thread("k")).run("one")
        const SID = first.session!
        // Another agent on the same stores takes the next turn at once (the lease is free).
        const second = yield* (yield* b.thread("k")).run("two")
        expect(second.thread?.mode).toBe("resumed")
        expect((yield* record(yield* b.thread("k"))).turns).toBe(2)
        const sessions = Threads.sessionsOf(sandbox)
        expect(Threads.storedTranscript(sessions, SID)).toContain("one-shot-turn")
        // The first agent's late save (its CLI's files never went quiet: bounded by the exit grace).
        yield* Effect.sleep("3500 millis")
        expect(Threads.storedTranscript(sessions, SID)).toContain("one-shot-turn")
      })))

  it.live("checks and saves under the thread's lease: another agent's turn waits, and its save stands", () =>
    withThreads(() => ThreadStore.layerMemory, ({ make, sandbox }) =>
      Effect.gen(function*() {
        const drv = driver()
        const held = yield* heldLateSave(make, drv)
        const b = yield* make(drv, { live: { threads: false } })
        // A's late save is checking that its commit is still current: another agent's turn, which
        // would save and commit between that check and the save, is ThreadBusy until it is done.
        const tb = yield* b.thread("k")
        expect(yield* Effect.flip(tb.run("two"))).toMatchObject({ _tag: "ThreadBusy", key: "k" })
        yield* held.answer
        const second = yield* tb.run("two").pipe(
          Effect.retry({
            while: (error) => error._tag === "ThreadBusy",
            schedule: Schedule.spaced("100 millis"),
            times: 50
          })
        )
        expect(second.thread).toMatchObject({ mode: "resumed", from: held.session, fromTurns: 1 })
        const sessions = Threads.sessionsOf(sandbox)
        // The stored session holds the late writes of A's turn and the other agent's turn.
        expect(Threads.storedTranscript(sessions, held.session)).toContain("live-late-write")
        expect(Threads.storedTranscript(sessions, held.session)).toContain("one-shot-turn")
        yield* Effect.sleep("1500 millis")
        expect((yield* record(tb)).turns).toBe(2)
        expect(Threads.storedTranscript(sessions, held.session)).toContain("one-shot-turn")
      })))

  it.live("the agent's own next turn waits for it, never ThreadBusy", () =>
    withThreads(() => ThreadStore.layerMemory, ({ make }) =>
      Effect.gen(function*() {
        const held = yield* heldLateSave(make, driver())
        const next = yield* Effect.fork(Effect.either(held.thread.run("two")))
        yield* Effect.sleep("300 millis")
        yield* held.answer
        const outcome = yield* Fiber.join(next).pipe(Effect.timeout("20 seconds"))
        expect(outcome._tag === "Left" ? outcome.left._tag : "ran").toBe("ran")
        expect(Option.getOrThrow(yield* held.store.get("k")).turns).toBe(2)
      })))

  it.live("the agent's own delete right after the turn waits for it, never ThreadBusy", () =>
    withThreads(() => ThreadStore.layerMemory, ({ make }) =>
      Effect.gen(function*() {
        const held = yield* heldLateSave(make, driver())
        // No turn runs: the user deletes the conversation they just had.
        const deleting = yield* Effect.fork(Effect.either(held.thread.delete))
        yield* Effect.sleep("300 millis")
        yield* held.answer
        const outcome = yield* Fiber.join(deleting).pipe(Effect.timeout("20 seconds"))
        expect(outcome._tag === "Left" ? outcome.left._tag : "deleted").toBe("deleted")
        expect(Option.isNone(yield* held.store.get("k"))).toBe(true)
      })))

  it.live("a turn waiting for it fails ThreadClosed at once when the thread is closed", () =>
    withThreads(() => ThreadStore.layerMemory, ({ make }) =>
      Effect.gen(function*() {
        const held = yield* heldLateSave(make, driver())
        const next = yield* Effect.fork(Effect.either(held.thread.run("two")))
        yield* Effect.sleep("200 millis")
        const closing = Date.now()
        yield* held.thread.close
        const outcome = yield* Fiber.join(next).pipe(Effect.timeout("20 seconds"))
        const waited = Date.now() - closing
        yield* held.answer
        expect({ outcome: outcome._tag === "Left" ? outcome.left._tag : "ran", promptly: waited < 1_000 })
          .toEqual({ outcome: "ThreadClosed", promptly: true })
      })))
})
