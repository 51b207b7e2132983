/**
 * A fork's first turn and its source's turns. In one agent (one clone), the fork's first turn
 * loaded the source's committed session over the file a running turn of the source appended to:
 * the source then committed two turns over a transcript that had lost the start of the second
 * (nothing reported). And a fork forked the record it was opened with while its first turn loaded
 * the session the store held then: a source that committed in between was forked with its newer
 * turns, the opening counting the older ones. The fork's first turn holds the source's lease
 * (`ThreadBusy` naming the source while a turn of it runs; the source's turns are `ThreadBusy`
 * while it runs) and forks what the source holds when it starts.
 *
 * Every wait is bounded: a turn that never ends fails the test with what it waited for.
 */
import { describe, expect, it } from "@effect/vitest"
import { ThreadStore } from "@tether/core"
import { FakeCli } from "@tether/testing"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Threads from "./fixtures/threads.js"
import { type Env, record, type Services, startTurn, text, withThreads } from "./fixtures/threadTest.js"

/** `effect`, failing with `what` if it has not ended within 30 s. */
const within = <A, E, R>(what: string, effect: Effect.Effect<A, E, R>) =>
  Effect.timeoutFail(effect, { duration: "30 seconds", onTimeout: () => new Error(`timed out: ${what}`) })

/** A turn of the source that writes `part-A`, works on for a while, then writes `part-B`. */
const longTurn = FakeCli.script({ op: "text", text: "part-A" }, { op: "sleep", ms: 1_500 }, {
  op: "text",
  text: "part-B"
})

/** Whether a session transcript in the clones under `root` holds `part-A` (the fake CLI writes it there). */
const writtenPartA = (root: string): boolean =>
  (Fs.readdirSync(root, { recursive: true, encoding: "utf8" }) as Array<string>).some((rel) => {
    if (!/sessions[/\\][^/\\]+\.jsonl$/.test(rel)) return false
    try {
      return Fs.readFileSync(Path.join(root, rel), "utf8").includes("part-A")
    } catch {
      return false
    }
  })

/**
 * Starts `stream` in the background; returns once its turn has written `part-A` (shown as an
 * event, or in its session's transcript in the clone), or fails if the turn ended without it,
 * naming what the stream showed.
 */
const startedPastPartA = <E>(stream: Stream.Stream<{ readonly _tag: string }, E>, root: string) =>
  Effect.gen(function*() {
    const partA = yield* Deferred.make<void>()
    const seen: Array<string> = []
    const fiber = yield* stream.pipe(
      Stream.tap((event) => {
        const text = (event as { readonly text?: unknown }).text
        seen.push(typeof text === "string" ? `${event._tag}(${text})` : event._tag)
        return (event._tag === "TextDelta" || event._tag === "Message") && typeof text === "string" &&
            text.includes("part-A")
          ? Deferred.succeed(partA, undefined)
          : Effect.void
      }),
      Stream.runDrain,
      Effect.either,
      Effect.fork
    )
    const written = Effect.repeat(Effect.sync(() => writtenPartA(root)), {
      until: (found) => found,
      schedule: Schedule.spaced("25 millis")
    })
    const shown = yield* within(
      "the turn writing part-A",
      Effect.raceAll([
        Effect.as(Deferred.await(partA), true),
        Effect.as(written, true),
        Effect.as(Fiber.await(fiber), false)
      ])
    )
    if (!shown) {
      return yield* Effect.dieMessage(
        `the turn ended without part-A: ${JSON.stringify(yield* Fiber.join(fiber))}; it showed ${seen.join(", ")}`
      )
    }
    return fiber
  })

/**
 * One agent on the memory store whose events are never dropped: the tests wait for the source's
 * `part-A` delta, which a slow consumer under load could lose (the default drops deltas, counted
 * by a `Dropped` event; stop 55's version of this test then waited forever, CI run 130).
 */
const lossless = <A, E>(body: (env: Env) => Effect.Effect<A, E, Services>) =>
  withThreads(() => ThreadStore.layerMemory, body, { events: { blocking: true } })

