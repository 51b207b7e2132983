/**
 * The thread entity on one in-memory runner (`Runner.layerTest`, messages serialized as between
 * runners), with real agents: the fake CLI, the real gateway, real clones.
 */
import * as Entity from "@effect/cluster/Entity"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import { SqliteClient } from "@effect/sql-sqlite-node"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Runner, ThreadEntity } from "@tether/cluster"
import { ThreadStore } from "@tether/core"
import * as SqlThreadStore from "@tether/core/SqlThreadStore"
import { FakeCli, Harness } from "@tether/testing"
import * as Cause from "effect/Cause"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as Tracer from "effect/Tracer"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Fixture from "./fixtures/agent.js"
import { sandbox, withRunner } from "./fixtures/withRunner.js"

const record = (threads: ThreadEntity.Client, key: string) =>
  Effect.map(Effect.orDie(threads.thread(key).snapshot), Option.getOrThrow)

describe("ThreadEntity on one runner", () => {
  it.live("a turn runs on the runner's agent, commits with its id, and the next turn resumes it", () =>
    withRunner(({ threads }) =>
      Effect.gen(function*() {
        const thread = threads.thread("tenant-42/issue-123")
        expect(Option.isNone(yield* thread.snapshot)).toBe(true)
        const first = yield* thread.run({ input: Fixture.turn("one"), id: "turn-1" })
        expect(first.text).toBe("one")
        expect(Fixture.runnerOf(first)).toBe("test-runner")
        expect(yield* record(threads, "tenant-42/issue-123")).toMatchObject({
          session: first.session,
          turns: 1,
          turn: "turn-1"
        })
        const events = yield* Stream.runCollect(thread.stream(Fixture.turn("two")))
        const tags = Array.from(events, (event) => event._tag)
        expect(tags[0]).toBe("RunStarted")
        expect(tags.at(-1)).toBe("RunFinished")
        expect(Array.from(events).find((event) => event._tag === "SessionStarted")).toMatchObject({
          sessionId: first.session,
          resumed: true
        })
        expect(yield* record(threads, "tenant-42/issue-123")).toMatchObject({ session: first.session, turns: 2 })
      })
    ))

  it.live("the client's spans carry the thread key's hash, never the key (docs/tracing.md)", () =>
    withRunner(({ threads }) =>
      Effect.gen(function*() {
        const key = "tenant-42/SECRET-KEY-7c1e"
        // Every span the turn makes, through the native tracer.
        const native = yield* Effect.tracer
        const spans: Array<Tracer.Span> = []
        const recording = Tracer.make({
          span: (...args) => {
            const span = native.span(...args)
            spans.push(span)
            return span
          },
          context: native.context
        })
        const thread = threads.thread(key)
        yield* thread.run(Fixture.turn("one")).pipe(Effect.withTracer(recording))
        yield* Stream.runDrain(thread.stream(Fixture.turn("two"))).pipe(Effect.withTracer(recording))
        // A failed turn whose provider error quotes the prompt: its spans end with the error's tag
        // and reason, not its message.
        const failing = FakeCli.script({ op: "result", ok: false, error: "PROVIDER-TEXT-41d2 quoted the prompt" })
        expect(yield* Effect.flip(thread.run(failing).pipe(Effect.withTracer(recording)))).toMatchObject({
          _tag: "RunError",
          reason: "ProviderFailed"
        })
        yield* Effect.flip(Stream.runDrain(thread.stream(failing)).pipe(Effect.withTracer(recording)))
        // @effect/cluster's own entity spans name the entity id (docs/tracing.md says so); Tether's
        // client spans carry only the hash.
        const ours = spans.filter((span) => span.name.startsWith("RemoteThread."))
        expect(ours.map((span) => span.name).sort()).toEqual([
          "RemoteThread.run",
          "RemoteThread.run",
          "RemoteThread.stream",
          "RemoteThread.stream"
        ])
        for (const span of ours) {
          for (const value of span.attributes.values()) expect(String(value)).not.toContain("SECRET-KEY-7c1e")
          expect(span.attributes.get("thread.key_hash")).toMatch(/^[0-9a-f]{32}$/)
          expect(span.status._tag).toBe("Ended")
          const exit = span.status._tag === "Ended" ? span.status.exit : undefined
          expect(exit !== undefined && Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "").not.toContain(
            "PROVIDER-TEXT"
          )
        }
        expect(
          ours.flatMap((span) =>
            span.status._tag === "Ended" && Exit.isFailure(span.status.exit)
              ? [Cause.pretty(span.status.exit.cause)]
              : []
          )
        ).toEqual([
          expect.stringContaining("failed: RunError ProviderFailed"),
          expect.stringContaining("failed: RunError ProviderFailed")
        ])
      })
    ))

  it.live("delete removes the checkpoint and its sessions on the runner; ThreadBusy while a turn runs", () =>
    withRunner(({ dirs, threads }) =>
      Effect.gen(function*() {
        // Every file under the shared session store whose name holds `session`.
        const stored = (session: string): Array<string> =>
          Fs.readdirSync(dirs.sessions, { recursive: true, encoding: "utf8" }).filter((name) => name.includes(session))
        const thread = threads.thread("tenant-7/delete")
        expect(yield* thread.delete).toEqual([])
        yield* thread.run(Fixture.turn("one"))
        const second = yield* thread.run(Fixture.turn("two"))
        expect(stored(second.session!)).not.toEqual([])
        const running = yield* Effect.fork(thread.run(Fixture.turn("long", 1_000)))
        yield* Effect.sleep("500 millis")
        expect(yield* Effect.flip(thread.delete)).toMatchObject({ _tag: "ThreadBusy", key: "tenant-7/delete" })
        yield* Fiber.join(running)
        const committed = yield* record(threads, "tenant-7/delete")
        expect(yield* thread.delete).toEqual([committed])
        expect(Option.isNone(yield* thread.snapshot)).toBe(true)
        expect(stored(second.session!)).toEqual([])
        // A later turn starts a fresh session.
        const again = yield* thread.run(Fixture.turn("again"))
        expect(again.thread?.mode).toBe("started")
        expect(again.session).not.toBe(second.session)
      })
    ))

  it.live("a committed turn delivered again is not run twice: it answers the first delivery's result", () =>
    withRunner(({ dirs, threads }) =>
      Effect.gen(function*() {
        const thread = threads.thread("k")
        const first = yield* thread.run({ input: Fixture.turn("once", 300), id: "the-turn" })
        const committed = yield* record(threads, "k")
        // What a second delivery is to the entity: the same turn (same id) once more.
        const again = yield* Effect.fork(thread.run({ input: Fixture.turn("once", 300), id: "the-turn" }))
        yield* Effect.sleep("200 millis")
        expect(Fixture.processesMentioning(dirs.base)).toEqual([])
        expect(yield* Fiber.join(again)).toEqual(first)
        expect(yield* record(threads, "k")).toEqual(committed)
      })
    ))

  it.live("a committed turn whose answer was lost (its runner died after the commit) fails with TurnAlreadyCommitted", () =>
    withRunner(({ store, threads }) =>
      Effect.gen(function*() {
        const lease = yield* store.acquire("k", "1 minute")
        const record = new ThreadStore.ThreadRecord({
          key: "k",
          provider: "fake-cli",
          session: "s",
          fingerprint: "fp",
          turns: 1,
          updatedAt: 1,
          turn: "lost-answer"
        })
        yield* store.commit(lease, record, "insert")
        yield* store.release(lease)
        const failed = yield* Effect.flip(threads.thread("k").run({ input: Fixture.turn("x"), id: "lost-answer" }))
        expect(failed).toMatchObject({ _tag: "TurnAlreadyCommitted", key: "k", turn: "lost-answer", record })
      })
    ))

  it.live("the entity is the thread's single writer: a second concurrent turn fails fast with ThreadBusy", () =>
    withRunner(({ threads }) =>
      Effect.gen(function*() {
        const thread = threads.thread("k")
        const long = yield* Effect.fork(thread.run(Fixture.turn("long", 1_500)))
        yield* Effect.sleep("700 millis")
        const busy = yield* Effect.flip(thread.run(Fixture.turn("second")))
        expect(busy).toMatchObject({ _tag: "ThreadBusy", key: "k" })
        expect((yield* Fiber.join(long)).text).toBe("long")
        expect(yield* record(threads, "k")).toMatchObject({ turns: 1 })
      })
    ))

  it.live("a previous runner's live lease is waited out, then the turn runs and commits once", () =>
    withRunner(({ store, threads }) =>
      Effect.gen(function*() {
        // A runner that died mid-turn left its lease behind.
        yield* store.acquire("k", "1500 millis")
        const started = Date.now()
        const result = yield* threads.thread("k").run(Fixture.turn("after takeover"))
        expect(Date.now() - started).toBeGreaterThanOrEqual(1_400)
        expect(result.text).toBe("after takeover")
        expect(yield* record(threads, "k")).toMatchObject({ turns: 1 })
      })
    ))

  it.live(
    "a turn sent while another waits out a previous runner's lease waits for it: it runs once that one is gone" +
      " (its caller gave up), fails with ThreadBusy once that one runs, with ThreadClosed on a close",
    () =>
      withRunner(({ store, threads }) =>
        Effect.gen(function*() {
          // Runners that died mid-turn left their leases on three threads behind.
          yield* Effect.forEach(["gone", "runs", "closed"], (key) => store.acquire(key, "1500 millis"))
          const send = (key: string, id: string, timeout: Duration.DurationInput = "10 seconds") =>
            Effect.fork(Effect.either(threads.thread(key).run({ input: Fixture.turn(id), id }, { timeout })))
          const outcome = (fiber: Effect.Effect.Success<ReturnType<typeof send>>) =>
            Effect.map(Fiber.join(fiber), Either.match({ onLeft: (error) => error._tag, onRight: (r) => r.text }))
          const holders = [yield* send("gone", "abandoned", "800 millis"), yield* send("runs", "first")]
          holders.push(yield* send("closed", "closed-1"))
          yield* Effect.sleep("300 millis")
          const waiters = [
            yield* send("gone", "next"),
            yield* send("runs", "second"),
            yield* send("closed", "closed-2")
          ]
          yield* Effect.sleep("300 millis")
          yield* threads.thread("closed").close
          expect(yield* Effect.forEach(holders, outcome)).toEqual(["ThreadCallTimeout", "first", "ThreadClosed"])
          expect(yield* Effect.forEach(waiters, outcome)).toEqual(["next", "ThreadBusy", "ThreadClosed"])
          expect(yield* record(threads, "gone")).toMatchObject({ turns: 1, turn: "next" })
          expect(yield* record(threads, "runs")).toMatchObject({ turns: 1, turn: "first" })
          expect(Option.isNone(yield* Effect.orDie(threads.thread("closed").snapshot))).toBe(true)
        })
      )
  )

  it.live("a lease that outlives takeover.timeout fails the turn with ThreadBusy; nothing ran", () =>
    withRunner(
      ({ store, threads }) =>
        Effect.gen(function*() {
          yield* store.acquire("k", "1 minute")
          const busy = yield* Effect.flip(threads.thread("k").run(Fixture.turn("never")))
          expect(busy._tag).toBe("ThreadBusy")
          expect(Option.isNone(yield* store.get("k"))).toBe(true)
        }),
      { takeover: "600 millis" }
    ))

  it.live("send: NoActiveTurn without a running turn, UnsupportedCapability during one of a driver without live input", () =>
    withRunner(({ threads }) =>
      Effect.gen(function*() {
        const thread = threads.thread("k")
        expect(yield* Effect.flip(thread.send("more"))).toMatchObject({ _tag: "NoActiveTurn", key: "k" })
        const long = yield* Effect.fork(thread.run(Fixture.turn("long", 1_000)))
        yield* Effect.sleep("500 millis")
        expect(yield* Effect.flip(thread.send("more"))).toMatchObject({
          _tag: "UnsupportedCapability",
          driver: "fake-cli",
          capability: "streamingInput"
        })
        yield* Fiber.join(long)
      })
    ))

  it.live("close cancels the running turn (ThreadClosed), commits nothing and kills its CLI", () =>
    withRunner(({ dirs, threads }) =>
      Effect.gen(function*() {
        const thread = threads.thread("k")
        yield* thread.run(Fixture.turn("healthy"))
        const healthy = yield* record(threads, "k")
        const running = yield* Effect.fork(Effect.flip(thread.run(Fixture.turn("cut short", 10_000))))
        yield* Effect.sleep("800 millis")
        expect(Fixture.processesMentioning(dirs.base).length).toBeGreaterThan(0)
        yield* thread.close
        expect((yield* Fiber.join(running))._tag).toBe("ThreadClosed")
        expect(Fixture.processesMentioning(dirs.base)).toEqual([])
        expect(yield* record(threads, "k")).toEqual(healthy)
        // The thread goes on with a new agent on the runner.
        yield* thread.run(Fixture.turn("again"))
        expect(yield* record(threads, "k")).toMatchObject({ session: healthy.session, turns: 2 })
      })
    ))

  it.live("a call that gets no answer in time fails with ThreadCallTimeout; the canceled turn commits nothing", () =>
    withRunner(({ dirs, threads }) =>
      Effect.gen(function*() {
        const thread = threads.thread("k")
        const timedOut = yield* Effect.flip(thread.run(Fixture.turn("slow", 8_000), { timeout: "1 second" }))
        expect(timedOut).toMatchObject({ _tag: "ThreadCallTimeout", key: "k", operation: "run", millis: 1000 })
        // The cancellation reaches the runner: its CLI is killed long before the turn would end.
        const since = Date.now()
        while (Fixture.processesMentioning(dirs.base).length > 0) yield* Effect.sleep("50 millis")
        expect(Date.now() - since).toBeLessThan(5_000)
        expect(Option.isNone(yield* Effect.orDie(thread.snapshot))).toBe(true)
        // The entity is free again: the canceled turn no longer holds it. The entity admits a new
        // turn once the canceled one's run has ended on the runner, after its CLI is gone: a turn
        // sent in that window fails fast with ThreadBusy (seen under a loaded CI), so this waits
        // for it, bounded.
        const next = yield* thread.run(Fixture.turn("next")).pipe(
          Effect.retry({
            while: (error) => error._tag === "ThreadBusy",
            schedule: Schedule.intersect(Schedule.spaced("50 millis"), Schedule.recurs(100))
          })
        )
        expect(next.text).toBe("next")
      })
    ))

  it.live("keys are opaque: NUL, lone surrogates and a 10,000-character key are distinct threads", () =>
    withRunner(({ threads }) =>
      Effect.gen(function*() {
        const keys = ["a\u0000b", "a", "\ud800", "\udc00", "k:a", "日本語/😀", "x".repeat(10_000)]
        yield* Effect.forEach(keys, (key) => threads.thread(key).run(Fixture.turn(`for ${key.slice(0, 20)}`)), {
          concurrency: 3
        })
        for (const key of keys) {
          const found = yield* record(threads, key)
          expect(found.key).toBe(key)
          expect(found.turns).toBe(1)
        }
      })
    ))

  it.live("a turn's tool policy, built-in tool policy and model reach the runner's agent", () =>
    withRunner(({ threads }) =>
      Effect.gen(function*() {
        const result = yield* threads.thread("k").run({
          input: FakeCli.script({ op: "list" }, { op: "text", text: "listed" }),
          model: "model-x",
          toolPolicy: { deny: ["whoami"] }
        })
        expect(result.effectiveTools).toEqual([])
        expect(result.model).toBe("model-x")
        const unknown = yield* Effect.flip(threads.thread("k").run({ input: "x", toolPolicy: { allow: ["nope"] } }))
        expect(unknown).toMatchObject({ _tag: "InvalidTurn", reason: "UnknownTool" })
        // The runner's agent has no sandbox level: a turn asking for a wider one is refused there.
        const widened = yield* Effect.flip(
          threads.thread("k").run({ input: "x", builtinTools: { sandbox: "unrestricted" } })
        )
        expect(widened._tag === "InvalidTurn" ? widened.reason : widened._tag).toBe("PolicyWidened")
      })
    ))
})

