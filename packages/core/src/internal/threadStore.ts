/** @internal */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"

/**
 * A thread's committed state: only ever written from a clean run that produced the
 * provider's official terminal record.
 *
 * @since 0.1.0
 * @category models
 */
export class ThreadRecord extends Schema.Class<ThreadRecord>("@tether/core/ThreadRecord")({
  key: Schema.String,
  /** The driver that owns the session. */
  provider: Schema.String,
  /** The provider's session id (the checkpoint a later turn resumes). */
  session: Schema.String,
  /** The agent's compatibility fingerprint when the record was committed. */
  fingerprint: Schema.String,
  /** Committed turns on this thread. */
  turns: Schema.Number,
  /** The `id` of the turn that committed this record, when it had one (see `Agent.Turn.id`). */
  turn: Schema.optional(Schema.String),
  /** Epoch milliseconds of the commit. */
  updatedAt: Schema.Number
}) {}

/**
 * Proof of holding a thread's lease. A commit is accepted only while it is held.
 *
 * @since 0.1.0
 * @category models
 */
export interface Lease {
  readonly key: string
  readonly holder: string
}

/**
 * Another run holds the thread's lease.
 *
 * @since 0.1.0
 * @category errors
 */
export class ThreadBusy extends Schema.TaggedError<ThreadBusy>()("ThreadBusy", {
  key: Schema.String
}) {
  override get message(): string {
    return "another run holds this thread"
  }
}

/**
 * The lease expired or was taken over: nothing was persisted.
 *
 * @since 0.1.0
 * @category errors
 */
export class LeaseLost extends Schema.TaggedError<LeaseLost>()("LeaseLost", {
  key: Schema.String
}) {
  override get message(): string {
    return "the thread's lease was lost; nothing was persisted"
  }
}

/**
 * A thread already exists under the key (e.g. the target of a fork).
 *
 * @since 0.1.0
 * @category errors
 */
export class ThreadAlreadyExists extends Schema.TaggedError<ThreadAlreadyExists>()("ThreadAlreadyExists", {
  key: Schema.String
}) {
  override get message(): string {
    return "a thread already exists under this key"
  }
}

/**
 * The store itself failed (I/O, SQL).
 *
 * @since 0.1.0
 * @category errors
 */
export class ThreadStoreError extends Schema.TaggedError<ThreadStoreError>()("ThreadStoreError", {
  operation: Schema.String,
  cause: Schema.Defect
}) {
  override get message(): string {
    return `thread store failed to ${this.operation}`
  }
}

/**
 * How a commit treats an existing record: `upsert` replaces it; `insert` fails with
 * `ThreadAlreadyExists` when one exists (fork targets must be absent).
 *
 * @since 0.1.0
 * @category models
 */
export type CommitMode = "upsert" | "insert"

/**
 * @since 0.1.0
 * @category tags
 */
export class ThreadStore extends Context.Tag("@tether/core/ThreadStore")<ThreadStore, {
  readonly get: (key: string) => Effect.Effect<Option.Option<ThreadRecord>, ThreadStoreError>
  /** Takes the lease, or fails fast with `ThreadBusy` while another unexpired one is held. */
  readonly acquire: (key: string, ttl: Duration.DurationInput) => Effect.Effect<Lease, ThreadBusy | ThreadStoreError>
  /** Extends a held lease; `LeaseLost` when it expired or was taken over. */
  readonly renew: (lease: Lease, ttl: Duration.DurationInput) => Effect.Effect<void, LeaseLost | ThreadStoreError>
  /** Gives the lease back (a lease already lost is not an error). */
  readonly release: (lease: Lease) => Effect.Effect<void, ThreadStoreError>
  /** Writes the record atomically with the lease check: a lost lease persists nothing. */
  readonly commit: (
    lease: Lease,
    record: ThreadRecord,
    mode: CommitMode
  ) => Effect.Effect<void, LeaseLost | ThreadAlreadyExists | ThreadStoreError>
}>() {}

interface MemoryState {
  readonly records: Map<string, ThreadRecord>
  readonly leases: Map<string, { readonly holder: string; readonly expiresAt: number }>
}

/** @internal */
export const makeMemory: Effect.Effect<ThreadStore["Type"]> = Effect.gen(function*() {
  const state = yield* Ref.make<MemoryState>({ records: new Map(), leases: new Map() })
  // Every operation is one atomic step over the whole state, stamped with the clock first.
  const step = <A, E>(f: (s: MemoryState, now: number) => readonly [Either.Either<A, E>, MemoryState]) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.flatten(Ref.modify(state, (s) => f(s, now))))
  const holds = (s: MemoryState, lease: Lease, now: number) => {
    const current = s.leases.get(lease.key)
    return current !== undefined && current.holder === lease.holder && current.expiresAt > now
  }
  const withLease = (s: MemoryState, key: string, holder: string, expiresAt: number): MemoryState => ({
    ...s,
    leases: new Map(s.leases).set(key, { holder, expiresAt })
  })
  return ThreadStore.of({
    get: (key) => Effect.map(Ref.get(state), (s) => Option.fromNullable(s.records.get(key))),
    acquire: (key, ttl) =>
      step((s, now) => {
        const current = s.leases.get(key)
        if (current !== undefined && current.expiresAt > now) return [Either.left(new ThreadBusy({ key })), s]
        const lease: Lease = { key, holder: crypto.randomUUID() }
        return [Either.right(lease), withLease(s, key, lease.holder, now + Duration.toMillis(ttl))]
      }),
    renew: (lease, ttl) =>
      step((s, now) =>
        holds(s, lease, now)
          ? [Either.void, withLease(s, lease.key, lease.holder, now + Duration.toMillis(ttl))]
          : [Either.left(new LeaseLost({ key: lease.key })), s]
      ),
    release: (lease) =>
      Ref.update(state, (s) => {
        if (s.leases.get(lease.key)?.holder !== lease.holder) return s
        const leases = new Map(s.leases)
        leases.delete(lease.key)
        return { ...s, leases }
      }),
    commit: (lease, record, mode) =>
      step<void, LeaseLost | ThreadAlreadyExists>((s, now) => {
        if (!holds(s, lease, now)) return [Either.left(new LeaseLost({ key: lease.key })), s]
        if (mode === "insert" && s.records.has(lease.key)) {
          return [Either.left(new ThreadAlreadyExists({ key: lease.key })), s]
        }
        return [Either.void, { ...s, records: new Map(s.records).set(lease.key, record) }]
      })
  })
})

/** @internal */
export const layerMemory: Layer.Layer<ThreadStore> = Layer.effect(ThreadStore, makeMemory)
