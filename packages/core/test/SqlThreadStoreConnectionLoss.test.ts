/**
 * The SQL thread store on a real PostgreSQL whose connection is lost in the middle of a
 * transaction (a server restart, a failover, `pg_terminate_backend`): the store itself failed,
 * which `ThreadStoreError` documents ("The store itself failed (I/O, SQL)") and every transactional
 * operation's type promises. It must not surface as a defect (the thread's lease renewal only
 * catches `ThreadStoreError` to retry at its next tick).
 */
import { PgClient } from "@effect/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { ThreadStore } from "@tether/core"
import * as SqlThreadStore from "@tether/core/SqlThreadStore"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Postgres from "./fixtures/postgres.js"

const record = (key: string, session: string, turns = 1) =>
  new ThreadStore.ThreadRecord({ key, provider: "reference", session, fingerprint: "fp", turns, updatedAt: turns })

describe("ThreadStore (postgres): a connection lost inside a transaction", () => {
  it.live(
    "a commit whose connection is terminated fails with ThreadStoreError, not a defect",
    () =>
      Effect.gen(function*() {
        const { url } = yield* Postgres.schema
        const store = Context.get(
          yield* Layer.build(
            SqlThreadStore.layer.pipe(
              Layer.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })),
              Layer.orDie
            )
          ),
          ThreadStore.ThreadStore
        )
        const admin = Context.get(
          yield* Layer.build(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 }).pipe(Layer.orDie)),
          SqlClient.SqlClient
        )
        // The commit's write to the record sleeps, so that the connection can be cut during it.
        yield* admin.unsafe(`CREATE OR REPLACE FUNCTION tether_test_slow() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN PERFORM pg_sleep(5); RETURN NEW; END $$`)
        yield* admin.unsafe(`CREATE TRIGGER tether_test_slow BEFORE INSERT ON tether_threads
        FOR EACH ROW EXECUTE FUNCTION tether_test_slow()`)

        const lease = yield* store.acquire("k", "1 minute")
        const committing = yield* Effect.fork(Effect.exit(store.commit(lease, record("k", "s1"), "upsert")))
        // Wait until the commit's backend sleeps in the trigger, then terminate it.
        let terminated = 0
        for (let i = 0; i < 100 && terminated === 0; i++) {
          yield* Effect.sleep("50 millis")
          const rows = yield* admin<{ readonly pid: number }>`SELECT pid FROM pg_stat_activity
          WHERE wait_event = 'PgSleep' AND pid <> pg_backend_pid() AND datname = current_database()`
          for (const { pid } of rows) {
            yield* admin`SELECT pg_terminate_backend(${pid})`
            terminated++
          }
        }
        expect(terminated).toBe(1)
        const exit = yield* Fiber.join(committing).pipe(Effect.timeout("20 seconds"), Effect.orDie)
        const described = Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "success"
        // The store failed: a typed ThreadStoreError, as the commit's type says.
        expect(Exit.isFailure(exit) && Cause.isDie(exit.cause), described).toBe(false)
        expect(
          Exit.isFailure(exit) && Cause.failureOption(exit.cause).pipe((o) => o._tag === "Some" && o.value._tag),
          described
        ).toBe("ThreadStoreError")
      }).pipe(Effect.scoped),
    30_000
  )
})
