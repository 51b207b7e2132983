/**
 * The thread entity's behaviour on a runner: one agent per active thread (built at its first
 * turn, closed when the entity stops or the thread is closed), one turn at a time, the wait for a
 * previous runner's lease, and the runner's reaper of dead runners' leftovers.
 *
 * @internal
 */
import * as Entity from "@effect/cluster/Entity"
import * as Agent from "@tether/core/Agent"
import { AgentConfigError, UnsupportedCapability } from "@tether/core/AgentError"
import type * as Event from "@tether/core/Event"
import type * as Thread from "@tether/core/Thread"
import { ThreadBusy, ThreadStore } from "@tether/core/ThreadStore"
import * as Profile from "@tether/profile/Profile"
import type * as Toolkit from "@tether/tool/Toolkit"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as ThreadEntity from "../ThreadEntity.js"
import { entityIdOf } from "./entityId.js"

type Request = typeof ThreadEntity.TurnRequest.Type

const turnOf = (request: Request): Agent.Turn => ({
  input: request.input,
  id: request.id,
  ...(request.model === undefined ? {} : { model: request.model }),
  ...(request.toolPolicy === undefined ? {} : { toolPolicy: request.toolPolicy })
})

const clamp = (value: Duration.Duration, min: Duration.DurationInput, max: Duration.DurationInput) =>
  Duration.max(Duration.decode(min), Duration.min(value, Duration.decode(max)))

/** @internal */
export const layer = <Tools extends Toolkit.Any>(options: ThreadEntity.LayerOptions<Tools>) => {
  const agentOptions = options.agent
  const leaseTtl = Duration.decode(agentOptions.threads?.leaseTtl ?? "30 seconds")
  const takeoverTimeout = Duration.decode(options.takeover?.timeout ?? Duration.sum(leaseTtl, "5 seconds"))
  const takeoverInterval = options.takeover?.interval === undefined
    ? clamp(Duration.divide(leaseTtl, 10).pipe((d) => d._tag === "Some" ? d.value : leaseTtl), "100 millis", "1 second")
    : Duration.decode(options.takeover.interval)
  // A previous runner's lease on the thread (it died mid-turn, or its shard just moved here)
  // is waited out; nothing was started while the acquire failed.
  const takeover = Schedule.spaced(takeoverInterval).pipe(
    Schedule.whileInput((error: { readonly _tag: string }) => error._tag === "ThreadBusy"),
    Schedule.upTo(takeoverTimeout)
  )
  const makeAgent = Agent.make(agentOptions)

  const handlers = Effect.gen(function*() {
    const address = yield* Entity.CurrentAddress
    const entityScope = yield* Scope.Scope
    const store = yield* ThreadStore
    const services = yield* Effect.context<Effect.Effect.Context<typeof makeAgent>>()
    const creating = yield* Effect.makeSemaphore(1)
    let current: { readonly agent: Agent.Agent; readonly scope: Scope.CloseableScope } | undefined
    let running: Thread.Thread | undefined
    let busy = false

    // The thread's agent on this runner, built at its first turn; a failed build is retried by
    // the next turn.
    const agent = creating.withPermits(1)(Effect.suspend(() => {
      if (current !== undefined) return Effect.succeed(current.agent)
      return Effect.gen(function*() {
        const scope = yield* Scope.fork(entityScope, ExecutionStrategy.sequential)
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

    // The entity is the thread's single writer: one turn at a time.
    const admit = (key: string) =>
      Effect.acquireRelease(
        Effect.suspend(() => busy ? Effect.fail(new ThreadBusy({ key })) : Effect.sync(() => void (busy = true))),
        () => Effect.sync(() => void (busy = false))
      )

    const open = (request: Request) =>
      Effect.flatMap(agent, (made) => made.thread(request.key, { resumeOnly: request.resumeOnly === true })).pipe(
        Effect.tap((thread) => Effect.sync(() => void (running = thread)))
      )

    const run = (request: Request) =>
      Effect.gen(function*() {
        yield* check(request.key)
        yield* admit(request.key)
        return yield* open(request).pipe(
          Effect.flatMap((thread) => thread.run(turnOf(request))),
          Effect.retry(takeover)
        )
      }).pipe(Effect.scoped, Effect.ensuring(Effect.sync(() => void (running = undefined))))

    const stream = (request: Request): Stream.Stream<Event.Event, ThreadEntity.TurnFailure> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        yield* check(request.key)
        yield* admit(request.key)
        yield* Effect.addFinalizer(() => Effect.sync(() => void (running = undefined)))
        // Only the opening and the lease are retried: no event has been emitted before either fails.
        const first = yield* open(request).pipe(
          Effect.flatMap((thread) =>
            Effect.map(Stream.toPull(thread.stream(turnOf(request))), (pull) => ({ pull, thread }))
          ),
          Effect.flatMap(({ pull }) =>
            pull.pipe(
              Effect.map((chunk) => ({ chunk, pull })),
              Effect.catchAll((error) =>
                error._tag === "None" ? Effect.succeed({ chunk: undefined, pull }) : Effect.fail(error.value)
              )
            )
          ),
          Effect.retry(takeover)
        )
        const rest = Stream.repeatEffectChunkOption(first.pull)
        return first.chunk === undefined ? Stream.empty : Stream.concat(Stream.fromChunk(first.chunk), rest)
      }))

    return ThreadEntity.Thread.of({
      Run: ({ payload }) => run(payload),
      RunStream: ({ payload }) => stream(payload),
      Send: ({ payload }) =>
        Effect.zipRight(
          check(payload.key),
          Effect.suspend((): Effect.Effect<never, ThreadEntity.NoActiveTurn | UnsupportedCapability> =>
            busy
              ? Effect.fail(
                new UnsupportedCapability({
                  driver: agentOptions.driver.name,
                  capability: "send",
                  detail: "this version of @tether/core has no live sessions to deliver input into a running turn"
                })
              )
              : Effect.fail(new ThreadEntity.NoActiveTurn({ key: payload.key }))
          )
        ),
      Snapshot: ({ payload }) => Effect.zipRight(check(payload.key), store.get(payload.key)),
      Close: ({ payload }) =>
        Effect.zipRight(
          check(payload.key),
          creating.withPermits(1)(Effect.suspend(() => {
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
      Agent.reapOrphans,
      Profile.reclaim({ root }).pipe(Effect.catchAll((error) => Effect.logWarning("reclaiming clones failed", error)))
    )
    yield* reap
    yield* Effect.forkScoped(Effect.repeat(Effect.delay(reap, reapInterval), Schedule.forever))
  }))

  return ThreadEntity.Thread.toLayer(handlers, {
    concurrency: "unbounded",
    ...(options.maxIdleTime === undefined ? {} : { maxIdleTime: options.maxIdleTime })
  }).pipe(Layer.provideMerge(runner))
}
