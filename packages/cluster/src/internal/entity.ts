/**
 * The thread entity's behaviour on a runner: one agent per active thread (built at its first
 * turn, closed when the entity stops or the thread is closed), one turn at a time, the wait for a
 * previous runner's lease, the answer of a turn delivered twice, and the runner's reaper of dead
 * runners' leftovers.
 *
 * @internal
 */
import * as Entity from "@effect/cluster/Entity"
import * as Agent from "@tether/core/Agent"
import { AgentConfigError, ApprovalNotFound } from "@tether/core/AgentError"
import type * as Event from "@tether/core/Event"
import type { Result } from "@tether/core/Result"
import type * as Thread from "@tether/core/Thread"
import { ThreadClosed } from "@tether/core/Thread"
import { ThreadBusy, ThreadStore } from "@tether/core/ThreadStore"
import * as Unstable from "@tether/core/Unstable"
import * as Profile from "@tether/profile/Profile"
import type * as Toolkit from "@tether/tool/Toolkit"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as ThreadEntity from "../ThreadEntity.js"
import * as Answers from "./answers.js"
import { entityIdOf } from "./entityId.js"

type Request = typeof ThreadEntity.TurnRequest.Type

/** The runner's answers store, shared by its entities. */
class RunnerAnswers extends Context.Tag("@tether/cluster/internal/RunnerAnswers")<RunnerAnswers, Answers.Answers>() {}

const turnOf = (request: Request, cancel: Effect.Effect<void>): Agent.Turn => ({
  input: request.input,
  id: request.id,
  cancel,
  ...(request.model === undefined ? {} : { model: request.model }),
  ...(request.toolPolicy === undefined ? {} : { toolPolicy: request.toolPolicy }),
  ...(request.builtinTools === undefined ? {} : { builtinTools: request.builtinTools })
})

const clamp = (value: Duration.Duration, min: Duration.DurationInput, max: Duration.DurationInput) =>
  Duration.max(Duration.decode(min), Duration.min(value, Duration.decode(max)))

