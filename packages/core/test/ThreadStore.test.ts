import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { ThreadStore } from "@tether/core"
import * as SqlThreadStore from "@tether/core/SqlThreadStore"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as TestClock from "effect/TestClock"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Postgres from "./fixtures/postgres.js"

const record = (key: string, session: string, turns = 1) =>
  new ThreadStore.ThreadRecord({ key, provider: "reference", session, fingerprint: "fp", turns, updatedAt: turns })

const sqliteLayer = () => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-store-"))
  return SqlThreadStore.layer.pipe(
    Layer.provide(SqliteClient.layer({ filename: Path.join(dir, "threads.db") })),
    Layer.orDie,
    Layer.merge(
      Layer.scopedDiscard(
        Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true })))
      )
    )
  )
}

const postgresLayer = () => SqlThreadStore.layer.pipe(Layer.provide(Postgres.layer()), Layer.orDie)

const stores: ReadonlyArray<readonly [string, () => Layer.Layer<ThreadStore.ThreadStore>]> = [
  ["memory", () => ThreadStore.layerMemory],
  ["sqlite", sqliteLayer],
  ["postgres", postgresLayer]
]

for (const [name, makeLayer] of stores) {
  describe(`ThreadStore (${name})`, () => {
    const withStore = <A, E>(f: (store: ThreadStore.ThreadStore["Type"]) => Effect.Effect<A, E>) =>
      Effect.flatMap(ThreadStore.ThreadStore, f).pipe(Effect.provide(makeLayer()))

    it.effect("a missing key has no record", () =>
      withStore((store) =>
        Effect.gen(function*() {
          expect(Option.isNone(yield* store.get("absent"))).toBe(true)
        })
      ))

    it.effect("one lease per key: a second acquire fails fast with ThreadBusy until release", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const lease = yield* store.acquire("k", "1 minute")
          const busy = yield* Effect.flip(store.acquire("k", "1 minute"))
          expect(busy._tag).toBe("ThreadBusy")
          const other = yield* store.acquire("other", "1 minute")
          expect(other.key).toBe("other")
          yield* store.release(lease)
          const again = yield* store.acquire("k", "1 minute")
          expect(again.holder).not.toBe(lease.holder)
        })
      ))

    it.effect("an expired lease is taken over, and its holder can no longer commit or renew", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const first = yield* store.acquire("k", "10 seconds")
          yield* store.commit(first, record("k", "s1"), "upsert")
          yield* TestClock.adjust("11 seconds")
          const second = yield* store.acquire("k", "10 seconds")
          const lost = yield* Effect.flip(store.commit(first, record("k", "stale"), "upsert"))
          expect(lost._tag).toBe("LeaseLost")
          expect((yield* Effect.flip(store.renew(first, "10 seconds")))._tag).toBe("LeaseLost")
          expect(Option.getOrThrow(yield* store.get("k")).session).toBe("s1")
          yield* store.commit(second, record("k", "s2", 2), "upsert")
          expect(Option.getOrThrow(yield* store.get("k")).session).toBe("s2")
        })
      ))

    it.effect("renew keeps a lease alive past its first expiry", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const lease = yield* store.acquire("k", "10 seconds")
          yield* TestClock.adjust("8 seconds")
          yield* store.renew(lease, "10 seconds")
          yield* TestClock.adjust("8 seconds")
          expect((yield* Effect.flip(store.acquire("k", "10 seconds")))._tag).toBe("ThreadBusy")
          yield* store.commit(lease, record("k", "s1"), "upsert")
        })
      ))

    it.effect("the id of the committing turn is kept with the record, and cleared by a commit without one", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const lease = yield* store.acquire("k", "1 minute")
          yield* store.commit(lease, new ThreadStore.ThreadRecord({ ...record("k", "s1"), turn: "turn-1" }), "upsert")
          expect(Option.getOrThrow(yield* store.get("k")).turn).toBe("turn-1")
          yield* store.commit(lease, record("k", "s1", 2), "upsert")
          const cleared = Option.getOrThrow(yield* store.get("k"))
          expect(cleared.turn).toBeUndefined()
          expect(cleared.turns).toBe(2)
        })
      ))

    it.effect("insert refuses an existing record with ThreadAlreadyExists and keeps it", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const lease = yield* store.acquire("k", "1 minute")
          yield* store.commit(lease, record("k", "s1"), "insert")
          const exists = yield* Effect.flip(store.commit(lease, record("k", "s2"), "insert"))
          expect(exists._tag).toBe("ThreadAlreadyExists")
          expect(Option.getOrThrow(yield* store.get("k")).session).toBe("s1")
        })
      ))

    it.effect("a released lease cannot commit", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const lease = yield* store.acquire("k", "1 minute")
          yield* store.release(lease)
          const exit = yield* Effect.exit(store.commit(lease, record("k", "s1"), "upsert"))
          expect(Exit.isFailure(exit)).toBe(true)
          expect(Option.isNone(yield* store.get("k"))).toBe(true)
        })
      ))

    it.effect("keys are stored and compared exactly: NUL, lone surrogates, astral characters", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const keys = ["a\u0000b", "a", "\ud800", "\udc00", "\ud83d\ude00", "tenant/42 issue#1", ""]
          for (const [i, key] of keys.entries()) {
            const lease = yield* store.acquire(key, "1 minute")
            yield* store.commit(lease, record(key, `s${i}`), "insert")
          }
          for (const [i, key] of keys.entries()) {
            const found = Option.getOrThrow(yield* store.get(key))
            expect(found.key).toBe(key)
            expect(found.session).toBe(`s${i}`)
          }
          expect(Option.isNone(yield* store.get("a\u0000"))).toBe(true)
        })
      ))

    it.effect("a commit of another session keeps the replaced record in the key's history; a resume does not", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const components = { model: "m1", instructions: "i1" }
          const lease = yield* store.acquire("k", "1 minute")
          const first = new ThreadStore.ThreadRecord({ ...record("k", "s1"), components })
          yield* store.commit(lease, first, "upsert")
          // The same session advancing: nothing superseded.
          yield* TestClock.adjust("1 second")
          const advanced = new ThreadStore.ThreadRecord({ ...record("k", "s1", 2), components, turn: "turn-2" })
          yield* store.commit(lease, advanced, "upsert")
          expect(yield* store.history("k")).toEqual([])
          expect(Option.getOrThrow(yield* store.get("k"))).toEqual(advanced)
          // Another session (a restart): the replaced record is kept, with when it was replaced.
          yield* TestClock.adjust("1 second")
          yield* store.commit(lease, record("k", "s2"), "upsert")
          // Another fingerprint on the same session is another conversation too.
          yield* TestClock.adjust("1 second")
          yield* store.commit(
            lease,
            new ThreadStore.ThreadRecord({ ...record("k", "s2"), fingerprint: "fp2" }),
            "upsert"
          )
          const history = yield* store.history("k")
          expect(history.map((entry) => [entry.record.session, entry.record.fingerprint, entry.supersededAt])).toEqual([
            ["s2", "fp", 3_000],
            ["s1", "fp", 2_000]
          ])
          // Whole, with the id of the turn that committed it.
          expect(history[1]!.record).toStrictEqual(advanced)
          expect(yield* store.history("other")).toEqual([])
          expect([...(yield* store.sessions)].sort()).toEqual(["s1", "s2"])
          // A lost lease supersedes nothing.
          yield* store.release(lease)
          expect((yield* Effect.flip(store.commit(lease, record("k", "s3"), "upsert")))._tag).toBe("LeaseLost")
          expect(yield* store.history("k")).toHaveLength(2)
        })
      ))

    it.effect("prune removes superseded records by key and by age, and expired leases; delete needs the lease", () =>
      withStore((store) =>
        Effect.gen(function*() {
          for (const key of ["a", "b"]) {
            const lease = yield* store.acquire(key, "1 minute")
            for (const [i, session] of ["s1", "s2", "s3"].entries()) {
              yield* TestClock.adjust("10 seconds")
              yield* store.commit(lease, record(key, `${key}-${session}`, i + 1), "upsert")
            }
            yield* store.release(lease)
          }
          // Superseded at 20 s and 30 s (a), 50 s and 60 s (b).
          const old = yield* store.prune({ supersededBefore: 25_000 })
          expect(old.map((entry) => entry.record.session)).toEqual(["a-s1"])
          const ofB = yield* store.prune({ key: "b" })
          expect(ofB.map((entry) => entry.record.session).sort()).toEqual(["b-s1", "b-s2"])
          expect((yield* store.history("a")).map((entry) => entry.record.session)).toEqual(["a-s2"])
          expect(yield* store.history("b")).toEqual([])
          expect(Option.getOrThrow(yield* store.get("b")).session).toBe("b-s3")
          // An expired lease of a dead host is pruned: the key is free, and its holder cannot commit.
          const dead = yield* store.acquire("c", "1 second")
          yield* TestClock.adjust("2 seconds")
          yield* store.prune({ key: "nothing" })
          const live = yield* store.acquire("c", "1 minute")
          expect((yield* Effect.flip(store.commit(dead, record("c", "x"), "upsert")))._tag).toBe("LeaseLost")
          // Delete: the record and its history, only under the lease.
          const lease = yield* store.acquire("a", "1 minute")
          yield* store.release(lease)
          expect((yield* Effect.flip(store.delete(lease)))._tag).toBe("LeaseLost")
          const held = yield* store.acquire("a", "1 minute")
          const removed = yield* store.delete(held)
          expect(removed.map((r) => r.session)).toEqual(["a-s3", "a-s2"])
          expect(Option.isNone(yield* store.get("a"))).toBe(true)
          expect(yield* store.history("a")).toEqual([])
          expect([...(yield* store.sessions)].sort()).toEqual(["b-s3"])
          yield* store.release(live)
        })
      ))

    it.effect("a replaced record is never dropped: kept, or (SQL: its session and time already kept) not replaced", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const at = (session: string, fingerprint: string, updatedAt: number) =>
            new ThreadStore.ThreadRecord({ ...record("k", session), fingerprint, updatedAt })
          const lease = yield* store.acquire("k", "1 minute")
          // s1 under fp1, then s1 under fp2 (another conversation), both committed at 1 s.
          yield* store.commit(lease, at("s1", "fp1", 1_000), "upsert")
          yield* TestClock.adjust("1 second")
          yield* store.commit(lease, at("s1", "fp2", 1_000), "upsert")
          yield* TestClock.adjust("1 second")
          const third = yield* Effect.either(store.commit(lease, at("s2", "fp2", 3_000), "upsert"))
          const entries = Effect.map(
            store.history("k"),
            (history) => history.map((entry) => [entry.record.session, entry.record.fingerprint, entry.supersededAt])
          )
          if (name === "memory") {
            expect(Either.isRight(third)).toBe(true)
            expect(yield* entries).toEqual([["s1", "fp2", 2_000], ["s1", "fp1", 1_000]])
          } else {
            // The SQL history holds one record per session and commit time (the key hosts of earlier
            // versions write under): the commit fails, and the record it would have dropped stays.
            expect(Either.isLeft(third) && third.left._tag).toBe("ThreadStoreError")
            expect(Option.getOrThrow(yield* store.get("k")).fingerprint).toBe("fp2")
            expect(yield* entries).toEqual([["s1", "fp1", 1_000]])
          }
        })
      ))

    it.effect("records replaced within one millisecond are listed most recently replaced first (history, delete)", () =>
      withStore((store) =>
        Effect.gen(function*() {
          // The clock does not move: three restarts of one key within the same millisecond.
          const lease = yield* store.acquire("k", "1 minute")
          for (const session of ["a-first", "b-second", "c-third", "d-current"]) {
            yield* store.commit(lease, record("k", session), "upsert")
          }
          expect((yield* store.history("k")).map((entry) => entry.record.session)).toEqual([
            "c-third",
            "b-second",
            "a-first"
          ])
          expect((yield* store.delete(lease)).map((r) => r.session)).toEqual([
            "d-current",
            "c-third",
            "b-second",
            "a-first"
          ])
        })
      ))

    it.effect("a turn id is kept exactly, whatever the string (half an emoji, NUL): every commit succeeds and reads back", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const lease = yield* store.acquire("k", "1 minute")
          // "order-😀" cut to 7 code units, and its neighbour: both are "order-\ufffd" in UTF-8.
          const ids = ["😀", "a\u0000b", "\udc00", "", "order-\ud83e", "order-\ud83d"]
          for (const [i, turn] of ids.entries()) {
            const committed = new ThreadStore.ThreadRecord({ ...record("k", "s1", i + 1), turn })
            const exit = yield* Effect.either(store.commit(lease, committed, "upsert"))
            expect(Either.isRight(exit) ? "committed" : exit.left._tag).toBe("committed")
            expect(Option.getOrThrow(yield* store.get("k"))).toStrictEqual(committed)
          }
          // Replaced, it keeps its id in the history.
          yield* store.commit(lease, record("k", "s2", 7), "upsert")
          expect((yield* store.history("k")).map((entry) => entry.record.turn)).toEqual(["order-\ud83d"])
        })
      ))

    it.effect("prune takes any bound as the memory store does: -Infinity (olderThan: Duration.infinity) and NaN remove nothing, a fractional one is exact", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const lease = yield* store.acquire("k", "1 minute")
          for (const [i, session] of ["s1", "s2", "s3"].entries()) {
            yield* TestClock.adjust("1 second")
            yield* store.commit(lease, record("k", session, i + 1), "upsert")
          }
          // s1 superseded at 2 s, s2 at 3 s.
          const prune = (options: ThreadStore.PruneOptions) =>
            Effect.map(store.prune(options), (removed) => removed.map((entry) => entry.record.session))
          expect(yield* prune({ key: "k", supersededBefore: -Infinity })).toEqual([])
          expect(yield* prune({ supersededBefore: -Infinity })).toEqual([])
          expect(yield* prune({ key: "k", supersededBefore: Number.NaN })).toEqual([])
          expect(yield* prune({ key: "k", supersededBefore: 1_999.5 })).toEqual([])
          expect(yield* prune({ key: "k", supersededBefore: 2_000.5 })).toEqual(["s1"])
          expect((yield* store.history("k")).map((entry) => entry.record.session)).toEqual(["s2"])
          expect(yield* prune({ supersededBefore: Infinity })).toEqual(["s2"])
          expect(yield* store.history("k")).toEqual([])
        })
      ))

    it.effect("the empty key and a 200,000-character key are kept, superseded, pruned and deleted", () =>
      withStore((store) =>
        Effect.gen(function*() {
          for (const key of ["", "x".repeat(200_000)]) {
            const lease = yield* store.acquire(key, "1 minute")
            yield* store.commit(lease, record(key, "s1", 1), "upsert")
            yield* store.commit(lease, record(key, "s2", 2), "upsert")
            expect(Option.getOrThrow(yield* store.get(key)).key).toBe(key)
            expect((yield* store.history(key)).map((entry) => entry.record.key)).toEqual([key])
            expect((yield* store.prune({ key })).length).toBe(1)
            expect((yield* store.delete(lease)).map((r) => r.session)).toEqual(["s2"])
          }
        })
      ))

    it.effect("keys of thousands of characters (past PostgreSQL's index limit) are kept and told apart exactly", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const random = (length: number) =>
            Array.from({ length }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919 + length) % 20000))).join("")
          const long = random(3_000)
          const twin = long.slice(0, -1) + "\ud800"
          const lease = yield* store.acquire(long, "1 minute")
          expect((yield* Effect.flip(store.acquire(long, "1 minute")))._tag).toBe("ThreadBusy")
          yield* store.commit(lease, record(long, "s-long"), "insert")
          const other = yield* store.acquire(twin, "1 minute")
          yield* store.commit(other, record(twin, "s-twin"), "insert")
          expect(Option.getOrThrow(yield* store.get(long))).toMatchObject({ key: long, session: "s-long" })
          expect(Option.getOrThrow(yield* store.get(twin))).toMatchObject({ key: twin, session: "s-twin" })
          yield* store.renew(lease, "1 minute")
          yield* store.release(lease)
          yield* store.release(yield* store.acquire(long, "1 minute"))
        })
      ))

    it.effect.prop(
      "any key round-trips exactly and never aliases another",
      [FastCheck.string({ unit: "binary", maxLength: 12 }), FastCheck.string({ unit: "binary", maxLength: 12 })],
      ([a, b]) =>
        withStore((store) =>
          Effect.gen(function*() {
            const lease = yield* store.acquire(a, "1 minute")
            yield* store.commit(lease, record(a, "sa"), "insert")
            const found = yield* store.get(b)
            if (a === b) expect(Option.getOrThrow(found).key).toBe(a)
            else expect(Option.isNone(found)).toBe(true)
          })
        ),
      { fastCheck: { numRuns: 25 } }
    )
  })
}

