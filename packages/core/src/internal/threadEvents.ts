/**
 * A thread's `events`: every subscriber gets every event of every turn of the thread, fed by
 * the runs themselves (not by the caller's stream, so a turn whose caller stopped reading still
 * reaches them), under the agent's event policy: each subscriber has a bounded buffer; content
 * deltas are dropped for a subscriber whose buffer is full and counted in a `Dropped` before
 * the next event it gets, every other event waits for room (in blocking mode every event waits).
 * Once the agent or the thread handle starts closing no event waits any more: a subscriber with no
 * room loses what does not fit, counted in a `Dropped` before the end of its stream, so that a
 * subscriber that stopped reading can hold up neither a run's end nor the close.
 *
 * @internal
 */
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"
import * as Event from "../Event.js"

interface Subscriber {
  readonly queue: Queue.Queue<Take.Take<Event.Event>>
  /** Ends the subscription after what it already holds. */
  readonly end: Effect.Effect<void>
  dropped: number
  readonly kinds: Set<string>
  /** The last dropped event: its stamp is the `Dropped`'s (sequences stay strictly increasing). */
  last: Event.Event | undefined
  /** Completed when the agent or the thread handle starts closing: deliveries stop waiting for room. */
  readonly closing: Deferred.Deferred<void>
}

/** @internal */
export interface Hub {
  readonly publish: (events: ReadonlyArray<Event.Event>) => Effect.Effect<void>
  readonly subscribe: Stream.Stream<Event.Event>
  /** Ends every subscription once it has delivered what it holds; later ones are empty. */
  readonly end: Effect.Effect<void>
}

/** @internal */
export const make = (options: {
  readonly capacity: number
  readonly blocking: boolean
  /** Completes when the agent has closed: every subscription ends then too. */
  readonly agentClosed: Effect.Effect<void>
  /** Completes when the agent or the thread handle starts closing. */
  readonly closing: Effect.Effect<void>
}): Hub => {
  const subscribers = new Set<Subscriber>()
  let ended = false

  const deliver = (subscriber: Subscriber, events: ReadonlyArray<Event.Event>): Effect.Effect<void> => {
    const full = Option.getOrElse(subscriber.queue.unsafeSize(), () => 0) >= options.capacity
    const out: Array<Event.Event> = []
    for (const event of events) {
      if (!options.blocking && full && Event.isDroppable(event)) {
        subscriber.dropped++
        subscriber.kinds.add(event._tag)
        subscriber.last = event
        continue
      }
      const dropped = takeDropped(subscriber)
      if (dropped !== undefined) out.push(dropped)
      out.push(event)
    }
    if (out.length === 0) return Effect.void
    const take = Take.chunk(Chunk.unsafeFromArray(out))
    if (subscriber.queue.unsafeOffer(take)) return Effect.void
    // No room: wait for it, until closing starts; then what did not fit is counted as dropped.
    const lose = Effect.sync(() => {
      for (const event of out) {
        if (event._tag === "Dropped") {
          subscriber.dropped += event.count
          for (const kind of event.kinds) subscriber.kinds.add(kind)
        } else {
          subscriber.dropped++
          subscriber.kinds.add(event._tag)
          subscriber.last = event
        }
      }
    })
    // Interruptible even from a run's uninterruptible end (its RunFinished): the wait that loses
    // the race is interrupted, never left blocked under the run's fiber.
    return Effect.raceFirst(
      Effect.interruptible(Effect.as(subscriber.queue.offer(take), true)),
      Effect.interruptible(Effect.as(Deferred.await(subscriber.closing), false))
    ).pipe(
      Effect.flatMap((delivered) => delivered ? Effect.void : lose),
      // A subscriber that went away (its queue shut down) never fails the run that publishes.
      Effect.catchAllCause(() => Effect.void)
    )
  }

  /** The `Dropped` for what the subscriber lost since its last event, if it lost anything. */
  const takeDropped = (subscriber: Subscriber): Event.Dropped | undefined => {
    if (subscriber.dropped === 0 || subscriber.last === undefined) return undefined
    const { runId, sequence, time } = subscriber.last
    const dropped = new Event.Dropped({
      runId,
      sequence,
      time,
      count: subscriber.dropped,
      kinds: Array.from(subscriber.kinds).sort()
    })
    subscriber.dropped = 0
    subscriber.kinds.clear()
    return dropped
  }

  const publish = (events: ReadonlyArray<Event.Event>) =>
    Effect.suspend(() =>
      subscribers.size === 0
        ? Effect.void
        : Effect.forEach(Array.from(subscribers), (subscriber) => deliver(subscriber, events), { discard: true })
    )

  const subscribe = Stream.unwrapScoped(Effect.gen(function*() {
    if (ended) return Stream.empty
    const queue = yield* Queue.bounded<Take.Take<Event.Event>>(options.capacity)
    const scope = yield* Effect.scope
    let ending = false
    const subscriber: Subscriber = {
      queue,
      // Forked into the subscription's scope: it may wait for room, never past the subscription.
      // What the subscriber lost at the close is counted before its end.
      end: Effect.suspend(() => {
        if (ending) return Effect.void
        ending = true
        return Effect.asVoid(Effect.forkIn(
          Effect.suspend(() => {
            const dropped = takeDropped(subscriber)
            return dropped === undefined
              ? queue.offer(Take.end)
              : Effect.zipRight(queue.offer(Take.chunk(Chunk.of<Event.Event>(dropped))), queue.offer(Take.end))
          }),
          scope
        ))
      }),
      dropped: 0,
      kinds: new Set(),
      last: undefined,
      closing: yield* Deferred.make<void>()
    }
    subscribers.add(subscriber)
    yield* Effect.addFinalizer(() =>
      Effect.zipRight(Effect.sync(() => subscribers.delete(subscriber)), Queue.shutdown(queue))
    )
    yield* Effect.forkScoped(Effect.zipRight(options.closing, Deferred.succeed(subscriber.closing, undefined)))
    yield* Effect.forkScoped(Effect.zipRight(options.agentClosed, subscriber.end))
    return Stream.fromQueue(queue).pipe(Stream.flattenTake)
  }))

  const end = Effect.suspend(() => {
    ended = true
    return Effect.forEach(Array.from(subscribers), (subscriber) => subscriber.end, { discard: true })
  })

  return { publish, subscribe, end }
}
