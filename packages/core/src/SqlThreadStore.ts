/**
 * The thread store on `@effect/sql`: checkpoints and leases that outlive the process and are
 * shared by every host connected to the same database.
 *
 * This module is only at its own entry point, `@tether/core/SqlThreadStore` (it is not
 * re-exported from `@tether/core`): it needs `@effect/sql`, an optional peer dependency, plus the
 * client of the database you choose. Nothing native is installed unless you choose it:
 *
 * - SQLite, embedded: `npm install @effect/sql@^0.52.1 @effect/sql-sqlite-node@^0.53.0` (builds
 *   `better-sqlite3`), then `SqlThreadStore.layer.pipe(Layer.provide(SqliteClient.layer({ filename: "threads.db" })))`;
 * - PostgreSQL, for several hosts: `npm install @effect/sql@^0.52.1 @effect/sql-pg@^0.53.0` (pure
 *   JavaScript), then `SqlThreadStore.layer.pipe(Layer.provide(PgClient.layerConfig({ url: Config.redacted("DATABASE_URL") })))`.
 *
 * @example
 * ```ts
 * import { SqliteClient } from "@effect/sql-sqlite-node"
 * import * as SqlThreadStore from "@tether/core/SqlThreadStore"
 * import { Layer } from "effect"
 *
 * // Provide it beside the gateway: every agent made in that context keeps its threads there.
 * const Threads = SqlThreadStore.layer.pipe(Layer.provide(SqliteClient.layer({ filename: "threads.db" })))
 * ```
 *
 * @since 0.1.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Layer from "effect/Layer"
import type { ThreadStore, ThreadStoreError } from "./internal/threadStore.js"
import * as internal from "./internal/threadStoreSql.js"

/**
 * The `ThreadStore` on the `SqlClient` of the context. Runs its migrations on start (tables
 * prefixed `tether_`; hosts starting together on an empty database are safe). Lease takeover and
 * guarded commits are single atomic statements in portable SQL, so the same layer works on SQLite
 * and PostgreSQL: of hosts acquiring one key at once exactly one wins, the others get
 * `ThreadBusy`. Keys of any length (a long key is indexed by its digest). Fails with
 * `ThreadStoreError` when the migrations cannot run.
 *
 * @example
 * ```ts
 * import { PgClient } from "@effect/sql-pg"
 * import * as SqlThreadStore from "@tether/core/SqlThreadStore"
 * import { Config, Layer } from "effect"
 *
 * // Several hosts share the threads: a turn holds its thread's lease in the database.
 * const Threads = SqlThreadStore.layer.pipe(
 *   Layer.provide(PgClient.layerConfig({ url: Config.redacted("DATABASE_URL") }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<ThreadStore, ThreadStoreError, SqlClient.SqlClient> = internal.layerSql