// Databases written by the first version (migration 1 only), on both SQL dialects.
const sqlDialects: ReadonlyArray<readonly [string, () => Layer.Layer<SqlClient.SqlClient>]> = [
  ["sqlite", () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-store-"))
    return SqliteClient.layer({ filename: Path.join(dir, "threads.db") }).pipe(
      Layer.orDie,
      Layer.merge(
        Layer.scopedDiscard(Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(dir, { recursive: true }))))
      )
    )
  }],
  ["postgres", () => Postgres.layer()]
]
for (const [name, sqlLayer] of sqlDialects) {
  /** The first version's schema and one record under the key "k". */
  const firstVersion = (session: string) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE tether_migrations (migration_id integer PRIMARY KEY NOT NULL, created_at TEXT, name TEXT)`
      yield* sql`INSERT INTO tether_migrations (migration_id, created_at, name) VALUES (1, '2026-01-01', 'tether_threads')`
      yield* sql`CREATE TABLE tether_threads (key_hex TEXT PRIMARY KEY, provider TEXT NOT NULL, session TEXT NOT NULL,
        fingerprint TEXT NOT NULL, turns INTEGER NOT NULL, updated_at BIGINT NOT NULL)`
      yield* sql`CREATE TABLE tether_thread_leases (key_hex TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at BIGINT NOT NULL)`
      yield* sql`INSERT INTO tether_threads VALUES ('006b', 'reference', ${session}, 'fp', 3, 7)`
      return sql
    })
  const openStore = (sql: SqlClient.SqlClient) =>
    Effect.provide(
      ThreadStore.ThreadStore,
      SqlThreadStore.layer.pipe(Layer.provide(Layer.succeed(SqlClient.SqlClient, sql)))
    )

  it.live(`ThreadStore (${name}): a database written before the history migration keeps its records and gains a history`, () =>
    Effect.gen(function*() {
      const store = yield* openStore(yield* firstVersion("old"))
      const old = Option.getOrThrow(yield* store.get("k"))
      expect(old).toMatchObject({ key: "k", session: "old", turns: 3 })
      expect(old.components).toBeUndefined()
      const lease = yield* store.acquire("k", "1 minute")
      yield* store.commit(lease, record("k", "new"), "upsert")
      expect((yield* store.history("k")).map((entry) => entry.record)).toEqual([old])
    }).pipe(Effect.provide(sqlLayer())))

  it.live(`ThreadStore (${name}): a migration that cannot run fails the store with ThreadStoreError, not a defect`, () =>
    Effect.gen(function*() {
      const sql = yield* firstVersion("old")
      // Migration 2 adds `components`: a table that already has it (written by hand) makes it fail.
      yield* sql`ALTER TABLE tether_threads ADD COLUMN components TEXT`
      const exit = yield* Effect.exit(openStore(sql))
      expect(exit._tag).toBe("Failure")
      if (exit._tag === "Failure") {
        expect(Cause.isDie(exit.cause)).toBe(false)
        expect(Cause.failureOption(exit.cause)).toMatchObject({
          _tag: "Some",
          value: { _tag: "ThreadStoreError", operation: "migrate" }
        })
      }
    }).pipe(Effect.provide(sqlLayer())))

  it.live(`ThreadStore (${name}): a store created by the first version opens with its records intact`, () =>
    Effect.gen(function*() {
      const sql = yield* firstVersion("old-session")
      // A 300-character key: its hex (1,200 characters) moves to the indexed form.
      const long = "y".repeat(300)
      yield* sql`INSERT INTO tether_threads VALUES (${"0079".repeat(300)}, 'reference', 'long-session', 'fp', 1, 8)`
      const store = yield* openStore(sql)
      const old = Option.getOrThrow(yield* store.get("k"))
      expect(old).toMatchObject({ key: "k", session: "old-session", turns: 3, updatedAt: 7 })
      expect(old.turn).toBeUndefined()
      expect(Option.getOrThrow(yield* store.get(long))).toMatchObject({ key: long, session: "long-session", turns: 1 })
      const lease = yield* store.acquire("k", "1 minute")
      yield* store.commit(lease, new ThreadStore.ThreadRecord({ ...record("k", "s2", 4), turn: "t4" }), "upsert")
      expect(Option.getOrThrow(yield* store.get("k")).turn).toBe("t4")
    }).pipe(Effect.provide(sqlLayer())))
}

// A database of the version before migration 6 (the history's sequence, the turn ids' exact form).
for (const [name, sqlLayer] of sqlDialects) {
  /** Migrations 1 to 5 as that version left them: a record and a history under "k", one under "o". */
  const fifthVersion = Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE tether_migrations (migration_id integer PRIMARY KEY NOT NULL, created_at TEXT, name TEXT)`
    for (
      const [id, migration] of [
        [1, "tether_threads"],
        [2, "tether_thread_history"],
        [3, "tether_thread_turn"],
        [4, "tether_long_keys"],
        [5, "tether_history_turn"]
      ] as const
    ) {
      yield* sql`INSERT INTO tether_migrations (migration_id, created_at, name) VALUES (${id}, '2026-01-01', ${migration})`
    }
    yield* sql`CREATE TABLE tether_threads (key_hex TEXT PRIMARY KEY, provider TEXT NOT NULL, session TEXT NOT NULL,
      fingerprint TEXT NOT NULL, turns INTEGER NOT NULL, updated_at BIGINT NOT NULL, components TEXT, turn_id TEXT,
      key_long TEXT)`
    yield* sql`CREATE TABLE tether_thread_leases (key_hex TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at BIGINT NOT NULL)`
    yield* sql`CREATE TABLE tether_thread_history (key_hex TEXT NOT NULL, provider TEXT NOT NULL, session TEXT NOT NULL,
      fingerprint TEXT NOT NULL, components TEXT, turns INTEGER NOT NULL, updated_at BIGINT NOT NULL,
      superseded_at BIGINT NOT NULL, key_long TEXT, turn_id TEXT, PRIMARY KEY (key_hex, session, updated_at))`
    // The current record: session h3 resumed under another fingerprint.
    yield* sql`INSERT INTO tether_threads (key_hex, provider, session, fingerprint, turns, updated_at, turn_id)
      VALUES ('006b', 'reference', 'h3', 'fp2', 4, 4, 't4')`
    // Superseded at 10, 20 and 20 (in one millisecond: listed by their commit time).
    for (const [session, at, superseded] of [["h1", 1, 10], ["h3", 3, 20], ["h2", 2, 20]] as const) {
      yield* sql`INSERT INTO tether_thread_history
          (key_hex, provider, session, fingerprint, turns, updated_at, superseded_at, turn_id)
        VALUES ('006b', 'reference', ${session}, 'fp', ${at}, ${at}, ${superseded}, ${`t${at}`})`
    }
    yield* sql`INSERT INTO tether_thread_history (key_hex, provider, session, fingerprint, turns, updated_at, superseded_at)
      VALUES ('006f', 'reference', 'o1', 'fp', 1, 1, 5)`
    return sql
  })
  const openStore = (sql: SqlClient.SqlClient) =>
    Effect.provide(
      ThreadStore.ThreadStore,
      SqlThreadStore.layer.pipe(Layer.provide(Layer.succeed(SqlClient.SqlClient, sql)))
    )

  it.live(`ThreadStore (${name}): a history written before migration 6 keeps its rows and order, and loses no later record`, () =>
    Effect.gen(function*() {
      const sql = yield* fifthVersion
      const store = yield* openStore(sql)
      const entries = (key: string) =>
        Effect.map(
          store.history(key),
          (history) => history.map((entry) => [entry.record.session, entry.record.fingerprint, entry.record.turn])
        )
      expect(Option.getOrThrow(yield* store.get("k"))).toMatchObject({ session: "h3", fingerprint: "fp2", turn: "t4" })
      expect(yield* entries("k")).toEqual([["h3", "fp", "t3"], ["h2", "fp", "t2"], ["h1", "fp", "t1"]])
      expect(yield* entries("o")).toEqual([["o1", "fp", undefined]])
      // A restart replaces h3 under fp2: it is kept before the rows the earlier version kept.
      const lease = yield* store.acquire("k", "1 minute")
      const turn = "order-\ud83d"
      yield* store.commit(lease, new ThreadStore.ThreadRecord({ ...record("k", "new", 4), turn }), "upsert")
      expect(Option.getOrThrow(yield* store.get("k")).turn).toBe(turn)
      expect(yield* entries("k")).toEqual([
        ["h3", "fp2", "t4"],
        ["h3", "fp", "t3"],
        ["h2", "fp", "t2"],
        ["h1", "fp", "t1"]
      ])
      // A host of the version before keeps working on the migrated tables: its history copy
      // (exactly its statement, no turn_hex, no seq) and its upsert (turn_id only) are read.
      yield* sql`INSERT INTO tether_thread_history
          (key_hex, key_long, provider, session, fingerprint, components, turns, updated_at, turn_id, superseded_at)
        SELECT key_hex, key_long, provider, session, fingerprint, components, turns, updated_at, turn_id, ${Date.now()}
        FROM tether_threads
        WHERE key_hex = '006b' AND (session <> 'older' OR fingerprint <> 'fp' OR provider <> 'reference')
        ON CONFLICT (key_hex, session, updated_at) DO NOTHING`
      yield* sql`UPDATE tether_threads SET turn_id = 'older-host', session = 'older' WHERE key_hex = '006b'`
      expect(Option.getOrThrow(yield* store.get("k")).turn).toBe("older-host")
      expect((yield* entries("k"))[0]).toEqual(["new", "fp", "order-\ufffd"])
      expect((yield* store.delete(lease)).map((r) => r.session)).toEqual(["older", "new", "h3", "h3", "h2", "h1"])
    }).pipe(Effect.provide(sqlLayer())))
}

