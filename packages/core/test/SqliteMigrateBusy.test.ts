/**
 * A SQLite thread store shared by two hosts: a host (a new version) starting while another host
 * (an older one) is inside a write transaction on the same file, committing a turn. The Migrator
 * took its failure to record its migrations (the new host's read could not take the write lock)
 * for another host running them and returned with nothing done: the store came up without its
 * tables and every commit failed `no such table` for as long as the host lived. It waits for the
 * lock and migrates.
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import { describe, expect, it } from "@effect/vitest"
import { ThreadStore } from "@tether/core"
import * as SqlThreadStore from "@tether/core/SqlThreadStore"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

describe("SqlThreadStore on SQLite: two hosts on one file", () => {
  it.live(
    "a host starting while another host holds a write transaction waits for it and migrates",
    () =>
      Effect.gen(function*() {
        const dir = yield* Effect.acquireRelease(
          Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-migrate-"))),
          (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
        )
        const filename = Path.join(dir, "threads.db")
        // The other host: the first version's database, on a connection of its own.
        const other = Context.get(yield* Layer.build(SqliteClient.layer({ filename })), SqliteClient.SqliteClient)
        yield* other.unsafe(`CREATE TABLE tether_migrations (migration_id integer PRIMARY KEY NOT NULL,
        created_at TEXT, name TEXT)`)
        yield* other.unsafe(`INSERT INTO tether_migrations VALUES (1, '2026-01-01', 'tether_threads')`)
        yield* other.unsafe(`CREATE TABLE tether_threads (key_hex TEXT PRIMARY KEY, provider TEXT NOT NULL,
        session TEXT NOT NULL, fingerprint TEXT NOT NULL, turns INTEGER NOT NULL, updated_at BIGINT NOT NULL)`)
        yield* other.unsafe(`CREATE TABLE tether_thread_leases (key_hex TEXT PRIMARY KEY, holder TEXT NOT NULL,
        expires_at BIGINT NOT NULL)`)
        yield* other.unsafe(`INSERT INTO tether_threads VALUES ('006a', 'reference', 'old', 'fp', 3, 7)`)
        // The other host is inside its commit's transaction (it has written) ...
        const written = yield* Deferred.make<void>()
        const done = yield* Deferred.make<void>()
        const committing = yield* other.withTransaction(
          other.unsafe(`UPDATE tether_threads SET turns = 4 WHERE key_hex = '006a'`).pipe(
            Effect.zipRight(Deferred.succeed(written, undefined)),
            Effect.zipRight(Deferred.await(done))
          )
        ).pipe(Effect.fork)
        yield* Deferred.await(written)
        // ... when this host starts on the same file; the other's transaction ends a moment later.
        const starting = yield* Layer.build(SqlThreadStore.layer.pipe(Layer.provide(SqliteClient.layer({ filename }))))
          .pipe(Effect.fork)
        yield* Effect.sleep("300 millis")
        yield* Deferred.succeed(done, undefined)
        yield* Fiber.join(committing)
        const store = Context.get(yield* Fiber.join(starting), ThreadStore.ThreadStore)
        // Its migrations ran: a turn commits, the history answers, the other host's record is kept.
        const lease = yield* store.acquire("k", "1 minute")
        yield* store.commit(
          lease,
          new ThreadStore.ThreadRecord({
            key: "k",
            provider: "reference",
            session: "new",
            fingerprint: "fp",
            turns: 1,
            turn: "t1",
            updatedAt: 8
          }),
          "upsert"
        )
        expect(yield* store.get("k")).toMatchObject({ _tag: "Some", value: { session: "new", turn: "t1" } })
        expect(yield* store.history("k")).toEqual([])
        // The other host's record (key "j", hex 006a), with what its transaction wrote.
        expect(yield* store.get("j")).toMatchObject({ _tag: "Some", value: { session: "old", turns: 4 } })
      }).pipe(Effect.scoped),
    30_000
  )
})