describe("a fork's first turn and its source", () => {
  it.live("in one agent: ThreadBusy while the source runs, reverts nothing of it, then forks what it committed", () =>
    lossless(({ agent, sandbox }) =>
      Effect.gen(function*() {
        const source = yield* agent.thread("src")
        yield* within("the source's first turn", source.run(text("first turn")))
        // The host branches the thread's committed checkpoint (one turn) ...
        const branch = yield* source.fork("copy")
        // ... while the source's second turn has written part of its transcript and works on.
        const running = yield* startedPastPartA(source.stream(longTurn), sandbox.root)
        const busy = yield* within("the fork's turn while the source runs", Effect.either(branch.run(text("branch"))))
        expect(busy._tag === "Left" ? busy.left : busy.right.thread).toMatchObject({ _tag: "ThreadBusy", key: "src" })
        expect((yield* within("the source's second turn", Fiber.join(running)))._tag).toBe("Right")
        const committed = yield* record(source)
        expect(committed.turns).toBe(2)
        // The source's committed session holds its whole second turn.
        const sessions = Threads.sessionsOf(sandbox)
        const saved = Threads.storedTranscript(sessions, committed.session)
        expect(saved).toContain("part-A")
        expect(saved).toContain("part-B")
        // The fork forks what the source holds now (two turns), and says so.
        const forked = yield* within("the fork's first turn", branch.run(text("branch turn")))
        expect(forked.thread).toMatchObject({ mode: "forked", from: committed.session, fromTurns: 2 })
        const copy = yield* record(branch)
        expect(copy.turns).toBe(3)
        expect(Threads.storedTranscript(sessions, copy.session)).toContain("part-B")
        expect(Threads.storedTranscript(sessions, copy.session)).toContain("branch turn")
        expect((yield* record(source)).turns).toBe(2)
      })
    ))

  it.live("in one agent: the source's turns are ThreadBusy while its fork's first turn runs", () =>
    lossless(({ agent, sandbox }) =>
      Effect.gen(function*() {
        const source = yield* agent.thread("src")
        yield* within("the source's first turn", source.run(text("first turn")))
        const branch = yield* source.fork("copy")
        const forking = yield* startedPastPartA(branch.stream(longTurn), sandbox.root)
        const busy = yield* within("the source's turn while its fork runs", Effect.either(source.run(text("x"))))
        expect(busy._tag === "Left" ? busy.left : busy.right.thread).toMatchObject({ _tag: "ThreadBusy", key: "src" })
        expect((yield* within("the fork's first turn", Fiber.join(forking)))._tag).toBe("Right")
        // Once it ended, both go on.
        expect((yield* within("the source's next turn", source.run(text("again")))).thread).toMatchObject({
          mode: "resumed",
          fromTurns: 1
        })
        expect((yield* within("the fork's next turn", branch.run(text("again")))).thread).toMatchObject({
          mode: "resumed",
          fromTurns: 2
        })
      })
    ))

  it.live("two agents on one SQLite file: a fork in B of a thread whose turn runs in A waits for it, then forks it whole", () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-fork-shared-"))),
        (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
      )
      const file = Path.join(dir, "threads.db")
      yield* withThreads(() => Threads.sqliteLayer(file), ({ agent: a, make, sandbox }) =>
        Effect.gen(function*() {
          // Agent B: a second host, on its own connection to the file.
          const storeB = Context.get(yield* Layer.build(Threads.sqliteLayer(file)), ThreadStore.ThreadStore)
          const b = yield* make().pipe(Effect.provideService(ThreadStore.ThreadStore, storeB))
          const ta = yield* a.thread("source")
          yield* within("the source's first turn", ta.run(text("source turn 1")))
          const copy = yield* (yield* b.thread("source")).fork("copy")
          const running = yield* startTurn(
            ta.stream(FakeCli.script({ op: "sleep", ms: 700 }, { op: "text", text: "source turn 2" }))
          )
          const busy = yield* within("the fork's turn while the source runs", Effect.either(copy.run(text("x"))))
          expect(busy._tag === "Left" ? busy.left : busy.right.thread).toMatchObject({
            _tag: "ThreadBusy",
            key: "source"
          })
          expect((yield* within("the source's second turn", Fiber.join(running)))._tag).toBe("Right")
          const source = yield* record(ta)
          expect(source.turns).toBe(2)
          const branch = yield* within("the fork's first turn", copy.run(text("branch on B")))
          // What the opening says it forked is what the fork's session holds.
          expect(branch.thread).toMatchObject({ mode: "forked", from: source.session, fromTurns: 2 })
          const forked = yield* record(copy)
          expect(forked.turns).toBe(3)
          const stored = Threads.storedTranscript(Threads.sessionsOf(sandbox), forked.session)
          expect(stored).toContain("source turn 1")
          expect(stored).toContain("source turn 2")
          expect(stored).toContain("branch on B")
        }))
    }).pipe(Effect.scoped))
})
