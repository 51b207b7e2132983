/**
 * A runner stopped gracefully (SIGTERM, as a rolling deploy does) while it runs a streamed and a
 * persisted turn (two runners on PostgreSQL, the caller a client-only member). The stopping runner
 * ended the streams it served with an interruption that was not the caller's: its stream ended
 * "All fibers interrupted" with no typed error and no RunFinished, while the runner finished the
 * turn and committed it. The stream is delivered again now: it ends with its RunFinished, or, when
 * the stopping runner committed the turn first, with `TurnAlreadyCommitted`, and `run` with the
 * same turn id answers what that turn answered. The persisted run is answered.
 */
import { PgClient } from "@effect/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Runner, ThreadEntity } from "@tether/cluster"
import type { Event } from "@tether/core"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as Fixture from "./fixtures/agent.js"
import { ownerOf, reservePort, startRunner, waitForShares, waitUntil } from "./fixtures/fleet.js"
import * as Postgres from "./fixtures/postgres.js"

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

describe("a runner stopped gracefully mid-turn", () => {
  it.live(
    "its streamed turn ends with its RunFinished or a typed TurnAlreadyCommitted (then answered by id), its persisted run is answered",
    () =>
      Effect.gen(function*() {
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
                reapInterval: "1 second"
              })
            )
          ),
          { concurrency: "unbounded" }
        )
        const pg = PgClient.layer({ url: Redacted.make(db.url), maxConnections: 4 }).pipe(Layer.orDie)
        yield* Effect.gen(function*() {
          yield* waitForShares(yield* SqlClient.SqlClient, 30_000)
          yield* Effect.sleep("2 seconds")
          const owner = ownerOf(ports)
          const keyOnFirst = (prefix: string) => {
            for (let i = 0;; i++) if (owner(`${prefix}-${i}`) === ports[0]) return `${prefix}-${i}`
          }
          const threads = yield* ThreadEntity.client({ turnTimeout: "100 seconds" })
          const streamed: Array<Event.Event> = []
          const streamKey = keyOnFirst("s")
          const streaming = yield* threads.thread(streamKey).stream({
            input: Fixture.turn("streamed", 4_000),
            id: "st1"
          })
            .pipe(Stream.runForEach((event) => Effect.sync(() => streamed.push(event))), Effect.exit, Effect.fork)
          const running = yield* threads.thread(keyOnFirst("r")).run({ input: Fixture.turn("ran", 4_000), id: "t1" })
            .pipe(Effect.exit, Effect.fork)
          yield* waitUntil(
            "both turns to run on r1",
            Effect.sync(() => Fixture.processesMentioning(`TETHER_AGENT_MARKER=${r1!.pid}-`).length >= 2),
            30_000
          )
          yield* Effect.sleep("500 millis")
          process.kill(r1!.pid, "SIGTERM")
          const streamExit = yield* Fiber.join(streaming)
          const runExit = yield* Fiber.join(running)
          expect(Exit.isSuccess(runExit)).toBe(true)
          const finished = streamed.filter((event) => event._tag === "RunFinished")
          if (Exit.isSuccess(streamExit)) {
            expect(finished.length).toBe(1)
            expect(streamed.at(-1)?._tag).toBe("RunFinished")
          } else {
            // Never an interruption of the caller's stream with the turn going on: a typed failure.
            const failure = Cause.failureOption(streamExit.cause)
            expect(failure._tag === "Some" ? failure.value._tag : Cause.pretty(streamExit.cause)).toBe(
              "TurnAlreadyCommitted"
            )
            expect(finished).toEqual([])
            const answer = yield* threads.thread(streamKey).run({ input: Fixture.turn("streamed", 4_000), id: "st1" })
            expect(answer.text).toBe("streamed")
          }
        }).pipe(
          Effect.provide(Runner.layerClient({ timing: Runner.tuned }).pipe(Layer.provideMerge(pg))),
          Effect.tapDefect(() => Effect.sync(() => console.log(r1!.output(), r2!.output())))
        )
      }).pipe(Effect.scoped),
    150_000
  )
})