describe("ThreadStore (sqlite across processes)", () => {
  it("a record written by one host process is read by the next", () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-store-"))
    try {
      const filename = Path.join(dir, "threads.db")
      const child = Path.join(import.meta.dirname, "fixtures/threadStoreChild.ts")
      const run = (mode: string) =>
        execFileSync(process.execPath, [
          "--conditions=@tether/source",
          "--import",
          "tsx",
          child,
          filename,
          mode,
          JSON.stringify("k\u0000λ")
        ], {
          encoding: "utf8"
        }).trim()
      expect(run("write")).toBe("written")
      const read = JSON.parse(run("read"))
      expect(read).toMatchObject({ key: "k\u0000λ", session: "session-from-child", fingerprint: "fp-1", turns: 1 })
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe("ThreadStore (postgres, one store per host)", () => {
  const hosts = 20
  // Each host has its own store on its own connection, as separate host processes would.
  const startHosts = (url: string, count = hosts) =>
    Effect.forEach(
      Array.from({ length: count }, (_, i) => i),
      () =>
        Effect.map(
          Layer.build(
            SqlThreadStore.layer.pipe(Layer.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })))
          ),
          (context) => Context.get(context, ThreadStore.ThreadStore)
        ),
      { concurrency: "unbounded" }
    )

  it.live("20 hosts starting at once on an empty database all come up (the migrations race)", () =>
    Effect.gen(function*() {
      const { url } = yield* Postgres.schema
      const stores = yield* startHosts(url)
      expect(stores.length).toBe(hosts)
      const lease = yield* stores[7]!.acquire("k", "1 minute")
      yield* stores[7]!.commit(lease, record("k", "s1"), "insert")
      expect(Option.getOrThrow(yield* stores[13]!.get("k")).session).toBe("s1")
    }).pipe(Effect.scoped))

  it.live("a takeover between the statements of a delete or a commit never leaves it half done (READ COMMITTED)", () =>
    Effect.gen(function*() {
      const { url } = yield* Postgres.schema
      const [a, b] = (yield* startHosts(url, 2)) as [ThreadStore.ThreadStore["Type"], ThreadStore.ThreadStore["Type"]]
      const sql = Context.get(
        yield* Layer.build(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 }).pipe(Layer.orDie)),
        SqlClient.SqlClient
      )
      // Host A's statement on `table` sleeps 3 s; its lease (2 s) expires meanwhile and host B,
      // whose acquire takes an expired lease, comes for the key 2.5 s after A's acquire.
      const slow = (table: string, event: "DELETE" | "INSERT") =>
        Effect.gen(function*() {
          yield* sql.unsafe(`CREATE OR REPLACE FUNCTION tether_test_slow() RETURNS trigger LANGUAGE plpgsql AS
            $$ BEGIN PERFORM pg_sleep(3); RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END; END $$`)
          yield* sql.unsafe(`DROP TRIGGER IF EXISTS tether_test_slow ON tether_threads`)
          yield* sql.unsafe(`DROP TRIGGER IF EXISTS tether_test_slow ON tether_thread_history`)
          yield* sql.unsafe(`CREATE TRIGGER tether_test_slow BEFORE ${event} ON ${table}
            FOR EACH ROW EXECUTE FUNCTION tether_test_slow()`)
        })
      const race = <A, E>(operation: (lease: ThreadStore.Lease) => Effect.Effect<A, E>) =>
        Effect.gen(function*() {
          const lease = yield* a.acquire("k", "2 seconds")
          const running = yield* Effect.fork(Effect.either(operation(lease)))
          yield* Effect.sleep("2500 millis")
          const taken = yield* b.acquire("k", "1 minute")
          const outcome = yield* Fiber.join(running)
          yield* b.release(taken)
          return outcome
        })
      const setup = Effect.gen(function*() {
        const lease = yield* a.acquire("k", "1 minute")
        yield* a.commit(lease, record("k", "s1", 1), "upsert")
        yield* a.commit(lease, record("k", "s2", 2), "upsert")
        yield* a.release(lease)
      })
      const state = Effect.gen(function*() {
        return {
          current: Option.map(yield* a.get("k"), (r) => r.session),
          history: (yield* a.history("k")).map((entry) => entry.record.session)
        }
      })

      // A delete: the record and its history go together, or neither does.
      yield* setup
      yield* slow("tether_threads", "DELETE")
      const deleted = yield* race((lease) => a.delete(lease))
      const afterDelete = yield* state
      if (Either.isRight(deleted)) {
        expect(deleted.right.map((r) => r.session)).toEqual(["s2", "s1"])
        expect(afterDelete).toEqual({ current: Option.none(), history: [] })
      } else {
        expect(deleted.left._tag).toBe("LeaseLost")
        expect(afterDelete).toEqual({ current: Option.some("s2"), history: ["s1"] })
      }

      // A commit of another session: the replaced record moves to the history only with the commit.
      yield* sql.unsafe(`DELETE FROM tether_thread_history`)
      yield* sql.unsafe(`DROP TRIGGER IF EXISTS tether_test_slow ON tether_threads`)
      yield* sql.unsafe(`DELETE FROM tether_threads`)
      yield* setup
      yield* sql.unsafe(`DELETE FROM tether_thread_history`)
      yield* slow("tether_thread_history", "INSERT")
      const committed = yield* race((lease) => a.commit(lease, record("k", "s3", 3), "upsert"))
      const afterCommit = yield* state
      if (Either.isRight(committed)) {
        expect(afterCommit).toEqual({ current: Option.some("s3"), history: ["s2"] })
      } else {
        expect(committed.left._tag).toBe("LeaseLost")
        expect(afterCommit).toEqual({ current: Option.some("s2"), history: [] })
      }
    }).pipe(Effect.scoped))

  it.live("20 hosts acquiring one key at once: exactly one wins each round, the others get ThreadBusy", () =>
    Effect.gen(function*() {
      const { url } = yield* Postgres.schema
      const stores = yield* startHosts(url)
      const race = (key: string) =>
        Effect.forEach(stores, (store) => Effect.either(store.acquire(key, "1 minute")), { concurrency: "unbounded" })
      for (let round = 0; round < 10; round++) {
        // Even rounds race for a fresh key; odd rounds race to take over an expired lease.
        const key = `round-${round}`
        if (round % 2 === 1) {
          yield* stores[round]!.acquire(key, "1 millis")
          yield* Effect.sleep("5 millis")
        }
        const outcomes = yield* race(key)
        const winners = outcomes.filter(Either.isRight)
        expect(winners.length).toBe(1)
        expect(outcomes.filter(Either.isLeft).map((outcome) => outcome.left._tag)).toEqual(
          Array.from({ length: hosts - 1 }, () => "ThreadBusy")
        )
        // Only the winner's lease commits.
        const winner = stores[outcomes.findIndex(Either.isRight)]!
        yield* winner.commit(winners[0]!.right, record(key, `s${round}`), "insert")
        const loser = stores[outcomes.findIndex(Either.isLeft)]!
        const forged = yield* Effect.flip(loser.commit({ key, holder: "forged" }, record(key, "forged"), "upsert"))
        expect(forged._tag).toBe("LeaseLost")
        expect(Option.getOrThrow(yield* loser.get(key)).session).toBe(`s${round}`)
      }
    }).pipe(Effect.scoped))
})
