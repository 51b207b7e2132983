/** @internal */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Crypto from "node:crypto"
import {
  type Lease,
  LeaseLost,
  SupersededRecord,
  ThreadAlreadyExists,
  ThreadBusy,
  ThreadRecord,
  ThreadStore,
  ThreadStoreError
} from "./threadStore.js"

/**
 * Keys are arbitrary JavaScript strings (lone surrogates and NUL included). UTF-8 would merge
 * distinct lone surrogates, and NUL is unsafe in many SQL text paths, so a key is stored as
 * the hex of its UTF-16 code units: exact, portable, and ordered like the key.
 */
export const encodeKey = (key: string): string => {
  let out = ""
  for (let i = 0; i < key.length; i++) out += key.charCodeAt(i).toString(16).padStart(4, "0")
  return out
}

/**
 * The indexed form of a key: its hex, or for a key whose hex is longer than `maxIndexedHex`
 * (PostgreSQL refuses btree entries over 2704 bytes) `#` and the SHA-256 of the hex (`#` is not
 * a hex digit, so the two forms never meet). Such a record keeps its full hex in `key_long`.
 *
 * @internal
 */
export const maxIndexedHex = 1024

/** @internal */
export const indexedKey = (hex: string): string =>
  hex.length <= maxIndexedHex ? hex : `#${Crypto.createHash("sha256").update(hex).digest("hex")}`

/** @internal */
export const decodeKey = (hex: string): string => {
  let out = ""
  for (let i = 0; i < hex.length; i += 4) out += String.fromCharCode(parseInt(hex.slice(i, i + 4), 16))
  return out
}

/**
 * What a text column holds of a string written to it: drivers send UTF-8, where a lone surrogate
 * becomes U+FFFD, and PostgreSQL refuses NUL, so NUL is written as U+FFFD too.
 */
const textForm = (value: string): string => Buffer.from(value, "utf8").toString("utf8").replaceAll("\u0000", "\ufffd")

