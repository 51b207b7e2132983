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
import { LeaseLost, ThreadAlreadyExists, ThreadBusy, ThreadStoreError } from "../ThreadStoreError.js"

// The errors are defined in their public module; re-exported for the store implementations.
export { LeaseLost, ThreadAlreadyExists, ThreadBusy, ThreadStoreError }

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
  /**
   * One digest per component of the fingerprint (`driver`, `model`, `instructions`, `tools`, ...),
   * so an incompatible record names the components that changed. Absent on records written
   * without them.
   */
  components: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  /** Committed turns on this thread. */
  turns: Schema.Number,
  /** The `id` of the turn that committed this record, when it had one (see `Agent.Turn.id`). */
  turn: Schema.optional(Schema.String),
  /** Epoch milliseconds of the commit. */
  updatedAt: Schema.Number
}) {}

/**
 * A checkpoint that a commit of another session (or another fingerprint or provider) replaced:
 * kept in its key's history, readable until the host prunes it or deletes the thread.
 *
 * @since 0.1.0
 * @category models
 */
export class SupersededRecord extends Schema.Class<SupersededRecord>("@tether/core/SupersededRecord")({
  record: ThreadRecord,
  /** Epoch milliseconds of the commit that replaced it. */
  supersededAt: Schema.Number
}) {}

/**
 * What `prune` removes: superseded records (of one key, or of every key) replaced before
 * `supersededBefore` (epoch milliseconds; absent: all of them).
 *
 * @since 0.1.0
 * @category models
 */
export interface PruneOptions {
  readonly key?: string
  readonly supersededBefore?: number
}

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
 * How a commit treats an existing record: `upsert` replaces it (a replaced record of another
 * session, fingerprint or provider moves to the key's history, never lost); `insert` fails with
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
  /** The key's superseded records, the most recently replaced first. */
  readonly history: (key: string) => Effect.Effect<ReadonlyArray<SupersededRecord>, ThreadStoreError>
  /**
   * Removes superseded records (see `PruneOptions`) and every expired lease; returns the removed
   * records so their provider sessions can be dropped too. Current records are never touched.
   */
  readonly prune: (options: PruneOptions) => Effect.Effect<ReadonlyArray<SupersededRecord>, ThreadStoreError>
  /**
   * Removes the key's record and its history, atomically with the lease check (`LeaseLost`:
   * nothing removed); returns what was removed, the current record first.
   */
  readonly delete: (lease: Lease) => Effect.Effect<ReadonlyArray<ThreadRecord>, LeaseLost | ThreadStoreError>
  /** Every provider session a record of the store refers to, current or superseded (retention). */
  readonly sessions: Effect.Effect<ReadonlyArray<string>, ThreadStoreError>
}>() {}

/**
 * Whether committing `next` over `previous` replaces another conversation (so `previous` is kept
 * in the history) rather than advancing the same one.
 *
 * @internal
 */
export const replaces = (previous: ThreadRecord, next: ThreadRecord): boolean =>
  previous.session !== next.session || previous.fingerprint !== next.fingerprint ||
  previous.provider !== next.provider

interface MemoryState {
  readonly records: Map<string, ThreadRecord>
  /** Per key, oldest first. */
  readonly history: Map<string, ReadonlyArray<SupersededRecord>>
  readonly leases: Map<string, { readonly holder: string; readonly expiresAt: number }>
}

/** @internal */
export const makeMemory: Effect.Effect<ThreadStore["Type"]> = Effect.gen(function*() {
  const state = yield* Ref.make<MemoryState>({ records: new Map(), history: new Map(), leases: new Map() })
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
        const previous = s.records.get(lease.key)
        if (mode === "insert" && previous !== undefined) {
          return [Either.left(new ThreadAlreadyExists({ key: lease.key })), s]
        }
        const history = previous !== undefined && replaces(previous, record)
          ? new Map(s.history).set(lease.key, [
            ...(s.history.get(lease.key) ?? []),
            new SupersededRecord({ record: previous, supersededAt: now })
          ])
          : s.history
        return [Either.void, { ...s, history, records: new Map(s.records).set(lease.key, record) }]
      }),
    history: (key) => Effect.map(Ref.get(state), (s) => (s.history.get(key) ?? []).slice().reverse()),
    prune: (options) =>
      step<ReadonlyArray<SupersededRecord>, never>((s, now) => {
        const removed: Array<SupersededRecord> = []
        const history = new Map<string, ReadonlyArray<SupersededRecord>>()
        for (const [key, entries] of s.history) {
          const kept: Array<SupersededRecord> = []
          for (const entry of entries) {
            const matches = (options.key === undefined || options.key === key) &&
              (options.supersededBefore === undefined || entry.supersededAt < options.supersededBefore)
            if (matches) removed.push(entry)
            else kept.push(entry)
          }
          if (kept.length > 0) history.set(key, kept)
        }
        const leases = new Map(Array.from(s.leases).filter(([, lease]) => lease.expiresAt > now))
        return [Either.right(removed.reverse()), { ...s, history, leases }]
      }),
    delete: (lease) =>
      step<ReadonlyArray<ThreadRecord>, LeaseLost>((s, now) => {
        if (!holds(s, lease, now)) return [Either.left(new LeaseLost({ key: lease.key })), s]
        const current = s.records.get(lease.key)
        const removed = [
          ...(current === undefined ? [] : [current]),
          ...(s.history.get(lease.key) ?? []).slice().reverse().map((entry) => entry.record)
        ]
        const records = new Map(s.records)
        records.delete(lease.key)
        const history = new Map(s.history)
        history.delete(lease.key)
        return [Either.right(removed), { ...s, records, history }]
      }),
    sessions: Effect.map(Ref.get(state), (s) =>
      Array.from(
        new Set([
          ...Array.from(s.records.values(), (record) => record.session),
          ...Array.from(s.history.values()).flatMap((entries) => entries.map((entry) => entry.record.session))
        ])
      ))
  })
})

/** @internal */
export const layerMemory: Layer.Layer<ThreadStore> = Layer.effect(ThreadStore, makeMemory)
