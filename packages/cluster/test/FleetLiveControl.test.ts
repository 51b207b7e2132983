/**
 * Live control of threads whose entity lives on another runner process: a socket fleet of two
 * runner processes on PostgreSQL (the run's throwaway server), each running the reference driver's
 * live process with approvals answered by the host, driven from this process as a client-only
 * member with the tuned timing (5 s thread leases). `send`, `cancel`, `approve` and `delete` reach
 * the turn and the warm process on the thread's runner; then, across a SIGKILL of that runner,
 * they reach the survivor's run of the same turn. The tests share the fleet: the last one kills
 * the second runner.
 */
import { PgClient } from "@effect/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import { expect, layer } from "@effect/vitest"
import { Runner, ThreadEntity } from "@tether/cluster"
import { Approval, type Event } from "@tether/core"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as Fixture from "./fixtures/agent.js"
import { ownerOf, reservePort, type RunnerProcess, startRunner, waitForShares, waitUntil } from "./fixtures/fleet.js"
import * as Postgres from "./fixtures/postgres.js"

class Fleet extends Context.Tag("test/Fleet")<Fleet, {
  /** r1 and r2, on ports reserved for them. */
  readonly runners: readonly [RunnerProcess, RunnerProcess]
  /** A thread key starting with `prefix` whose shard r2 holds. */
  readonly keyOnSecond: (prefix: string) => string
}>() {}

/** The shared directories; a process of the fleet's agents still alive then is killed first. */
const sandbox = Effect.acquireRelease(
  Effect.sync(Fixture.makeDirs),
  (dirs) =>
    Effect.sync(() => {
      for (const pid of Fixture.processesMentioning(dirs.base)) {
        try {
          process.kill(pid, "SIGKILL")
        } catch {
          // gone
        }
      }
      Fixture.removeDirs(dirs)
    })
)

const reserve = () => Effect.acquireRelease(Effect.promise(reservePort), (port) => Effect.promise(port.release))

/**
 * A database, two runners and this process as a client-only member, once both runners hold their
 * shares of the shards (a key's runner is then the one `ownerOf` computes, and stays so).
 */
const FleetLive = Layer.scopedContext(Effect.gen(function*() {
  const db = yield* Postgres.database
  const dirs = yield* sandbox
  const reserved = [yield* reserve(), yield* reserve()] as const
  const ports = [reserved[0].port, reserved[1].port] as const
  const [r1, r2] = yield* Effect.all(
    reserved.map((port, i) =>
      Effect.zipRight(
        Effect.promise(port.release),
        startRunner({
          name: `r${i + 1}`,
          port: port.port,
          databaseUrl: db.url,
          dirs,
          timing: "tuned",
          leaseTtl: "5 seconds",
          reapInterval: "1 second",
          reference: { waitMs: 60_000 }
        })
      )
    ),
    { concurrency: "unbounded" }
  )
  const pg = PgClient.layer({ url: Redacted.make(db.url), maxConnections: 4 }).pipe(Layer.orDie)
  const member = yield* Layer.build(Runner.layerClient({ timing: Runner.tuned }).pipe(Layer.provideMerge(pg)))
  const sql = Context.get(member, SqlClient.SqlClient)
  yield* waitForShares(sql, 30_000)
  const owner = ownerOf(ports)
  const keyOnSecond = (prefix: string) => {
    for (let i = 0;; i++) {
      if (owner(`${prefix}-${i}`) === ports[1]) return `${prefix}-${i}`
    }
  }
  return Context.add(member, Fleet, { runners: [r1!, r2!], keyOnSecond })
}))

/** The agent processes of the runner process `pid`, found by marker. */
const markedBy = (pid: number) => Fixture.processesMentioning(`TETHER_AGENT_MARKER=${pid}-`)

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Streams a turn of the remote thread in the background; resolves once `tag` went by. */
const streamUntil = (thread: ThreadEntity.RemoteThread, input: string, tag: Event.Event["_tag"]) =>
  Effect.gen(function*() {
    const events: Array<Event.Event> = []
    const fiber = yield* thread.stream(input).pipe(
      Stream.runForEach((event) => Effect.sync(() => events.push(event))),
      Effect.fork
    )
    yield* waitUntil(tag, Effect.sync(() => events.some((event) => event._tag === tag)))
    return { events, fiber }
  })

const ofTag = <T extends Event.Event["_tag"]>(events: ReadonlyArray<Event.Event>, tag: T) =>
  events.filter((event): event is Extract<Event.Event, { readonly _tag: T }> => event._tag === tag)

/** `effect` tried again until it succeeds while the thread's shard moves to a survivor. */
const retrying = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.timeout("3 seconds"),
    Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo("60 seconds"))),
    Effect.orDie
  )

/** A failure shows what the runners said. */
const withOutput = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.tapErrorCause(
    effect,
    () =>
      Effect.flatMap(Fleet, ({ runners }) =>
        Effect.sync(() =>
          runners.forEach((runner) => console.log(`--- ${runner.name}:\n${runner.output()}`))
        ))
  )

