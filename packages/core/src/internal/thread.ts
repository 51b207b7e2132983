/**
 * Threads over the agent's runs: the lease, the continue-or-start decision, the one fresh
 * retry of a rejected resume, the guarded checkpoint commit, forks and per-thread events.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Stream from "effect/Stream"
import { randomUUID } from "node:crypto"
import type * as Agent from "../Agent.js"
import { type AgentClosed, type InvalidTurn, type RunError, UnsupportedCapability } from "../AgentError.js"
import { ProtocolError } from "../Driver.js"
import type * as Driver from "../Driver.js"
import type * as Event from "../Event.js"
import type { Result } from "../Result.js"
import * as Thread from "../Thread.js"
import { ThreadAlreadyExists, ThreadRecord } from "./threadStore.js"
import type { CommitMode, Lease, ThreadStore, ThreadStoreError } from "./threadStore.js"

/** What a thread's turn hands to the agent's run. @internal */
export interface Hooks {
  /** The thread's key (traced only as a keyed hash). */
  readonly key: string
  readonly session: Driver.SessionRequest
  /** Runs after a clean terminal record, before `RunFinished`; a failure fails the run. */
  readonly commit: (result: Result) => Effect.Effect<void, { readonly message: string }>
  /** Completed once the run's provider process is gone (or was never spawned). */
  readonly reaped: Deferred.Deferred<void>
}

/** What a thread needs from its agent. @internal */
export interface Host {
  readonly provider: string
  readonly capabilities: Driver.Capabilities
  readonly fingerprint: string
  /** Tools without a revision (threads refuse them). */
  readonly revisionless: ReadonlyArray<string>
  readonly store: ThreadStore["Type"]
  readonly leaseTtl: Duration.Duration
  /** Fails with `AgentClosed` once the agent's admission is fenced. */
  readonly admit: Effect.Effect<void, AgentClosed>
  readonly stream: (turn: Agent.Input, hooks: Hooks) => Stream.Stream<Event.Event, RunError | AgentClosed | InvalidTurn>
  /** Completes once the agent has closed (its runs canceled): every thread's `events` end. */
  readonly closed: Effect.Effect<void>
  /** Per key: completed once the last turn's provider process is gone (any handle of the key). */
  readonly exiting: Map<string, Deferred.Deferred<void>>
}

const isResumeRejected = (error: RunError | AgentClosed | InvalidTurn): error is RunError =>
  error._tag === "RunError" && error.reason === "ProtocolError" && error.cause instanceof ProtocolError &&
  error.cause.reason === "ResumeRejected"

