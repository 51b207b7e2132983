/**
 * Several handles of one thread key in one agent, and forks: a second handle's run and delete are
 * `ThreadBusy` while the first runs (its prune works, its close leaves the other's turn alone); a
 * fork whose source was deleted, or deleted itself before its first turn; a closed handle's
 * events, fork and delete;
 * `resumeOnly` and `onUnresumable: "fail"`.
 */
import { describe, expect, it } from "@effect/vitest"
import { ThreadStore } from "@tether/core"
import { FakeCli } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Threads from "./fixtures/threads.js"
import { record, startTurn, text, watch, withThreads } from "./fixtures/threadTest.js"

const store = () => ThreadStore.layerMemory
const long = () =>
  FakeCli.script({ op: "text", text: "on it" }, { op: "sleep", ms: 1_500 }, { op: "text", text: "done" })

describe("thread handles of one key", () => {
  it.live("a second handle's run and delete are ThreadBusy while the first runs; its prune works, its close leaves that turn alone", () =>
    withThreads(store, ({ agent }) =>
      Effect.gen(function*() {
        const a = yield* agent.thread("k")
        yield* a.run(text("one"))
        const b = yield* agent.thread("k")
        const eventsA = yield* watch(a.events)
        const fiber = yield* startTurn(a.stream(long()))
        expect(yield* Effect.flip(b.run(text("x")))).toMatchObject({ _tag: "ThreadBusy" })
        expect(yield* Effect.flip(b.delete)).toMatchObject({ _tag: "ThreadBusy" })
        expect(yield* b.prune()).toEqual([])
        yield* b.close
        const outcome = yield* Fiber.join(fiber)
        expect(outcome._tag).toBe("Right")
        expect((yield* record(a)).turns).toBe(2)
        yield* a.close
        const evs = yield* Fiber.join(eventsA)
        expect(evs.filter((e) => e._tag === "RunFinished")).toHaveLength(1)
      })))

  it.live("a fork whose source was deleted before its first turn restarts (ResumeRejected), then resumes", () =>
    withThreads(store, ({ agent }) =>
      Effect.gen(function*() {
        const a = yield* agent.thread("src")
        yield* a.run(text("one"))
        const f = yield* a.fork("copy")
        yield* a.delete
        // The source's session went with it: the fork's resume of it is rejected, and it restarts.
        const branched = yield* f.run(text("branch"))
        expect(branched.thread).toMatchObject({
          mode: "restarted",
          fromTurns: 1,
          reason: { _tag: "ResumeRejected" }
        })
        const again = yield* f.run(text("again"))
        expect(again.thread).toMatchObject({ mode: "resumed", from: branched.session, fromTurns: 1 })
        expect(yield* record(f)).toMatchObject({ key: "copy", session: branched.session, turns: 2 })
      })))

  it.live("a fork handle deleted before its first turn deletes nothing", () =>
    withThreads(store, ({ agent }) =>
      Effect.gen(function*() {
        const a = yield* agent.thread("src")
        yield* a.run(text("one"))
        const f = yield* a.fork("copy")
        expect(yield* f.delete).toEqual([])
        const branched = yield* f.run(text("branch"))
        expect(branched.thread).toMatchObject({ mode: "forked", fromTurns: 1 })
        expect((yield* record(a)).turns).toBe(1)
      })))

  it.live("a closed handle: events end at once, fork is ThreadClosed, delete works", () =>
    withThreads(store, ({ agent }) =>
      Effect.gen(function*() {
        const a = yield* agent.thread("k")
        yield* a.close
        const evs = yield* Stream.runCollect(a.events).pipe(Effect.timeout("2 seconds"))
        expect(evs.length).toBe(0)
        expect(yield* Effect.flip(a.fork("zz"))).toMatchObject({ _tag: "ThreadClosed" })
        // Nothing was committed under the key: the delete removes nothing, and does not fail.
        expect(yield* a.delete).toEqual([])
      })))

  it.live("a resumeOnly fork whose source is rejected commits nothing; onUnresumable fail is ThreadIncompatible before spawn", () =>
    withThreads(store, ({ agent, control, make }) =>
      Effect.gen(function*() {
        const a = yield* agent.thread("src")
        const first = yield* a.run(text("one"))
        const f = yield* a.fork("copy", { resumeOnly: true })
        control.rejected.add(first.session!)
        expect(yield* Effect.flip(f.run(text("b")))).toMatchObject({ _tag: "ResumeRejected", key: "copy" })
        expect(Option.isNone(yield* f.snapshot)).toBe(true)
        control.rejected.clear()
        const strict = yield* agent.thread("src", { onUnresumable: "fail" })
        const other = yield* make(Threads.driver(control), {
          definition: { instructions: "You write release notes.", skills: [], tools: Threads.Tools }
        })
        yield* (yield* other.thread("src")).run(text("other"))
        const before = control.prepared.length
        expect(yield* Effect.flip(strict.run(text("x")))).toMatchObject({ _tag: "ThreadIncompatible" })
        expect(control.prepared.length).toBe(before)
      })))

  it.live("closing one handle while another runs: each handle's events are its own", () =>
    withThreads(store, ({ agent }) =>
      Effect.gen(function*() {
        const a = yield* agent.thread("k")
        const b = yield* agent.thread("k")
        const evA = yield* watch(a.events)
        const evB = yield* watch(b.events)
        const fiber = yield* startTurn(b.stream(long()))
        yield* a.close
        const out = yield* Fiber.join(fiber)
        expect(out._tag).toBe("Right")
        expect(yield* Fiber.join(evA)).toEqual([])
        yield* b.close
        const eb = yield* Fiber.join(evB)
        expect(eb.filter((e) => e._tag === "RunFinished").map((e) => (e as any).outcome)).toEqual(["success"])
      })))
})
