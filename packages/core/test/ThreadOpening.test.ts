// How a thread turn opens its provider session, and what the host is told when it cannot resume:
// nothing a thread held is lost without a `ThreadOpened` event and `Result.thread` saying so.
import { describe, expect, it } from "@effect/vitest"
import type { Event } from "@tether/core"
import { Driver, Thread, ThreadStore } from "@tether/core"
import { FakeCli, Harness, Reference } from "@tether/testing"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Threads from "./fixtures/threads.js"
import { type Env, record, text, watch, withThreads } from "./fixtures/threadTest.js"

const collect = <E>(stream: Stream.Stream<Event.Event, E>) =>
  Effect.map(
    Stream.runCollect(Stream.either(stream)),
    (chunk) => Array.from(chunk).flatMap((either) => either._tag === "Right" ? [either.right] : [])
  )

const openings = (events: ReadonlyArray<Event.Event>) =>
  events.flatMap((event) => event._tag === "ThreadOpened" ? [event.opening] : [])

/** Removes a session's transcript from the session store (a store that lost the session). */
const loseTranscript = (sessions: string, session: string) =>
  Effect.sync(() => {
    for (const store of Fs.readdirSync(sessions)) {
      Fs.rmSync(Path.join(sessions, store, "profile", "sessions", `${session}.jsonl`), { force: true })
    }
  })

/**
 * A thread with one committed turn whose session the store then lost, reopened on a new agent
 * (the first one closed): its next turn's resume is rejected. The thread's observers are watched.
 */
const lostSession = (
  { agent, control, make, sandbox }: Env
) =>
  Effect.gen(function*() {
    yield* (yield* agent.thread("k")).run(text("one"))
    const healthy = yield* record(yield* agent.thread("k"))
    yield* agent.close()
    // The session store lost the session: the next clone has no transcript to resume.
    yield* loseTranscript(Threads.sessionsOf(sandbox), healthy.session)
    const rebuilt = yield* make(Threads.driver(control))
    const thread = yield* rebuilt.thread("k")
    const watching = yield* watch(thread.events)
    return { healthy, prepared: control.prepared.length, rebuilt, thread, watching }
  })

