/**
 * Threads over the agent's runs: the lease, how a turn opens its provider session (resume,
 * start, fork, or a restart the host is told about), the one fresh retry of a rejected resume,
 * the guarded checkpoint commit after the session is saved, forks, retention and per-thread
 * events.
 *
 * @internal
 */
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { randomUUID } from "node:crypto"
import type * as Agent from "../Agent.js"
import { type AgentClosed, type InvalidTurn, type RunError, UnsupportedCapability } from "../AgentError.js"
import type { ApprovalAlreadyResolved, ApprovalNotFound } from "../AgentError.js"
import type * as Approval from "../Approval.js"
import { ProtocolError } from "../Driver.js"
import type * as Driver from "../Driver.js"
import type * as Event from "../Event.js"
import { Incompatible, Rejected, type Result, ThreadOpening } from "../Result.js"
import * as Thread from "../Thread.js"
import { differingComponents } from "./compatibility.js"
import * as Structured from "./structured.js"
import * as ThreadEvents from "./threadEvents.js"
import { ThreadAlreadyExists, ThreadRecord, ThreadStoreError } from "./threadStore.js"
import type { CommitMode, Lease, SupersededRecord, ThreadStore } from "./threadStore.js"
import * as Tracing from "./tracing.js"

/** What a thread's turn hands to the agent's run. @internal */
export interface Hooks {
  /** The thread's key, named on the run's `RunStarted`. */
  readonly threadKey: string
  readonly session: Driver.SessionRequest
  /** How the turn opened its session: a `ThreadOpened` event after `RunStarted`, `Result.thread`. */
  readonly opening: ThreadOpening
  /** Runs after a clean terminal record and the CLI's exit, before `RunFinished`; a failure fails the run. */
  readonly commit: (result: Result) => Effect.Effect<void, { readonly message: string }>
  /** Saves the session's files again (a live CLI may finish writing the turn after its commit). */
  readonly save: (session: string) => Effect.Effect<void, { readonly message: string }>
  /** Loads the session's committed files into the clone before a process resumes it. */
  readonly load: (session: string) => Effect.Effect<void, { readonly message: string }>
  /** Completed once the run's provider process is gone (or was never spawned). */
  readonly reaped: Deferred.Deferred<void>
  /** Every batch of the run's events as it is stamped, whether or not the caller still reads. */
  readonly observe: (events: ReadonlyArray<Event.Event>) => Effect.Effect<void>
  /** The admitted run's fiber (closing the thread cancels it and waits for it). */
  readonly admitted: (fiber: Fiber.RuntimeFiber<Result, RunError>) => Effect.Effect<void>
  /**
   * Called when the provider has taken the session before any of its outputs: a live turn's
   * process is attached to it (opened, a `session/load` answered, or warm with it already).
   */
  readonly accepted: () => void
}

/** What a thread needs from its agent. @internal */
export interface Host {
  readonly provider: string
  readonly capabilities: Driver.Capabilities
  readonly outputSchemaRefusal: ((jsonSchema: Driver.JsonSchema) => string | undefined) | undefined
  readonly fingerprint: string
  /** Per-component digests of the fingerprint. */
  readonly components: { readonly [name: string]: string }
  /** Tools without a revision (threads refuse them). */
  readonly revisionless: ReadonlyArray<string>
  readonly store: ThreadStore["Type"]
  /**
   * Whether `store` came from the context (shared with the other agents of the identity), not the
   * agent's own in-memory one, which cannot know what the others' records refer to.
   */
  readonly storeShared: boolean
  readonly leaseTtl: Duration.Duration
  /** The agent's event policy, applied to each subscriber of a thread's `events`. */
  readonly events: { readonly capacity: number; readonly blocking: boolean }
  /** The identity's provider session store. */
  readonly sessions: {
    /** Saves the session's entries (and the shared ones); a checkpoint is committed after it. */
    readonly save: (session: string) => Effect.Effect<void, { readonly message: string }>
    /** Puts the store's (committed) copy of the session's own entries in the clone, where it differs. */
    readonly load: (session: string) => Effect.Effect<void, { readonly message: string }>
    readonly drop: (
      sessions: ReadonlyArray<string>
    ) => Effect.Effect<ReadonlyArray<string>, { readonly message: string }>
    readonly prune: (
      olderThan: Duration.Duration,
      keep: ReadonlyArray<string>
    ) => Effect.Effect<ReadonlyArray<string>, { readonly message: string }>
  }
  /** Fails with `AgentClosed` once the agent's admission is fenced. */
  readonly admit: Effect.Effect<void, AgentClosed>
  readonly stream: (turn: Agent.Input, hooks: Hooks) => Stream.Stream<Event.Event, RunError | AgentClosed | InvalidTurn>
  /**
   * The same run as `stream`'s, its events read by a direct loop of pulls: its result. `seen`, when
   * given, is handed each batch of events as it is read.
   */
  readonly run: (
    turn: Agent.Input,
    hooks: Hooks,
    seen?: (events: ReadonlyArray<Event.Event>) => unknown
  ) => Effect.Effect<Result, RunError | AgentClosed | InvalidTurn>
  /** Completes once the agent's close has drained its runs (each RunFinished published): every thread's `events` end. */
  readonly closed: Effect.Effect<void>
  /** Completes when the agent's close starts (its admission fence): thread events stop waiting for slow subscribers. */
  readonly closing: Effect.Effect<void>
  /** Per key: completed once the last turn's provider process is gone (any handle of the key). */
  readonly exiting: Map<string, Deferred.Deferred<void>>
  /** Delivers input into the key's running live turn (`thread.send`). */
  readonly send: (key: string, input: string) => Effect.Effect<Thread.Delivery, Thread.SendFailure>
  /** Shuts down the key's warm live process, if any. */
  readonly retireLive: (key: string) => Effect.Effect<void>
  /** Waits for the late save of the key's last live turn, if one is pending (`Pool.settle`). */
  readonly settleLive: (key: string) => Effect.Effect<void>
  /** The thread leases this agent's turns hold (`makeLeases`). */
  readonly leases: Leases
  /** Answers an approval asked by a turn of thread `key`. */
  readonly approve: (
    id: string,
    decision: Approval.Decision,
    key: string
  ) => Effect.Effect<void, ApprovalNotFound | ApprovalAlreadyResolved>
}