describe("entity ids", () => {
  it.prop(
    "distinct keys get distinct ids of at most 255 characters",
    [FastCheck.string({ unit: "binary", maxLength: 300 }), FastCheck.string({ unit: "binary", maxLength: 300 })],
    ([a, b]) => {
      const [ia, ib] = [ThreadEntity.entityIdOf(a), ThreadEntity.entityIdOf(b)]
      expect(ia.length).toBeLessThanOrEqual(255)
      expect(ia.includes("\u0000")).toBe(false)
      expect(ia === ib).toBe(a === b)
    },
    { fastCheck: { numRuns: 200 } }
  )
})

describe("Entity.makeTestClient", () => {
  it.live("the entity's handlers answer without sharding", () =>
    Effect.gen(function*() {
      const dirs = yield* sandbox
      const make = yield* Entity.makeTestClient(
        ThreadEntity.Thread,
        ThreadEntity.layer({ agent: Fixture.agentOptions(dirs, "3 seconds") }).pipe(
          Layer.provide(ThreadStore.layerMemory),
          Layer.provide(Fixture.toolsLive("unit")),
          Layer.provide(Harness.layer)
        )
      ).pipe(Effect.provide(ShardingConfig.layer()))
      const client = yield* make(ThreadEntity.entityIdOf("k"))
      expect(yield* client.Snapshot({ key: "k" })).toEqual(Option.none())
      expect(yield* Effect.flip(client.Send({ key: "k", input: "x" }))).toMatchObject({ _tag: "NoActiveTurn" })
      expect((yield* client.Run({ key: "k", id: "t1", input: Fixture.turn("direct") })).text).toBe("direct")
    }).pipe(Effect.scoped))
})