const migrationRecord = {
  "1_tether_threads": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE IF NOT EXISTS tether_threads (
      key_hex TEXT PRIMARY KEY,
      provider TEXT NOT NULL,
      session TEXT NOT NULL,
      fingerprint TEXT NOT NULL,
      turns INTEGER NOT NULL,
      updated_at BIGINT NOT NULL
    )`
    yield* sql`CREATE TABLE IF NOT EXISTS tether_thread_leases (
      key_hex TEXT PRIMARY KEY,
      holder TEXT NOT NULL,
      expires_at BIGINT NOT NULL
    )`
  }),
  // Per-component digests of the fingerprint, and the records a commit of another session replaced.
  "2_tether_thread_history": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`ALTER TABLE tether_threads ADD COLUMN components TEXT`
    yield* sql`CREATE TABLE IF NOT EXISTS tether_thread_history (
      key_hex TEXT NOT NULL,
      provider TEXT NOT NULL,
      session TEXT NOT NULL,
      fingerprint TEXT NOT NULL,
      components TEXT,
      turns INTEGER NOT NULL,
      updated_at BIGINT NOT NULL,
      superseded_at BIGINT NOT NULL,
      PRIMARY KEY (key_hex, session, updated_at)
    )`
  }),
  // The id of the turn that committed a record (a redelivered turn never commits twice).
  "3_tether_thread_turn": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`ALTER TABLE tether_threads ADD COLUMN turn_id TEXT`
  }),
  // Long keys move to their indexed form (only SQLite could store them before), history included.
  "4_tether_long_keys": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`ALTER TABLE tether_threads ADD COLUMN key_long TEXT`
    yield* sql`ALTER TABLE tether_thread_history ADD COLUMN key_long TEXT`
    for (const table of ["tether_threads", "tether_thread_history", "tether_thread_leases"] as const) {
      const rows = yield* sql<{ readonly key_hex: string }>`SELECT DISTINCT key_hex FROM ${sql(table)}
        WHERE length(key_hex) > ${maxIndexedHex}`
      for (const { key_hex } of rows) {
        yield* table === "tether_thread_leases"
          ? sql`UPDATE tether_thread_leases SET key_hex = ${indexedKey(key_hex)} WHERE key_hex = ${key_hex}`
          : sql`UPDATE ${sql(table)} SET key_hex = ${indexedKey(key_hex)}, key_long = ${key_hex}
              WHERE key_hex = ${key_hex}`
      }
    }
  }),
  // A superseded record keeps the id of the turn that committed it, as the memory store does.
  "5_tether_history_turn": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`ALTER TABLE tether_thread_history ADD COLUMN turn_id TEXT`
  }),
  // Turn ids are kept exactly (`turn_hex`, the hex of their UTF-16 code units, as keys are;
  // `turn_id` keeps their text form), and `seq` numbers a key's superseded records in the order
  // they were replaced (records replaced within one millisecond had no order). Columns only: a host
  // of an earlier version keeps working on the migrated tables (it writes neither).
  "6_tether_turn_hex_history_seq": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`ALTER TABLE tether_threads ADD COLUMN turn_hex TEXT`
    yield* sql`ALTER TABLE tether_thread_history ADD COLUMN turn_hex TEXT`
    yield* sql`ALTER TABLE tether_thread_history ADD COLUMN seq BIGINT`
  })
}
const migrations = Migrator.fromRecord(migrationRecord)
/** The id of the last migration this version knows. */
const latestMigration = Math.max(...Object.keys(migrationRecord).map((name) => Number.parseInt(name, 10)))

interface RecordRow {
  readonly key_hex: string
  readonly key_long: string | null
  readonly provider: string
  readonly session: string
  readonly fingerprint: string
  readonly components: string | null
  readonly turns: number | bigint
  readonly updated_at: number | bigint
  readonly turn_id: string | null
  readonly turn_hex: string | null
}

interface HistoryRow extends RecordRow {
  readonly superseded_at: number | bigint
}

const Components = Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.String }))
const decodeComponents = Schema.decodeUnknownSync(Components)
const encodeComponents = Schema.encodeSync(Components)

interface LeaseRow {
  readonly holder: string
  readonly expires_at: number | bigint
}

/**
 * The turn id of a row: its exact form, unless the row has none (written before migration 6) or
 * one its `turn_id` does not match (a writer that set `turn_id` only).
 */
const turnOf = (row: RecordRow): string | undefined => {
  if (row.turn_hex !== null) {
    const turn = decodeKey(row.turn_hex)
    if (textForm(turn) === row.turn_id) return turn
  }
  return row.turn_id ?? undefined
}

// A row this store wrote decodes; anything else is a store failure (caught where it is called).
const toRecord = (row: RecordRow) => {
  const turn = turnOf(row)
  return new ThreadRecord({
    key: decodeKey(row.key_long ?? row.key_hex),
    provider: row.provider,
    session: row.session,
    fingerprint: row.fingerprint,
    ...(row.components === null ? {} : { components: decodeComponents(row.components) }),
    turns: Number(row.turns),
    updatedAt: Number(row.updated_at),
    ...(turn === undefined ? {} : { turn })
  })
}

const toSuperseded = (row: HistoryRow) =>
  new SupersededRecord({ record: toRecord(row), supersededAt: Number(row.superseded_at) })

/**
 * `supersededBefore` as a BIGINT bound (PostgreSQL refuses a fractional or infinite one):
 * `superseded_at` holds a commit's epoch milliseconds, an integer a JavaScript number holds
 * exactly, so `superseded_at < b` is `superseded_at < ceil(b)`. A bound above every such integer
 * removes them all (`"all"`, no condition); one below them all, or NaN (`x < NaN` is false in the
 * memory store), removes none (`"none"`: `Duration.infinity`'s `olderThan`).
 */
const supersededBound = (bound: number | undefined): number | "all" | "none" =>
  bound === undefined || bound > Number.MAX_SAFE_INTEGER
    ? "all"
    : bound >= Number.MIN_SAFE_INTEGER
    ? Math.ceil(bound)
    : "none"

const decodeRows = <R, A>(operation: string, rows: ReadonlyArray<R>, f: (row: R) => A) =>
  Effect.try({ try: () => rows.map(f), catch: (cause) => new ThreadStoreError({ operation, cause }) })

/** @internal */
export const makeSql = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* Migrator.make({})({ loader: migrations, table: "tether_migrations" }).pipe(
    // A migration that fails (a lock timeout behind another host's long transaction, say) is a
    // defect of the Migrator's own: it is this store's failure, retried like the others.
    Effect.catchAllDefect((defect) => Effect.fail(defect)),
    // The Migrator takes any failure to record the migrations it ran for another host running
    // them, and returns with nothing done: on SQLite, a host starting while another host commits a
    // turn (its read cannot take the write lock) came up without its tables. The store starts
    // once the database holds this version's last migration.
    Effect.zipRight(
      sql<{ readonly id: number | bigint | null }>`SELECT MAX(migration_id) AS id FROM tether_migrations`
    ),
    Effect.filterOrFail(
      (rows) => Number(rows[0]?.id ?? 0) >= latestMigration,
      () => new Error(`the database lacks migration ${latestMigration}: another host may be running it`)
    ),
    // Hosts starting together on an empty PostgreSQL database race to create the migrations
    // table (the Migrator checks for it, then creates it outside its lock): the losers fail
    // once and find it on the next attempt, where the Migrator's table lock serializes the rest.
    // A database another host is migrating, or holds in a write transaction, is waited for up
    // to 5 s; then the store fails to start (`ThreadStoreError` "migrate").
    Effect.retry({ times: 50, schedule: Schedule.spaced("100 millis") }),
    // A lock wait inside the Migrator (PostgreSQL: another host's migration) never fails on its
    // own: the 5 s bound is the start's as a whole.
    Effect.timeoutFail({
      duration: "5 seconds",
      onTimeout: () => new Error("the database's migrations did not complete within 5 s")
    }),
    Effect.mapError((cause) => new ThreadStoreError({ operation: "migrate", cause }))
  )
  // Most recently replaced first: `seq` orders records replaced within one millisecond (a row a
  // host of an earlier version wrote has none, and sorts as 0 on every dialect).
  const historyOrder = sql.unsafe("superseded_at DESC, COALESCE(seq, 0) DESC, updated_at DESC")
  const storeError = (operation: string) => (cause: unknown) => new ThreadStoreError({ operation, cause })
  // @effect/sql dies when a transaction's COMMIT or ROLLBACK fails (a connection lost inside the
  // transaction): that is the store failing, a `ThreadStoreError` like any other SQL error.
  const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    sql.withTransaction(effect).pipe(
      Effect.catchSomeDefect((defect) => defect instanceof SqlError ? Option.some(Effect.fail(defect)) : Option.none())
    )
  const leaseOf = (keyHex: string) =>
    Effect.map(
      sql<LeaseRow>`SELECT holder, expires_at FROM tether_thread_leases WHERE key_hex = ${keyHex}`,
      (rows) => Option.fromNullable(rows[0])
    )
  const held = (lease: Lease, now: number) =>
    Effect.map(
      leaseOf(indexedKey(encodeKey(lease.key))),
      Option.match({
        onNone: () => false,
        onSome: (row) => row.holder === lease.holder && Number(row.expires_at) > now
      })
    )

  // Locks the lease row while the lease is held (a no-op update takes the row lock, released when
  // the transaction ends), then says whether it is held.
  const lock = (keyHex: string, lease: Lease, now: number) =>
    sql`UPDATE tether_thread_leases SET holder = holder
      WHERE key_hex = ${keyHex} AND holder = ${lease.holder} AND expires_at > ${now}`.pipe(
      Effect.zipRight(held(lease, now))
    )

  return ThreadStore.of({
    get: (key) =>
      sql<RecordRow>`SELECT * FROM tether_threads WHERE key_hex = ${indexedKey(encodeKey(key))}`.pipe(
        Effect.mapError(storeError("get")),
        Effect.flatMap((rows) => decodeRows("get", rows, toRecord)),
        Effect.map((records) => Option.fromNullable(records[0]))
      ),
    acquire: (key, ttl) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const keyHex = indexedKey(encodeKey(key))
        const holder = crypto.randomUUID()
        const expiresAt = now + Duration.toMillis(ttl)
        // One statement takes a free or expired lease and leaves a live one alone.
        yield* sql`INSERT INTO tether_thread_leases (key_hex, holder, expires_at)
          VALUES (${keyHex}, ${holder}, ${expiresAt})
          ON CONFLICT (key_hex) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
          WHERE tether_thread_leases.expires_at <= ${now}`
        const current = yield* leaseOf(keyHex)
        return { current, lease: { key, holder } satisfies Lease }
      }).pipe(
        transaction,
        Effect.mapError(storeError("acquire")),
        Effect.flatMap(({ current, lease }) =>
          Option.isSome(current) && current.value.holder === lease.holder
            ? Effect.succeed(lease)
            : Effect.fail(new ThreadBusy({ key }))
        )
      ),
    renew: (lease, ttl) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const keyHex = indexedKey(encodeKey(lease.key))
        const expiresAt = now + Duration.toMillis(ttl)
        yield* sql`UPDATE tether_thread_leases SET expires_at = ${expiresAt}
          WHERE key_hex = ${keyHex} AND holder = ${lease.holder} AND expires_at > ${now}`
        const current = yield* leaseOf(keyHex)
        return Option.isSome(current) && current.value.holder === lease.holder &&
          Number(current.value.expires_at) === expiresAt
      }).pipe(
        transaction,
        Effect.mapError(storeError("renew")),
        Effect.flatMap((ok) => ok ? Effect.void : Effect.fail(new LeaseLost({ key: lease.key })))
      ),
    release: (lease) =>
      sql`DELETE FROM tether_thread_leases WHERE key_hex = ${
        indexedKey(encodeKey(lease.key))
      } AND holder = ${lease.holder}`.pipe(
        Effect.asVoid,
        Effect.mapError(storeError("release"))
      ),
    commit: (lease, record, mode) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const fullHex = encodeKey(lease.key)
        const keyHex = indexedKey(fullHex)
        const keyLong = keyHex === fullHex ? null : fullHex
        // The lease row is locked first (PostgreSQL keeps the lock until the transaction ends;
        // SQLite serializes writers): under READ COMMITTED a takeover committed between two of the
        // statements below could otherwise leave half of them done.
        if (!(yield* lock(keyHex, lease, now))) return "lost" as const
        const components = record.components === undefined ? null : encodeComponents(record.components)
        const turnId = record.turn === undefined ? null : textForm(record.turn)
        const turnHex = record.turn === undefined ? null : encodeKey(record.turn)
        const values =
          sql`${keyHex}, ${keyLong}, ${record.provider}, ${record.session}, ${record.fingerprint}, ${components}, ${record.turns}, ${record.updatedAt}, ${turnId}, ${turnHex}`
        // Every write is guarded by the lease in the same statement as well: a lost lease writes nothing.
        const guard = sql`EXISTS (SELECT 1 FROM tether_thread_leases
          WHERE key_hex = ${keyHex} AND holder = ${lease.holder} AND expires_at > ${now})`
        if (mode === "insert") {
          yield* sql`INSERT INTO tether_threads
              (key_hex, key_long, provider, session, fingerprint, components, turns, updated_at, turn_id, turn_hex)
            SELECT ${values} WHERE ${guard}
            ON CONFLICT (key_hex) DO NOTHING`
        } else {
          // A record of another conversation is kept in the history before it is replaced, numbered
          // after the key's others: the lease row locked above keeps every other commit of the
          // key out until this transaction ends.
          const replaced = yield* sql<{ readonly session: string; readonly updated_at: number | bigint }>`
            SELECT session, updated_at FROM tether_threads
            WHERE key_hex = ${keyHex} AND ${guard}
              AND (session <> ${record.session} OR fingerprint <> ${record.fingerprint}
                OR provider <> ${record.provider})`
          if (replaced.length > 0) {
            const kept = yield* sql<{ readonly key_hex: string }>`INSERT INTO tether_thread_history
                (key_hex, seq, key_long, provider, session, fingerprint, components, turns, updated_at, turn_id,
                turn_hex, superseded_at)
              SELECT key_hex,
                (SELECT COALESCE(MAX(seq), 0) + 1 FROM tether_thread_history WHERE key_hex = ${keyHex}),
                key_long, provider, session, fingerprint, components, turns, updated_at, turn_id, turn_hex, ${now}
              FROM tether_threads
              WHERE key_hex = ${keyHex} AND ${guard}
              ON CONFLICT (key_hex, session, updated_at) DO NOTHING
              RETURNING key_hex`
            // The history keeps one record per session and commit time (the key hosts of earlier
            // versions write under): one it already holds leaves no room for this one, which is
            // then not replaced (the transaction is rolled back) rather than lost.
            if (kept.length === 0) {
              return yield* Effect.fail(
                new Error(
                  `the history already holds a record of session ${JSON.stringify(replaced[0]!.session)} committed at ${
                    Number(replaced[0]!.updated_at)
                  }: the record of that session and time cannot be replaced`
                )
              )
            }
          }
          yield* sql`INSERT INTO tether_threads
              (key_hex, key_long, provider, session, fingerprint, components, turns, updated_at, turn_id, turn_hex)
            SELECT ${values} WHERE ${guard}
            ON CONFLICT (key_hex) DO UPDATE SET provider = excluded.provider, session = excluded.session,
              fingerprint = excluded.fingerprint, components = excluded.components, turns = excluded.turns,
              updated_at = excluded.updated_at, turn_id = excluded.turn_id, turn_hex = excluded.turn_hex`
        }
        if (!(yield* held(lease, now))) return "lost" as const
        const rows = yield* sql<RecordRow>`SELECT * FROM tether_threads WHERE key_hex = ${keyHex}`
        const row = rows[0]
        const written = row !== undefined && row.session === record.session &&
          row.fingerprint === record.fingerprint && Number(row.updated_at) === record.updatedAt &&
          Number(row.turns) === record.turns && row.provider === record.provider &&
          row.turn_hex === turnHex && turnOf(row) === record.turn
        return written ? "ok" as const : "exists" as const
      }).pipe(
        transaction,
        Effect.mapError(storeError("commit")),
        Effect.flatMap((status): Effect.Effect<void, LeaseLost | ThreadAlreadyExists> =>
          status === "ok"
            ? Effect.void
            : status === "lost"
            ? Effect.fail(new LeaseLost({ key: lease.key }))
            : Effect.fail(new ThreadAlreadyExists({ key: lease.key }))
        )
      ),
    history: (key) =>
      sql<HistoryRow>`SELECT * FROM tether_thread_history WHERE key_hex = ${indexedKey(encodeKey(key))}
        ORDER BY ${historyOrder}`.pipe(
        Effect.mapError(storeError("history")),
        Effect.flatMap((rows) => decodeRows("history", rows, toSuperseded))
      ),
    prune: (options) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const before = supersededBound(options.supersededBefore)
        const where = sql.and([
          ...(options.key === undefined ? [] : [sql`key_hex = ${indexedKey(encodeKey(options.key))}`]),
          ...(typeof before === "number" ? [sql`superseded_at < ${before}`] : [])
        ])
        // One statement, so what it returns is exactly what it removed: under READ COMMITTED
        // (PostgreSQL's default) a SELECT then a DELETE each see their own snapshot, and a row
        // another host committed between them was removed unreported (its session never dropped).
        const rows = before === "none"
          ? []
          : yield* sql<HistoryRow>`DELETE FROM tether_thread_history WHERE ${where} RETURNING *`
        yield* sql`DELETE FROM tether_thread_leases WHERE expires_at <= ${now}`
        return rows
      }).pipe(
        transaction,
        Effect.mapError(storeError("prune")),
        Effect.flatMap((rows) => decodeRows("prune", rows, toSuperseded))
      ),
    delete: (lease) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const keyHex = indexedKey(encodeKey(lease.key))
        // The lease row is locked first: the statements below then all see this lease, so a
        // takeover committed meanwhile (PostgreSQL, READ COMMITTED) cannot leave half of them done.
        if (!(yield* lock(keyHex, lease, now))) return undefined
        const current = yield* sql<RecordRow>`SELECT * FROM tether_threads WHERE key_hex = ${keyHex}`
        const history = yield* sql<HistoryRow>`SELECT * FROM tether_thread_history WHERE key_hex = ${keyHex}
          ORDER BY ${historyOrder}`
        const guard = sql`EXISTS (SELECT 1 FROM tether_thread_leases
          WHERE key_hex = ${keyHex} AND holder = ${lease.holder} AND expires_at > ${now})`
        yield* sql`DELETE FROM tether_threads WHERE key_hex = ${keyHex} AND ${guard}`
        yield* sql`DELETE FROM tether_thread_history WHERE key_hex = ${keyHex} AND ${guard}`
        return (yield* held(lease, now)) ? [...current, ...history] : undefined
      }).pipe(
        transaction,
        Effect.mapError(storeError("delete")),
        Effect.flatMap((rows): Effect.Effect<ReadonlyArray<ThreadRecord>, LeaseLost | ThreadStoreError> =>
          rows === undefined
            ? Effect.fail(new LeaseLost({ key: lease.key }))
            : decodeRows("delete", rows, toRecord)
        )
      ),
    sessions: sql<{ readonly session: string }>`SELECT session FROM tether_threads
      UNION SELECT session FROM tether_thread_history`.pipe(
      Effect.map((rows) => rows.map((row) => row.session)),
      Effect.mapError(storeError("sessions"))
    )
  })
})

/** @internal */
export const layerSql: Layer.Layer<ThreadStore, ThreadStoreError, SqlClient.SqlClient> = Layer.effect(
  ThreadStore,
  makeSql
)
