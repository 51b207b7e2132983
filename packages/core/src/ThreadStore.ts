/**
 * Where threads keep their checkpoints: the provider session a thread resumes, its
 * compatibility fingerprint, and the lease that allows one run per thread at a time.
 *
 * Keys are the host's own opaque strings (any Unicode, lone surrogates and NUL included),
 * stored and compared exactly as given.
 *
 * @since 0.1.0
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Layer from "effect/Layer"
import * as internal from "./internal/threadStore.js"
import type { ThreadStore, ThreadStoreError } from "./internal/threadStore.js"
import * as internalSql from "./internal/threadStoreSql.js"

export {
  /**
   * @since 0.1.0
   * @category errors
   */
  LeaseLost,
  /**
   * @since 0.1.0
   * @category errors
   */
  ThreadAlreadyExists,
  /**
   * @since 0.1.0
   * @category errors
   */
  ThreadBusy,
  /**
   * @since 0.1.0
   * @category models
   */
  ThreadRecord,
  /**
   * @since 0.1.0
   * @category tags
   */
  ThreadStore,
  /**
   * @since 0.1.0
   * @category errors
   */
  ThreadStoreError
} from "./internal/threadStore.js"

export type {
  /**
   * @since 0.1.0
   * @category models
   */
  CommitMode,
  /**
   * @since 0.1.0
   * @category models
   */
  Lease
} from "./internal/threadStore.js"

/**
 * The in-memory store (the default): process-local, lost when the process exits.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<ThreadStore> = internal.layerMemory

/**
 * A store on `@effect/sql`: `@effect/sql-sqlite-node`'s `SqliteClient.layer({ filename })` for an
 * embedded persistent store, `@effect/sql-pg`'s `PgClient.layer({ url })` for a store shared by
 * several hosts. Runs its migrations on start (tables prefixed `tether_`; hosts starting together
 * on an empty database are safe). Lease takeover and guarded commits are single atomic statements
 * in portable SQL: of hosts acquiring one key at once exactly one wins, the others get `ThreadBusy`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSql: Layer.Layer<ThreadStore, ThreadStoreError, SqlClient.SqlClient> = internalSql.layerSql