for (const [name, storeLayer] of Threads.stores) {
  describe(`Thread openings (${name} store)`, () => {
    it.live("every turn says how it opened: ThreadOpened right after RunStarted, before any output, and Result.thread", () =>
      withThreads(storeLayer, ({ agent }) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("k")
          const first = yield* collect(thread.stream(text("one")))
          expect(first.slice(0, 3).map((event) => event._tag)).toEqual(["RunStarted", "ThreadOpened", "ProcessStarted"])
          expect(first[0]).toMatchObject({ threadKey: "k" })
          const started = openings(first)[0]!
          expect(started).toEqual(new Thread.ThreadOpening({ key: "k", mode: "started" }))
          const firstResult = first.flatMap((event) => event._tag === "RunFinished" ? [event.result] : [])[0]!
          expect(firstResult.thread).toEqual(started)
          const second = yield* thread.run(text("two"))
          expect(second.thread).toEqual(
            new Thread.ThreadOpening({ key: "k", mode: "resumed", from: firstResult.session!, fromTurns: 1 })
          )
          const forked = yield* (yield* thread.fork("branch")).run(text("three"))
          expect(forked.thread).toEqual(
            new Thread.ThreadOpening({ key: "branch", mode: "forked", from: firstResult.session!, fromTurns: 2 })
          )
          // A plain run of the agent is no thread.
          const plain = yield* collect(agent.stream(text("plain")))
          expect(openings(plain)).toEqual([])
          const last = plain.at(-1)
          expect(last?._tag === "RunFinished" && last.result.thread).toBeUndefined()
        })))

    it.live("an incompatible record restarts, naming the components that differ; the replaced one stays readable", () =>
      withThreads(storeLayer, ({ agent, make, control }) =>
        Effect.gen(function*() {
          yield* (yield* agent.thread("k")).run(text("one"))
          const healthy = yield* record(yield* agent.thread("k"))
          const other = yield* make(Threads.driver(control), {
            definition: { instructions: "You write release notes.", skills: [], tools: Threads.Tools },
            model: "other-model"
          })
          const thread = yield* other.thread("k")
          const events = yield* collect(thread.stream(text("two")))
          const [opening] = openings(events)
          expect(opening).toEqual(
            new Thread.ThreadOpening({
              key: "k",
              mode: "restarted",
              from: healthy.session,
              fromTurns: 1,
              reason: new Thread.Incompatible({ components: ["instructions", "model"] })
            })
          )
          // Announced before the provider process started.
          expect(events.findIndex((event) => event._tag === "ThreadOpened")).toBeLessThan(
            events.findIndex((event) => event._tag === "ProcessStarted")
          )
          expect(control.prepared.at(-1)?._tag).toBe("New")
          const replaced = yield* record(thread)
          expect(replaced).toMatchObject({ fingerprint: other.fingerprint, turns: 1 })
          expect(replaced.session).not.toBe(healthy.session)
          const history = yield* thread.history
          expect(history.map((entry) => entry.record)).toEqual([healthy])
          // The original agent is told the same, by name, when it must not restart.
          expect(yield* Effect.flip(agent.thread("k", { resumeOnly: true }))).toMatchObject({
            _tag: "ThreadIncompatible",
            reason: "Fingerprint",
            components: ["instructions", "model"]
          })
        })))

    it.live(
      "a resume the provider rejects restarts with its rejection text, seen only as the restart (one run); the replaced record stays readable",
      () =>
        withThreads(storeLayer, (fixture) =>
          Effect.gen(function*() {
            const { control } = fixture
            const { healthy, prepared, rebuilt, thread, watching } = yield* lostSession(fixture)
            const events = yield* collect(thread.stream(text("two")))
            // The rejected attempt ran (a resume, then a fresh session) ...
            expect(control.prepared.slice(prepared).map((session) => session._tag)).toEqual(["Resume", "New"])
            // ... and is invisible but for the restart's ThreadOpened: one run, one start, one end.
            const detail = `no conversation found with session id ${healthy.session}`
            const restarted = new Thread.ThreadOpening({
              key: "k",
              mode: "restarted",
              from: healthy.session,
              fromTurns: 1,
              reason: new Thread.Rejected({ detail })
            })
            expect(openings(events)).toEqual([restarted])
            expect(events.filter((event) => event._tag === "RunStarted")).toHaveLength(1)
            expect(new Set(events.map((event) => event.runId)).size).toBe(1)
            const finished = events.flatMap((event) => event._tag === "RunFinished" ? [event] : [])
            expect(finished.map((event) => event.outcome)).toEqual(["success"])
            expect(finished[0]!.result.thread).toEqual(restarted)
            // The thread's observers are told the same.
            yield* rebuilt.close()
            const observed = Array.from(yield* Fiber.join(watching))
            expect(observed.map((event) => [event.runId, event._tag])).toEqual(
              events.map((event) => [event.runId, event._tag])
            )
            expect((yield* record(thread)).session).toBe(finished[0]!.result.session)
            expect((yield* thread.history).map((entry) => entry.record)).toEqual([healthy])
          }))
    )

    it.live(
      "thread.run of a rejected resume: the result and the observers see one run, opened restarted; a rejection after the provider answered stands",
      () =>
        withThreads(storeLayer, (fixture) =>
          Effect.gen(function*() {
            const { control } = fixture
            const { healthy, prepared, rebuilt, thread, watching } = yield* lostSession(fixture)
            // `run` reads its turn without a stream: the fresh retry and the hold work the same.
            const result = yield* thread.run(text("two"))
            expect(control.prepared.slice(prepared).map((session) => session._tag)).toEqual(["Resume", "New"])
            const restarted = new Thread.ThreadOpening({
              key: "k",
              mode: "restarted",
              from: healthy.session,
              fromTurns: 1,
              reason: new Thread.Rejected({ detail: `no conversation found with session id ${healthy.session}` })
            })
            expect(result.thread).toEqual(restarted)
            expect((yield* record(thread)).session).toBe(result.session)
            // A resume rejected after the provider answered: nothing is retried, the failure stands.
            const resumed = yield* record(thread)
            control.rejected.add(resumed.session)
            control.rejectBy = "late"
            const before = control.prepared.length
            expect(yield* Effect.flip(thread.run(text("three")))).toMatchObject({
              _tag: "RunError",
              reason: "ProtocolError"
            })
            expect(control.prepared.slice(before).map((session) => session._tag)).toEqual(["Resume"])
            expect(yield* record(thread)).toEqual(resumed)
            yield* rebuilt.close()
            const observed = Array.from(yield* Fiber.join(watching))
            // One run per turn, the first opened restarted (the rejected attempt unseen), the second
            // shown whole up to its failure.
            const runs = Array.from(new Set(observed.map((event) => event.runId)))
            expect(runs).toHaveLength(2)
            expect(openings(observed).map((opening) => opening.mode)).toEqual(["restarted", "resumed"])
            expect(observed.filter((event) => event._tag === "RunStarted")).toHaveLength(2)
            const finished = observed.flatMap((event) => event._tag === "RunFinished" ? [event.outcome] : [])
            expect(finished).toEqual(["success", "failure"])
            // The text the provider gave before its rejection, whole: the scrubber may hand it on in
            // two deltas (it holds back an end that could start a live token, 1 chance in 64 per token).
            const answered = observed.flatMap((event) =>
              event.runId === runs[1] && event._tag === "TextDelta" ? [event.text] : []
            )
            expect(answered.join("")).toBe("already answering")
          }))
    )

    it.live("onUnresumable: fail — nothing starts on an incompatible record, a rejected resume fails, the record stays", () =>
      withThreads(storeLayer, ({ agent, make, control }) =>
        Effect.gen(function*() {
          const other = yield* make(Threads.driver(control), { model: "other-model" })
          // Opened while nothing is committed; the record appears before its turn.
          const strict = yield* other.thread("k", { onUnresumable: "fail" })
          yield* (yield* agent.thread("k")).run(text("one"))
          const healthy = yield* record(strict)
          const prepared = control.prepared.length
          expect(yield* Effect.flip(strict.run(text("two")))).toMatchObject({
            _tag: "ThreadIncompatible",
            components: ["model"]
          })
          expect(yield* Effect.flip(other.thread("k", { onUnresumable: "fail" }))).toMatchObject({
            _tag: "ThreadIncompatible"
          })
          expect(control.prepared.length).toBe(prepared)
          // A rejected resume: one attempt, no fresh session.
          control.rejected.add(healthy.session)
          const failing = yield* agent.thread("k", { onUnresumable: "fail" })
          expect(yield* Effect.flip(failing.run(text("three")))).toMatchObject({ _tag: "ResumeRejected", key: "k" })
          expect(control.prepared.slice(prepared).map((session) => session._tag)).toEqual(["Resume"])
          expect(yield* record(failing)).toEqual(healthy)
          expect(yield* failing.history).toEqual([])
        })))
  })
}

