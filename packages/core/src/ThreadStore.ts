/**
 * Where threads keep their checkpoints: the provider session a thread resumes, its
 * compatibility fingerprint, and the lease that allows one run per thread at a time.
 *
 * Keys are the host's own opaque strings (any Unicode, lone surrogates and NUL included),
 * stored and compared exactly as given.
 *
 * Nothing is lost silently: a commit that replaces a record of another session, fingerprint or
 * provider (a restarted thread) keeps the replaced record in the key's `history` until the host
 * removes it with `prune` or `delete`. (The SQL store's history holds one record per session and
 * commit time: a commit that would move there a record of the same session and `updatedAt` as one
 * it holds fails with `ThreadStoreError` and replaces nothing.) Turn ids, like keys, are kept
 * exactly.
 *
 * Stores: `layerMemory` here (the default), and the SQL store at its own entry point,
 * `@tether/core/SqlThreadStore` (SQLite, PostgreSQL), which needs the optional `@effect/sql`.
 *
 * @since 0.1.0
 */
import type * as Layer from "effect/Layer"
import * as internal from "./internal/threadStore.js"
import type { ThreadStore } from "./internal/threadStore.js"

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
   * @category errors
   */
  ThreadStoreError
} from "./ThreadStoreError.js"

export {
  /**
   * @since 0.1.0
   * @category models
   */
  SupersededRecord,
  /**
   * @since 0.1.0
   * @category models
   */
  ThreadRecord,
  /**
   * The service that keeps thread checkpoints: one current record per key, plus the records a
   * new conversation replaced (its history). A turn holds its thread's lease while it runs, and a
   * commit is atomic with the lease check: a host that lost the lease persists nothing. Agents
   * use it when their context has one, else an in-memory store of their own.
   *
   * @since 0.1.0
   * @category tags
   */
  ThreadStore
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
  Lease,
  /**
   * @since 0.1.0
   * @category models
   */
  PruneOptions
} from "./internal/threadStore.js"

/**
 * The in-memory store (the default): process-local, lost when the process exits.
 *
 * @example
 * ```ts
 * import * as NodeContext from "@effect/platform-node/NodeContext"
 * import { ThreadStore } from "@tether/core"
 * import { Gateway } from "@tether/gateway"
 * import { Layer } from "effect"
 *
 * // Every agent made in this context shares the store (else each agent keeps its own).
 * const AgentContext = Layer.mergeAll(ThreadStore.layerMemory, Gateway.layer(), NodeContext.layer)
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<ThreadStore> = internal.layerMemory