const compatibility = (host: Host, record: ThreadRecord): "Provider" | "Fingerprint" | undefined =>
  record.provider !== host.provider ? "Provider" : record.fingerprint !== host.fingerprint ? "Fingerprint" : undefined

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
    const reason = compatibility(host, record.value)
    return reason === undefined
      ? Effect.succeed(record.value)
      : Effect.fail(new Thread.ThreadIncompatible({ key, reason }))
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
}

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
    if (options.resumeOnly === true && forkOf === undefined) yield* resumable(host, key)
    const pubsub = yield* PubSub.unbounded<Event.Event>()
    const closedSignal = yield* Deferred.make<void>()
    const resumeOnly = options.resumeOnly === true
    let closed = false
    let pendingFork = forkOf
    const renewEvery = Duration.millis(Math.max(1, Math.floor(Duration.toMillis(host.leaseTtl) / 3)))

    const plan = Effect.gen(function*() {
      const record = yield* host.store.get(key)
      if (pendingFork !== undefined) {
        if (Option.isSome(record)) return yield* new ThreadAlreadyExists({ key })
        const from = pendingFork.session
        return { session: { _tag: "Fork", from, id: randomUUID() }, mode: "insert", turns: pendingFork.turns } as Plan
      }
      const fresh: Plan = { session: { _tag: "New", id: randomUUID() }, mode: "upsert", turns: 0 }
      if (Option.isNone(record)) {
        return resumeOnly ? yield* new Thread.ThreadNotFound({ key }) : fresh
      }
      const reason = compatibility(host, record.value)
      if (reason !== undefined) return resumeOnly ? yield* new Thread.ThreadIncompatible({ key, reason }) : fresh
      return {
        session: { _tag: "Resume", id: record.value.session },
        mode: "upsert",
        turns: record.value.turns
      } as Plan
    })

    const attempt = (lease: Lease, turn: Agent.Input, plan: Plan) =>
      Stream.unwrap(Effect.gen(function*() {
        const reaped = yield* Deferred.make<void>()
        if (host.exiting.size >= 1024) {
          // Keys that saw no turn since their process exited: nothing to wait for any more.
          for (const [other, deferred] of Array.from(host.exiting)) {
            if (yield* Deferred.isDone(deferred)) host.exiting.delete(other)
          }
        }
        host.exiting.set(key, reaped)
        const commit = (result: Result) =>
          result.session === undefined
            ? Effect.fail({ message: "the run reported no provider session to checkpoint" })
            : Clock.currentTimeMillis.pipe(
              Effect.flatMap((now) =>
                host.store.commit(
                  lease,
                  new ThreadRecord({
                    key,
                    provider: host.provider,
                    session: result.session!,
                    fingerprint: host.fingerprint,
                    turns: plan.turns + 1,
                    updatedAt: now
                  }),
                  plan.mode
                )
              ),
              Effect.tap(() => Effect.sync(() => (pendingFork = undefined)))
            )
        return host.stream(turn, { key, session: plan.session, commit, reaped })
      }))

    const stream = (turn: Agent.Input): Stream.Stream<Event.Event, Thread.RunFailure> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        yield* host.admit
        if (closed) return yield* new Thread.ThreadClosed({ key })
        const lease = yield* Effect.acquireRelease(
          host.store.acquire(key, host.leaseTtl),
          (lease) => Effect.ignore(host.store.release(lease))
        )
        // Renewed while the turn lasts (a failing store is retried at the next tick); once the
        // lease is lost renewal stops, and the guarded commit persists nothing.
        yield* Effect.forkScoped(Effect.ignore(Effect.forever(
          Effect.zipRight(
            Effect.sleep(renewEvery),
            host.store.renew(lease, host.leaseTtl).pipe(Effect.catchTag("ThreadStoreError", () => Effect.void))
          )
        )))
        // The previous turn's CLI may still be exiting (writing its session): resume after it.
        const exiting = host.exiting.get(key)
        if (exiting !== undefined) yield* Deferred.await(exiting)
        const first = yield* plan
        const runs = attempt(lease, turn, first).pipe(
          Stream.catchAll((error): Stream.Stream<Event.Event, Thread.RunFailure> => {
            if (first.session._tag === "New" || !isResumeRejected(error)) return Stream.fail(error)
            if (resumeOnly) {
              return Stream.fail(new Thread.ResumeRejected({ key, detail: error.detail, result: error.result }))
            }
            return attempt(lease, turn, { session: { _tag: "New", id: randomUUID() }, mode: first.mode, turns: 0 })
          })
        )
        return runs.pipe(
          Stream.tap((event) => PubSub.publish(pubsub, event)),
          Stream.interruptWhen(
            Effect.zipRight(Deferred.await(closedSignal), Effect.fail(new Thread.ThreadClosed({ key })))
          )
        )
      })).pipe(Stream.withSpan("Thread.stream"))

    const run = (turn: Agent.Input): Effect.Effect<Result, Thread.RunFailure> =>
      Effect.suspend(() => {
        let result: Result | undefined
        return stream(turn).pipe(
          Stream.runForEachChunk((chunk) =>
            Effect.sync(() => {
              for (const event of chunk) if (event._tag === "RunFinished") result = event.result
            })
          ),
          Effect.flatMap(() =>
            result === undefined
              ? Effect.dieMessage("a thread turn ended without its RunFinished event")
              : Effect.succeed(result)
          )
        )
      }).pipe(Effect.withSpan("Thread.run"))

    const close = Effect.suspend(() => {
      closed = true
      return Effect.zipRight(Deferred.succeed(closedSignal, undefined), PubSub.shutdown(pubsub))
    })

    const fork = (target: string, forkOptions: Thread.Options = {}): Effect.Effect<Thread.Thread, Thread.OpenFailure> =>
      Effect.gen(function*() {
        yield* preflight(host, "fork")
        if (closed) return yield* new Thread.ThreadClosed({ key })
        if (Option.isSome(yield* host.store.get(target))) return yield* new ThreadAlreadyExists({ key: target })
        const source = yield* resumable(host, key)
        return yield* open(host, target, forkOptions, source)
      }).pipe(Effect.withSpan("Thread.fork"))

    return {
      key,
      run,
      stream,
      fork,
      snapshot: host.store.get(key),
      events: Stream.fromPubSub(pubsub).pipe(Stream.interruptWhen(host.closed)),
      close
    } satisfies Thread.Thread
  }).pipe(Effect.withSpan("Agent.thread"))