describe("Thread openings: the hold on a resumed turn", () => {
  it.live("a resumed turn canceled before it showed anything reaches the observers by the close, however slow its caller", () =>
    withThreads(() => ThreadStore.layerMemory, ({ agent }) =>
      Effect.gen(function*() {
        const thread = yield* agent.thread("k")
        yield* thread.run(text("one"))
        const watching = yield* watch(thread.events)
        // The resumed turn's CLI hangs after announcing its session: every event is bookkeeping,
        // so the caller's stream holds them until the run ends. The caller then stalls on the
        // first one until after the agent's close.
        const stalled = yield* Deferred.make<void>()
        const caller = yield* thread.stream(FakeCli.script({ op: "hang" })).pipe(
          Stream.tap(() => Deferred.await(stalled)),
          Stream.runCollect,
          Effect.either,
          Effect.fork
        )
        yield* Harness.markedProcesses(agent.marker).pipe(
          Effect.repeat({ until: (pids) => pids.length > 0, schedule: Schedule.spaced("20 millis") })
        )
        yield* agent.close()
        yield* Deferred.succeed(stalled, undefined)
        yield* Fiber.join(caller)
        const observed = yield* Fiber.join(watching)
        expect(observed.map((event) => event._tag)).toContain("RunStarted")
        const finished = observed.flatMap((event) => event._tag === "RunFinished" ? [event.outcome] : [])
        expect(finished).toEqual(["canceled"])
        expect(observed.find((event) => event._tag === "ThreadOpened")).toMatchObject({ opening: { mode: "resumed" } })
      })))
  it.live("the hold is bounded: a resumed turn whose CLI prints only unreadable lines is shown after 256 events", () =>
    withThreads(() => ThreadStore.layerMemory, ({ agent }) =>
      Effect.gen(function*() {
        const thread = yield* agent.thread("k")
        yield* thread.run(text("one"))
        // 300 lines that are not JSON (a Notice each), then the CLI hangs: the run never ends on
        // its own, so without the bound its caller would see nothing.
        const malformed = Array.from({ length: 300 }, () => ({ op: "malformed" }) as const)
        const seen = yield* thread.stream(FakeCli.script(...malformed, { op: "hang" })).pipe(
          Stream.takeUntil((event) => event._tag === "Notice"),
          Stream.runCollect,
          Effect.timeout("30 seconds")
        )
        const tags = Array.from(seen).map((event) => event._tag)
        expect(tags.slice(0, 2)).toEqual(["RunStarted", "ThreadOpened"])
        expect(tags.at(-1)).toBe("Notice")
      })))
})