/**
 * The thread leases this agent's turns hold, by key, and a lock per key over taking one: a live
 * turn's late save (after its turn let go of the lease) checks and takes the key's lease under
 * it, so it sees either a turn of this agent holding the lease (which waits for the save before
 * it touches the session: the save goes on) or takes the lease itself (no other host's turn can
 * save and commit between its check and its save). @internal
 */
export interface Leases {
  readonly held: Map<string, Lease>
  readonly locked: <A, E, R>(key: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/** @internal */
export const makeLeases = (): Leases => {
  const locks = new Map<string, { readonly semaphore: Effect.Semaphore; users: number }>()
  return {
    held: new Map(),
    locked: (key, effect) =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          let entry = locks.get(key)
          if (entry === undefined) {
            entry = { semaphore: Effect.unsafeMakeSemaphore(1), users: 0 }
            locks.set(key, entry)
          }
          entry.users += 1
          return entry
        }),
        // The wait for the permit stays interruptible inside an acquire (`hold`): a turn closed or
        // interrupted while a late save holds the key ends at once, having taken nothing.
        (entry) =>
          Effect.acquireUseRelease(
            Effect.interruptible(entry.semaphore.take(1)),
            () => effect,
            () => entry.semaphore.release(1)
          ),
        (entry) =>
          Effect.sync(() => {
            entry.users -= 1
            if (entry.users === 0 && locks.get(key) === entry) locks.delete(key)
          })
      )
  }
}

const rejection = (error: RunError | AgentClosed | InvalidTurn): ProtocolError | undefined =>
  error._tag === "RunError" && error.reason === "ProtocolError" && error.cause instanceof ProtocolError &&
    error.cause.reason === "ResumeRejected"
    ? error.cause
    : undefined

/**
 * Events a run publishes before its provider has shown anything of the session it was asked to
 * resume: the run's own bookkeeping (its start, how the thread opened, the process, a dropped
 * count, notices, the end) and the provider's announcement of the session (a CLI may announce it,
 * then say it cannot load it). The first other event (text, a message, a tool call, usage, an
 * approval, …) shows the provider accepted the session.
 */
const bookkeeping = (event: Event.Event): boolean => {
  switch (event._tag) {
    case "ProcessStarted":
    case "RunStarted":
    case "ThreadOpened":
    case "SessionStarted":
    case "ProcessExited":
    case "Notice":
    case "Dropped":
    case "RunFinished":
      return true
    default:
      return false
  }
}

/**
 * The most events a resuming attempt holds back. A CLI that printed this many (notices of lines
 * it could not read, say) before anything else is shown as it goes: the hold is bounded in
 * memory, and a rejection after that stands as the turn's failure, not retried fresh.
 */
const maxHeld = 256

/**
 * Holds a resuming attempt's events back until its provider has shown it accepted the session
 * (`accepted()` says so, or the first event that is not bookkeeping, or the run's end), so that
 * a rejected resume retried fresh is invisible but for the restart's own `ThreadOpened`. `pass`
 * returns what may be shown now; `take` ends the hold and returns what was held back. At
 * `maxHeld` events the hold ends.
 */
