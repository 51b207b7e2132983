/**
 * docs/threads.md: "a host starting while another host migrates the database ... waits for it up
 * to 5 s, then fails to start (`ThreadStoreError`, operation `migrate`)". On PostgreSQL, another
 * host migrating holds the Migrator's table lock, whose wait never failed on its own: the start
 * hung until the lock went. The 5 s bound is the start's as a whole.
 */
import { PgClient } from "@effect/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as SqlThreadStore from "@tether/core/SqlThreadStore"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Postgres from "./fixtures/postgres.js"

describe("SqlThreadStore on PostgreSQL: another host is migrating", () => {
  it.live(
    "a host starting while another host migrates fails ThreadStoreError migrate within about 5 s",
    () =>
      Effect.gen(function*() {
        const { url } = yield* Postgres.schema
        const other = Context.get(
          yield* Layer.build(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 }).pipe(Layer.orDie)),
          SqlClient.SqlClient
        )
        // An older version's database, which the other host is migrating (it holds the
        // Migrator's lock inside its migration transaction).
        yield* other.unsafe(`CREATE TABLE tether_migrations (migration_id integer PRIMARY KEY NOT NULL,
        created_at TIMESTAMP WITH TIME ZONE DEFAULT CURRENT_TIMESTAMP NOT NULL, name VARCHAR(255) NOT NULL)`)
        yield* other.unsafe(`INSERT INTO tether_migrations (migration_id, name) VALUES (1, 'tether_threads')`)
        const locked = yield* Deferred.make<void>()
        const done = yield* Deferred.make<void>()
        const migrating = yield* other.withTransaction(
          other.unsafe(`LOCK TABLE tether_migrations IN ACCESS EXCLUSIVE MODE`).pipe(
            Effect.zipRight(Deferred.succeed(locked, undefined)),
            Effect.zipRight(Deferred.await(done))
          )
        ).pipe(Effect.fork)
        yield* Effect.addFinalizer(() =>
          Deferred.succeed(done, undefined).pipe(Effect.zipRight(Fiber.await(migrating)))
        )
        yield* Deferred.await(locked)
        const started = Date.now()
        const exit = yield* Effect.scoped(
          Layer.build(
            SqlThreadStore.layer.pipe(Layer.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })))
          )
        ).pipe(Effect.timeout("15 seconds"), Effect.exit)
        const elapsed = Date.now() - started
        expect({
          outcome: Exit.isSuccess(exit) ? "started" : String(Exit.causeOption(exit)).slice(0, 200),
          withinBound: elapsed < 8_000,
          elapsed
        }).toMatchObject({ withinBound: true })
        expect(String(exit)).toContain("migrate")
      }).pipe(Effect.scoped),
    40_000
  )
})
