/**
 * The runs a router serves: each run's events in a bounded replay buffer, the clients reading
 * them, and the run's cancellation (on request, or when its last client has been gone for the
 * reconnect grace).
 *
 * @internal
 */
import type * as Event from "@tether/core/Event"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"

/** One buffered event: its SSE id (the event's sequence, continued across a retried run). @internal */
export interface Frame {
  readonly id: number
  readonly event: Event.Event | undefined
}

/** @internal */
export interface Entry {
  readonly key: string
  /** The ids of the runs this turn carried (a rejected resume retried fresh carries two). */
  readonly runIds: Set<string>
  readonly capacity: number
  readonly frames: Array<Frame>
  /** The id of the newest frame evicted from the buffer (-1: none). */
  evictedUpTo: number
  lastId: number
  offset: number
  done: boolean
  /** Completed (and replaced) at every change: a new frame, or the end. */
  changed: Deferred.Deferred<void>
  readonly finished: Deferred.Deferred<void>
  /** Completing it cancels the run (see `Agent.Turn.cancel`). */
  readonly cancel: Deferred.Deferred<void>
  subscribers: number
  /** Bumped whenever the subscriber count changes, so a stale grace timer does nothing. */
  generation: number
  /** Whether a `RunFinished` arrived (the stream ending otherwise is an error frame). */
  sawFinished: boolean
}

/** @internal */
export const makeEntry = (key: string, capacity: number): Effect.Effect<Entry> =>
  Effect.map(
    Effect.all([Deferred.make<void>(), Deferred.make<void>(), Deferred.make<void>()]),
    ([changed, finished, cancel]): Entry => ({
      key,
      runIds: new Set(),
      capacity,
      frames: [],
      evictedUpTo: -1,
      lastId: -1,
      offset: 0,
      done: false,
      changed,
      finished,
      cancel,
      subscribers: 0,
      generation: 0,
      sawFinished: false
    })
  )

const signal = (entry: Entry): Effect.Effect<void> =>
  Effect.suspend(() => {
    const previous = entry.changed
    entry.changed = Deferred.unsafeMake(FiberId.none)
    return Deferred.succeed(previous, undefined)
  })

/** Buffers one event (evicting the oldest past the capacity) and wakes the readers. @internal */
export const publish = (entry: Entry, event: Event.Event | undefined): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (event?._tag === "RunStarted" && entry.runIds.size > 0) entry.offset = entry.lastId + 1
    if (event?._tag === "RunStarted") entry.runIds.add(event.runId)
    if (event?._tag === "RunFinished") entry.sawFinished = true
    const id = event === undefined ? entry.lastId + 1 : entry.offset + event.sequence
    entry.lastId = id
    entry.frames.push({ id, event })
    if (entry.frames.length > entry.capacity) entry.evictedUpTo = entry.frames.shift()!.id
    return signal(entry)
  })

/** Marks the end of the run's events. @internal */
export const end = (entry: Entry): Effect.Effect<void> =>
  Effect.suspend(() => {
    entry.done = true
    return Effect.zipRight(signal(entry), Deferred.succeed(entry.finished, undefined))
  })

/** Whether a reader that saw `after` has lost events to eviction. @internal */
export const expired = (entry: Entry, after: number): boolean => after < entry.evictedUpTo

/** What a reader gets: buffered frames, a heartbeat after an idle interval, or the loss of events. @internal */
export type Item =
  | { readonly _tag: "Frame"; readonly frame: Frame }
  | { readonly _tag: "Heartbeat" }
  | { readonly _tag: "Expired" }

const heartbeatItem: Item = { _tag: "Heartbeat" }

type Timers = { readonly grace: Duration.Duration; readonly timers: FiberSet.FiberSet<void, never> }

/**
 * A reader's place held for the client that started the run, from before the run starts until
 * that client's response stream takes it (`subscribe`) or the request ends without reading
 * (`release`): the grace counts from when the requester stops reading, never before it started.
 *
 * @internal
 */
export interface Reservation {
  held: boolean
}

/** Counts a reader for the entry until the reservation is taken over or released. @internal */
export const reserve = (entry: Entry): Effect.Effect<Reservation> =>
  Effect.sync(() => {
    entry.subscribers++
    entry.generation++
    return { held: true }
  })

/** Gives the reserved place up (once; nothing after a `subscribe` took it over). @internal */
export const release = (entry: Entry, reservation: Reservation, options: Timers): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (!reservation.held) return Effect.void
    reservation.held = false
    return leave(entry, options)
  })

/**
 * The frames after `after` (-1: from the start), then each new one until the run's end; a
 * heartbeat whenever `idle` passes without one. A reader that falls behind the buffer gets
 * `Expired` and ends. While the stream is read the entry counts a subscriber (taking over
 * `reservation`'s place when it is still held); when the last one leaves before the end, the run
 * is canceled after `grace` unless a reader comes back.
 *
 * @internal
 */
export const subscribe = (
  entry: Entry,
  after: number,
  options: {
    readonly idle: Duration.Duration
    readonly grace: Duration.Duration
    readonly timers: FiberSet.FiberSet<void, never>
  },
  reservation?: Reservation
): Stream.Stream<Item> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        if (reservation?.held === true) {
          reservation.held = false
        } else {
          entry.subscribers++
        }
        entry.generation++
      }),
      () => leave(entry, options)
    )
    let last = after
    let ended = false
    const next: Effect.Effect<Chunk.Chunk<Item>, Option.Option<never>> = Effect.suspend(() => {
      if (ended) return Effect.fail(Option.none())
      if (expired(entry, last)) {
        ended = true
        return Effect.succeed(Chunk.of<Item>({ _tag: "Expired" }))
      }
      let from = entry.frames.length
      while (from > 0 && entry.frames[from - 1]!.id > last) from--
      if (from < entry.frames.length) {
        const fresh = entry.frames.slice(from).map((frame): Item => ({ _tag: "Frame", frame }))
        last = entry.lastId
        return Effect.succeed(Chunk.unsafeFromArray(fresh))
      }
      if (entry.done) return Effect.fail(Option.none())
      return Deferred.await(entry.changed).pipe(
        Effect.timeout(options.idle),
        Effect.match({ onFailure: () => Chunk.of(heartbeatItem), onSuccess: () => Chunk.empty<Item>() })
      )
    })
    return Stream.repeatEffectChunkOption(next)
  }))

const leave = (entry: Entry, options: Timers): Effect.Effect<void> =>
  Effect.suspend(() => {
    entry.subscribers--
    entry.generation++
    return watch(entry, options)
  })

/**
 * Cancels the run after the grace unless a reader comes (or the run ends) first; nothing when
 * it has readers.
 */
const watch = (entry: Entry, options: Timers): Effect.Effect<void> =>
  Effect.suspend(() => {
    const generation = entry.generation
    if (entry.subscribers > 0 || entry.done) return Effect.void
    if (Duration.toMillis(options.grace) <= 0) return Deferred.succeed(entry.cancel, undefined)
    // May be forked from a finalizer: the timer must stay interruptible (the router's close ends it).
    return FiberSet.run(
      options.timers,
      Effect.interruptible(
        Effect.sleep(options.grace).pipe(
          Effect.zipRight(Effect.suspend(() =>
            entry.generation === generation && entry.subscribers === 0 && !entry.done
              ? Deferred.succeed(entry.cancel, undefined)
              : Effect.void
          )),
          Effect.asVoid
        )
      )
    ).pipe(Effect.asVoid)
  })