describe("Runner.layerSingle on SQLite (one machine, the embedded default)", () => {
  it.live("threads run through a durable single runner, their store and answers in one SQLite file", () =>
    Effect.gen(function*() {
      const dirs = yield* sandbox
      const filename = Path.join(dirs.base, "fleet.db")
      yield* Effect.gen(function*() {
        const threads = yield* ThreadEntity.client()
        const first = yield* threads.thread("k").run({ input: Fixture.turn("one"), id: "t1" })
        // The same turn again answers the stored answer (from SQLite) without running.
        expect(yield* threads.thread("k").run({ input: Fixture.turn("one"), id: "t1" })).toEqual(first)
        yield* threads.thread("k").run({ input: Fixture.turn("two"), id: "t2" })
        const sql = yield* SqlClient.SqlClient
        const tables = yield* sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`
        expect(tables.map((table) => table.name)).toEqual(
          expect.arrayContaining(["cluster_messages", "cluster_replies", "tether_threads", "tether_turn_answers"])
        )
      }).pipe(
        Effect.provide(
          ThreadEntity.layer({ agent: Fixture.agentOptions(dirs, "3 seconds") }).pipe(
            Layer.provideMerge(Runner.layerSingle()),
            Layer.provideMerge(SqlThreadStore.layer),
            Layer.provide(Fixture.toolsLive("single")),
            Layer.provide(Harness.layer),
            Layer.provideMerge(SqliteClient.layer({ filename }))
          )
        ),
        Effect.scoped
      )
      // A new process on the same file finds the committed thread.
      const found = yield* Effect.gen(function*() {
        const store = yield* ThreadStore.ThreadStore
        return yield* store.get("k")
      }).pipe(Effect.provide(SqlThreadStore.layer.pipe(Layer.provide(SqliteClient.layer({ filename })))))
      expect(Option.getOrThrow(found)).toMatchObject({ turns: 2, turn: "t2" })
      expect(Fixture.processesMentioning(dirs.base)).toEqual([])
    }).pipe(Effect.scoped))
})