layer(FleetLive, { excludeTestServices: true, timeout: 90_000 })(
  "live control of a thread on another runner process",
  (it) => {
    it.effect(
      "send, cancel, approve and delete reach the turn and the warm process on the thread's runner process",
      () =>
        Effect.gen(function*() {
          const { runners: [, r2], keyOnSecond } = yield* Fleet
          const threads = yield* ThreadEntity.client({ timeout: "20 seconds", turnTimeout: "60 seconds" })
          const thread = threads.thread(keyOnSecond("live"))
          expect((yield* thread.run("warm")).text).toBe("warm")
          expect(markedBy(r2.pid).length).toBeGreaterThan(0)

          // send: injected into the running turn, with its run id.
          const sent = yield* streamUntil(thread, "long", "TextDelta")
          const sentRun = ofTag(sent.events, "RunStarted")[0]!.runId
          expect(yield* thread.send("go on")).toEqual(new ThreadEntity.Delivery({ runId: sentRun, mode: "injected" }))
          yield* Fiber.join(sent.fiber)
          expect(ofTag(sent.events, "InputDelivered")).toMatchObject([{ runId: sentRun, text: "go on" }])
          expect(sent.events.at(-1)).toMatchObject({
            _tag: "RunFinished",
            outcome: "success",
            result: { text: "long" }
          })

          // cancel: the stream's reader is this process, the turn runs on r2.
          const canceled = yield* streamUntil(thread, "long", "TextDelta")
          const canceledRun = ofTag(canceled.events, "RunStarted")[0]!.runId
          expect(yield* thread.cancel(canceledRun)).toBe(canceledRun)
          const ended = yield* Effect.either(Fiber.join(canceled.fiber))
          expect(Either.isLeft(ended) && ended.left).toMatchObject({ _tag: "RunError", reason: "Canceled" })
          expect(canceled.events.at(-1)).toMatchObject({ _tag: "RunFinished", outcome: "canceled" })

          // approve: resolved by the host; a second answer finds it resolved.
          const asked = yield* streamUntil(thread, "ask", "ApprovalRequested")
          const request = ofTag(asked.events, "ApprovalRequested")[0]!.request
          yield* thread.approve(request.id, Approval.allow)
          yield* Fiber.join(asked.fiber)
          expect(ofTag(asked.events, "ApprovalResolved")).toMatchObject([
            { approvalId: request.id, by: "host", decision: { _tag: "Allow" } }
          ])
          expect(asked.events.at(-1)).toMatchObject({ _tag: "RunFinished", outcome: "success" })
          expect(yield* Effect.flip(thread.approve(request.id, Approval.deny("late")))).toMatchObject({
            _tag: "ApprovalAlreadyResolved"
          })

          // delete: the one warm process that served every turn goes, then the records.
          const pids = [...sent.events, ...canceled.events, ...asked.events].flatMap((event) =>
            event._tag === "ProcessStarted" ? [event.pid] : []
          )
          expect(new Set(pids).size).toBe(1)
          expect(markedBy(r2.pid)).toContain(pids[0])
          expect((yield* thread.delete).length).toBeGreaterThanOrEqual(1)
          expect(Option.isNone(yield* thread.snapshot)).toBe(true)
          yield* waitUntil("the warm process to exit", Effect.sync(() => !alive(pids[0]!)), 10_000)
        }).pipe(withOutput)
    )

    it.effect(
      "its runner SIGKILLed mid-turn: the survivor runs a turn sent with run again, send reaches it and cancel" +
        " ends the next; a streamed turn carries the partial run then the survivor's, whose approval approve answers",
      () =>
        Effect.gen(function*() {
          const { keyOnSecond, runners: [survivor, victim] } = yield* Fleet
          const threads = yield* ThreadEntity.client({ timeout: "20 seconds", turnTimeout: "60 seconds" })
          const waiting = threads.thread(keyOnSecond("failover/run"))
          const asking = threads.thread(keyOnSecond("failover/stream"))
          const first = yield* Effect.fork(Effect.either(waiting.run("long")))
          const asked = yield* streamUntil(asking, "ask", "ApprovalRequested")
          const firstRequest = ofTag(asked.events, "ApprovalRequested")[0]!.request
          // Both turns run on the victim: one live process each.
          yield* waitUntil("the victim's live processes", Effect.sync(() => markedBy(victim.pid).length >= 2))
          yield* Effect.sleep("300 millis")
          process.kill(victim.pid, "SIGKILL")
          yield* Effect.promise(() => victim.exited)

          // The survivor runs the persisted turn again: send reaches it once it started there.
          expect((yield* retrying(waiting.send("go on"))).mode).toBe("injected")
          const result = yield* Fiber.join(first)
          expect(Either.isRight(result) && result.right.text).toBe("long")

          // The stream is not ended by the kill: the call goes to the survivor, which asks again in it.
          yield* waitUntil(
            "the survivor's approval request",
            Effect.sync(() => ofTag(asked.events, "ApprovalRequested").length === 2)
          )
          expect(Option.isNone(yield* Fiber.poll(asked.fiber))).toBe(true)
          const secondRequest = ofTag(asked.events, "ApprovalRequested")[1]!.request
          expect(yield* Effect.flip(asking.approve(firstRequest.id, Approval.allow))).toMatchObject({
            _tag: "ApprovalNotFound"
          })
          yield* asking.approve(secondRequest.id, Approval.allow)
          yield* Fiber.join(asked.fiber)
          expect(ofTag(asked.events, "RunStarted")).toHaveLength(2)
          expect(asked.events.at(-1)).toMatchObject({ _tag: "RunFinished", outcome: "success" })
          expect(markedBy(survivor.pid).length).toBeGreaterThanOrEqual(2)

          // A next turn on the survivor, canceled from here.
          const second = yield* Effect.fork(Effect.either(waiting.run("long")))
          const canceled = yield* retrying(waiting.cancel())
          const ended = yield* Fiber.join(second)
          expect(Either.isLeft(ended) && ended.left).toMatchObject({
            _tag: "RunError",
            reason: "Canceled",
            result: { runId: canceled }
          })
        }).pipe(withOutput)
    )
  }
)