describe("Thread openings (live)", () => {
  it.live(
    "a live process whose session load is rejected restarts fresh, seen only as the restart; the rejected process is gone",
    () => {
      const rejected = new Set<string>()
      const base = Reference.driver({ live: true })
      // The provider refuses to load chosen sessions when its live process attaches (ACP's
      // `session/load` failing), before any output.
      const rejecting: Driver.Driver = {
        ...base,
        live: {
          ...base.live!,
          attach: (channel, context) =>
            context.session._tag === "Resume" && rejected.has(context.session.id)
              ? Effect.fail(new Driver.ProtocolError({ reason: "ResumeRejected", detail: "no such session" }))
              : base.live!.attach(channel, context)
        }
      }
      return withThreads(() => ThreadStore.layerMemory, ({ make }) =>
        Effect.gen(function*() {
          const agent = yield* make(rejecting)
          const first = yield* (yield* agent.thread("k")).run("one")
          yield* agent.close()
          rejected.add(first.session!)
          const rebuilt = yield* make(rejecting)
          const thread = yield* rebuilt.thread("k")
          const events = yield* collect(thread.stream("two"))
          expect(openings(events)).toEqual([
            new Thread.ThreadOpening({
              key: "k",
              mode: "restarted",
              from: first.session!,
              fromTurns: 1,
              reason: new Thread.Rejected({ detail: "no such session" })
            })
          ])
          expect(events.filter((event) => event._tag === "RunStarted")).toHaveLength(1)
          expect(events.filter((event) => event._tag === "RunFinished").map((event) => event.outcome)).toEqual([
            "success"
          ])
          // Only the fresh session's process is left: the one the rejected load ran on was shut down.
          const started = events.flatMap((event) => event._tag === "ProcessStarted" ? [event.pid] : [])
          expect(started).toHaveLength(1)
          expect(yield* Harness.markedProcesses(rebuilt.marker)).toEqual(started)
        }))
    }
  )
})