const gate = (accepted: () => boolean) => {
  let held: Array<Event.Event> | undefined = []
  return {
    pass: (events: ReadonlyArray<Event.Event>): ReadonlyArray<Event.Event> => {
      if (held === undefined) return events
      for (let i = 0; i < events.length; i++) {
        if (accepted() || !bookkeeping(events[i]!) || held.length >= maxHeld) {
          const shown = [...held, ...events.slice(i)]
          held = undefined
          return shown
        }
        held.push(events[i]!)
      }
      return []
    },
    take: (): ReadonlyArray<Event.Event> => {
      const taken = held ?? []
      held = undefined
      return taken
    },
    get holding() {
      return held !== undefined
    }
  }
}

/** Why the record cannot be resumed by this agent, or `undefined` when it can. */
const incompatibility = (host: Host, record: ThreadRecord) => {
  if (record.provider === host.provider && record.fingerprint === host.fingerprint) return undefined
  const components = differingComponents(record.components, host.components)
  return {
    reason: record.provider !== host.provider ? "Provider" as const : "Fingerprint" as const,
    components: components.length === 0 ? ["fingerprint"] : components
  }
}

/** The committed record a turn continues, checked for compatibility. @internal */
const resumable = (
  host: Host,
  key: string
): Effect.Effect<ThreadRecord, Thread.ThreadNotFound | Thread.ThreadIncompatible | ThreadStoreError> =>
  Effect.flatMap(host.store.get(key), (record): Effect.Effect<
    ThreadRecord,
    Thread.ThreadNotFound | Thread.ThreadIncompatible
  > => {
    if (Option.isNone(record)) return Effect.fail(new Thread.ThreadNotFound({ key }))
    const incompatible = incompatibility(host, record.value)
    return incompatible === undefined
      ? Effect.succeed(record.value)
      : Effect.fail(new Thread.ThreadIncompatible({ key, ...incompatible }))
  })

/** Checks done before any run of any thread: admission, resume capability, tool revisions. */
const preflight = (host: Host, capability: "resume" | "fork") =>
  Effect.gen(function*() {
    yield* host.admit
    if (!host.capabilities[capability]) {
      return yield* new UnsupportedCapability({
        driver: host.provider,
        capability,
        detail: capability === "resume" ? "threads resume provider sessions" : "the driver cannot fork a session"
      })
    }
    if (host.revisionless.length > 0) return yield* new Thread.ToolRevisionMissing({ tools: host.revisionless })
  })

interface Plan {
  readonly session: Driver.SessionRequest
  readonly mode: CommitMode
  /** Committed turns the session already carries. */
  readonly turns: number
  readonly opening: ThreadOpening
}

const sessionStoreError = (operation: string) => (cause: { readonly message: string }) =>
  new ThreadStoreError({ operation, cause })

/** Drops the provider sessions of removed records from the session store (not `keep`'s). */
const dropSessions = (host: Host, records: ReadonlyArray<ThreadRecord>, keep: ReadonlyArray<string>) => {
  const sessions = Array.from(new Set(records.map((record) => record.session))).filter((s) => !keep.includes(s))
  return Effect.mapError(host.sessions.drop(sessions), sessionStoreError("drop provider sessions"))
}

/**
 * Retention by age over every key: superseded records and their sessions, then the session
 * store's entries of sessions no record refers to. @internal
 */
export const pruneAll = (
  host: Host,
  options: { readonly olderThan: Duration.DurationInput }
): Effect.Effect<Thread.PruneReport, ThreadStoreError | AgentClosed> =>
  Effect.gen(function*() {
    yield* host.admit
    const olderThan = Duration.decode(options.olderThan)
    const now = yield* Clock.currentTimeMillis
    const records = yield* host.store.prune({ supersededBefore: now - Duration.toMillis(olderThan) })
    const referenced = yield* host.store.sessions
    const dropped = yield* dropSessions(host, records.map((entry) => entry.record), referenced)
    // Unreferenced by which records? An agent's own in-memory store sees its records only: the
    // session store is the identity's, and another agent's checkpoint may point into it.
    // An entry saved within a lease's time to live may be a live turn's, saved and not yet
    // committed (here or on another host: a turn renews its lease before it saves and commits
    // within it): only older ones can be a killed host's leftovers.
    const unreferenced = !host.storeShared ? [] : yield* Effect.mapError(
      host.sessions.prune(Duration.max(olderThan, host.leaseTtl), referenced),
      sessionStoreError("prune provider sessions")
    )
    return { records, sessionEntries: [...dropped, ...unreferenced].sort() }
  }).pipe(Tracing.withSpan("Agent.pruneThreads"))

/**
 * Opens a thread; `forkOf` is the committed record of the thread it forks (its first turn forks
 * that session, committing insert-only). @internal
 */
