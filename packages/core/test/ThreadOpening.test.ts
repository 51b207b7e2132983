// How a thread turn opens its provider session, and what the host is told when it cannot resume:
// nothing a thread held is lost without a `ThreadOpened` event and `Result.thread` saying so.
import { describe, expect, it } from "@effect/vitest"
import type { Event } from "@tether/core"
import { Thread } from "@tether/core"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Threads from "./fixtures/threads.js"
import { record, text, withThreads } from "./fixtures/threadTest.js"

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

    it.live("a resume the provider rejects restarts with its rejection text; the replaced record stays readable", () =>
      withThreads(storeLayer, ({ agent, make, control, sandbox }) =>
        Effect.gen(function*() {
          yield* (yield* agent.thread("k")).run(text("one"))
          const healthy = yield* record(yield* agent.thread("k"))
          yield* agent.close()
          // The session store lost the session: the next clone has no transcript to resume.
          yield* loseTranscript(Threads.sessionsOf(sandbox), healthy.session)
          const rebuilt = yield* make(Threads.driver(control))
          const thread = yield* rebuilt.thread("k")
          const events = yield* collect(thread.stream(text("two")))
          const detail = `no conversation found with session id ${healthy.session}`
          expect(openings(events)).toEqual([
            new Thread.ThreadOpening({ key: "k", mode: "resumed", from: healthy.session, fromTurns: 1 }),
            new Thread.ThreadOpening({
              key: "k",
              mode: "restarted",
              from: healthy.session,
              fromTurns: 1,
              reason: new Thread.Rejected({ detail })
            })
          ])
          const finished = events.flatMap((event) => event._tag === "RunFinished" ? [event] : [])
          expect(finished.map((event) => event.outcome)).toEqual(["failure", "success"])
          expect(finished[1]!.result.thread?.mode).toBe("restarted")
          expect((yield* record(thread)).session).toBe(finished[1]!.result.session)
          expect((yield* thread.history).map((entry) => entry.record)).toEqual([healthy])
        })))

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