/** @internal */
export const layer = <Tools extends Toolkit.Any>(options: ThreadEntity.LayerOptions<Tools>) => {
  const agentOptions = options.agent
  const leaseTtl = Duration.decode(agentOptions.threads?.leaseTtl ?? "30 seconds")
  const takeoverTimeout = Duration.decode(options.takeover?.timeout ?? Duration.sum(leaseTtl, "5 seconds"))
  const takeoverInterval = options.takeover?.interval === undefined
    ? clamp(Duration.unsafeDivide(leaseTtl, 10), "100 millis", "1 second")
    : Duration.decode(options.takeover.interval)
  // A previous runner's lease on the thread (it died mid-turn, or its shard just moved here)
  // is waited out; nothing was started while the acquire failed.
  const takeover = Schedule.spaced(takeoverInterval).pipe(
    Schedule.whileInput((error: { readonly _tag: string }) => error._tag === "ThreadBusy"),
    Schedule.upTo(takeoverTimeout)
  )
  const opening = Schedule.spaced("50 millis").pipe(Schedule.upTo(takeoverTimeout))
  const makeAgent = Agent.make(agentOptions)

  const handlers = Effect.gen(function*() {
    const address = yield* Entity.CurrentAddress
    // Made now, before the entity's RPC server exists, so it closes after the server: a runner
    // that stops (or hands the shard over) interrupts the running turn first, which leaves the
    // persisted turn to be delivered again, instead of failing it by closing the agent under it.
    const agents = yield* Scope.fork(yield* Scope.Scope, ExecutionStrategy.sequential)
    const store = yield* ThreadStore
    const answers = yield* RunnerAnswers
    const services = yield* Effect.context<Effect.Effect.Context<typeof makeAgent>>()
    const creating = yield* Effect.makeSemaphore(1)
    let current: { readonly agent: Agent.Agent; readonly scope: Scope.CloseableScope } | undefined
    let running: Thread.Thread | undefined
    // The running turn once its RunStarted went by: what `Send` delivers into and `Cancel`
    // cancels, and its run id.
    let active:
      | { readonly thread: Thread.Thread; readonly runId: string; readonly cancel: Deferred.Deferred<void> }
      | undefined
    let busy = false
    // Whether what holds `busy` runs: a turn past its opening (its agent, its thread, a previous
    // runner's lease), or a delete.
    let started = false
    // How many Close messages this entity took: a turn that arrived before one is canceled by it,
    // also while it waits to be admitted or out another runner's lease (each retry would otherwise
    // build a new agent).
    let closes = 0

    // The thread's agent on this runner, built at its first turn; a failed build is tried again
    // by the next turn.
    const agent = creating.withPermits(1)(Effect.suspend(() => {
      if (current !== undefined) return Effect.succeed(current.agent)
      return Effect.gen(function*() {
        const scope = yield* Scope.fork(agents, ExecutionStrategy.sequential)
        const made = yield* makeAgent.pipe(
          Scope.extend(scope),
          Effect.provide(services),
          Effect.onError(() => Scope.close(scope, Exit.void))
        )
        current = { agent: made, scope }
        return made
      })
    }))

    const check = (key: string) =>
      entityIdOf(key) === address.entityId
        ? Effect.void
        : Effect.dieMessage(`a message for thread ${JSON.stringify(key)} reached entity ${address.entityId}`)

    // The entity is the thread's single writer: one turn (or delete) at a time. One that arrives
    // while the holder is still opening waits for it, up to `takeover.timeout`: a delivery taken
    // over from a dead runner may hold the entity through the lease wait only to be interrupted
    // then (its caller gave up). Once the holder runs, it fails with ThreadBusy; a Close that
    // comes meanwhile ends the wait with ThreadClosed.
    const admit = (key: string, arrivedAt: number, runsAtOnce: boolean) =>
      Effect.acquireRelease(
        // The check and the taking in one step: no other fiber runs between them.
        Effect.suspend((): Effect.Effect<void, ThreadBusy | ThreadClosed> => {
          if (closes !== arrivedAt) return Effect.fail(new ThreadClosed({ key }))
          if (busy) return Effect.fail(new ThreadBusy({ key }))
          busy = true
          started = runsAtOnce
          return Effect.void
        }),
        () => Effect.sync(() => void (busy = started = false))
      ).pipe(Effect.retry({ schedule: opening, while: (error) => error._tag === "ThreadBusy" && !started }))

    // The turn's events. Its answer is saved with its commit (same uninterruptible step, while the
    // turn holds the lease), so whoever takes the lease next finds it. Only the opening and the
    // lease are waited for: no event was emitted when either fails.
    const events = (request: Request): Stream.Stream<Event.Event, ThreadEntity.TurnFailure> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        yield* check(request.key)
        const arrivedAt = closes
        yield* admit(request.key, arrivedAt, false)
        const cancel = yield* Deferred.make<void>()
        // The runs of this turn that have ended (a rejected resume retried fresh is a second run).
        const ended = new Set<string>()
        yield* Effect.addFinalizer(() => Effect.sync(() => void (running = active = undefined)))
        const first = yield* Effect.suspend(() =>
          closes === arrivedAt ? Effect.void : Effect.fail(new ThreadClosed({ key: request.key }))
        ).pipe(
          Effect.zipRight(agent),
          Effect.flatMap((made) =>
            made.thread(request.key, {
              resumeOnly: request.resumeOnly === true,
              onCommit: ({ result }) => answers.save(request.key, request.id, result)
            })
          ),
          Effect.tap((thread) => Effect.sync(() => void (running = thread))),
          // The turn's end as its run reports it, on the thread's events (fed by the run, not by
          // this stream's reader, which may hold its RunFinished back while the turn has committed):
          // from then on nothing runs to send into or cancel.
          Effect.tap((thread) =>
            Effect.flatMap(Deferred.make<void>(), (subscribed) =>
              Effect.zipRight(
                Effect.forkScoped(
                  thread.events.pipe(
                    Stream.onStart(Deferred.succeed(subscribed, undefined)),
                    Stream.runForEach((event) =>
                      event._tag === "RunFinished"
                        ? Effect.sync(() => {
                          ended.add(event.runId)
                          if (active?.runId === event.runId) active = undefined
                        })
                        : Effect.void
                    )
                  )
                ),
                Deferred.await(subscribed)
              ))
          ),
          Effect.flatMap((thread) =>
            Stream.toPull(
              thread.stream(turnOf(request, Deferred.await(cancel))).pipe(
                Stream.tap((event) =>
                  event._tag === "RunStarted" && !ended.has(event.runId)
                    ? Effect.sync(() => void (active = { thread, runId: event.runId, cancel }))
                    : Effect.void
                )
              )
            )
          ),
          Effect.flatMap((pull) =>
            pull.pipe(
              Effect.map((chunk) => ({ chunk: Option.some(chunk), pull })),
              Effect.catchAll((error) =>
                Option.isNone(error) ? Effect.succeed({ chunk: Option.none(), pull }) : Effect.fail(error.value)
              )
            )
          ),
          Effect.retry(takeover),
          Effect.tap(() => Effect.sync(() => void (started = true)))
        )
        const rest = Stream.repeatEffectChunkOption(first.pull)
        return Option.match(first.chunk, {
          onNone: () => Stream.empty,
          onSome: (chunk) => Stream.concat(Stream.fromChunk(chunk), rest)
        })
      }))

    // Another delivery of this turn committed it: answer what it answered. With no saved answer
    // (its runner died between the commit and saving it) the turn fails with TurnAlreadyCommitted.
    const answered = (request: Request) => <A>(effect: Effect.Effect<A, ThreadEntity.TurnFailure>) =>
      effect.pipe(Effect.catchTag("TurnAlreadyCommitted", (error) =>
        Effect.flatMap(
          answers.find(request.key, request.id),
          Option.match({ onNone: () => Effect.fail(error), onSome: (result) => Effect.succeed(result as A) })
        )))

    const run = (request: Request): Effect.Effect<Result, ThreadEntity.TurnFailure> =>
      Effect.suspend(() => {
        let result: Result | undefined
        return events(request).pipe(
          Stream.runForEach((event) =>
            Effect.sync(() => void (event._tag === "RunFinished" && (result = event.result)))
          ),
          Effect.flatMap(() =>
            result === undefined
              ? Effect.dieMessage("a thread turn ended without its RunFinished event")
              : Effect.succeed(result)
          ),
          answered(request)
        )
      })

    return ThreadEntity.Thread.of({
      Run: ({ payload }) => run(payload),
      RunStream: ({ payload }) => events(payload),
      Send: ({ payload }) =>
        Effect.zipRight(
          check(payload.key),
          Effect.suspend(() => {
            const turn = active
            if (turn === undefined) return Effect.fail(new ThreadEntity.NoActiveTurn({ key: payload.key }))
            return turn.thread.send(payload.input).pipe(
              Effect.map((delivery) =>
                new ThreadEntity.Delivery({ runId: turn.runId, mode: delivery === "Injected" ? "injected" : "queued" })
              ),
              // The turn ended, or the thread's agent closed, before the input reached it.
              Effect.catchTags({
                NoActiveTurn: () => new ThreadEntity.NoActiveTurn({ key: payload.key }),
                AgentClosed: () => new ThreadEntity.NoActiveTurn({ key: payload.key })
              })
            )
          })
        ),
      Cancel: ({ payload }) =>
        Effect.zipRight(
          check(payload.key),
          Effect.suspend(() => {
            const turn = active
            return turn === undefined || (payload.runId !== undefined && payload.runId !== turn.runId)
              ? Effect.fail(new ThreadEntity.NoActiveTurn({ key: payload.key }))
              : Effect.as(Deferred.succeed(turn.cancel, undefined), turn.runId)
          })
        ),
      Approve: ({ payload }) =>
        Effect.zipRight(
          check(payload.key),
          Effect.suspend(() =>
            current === undefined
              ? Effect.fail(new ApprovalNotFound({ id: payload.id }))
              : current.agent.approve(payload.id, payload.decision)
          )
        ),
      Snapshot: ({ payload }) => Effect.zipRight(check(payload.key), store.get(payload.key)),
      // Admitted as a turn is (after a turn still opening), but it runs at once: a turn sent
      // meanwhile is ThreadBusy, as the delete is during a running turn.
      Delete: ({ payload }) =>
        Effect.zipRight(check(payload.key), admit(payload.key, closes, true)).pipe(
          Effect.zipRight(agent),
          Effect.flatMap((made) =>
            Effect.acquireUseRelease(
              made.thread(payload.key).pipe(
                // Opened without resumeOnly, onUnresumable or a source to fork: no record is read.
                Effect.catchTags({
                  ThreadNotFound: Effect.die,
                  ThreadIncompatible: Effect.die,
                  ThreadAlreadyExists: Effect.die
                })
              ),
              (thread) => thread.delete,
              (thread) => thread.close
            )
          ),
          Effect.scoped
        ),
      Close: ({ payload }) =>
        Effect.zipRight(
          check(payload.key),
          creating.withPermits(1)(Effect.suspend(() => {
            closes++
            const closing = current
            current = undefined
            return Effect.zipRight(
              running === undefined ? Effect.void : running.close,
              closing === undefined ? Effect.void : Scope.close(closing.scope, Exit.void)
            )
          }))
        )
    })
  })

  // Once per runner: bad options fail here; then dead runners' leftovers are reaped, at start
  // and periodically (their CLI processes by marker, their clones under the clone root).
  const root = agentOptions.profile?.root ?? Profile.defaultRoot()
  const reapInterval = Duration.decode(options.reap?.interval ?? "1 minute")
  const runner = Layer.scopedDiscard(Effect.gen(function*() {
    if (agentOptions.profile?._tag === "Dedicated") {
      return yield* new AgentConfigError({
        reason: "InvalidOptions",
        detail: "a dedicated profile serves one agent; thread entities need a cloning profile selection"
      })
    }
    yield* Effect.scoped(makeAgent)
    const reap = Effect.zipRight(
      Unstable.reapOrphans,
      Profile.reclaim({ root }).pipe(Effect.catchAll((error) => Effect.logWarning("reclaiming clones failed", error)))
    )
    yield* reap
    yield* Effect.forkScoped(Effect.repeat(Effect.delay(reap, reapInterval), Schedule.forever))
  }))

  return ThreadEntity.Thread.toLayer(handlers, {
    concurrency: "unbounded",
    ...(options.maxIdleTime === undefined ? {} : { maxIdleTime: options.maxIdleTime })
  }).pipe(
    Layer.provide(Layer.effect(RunnerAnswers, Answers.make)),
    Layer.provideMerge(runner)
  )
}
