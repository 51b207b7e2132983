/**
 * `Close` while a turn waits out a previous runner's lease (the survivor of a dead runner, on a
 * real PostgreSQL thread store): `ThreadEntity.Close` promises to cancel the running turn, which
 * then fails with `ThreadClosed` and commits nothing.
 */
import { PgClient } from "@effect/sql-pg"
import { describe, expect, it } from "@effect/vitest"
import { Runner, ThreadEntity } from "@tether/cluster"
import { ThreadStore } from "@tether/core"
import * as SqlThreadStore from "@tether/core/SqlThreadStore"
import { Harness } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Fixture from "./fixtures/agent.js"
import * as Postgres from "./fixtures/postgres.js"

const sandbox = Effect.acquireRelease(
  Effect.sync(Fixture.makeDirs),
  (dirs) => Effect.sync(() => Fixture.removeDirs(dirs))
)

describe("ThreadEntity on PostgreSQL: close during the takeover wait", () => {
  it.live("a turn closed while it waits out a dead runner's lease fails with ThreadClosed and commits nothing", () =>
    Effect.gen(function*() {
      const db = yield* Postgres.database
      const dirs = yield* sandbox
      yield* Effect.gen(function*() {
        const threads = yield* ThreadEntity.client({ timeout: "10 seconds", turnTimeout: "30 seconds" })
        const store = yield* ThreadStore.ThreadStore
        // A runner that died mid-turn left its lease on the thread behind.
        yield* store.acquire("k", "3 seconds")
        const thread = threads.thread("k")
        const turn = yield* Effect.fork(Effect.either(thread.run(Fixture.turn("must not run"))))
        // The turn now waits for that lease to expire (takeover); the host closes the thread.
        yield* Effect.sleep("1 second")
        yield* thread.close
        const outcome = yield* Fiber.join(turn)
        const committed = yield* Effect.orDie(store.get("k"))
        expect(Either.isLeft(outcome) ? outcome.left._tag : `ran: ${outcome.right.text}`).toBe("ThreadClosed")
        expect(Option.map(committed, (record) => record.turns)).toEqual(Option.none())
      }).pipe(
        Effect.provide(
          ThreadEntity.layer({ agent: Fixture.agentOptions(dirs, "3 seconds") }).pipe(
            Layer.provideMerge(Runner.layerTest),
            Layer.provideMerge(SqlThreadStore.layer),
            Layer.provide(Fixture.toolsLive("test-runner")),
            Layer.provide(Harness.layer),
            Layer.provide(PgClient.layer({ url: Redacted.make(db.url), maxConnections: 4 })),
            Layer.orDie
          )
        ),
        Effect.scoped
      )
      expect(Fixture.processesMentioning(dirs.base)).toEqual([])
    }).pipe(Effect.scoped))
})