export const open = (
  host: Host,
  key: string,
  options: Thread.Options,
  forkOf?: ThreadRecord
): Effect.Effect<Thread.Thread, Thread.OpenFailure> =>
  Effect.gen(function*() {
    yield* preflight(host, "resume")
    const resumeOnly = options.resumeOnly === true
    // `fail`: an unresumable checkpoint fails the turn instead of restarting it.
    const strict = resumeOnly || options.onUnresumable === "fail"
    if (forkOf === undefined && strict) {
      const record = yield* host.store.get(key)
      if (Option.isNone(record)) {
        if (resumeOnly) return yield* new Thread.ThreadNotFound({ key })
      } else {
        const incompatible = incompatibility(host, record.value)
        if (incompatible !== undefined) return yield* new Thread.ThreadIncompatible({ key, ...incompatible })
      }
    }
    const closedSignal = yield* Deferred.make<void>()
    const hub = ThreadEvents.make({
      ...host.events,
      agentClosed: host.closed,
      closing: Effect.raceFirst(host.closing, Deferred.await(closedSignal))
    })
    const running = new Set<Fiber.RuntimeFiber<Result, RunError>>()
    let closed = false
    let pendingFork = forkOf
    const renewEvery = Duration.millis(Math.max(1, Math.floor(Duration.toMillis(host.leaseTtl) / 3)))
    /**
     * Takes the lease of `leaseKey` for the scope, as a turn of this agent (`Leases`): a late save
     * of that key waits for the taking, and then saves, if at all, for this turn.
     */
    const hold = (leaseKey: string) =>
      Effect.acquireRelease(
        host.leases.locked(
          leaseKey,
          Effect.tap(
            host.store.acquire(leaseKey, host.leaseTtl),
            (lease) => Effect.sync(() => host.leases.held.set(leaseKey, lease))
          )
        ),
        (lease) =>
          Effect.sync(() => {
            if (host.leases.held.get(leaseKey) === lease) host.leases.held.delete(leaseKey)
          }).pipe(Effect.zipRight(Effect.ignore(host.store.release(lease))))
      )
    /** `hold`, for a turn: the thread's close cuts its wait for a late save holding the key (`ThreadClosed`). */
    const holdUnlessClosed = (leaseKey: string) =>
      Effect.raceFirst(
        hold(leaseKey),
        Effect.zipRight(Deferred.await(closedSignal), Effect.fail(new Thread.ThreadClosed({ key })))
      )
    /** Renews `lease` every third of its time to live until it is lost (a failing store: at the next tick). */
    const renewing = (lease: Lease) =>
      Effect.ignore(Effect.forever(
        Effect.zipRight(
          Effect.sleep(renewEvery),
          host.store.renew(lease, host.leaseTtl).pipe(Effect.catchTag("ThreadStoreError", () => Effect.void))
        )
      ))

    const opening = (
      mode: ThreadOpening["mode"],
      from?: { readonly session: string; readonly turns: number },
      reason?: Incompatible | Rejected
    ) =>
      new ThreadOpening({
        key,
        mode,
        ...(from === undefined ? {} : { from: from.session, fromTurns: from.turns }),
        ...(reason === undefined ? {} : { reason })
      })

    const plan = (turnId: string | undefined): Effect.Effect<
      Plan,
      | ThreadAlreadyExists
      | Thread.ThreadNotFound
      | Thread.ThreadIncompatible
      | Thread.TurnAlreadyCommitted
      | ThreadStoreError
    > =>
      Effect.gen(function*() {
        const record = yield* host.store.get(key)
        // Checked under the lease: a turn that committed before its runner died is not run again.
        if (turnId !== undefined && Option.isSome(record) && record.value.turn === turnId) {
          return yield* new Thread.TurnAlreadyCommitted({ key, turn: turnId, record: record.value })
        }
        if (pendingFork !== undefined) {
          if (Option.isSome(record)) return yield* new ThreadAlreadyExists({ key })
          // Read under the source's lease: what the source committed since the fork was opened is
          // in the session the store holds for it now, so that is what is forked, and counted. A
          // source deleted since (or now another agent's, incompatible) leaves the record the fork
          // was opened with: its session, if still stored.
          const latest = yield* host.store.get(pendingFork.key)
          const source = Option.isSome(latest) && incompatibility(host, latest.value) === undefined
            ? latest.value
            : pendingFork
          return {
            session: { _tag: "Fork", from: source.session, id: randomUUID() },
            mode: "insert",
            turns: source.turns,
            opening: opening("forked", source)
          } satisfies Plan
        }
        if (Option.isNone(record)) {
          if (resumeOnly) return yield* new Thread.ThreadNotFound({ key })
          return {
            session: { _tag: "New", id: randomUUID() },
            mode: "upsert",
            turns: 0,
            opening: opening("started")
          } satisfies Plan
        }
        const incompatible = incompatibility(host, record.value)
        if (incompatible !== undefined) {
          if (strict) return yield* new Thread.ThreadIncompatible({ key, ...incompatible })
          return {
            session: { _tag: "New", id: randomUUID() },
            mode: "upsert",
            turns: 0,
            opening: opening("restarted", record.value, new Incompatible({ components: incompatible.components }))
          } satisfies Plan
        }
        return {
          session: { _tag: "Resume", id: record.value.session },
          mode: "upsert",
          turns: record.value.turns,
          opening: opening("resumed", record.value)
        } satisfies Plan
      })

    /**
     * A resuming attempt's two holds: what the caller is shown (`shown`, fed what it reads) and
     * what the thread's observers are (`observed`, fed by `observe` on the run's side). Both end
     * once the provider accepted the session (`accept`).
     */
    const holds = () => {
      let accepted = false
      const shown = gate(() => accepted)
      const observed = gate(() => accepted)
      return {
        shown,
        accept: () => {
          accepted = true
        },
        observe: (events: ReadonlyArray<Event.Event>) => {
          // The run's end settles the hold for the observers here, on the run's side, unless it
          // may be a rejected resume (retried fresh, invisibly): they must not wait for the
          // caller's stream to end, which may come after the agent's close ended `events`.
          const end = events.find((event) => event._tag === "RunFinished")
          const settled = end !== undefined && !(end.outcome === "failure" && end.reason === "ProtocolError")
          const passed = settled ? [...observed.take(), ...events] : observed.pass(events)
          return passed.length === 0 ? Effect.void : hub.publish(passed)
        },
        /** The observers' hold ends: what it held is published. */
        release: Effect.suspend(() => {
          const late = observed.take()
          return late.length === 0 ? Effect.void : hub.publish(late)
        }),
        /** Whether a failure may still be retried fresh, unseen: nothing was shown to anyone. */
        get unseen() {
          return shown.holding && observed.holding
        },
        /** A retry drops what both holds kept back. */
        drop: () => {
          shown.take()
          observed.take()
        }
      }
    }

    /**
     * One attempt at the turn, as a stream. A resuming attempt (`retry` given) holds its events
     * back (from the stream and from the thread's observers) until its provider accepted the
     * session; `retry` is asked for the fresh attempt's plan when the attempt fails while still
     * holding, and then what was held is dropped. Otherwise what was held is shown and the
     * failure stands.
     */
    const attempt = (
      lease: Lease,
      turn: Agent.Input,
      plan: Plan,
      retry?: (error: Thread.RunFailure) => Plan | undefined
    ): Stream.Stream<Event.Event, Thread.RunFailure> => {
      const streamed = (observe: (events: ReadonlyArray<Event.Event>) => Effect.Effect<void>, accepted: () => void) =>
        Stream.unwrap(Effect.map(
          attemptHooks(lease, turn, plan, observe, accepted),
          ({ hooks, untrack }) => host.stream(turn, hooks).pipe(Stream.ensuring(untrack))
        ))
      if (retry === undefined) return streamed(hub.publish, () => {})
      return Stream.suspend(() => {
        const held = holds()
        return streamed(held.observe, held.accept).pipe(
          Stream.mapChunks((chunk) => Chunk.unsafeFromArray(held.shown.pass(Chunk.toReadonlyArray(chunk)))),
          Stream.concat(Stream.suspend(() => Stream.fromIterable(held.shown.take()))),
          Stream.catchAll((error) => {
            const fresh = held.unseen ? retry(error) : undefined
            if (fresh !== undefined) {
              held.drop()
              return attempt(lease, turn, fresh)
            }
            return Stream.concat(
              Stream.fromEffect(Effect.as(held.release, held.shown.take())).pipe(Stream.flattenIterables),
              Stream.fail(error)
            )
          }),
          // After the handler above: a retry has dropped what the observers were held back from.
          Stream.ensuring(held.release)
        )
      })
    }

    /**
     * One attempt at the turn, for `run`: the same attempt as `attempt`'s, its events read by the
     * agent's direct loop of pulls (no `Stream` around the run), only its result kept. What the
     * caller would have been shown is still passed through the `shown` hold: a failure is retried
     * fresh on the same condition as the stream's.
     */
    const attemptResult = (
      lease: Lease,
      turn: Agent.Input,
      plan: Plan,
      retry?: (error: Thread.RunFailure) => Plan | undefined
    ): Effect.Effect<Result, Thread.RunFailure> => {
      const direct = (
        observe: (events: ReadonlyArray<Event.Event>) => Effect.Effect<void>,
        accepted: () => void,
        seen?: (events: ReadonlyArray<Event.Event>) => unknown
      ) =>
        Effect.flatMap(
          attemptHooks(lease, turn, plan, observe, accepted),
          ({ hooks, untrack }) => Effect.ensuring(host.run(turn, hooks, seen), untrack)
        )
      if (retry === undefined) return direct(hub.publish, () => {})
      return Effect.suspend(() => {
        const held = holds()
        return direct(held.observe, held.accept, held.shown.pass).pipe(
          Effect.catchAll((error) => {
            const fresh = held.unseen ? retry(error) : undefined
            if (fresh !== undefined) {
              held.drop()
              return attemptResult(lease, turn, fresh)
            }
            return Effect.zipRight(held.release, Effect.fail(error))
          }),
          Effect.ensuring(held.release)
        )
      })
    }

    /**
     * What an attempt hands to the agent's run: its hooks (the checkpoint commit, the observers,
     * the reaped signal the next turn waits for), and `untrack`, run at the attempt's end.
     */
    const attemptHooks = (
      lease: Lease,
      turn: Agent.Input,
      plan: Plan,
      observe: (events: ReadonlyArray<Event.Event>) => Effect.Effect<void>,
      accepted: () => void
    ) =>
      Effect.gen(function*() {
        const reaped = yield* Deferred.make<void>()
        if (host.exiting.size >= 1024) {
          // Keys that saw no turn since their process exited: nothing to wait for any more.
          for (const [other, deferred] of Array.from(host.exiting)) {
            if (yield* Deferred.isDone(deferred)) host.exiting.delete(other)
          }
        }
        host.exiting.set(key, reaped)
        let fiber: Fiber.RuntimeFiber<Result, RunError> | undefined
        // The record this turn committed, once it did.
        let committedRecord: ThreadRecord | undefined
        // Whether the store holds `record` as the key's current one (the session, turn count and
        // time of this commit); no answer within 2 s counts as not committed.
        const landed = (record: ThreadRecord) =>
          host.store.get(key).pipe(
            // Asked from a finalizer (uninterruptible): a store that never answers is left behind.
            Effect.interruptible,
            Effect.map((current) =>
              Option.isSome(current) && current.value.session === record.session &&
              current.value.turns === record.turns && current.value.updatedAt === record.updatedAt
            ),
            Effect.timeout("2 seconds"),
            Effect.orElseSucceed(() => false)
          )
        const commit = (result: Result) =>
          Effect.gen(function*() {
            const session = result.session
            if (session === undefined) {
              return yield* Effect.fail({ message: "the run reported no provider session to checkpoint" })
            }
            // The lease is renewed first: a turn whose lease was taken over (its renewals failed
            // while it ran) saves nothing over the session the new holder may have committed, and
            // the save and the commit get the lease's whole time to live.
            yield* host.store.renew(lease, host.leaseTtl)
            // The session's files first: a host that dies before the commit keeps the previous
            // record, and a committed record always points at a saved session.
            yield* host.sessions.save(session)
            const record = new ThreadRecord({
              key,
              provider: host.provider,
              session,
              fingerprint: host.fingerprint,
              components: host.components,
              turns: plan.turns + 1,
              updatedAt: yield* Clock.currentTimeMillis,
              ...(typeof turn === "string" || turn.id === undefined ? {} : { turn: turn.id })
            })
            yield* host.store.commit(lease, record, plan.mode).pipe(
              // Certainly not committed: a fresh session's saved files belong to no record.
              Effect.tapError((error) =>
                error._tag !== "ThreadStoreError" && plan.session._tag !== "Resume"
                  ? Effect.ignore(host.sessions.drop([session]))
                  : Effect.void
              ),
              // The commit is interruptible (the agent's close must not wait on a store). Once the
              // store has committed, what goes with the commit happens even if the turn is then
              // canceled: the fork is done, and `onCommit` records what the host keeps with it.
              // A commit interrupted in flight (the turn canceled, a fleet runner's entity ended)
              // may have landed all the same: the store says, within a bound.
              Effect.onExit((exit) =>
                Effect.flatMap(
                  Exit.isSuccess(exit)
                    ? Effect.succeed(true)
                    : Exit.isInterrupted(exit)
                    ? landed(record)
                    : Effect.succeed(false),
                  (committed) =>
                    !committed ? Effect.void : Effect.sync(() => {
                      pendingFork = undefined
                      committedRecord = record
                    }).pipe(
                      Effect.zipRight(
                        options.onCommit === undefined ? Effect.void : options.onCommit({ record, result }).pipe(
                          Effect.catchAllCause((cause) =>
                            // The host's cause may quote the result (an answer its store refused).
                            Tracing.offSpan(Effect.logWarning("a thread's onCommit failed; the commit stands", cause))
                          )
                        )
                      )
                    )
                )
              )
            )
          })
        const admitted = (admittedFiber: Fiber.RuntimeFiber<Result, RunError>) =>
          Effect.suspend(() => {
            fiber = admittedFiber
            running.add(admittedFiber)
            return closed ? Fiber.interruptFork(admittedFiber) : Effect.void
          })
        const hooks: Hooks = {
          threadKey: key,
          session: plan.session,
          opening: plan.opening,
          commit,
          // A live turn's late save (its CLI wrote behind its result) runs after the turn let go
          // of the lease: only while the record it committed is still the key's current one. A
          // later turn committed since (another host's, resuming the same session) saved newer
          // files, which the late save would replace with older ones. Checked and saved under the
          // key's lease: this agent's turn's, which waits for this save (`Leases`), or its own,
          // taken for the check and the save (a turn that holds it elsewhere: nothing is saved).
          save: (session) =>
            host.leases.locked(
              key,
              Effect.gen(function*() {
                const mine = committedRecord
                if (mine === undefined || mine.session !== session) return
                const checkedSave = Effect.gen(function*() {
                  if (yield* landed(mine)) yield* host.sessions.save(session)
                })
                if (host.leases.held.has(key)) return yield* checkedSave
                const lease = yield* Effect.option(host.store.acquire(key, host.leaseTtl))
                if (Option.isNone(lease)) return
                yield* checkedSave.pipe(Effect.ensuring(Effect.ignore(host.store.release(lease.value))))
              })
            ),
          load: host.sessions.load,
          reaped,
          observe,
          admitted,
          accepted
        }
        return { hooks, untrack: Effect.sync(() => fiber !== undefined && running.delete(fiber)) }
      })

    /**
     * A turn up to its first attempt, in the turn's scope: admission, the lease (released with the
     * scope) and its renewal, the wait for the previous turn's CLI, the plan; then how a failure
     * of its attempts reaches the caller (`failure`) and the fresh retry's plan (`retry`).
     */
    const begin = (turn: Agent.Input) =>
      Effect.gen(function*() {
        yield* host.admit
        if (closed) return yield* new Thread.ThreadClosed({ key })
        const lease = yield* holdUnlessClosed(key)
        // Renewed while the turn lasts (a failing store is retried at the next tick); once the
        // lease is lost renewal stops, and the guarded commit persists nothing.
        yield* Effect.forkScoped(renewing(lease))
        // The previous turn's CLI may still be exiting (writing its session): resume after it. The
        // thread's close cuts the wait (this turn then fails `ThreadClosed` below).
        const exiting = host.exiting.get(key)
        if (exiting !== undefined) yield* Effect.raceFirst(Deferred.await(exiting), Deferred.await(closedSignal))
        // A fork's first turn loads the source's committed session into the clone, where a turn of
        // the source running in this agent writes it (the agent has one clone): it would revert
        // what that turn wrote. So it holds the source's lease too, for the whole turn (`ThreadBusy`
        // naming the source while a turn of it runs, anywhere; the source's turns are `ThreadBusy`
        // until this one ends), and starts once the source's last CLI is gone and its last live
        // turn's late save has landed. `plan` then forks what the source holds now.
        const forking = pendingFork
        if (forking !== undefined) {
          const held = yield* holdUnlessClosed(forking.key)
          yield* Effect.forkScoped(renewing(held))
          const sourceExiting = host.exiting.get(forking.key)
          if (sourceExiting !== undefined) {
            yield* Effect.raceFirst(Deferred.await(sourceExiting), Deferred.await(closedSignal))
          }
          yield* Effect.raceFirst(host.settleLive(forking.key), Deferred.await(closedSignal))
        }
        // A repair turn continues its host turn, which its first attempt committed under the same id.
        const first = yield* plan(
          typeof turn === "string" || Structured.attemptOf(turn)?.repair === true ? undefined : turn.id
        )
        if (closed) return yield* new Thread.ThreadClosed({ key })
        // A rejected resume is retried once with a fresh session, unless the thread is strict
        // (then it fails `ResumeRejected`) or the provider had already accepted the session (its
        // events were shown: the failure stands as it is). The retried attempt is seen only as the
        // restart's `ThreadOpened`.
        const retry = first.session._tag === "New" ? undefined : (error: Thread.RunFailure): Plan | undefined => {
          const rejected = error._tag === "RunError" ? rejection(error) : undefined
          if (rejected === undefined || strict) return undefined
          const from = first.opening.from === undefined
            ? undefined
            : { session: first.opening.from, turns: first.opening.fromTurns ?? 0 }
          return {
            session: { _tag: "New", id: randomUUID() },
            mode: first.mode,
            turns: 0,
            opening: opening("restarted", from, new Rejected({ detail: rejected.detail }))
          }
        }
        // No `Stream.interruptWhen` on the thread's close: it runs the stream through `mergeWith`,
        // which forks a fiber for every pull (2-3 ms of a warm turn's start and end). The close
        // interrupts the turn's run (admitted or not yet: see `admitted`), whose end reaches the
        // caller as `RunError(Canceled)`, and the waits before the run are cut above.
        const failure = (error: Thread.RunFailure): Thread.RunFailure => {
          if (first.session._tag !== "New" && strict && error._tag === "RunError" && rejection(error) !== undefined) {
            return new Thread.ResumeRejected({ key, detail: error.detail, result: error.result })
          }
          // A turn the thread's close canceled fails as closed.
          return closed && error._tag === "RunError" && error.reason === "Canceled"
            ? new Thread.ThreadClosed({ key })
            : error
        }
        return { lease, first, retry, failure }
      })

    const stream = (turn: Agent.Input): Stream.Stream<Event.Event, Thread.RunFailure> =>
      Stream.unwrapScoped(Effect.map(begin(turn), ({ failure, first, lease, retry }) =>
        attempt(lease, turn, first, retry).pipe(Stream.mapError(failure)))).pipe(
          Tracing.withStreamSpan("Thread.stream")
        )

    // The turn's attempts drained by the agent's direct loop of pulls: the same events reach the
    // observers and the same failures the caller as through `stream`, without the layers of
    // stream combinators around the run, built at every turn's start and unwound at its end.
    const run = (turn: Agent.Input): Effect.Effect<Result, Thread.RunFailure> =>
      Effect.scoped(Effect.flatMap(begin(turn), ({ failure, first, lease, retry }) =>
        Effect.mapError(attemptResult(lease, turn, first, retry), failure))).pipe(
          Tracing.withSpan("Thread.run")
        )

    // Cancels this handle's turns and waits for them (their RunFinished reaches `events`), then
    // ends `events`.
    const close = Effect.suspend(() => {
      closed = true
      return Deferred.succeed(closedSignal, undefined).pipe(
        Effect.zipRight(Effect.suspend(() =>
          Fiber.interruptAll(Array.from(running))
        )),
        // The thread's warm process goes with it (the agent stays).
        Effect.zipRight(host.retireLive(key)),
        Effect.zipRight(hub.end)
      )
    }).pipe(Tracing.withSpan("Thread.close"))

    const fork = (target: string, forkOptions: Thread.Options = {}): Effect.Effect<Thread.Thread, Thread.OpenFailure> =>
      Effect.gen(function*() {
        yield* preflight(host, "fork")
        if (closed) {
          return yield* new Thread.ThreadClosed({ key })
        }
        if (Option.isSome(yield* host.store.get(target))) {
          return yield* new ThreadAlreadyExists({ key: target })
        }
        const source = yield* resumable(host, key)
        return yield* open(host, target, forkOptions, source)
      }).pipe(Tracing.withSpan("Thread.fork"))

    const prune = (pruneOptions: Thread.PruneOptions = {}): Effect.Effect<
      ReadonlyArray<SupersededRecord>,
      ThreadStoreError | AgentClosed
    > =>
      Effect.gen(function*() {
        // Refused before anything is removed: a closed agent cannot drop the records' sessions.
        yield* host.admit
        const now = yield* Clock.currentTimeMillis
        const removed = yield* host.store.prune({
          key,
          ...(pruneOptions.olderThan === undefined
            ? {}
            : { supersededBefore: now - Duration.toMillis(Duration.decode(pruneOptions.olderThan)) })
        })
        const current = Option.map(yield* host.store.get(key), (record) =>
          record.session)
        yield* dropSessions(host, removed.map((entry) => entry.record), Option.toArray(current))
        return removed
      }).pipe(Tracing.withSpan("Thread.prune"))

    const remove: Effect.Effect<ReadonlyArray<ThreadRecord>, Thread.DeleteFailure> = Effect.gen(function*() {
      yield* host.admit
      // Taken as a turn of this agent takes it: after a late save that holds it (`Leases`).
      const lease = yield* hold(key)
      // The last turn's CLI may still be exiting: its session goes only once it is gone.
      const exiting = host.exiting.get(key)
      if (exiting !== undefined) yield* Deferred.await(exiting)
      // A warm process carries the session being deleted; a late save still to come saves under
      // this lease, and is waited for before the session goes.
      yield* host.retireLive(key)
      yield* host.settleLive(key)
      const removed = yield* host.store.delete(lease)
      yield* dropSessions(host, removed, [])
      return removed
    }).pipe(Effect.scoped, Tracing.withSpan("Thread.delete"))

    // Each attempt is a turn of this thread: a repair turn resumes the committed checkpoint.
    const structuredRunner: Structured.Runner<Thread.RunFailure> = {
      driver: host.provider,
      capabilities: host.capabilities,
      outputSchemaRefusal: host.outputSchemaRefusal,
      stream,
      resumesItself: false
    }

    return {
      key,
      run,
      stream,
      runAs: (schema, turn, structuredOptions) =>
        Structured.runAs(structuredRunner, schema, turn, structuredOptions).pipe(
          Tracing.withSpan("Thread.runAs")
        ),
      streamAs: (schema, turn, structuredOptions) =>
        Structured.streamAs(structuredRunner, schema, turn, structuredOptions).pipe(
          Tracing.withStreamSpan("Thread.streamAs")
        ),
      fork,
      snapshot: host.store.get(key),
      history: host.store.history(key),
      prune,
      delete: remove,
      events: hub.subscribe,
      send: (input: string) => Tracing.withSpan("Thread.send")(host.send(key, input)),
      approve: (id, decision) => host.approve(id, decision, key),
      close
    } satisfies Thread.Thread
  }).pipe(Tracing.withSpan("Agent.thread"))
