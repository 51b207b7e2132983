/**
 * The runs a router serves: each run's events in a bounded replay buffer, the clients reading
 * them (a frame a connected client has not read is never evicted: the run waits for it), and the
 * run's cancellation (on request, or when its last client has been gone for the reconnect grace).
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

/** A connected reader of a run: the id of the last frame it was given (-1: none yet). @internal */
export interface Reader {
  last: number
}

/** @internal */
export interface Entry {
  readonly key: string
  /** The ids of the runs this turn carried (a rejected resume retried fresh carries two). */
  readonly runIds: Set<string>
  /** The ids of the approvals this turn asked for: they are answered through its runs' URLs only. */
  readonly approvals: Set<string>
  readonly capacity: number
  readonly frames: Array<Frame>
  /** The id of the newest frame evicted from the buffer (-1: none). */
  evictedUpTo: number
  lastId: number
  offset: number
  done: boolean
  /** Completed (and replaced) at every change: a new frame, or the end. */
  changed: Deferred.Deferred<void>
  /** Completed (and replaced) whenever a reader moves on or leaves: a waiting publisher looks again. */
  progress: Deferred.Deferred<void>
  readonly finished: Deferred.Deferred<void>
  /** Completing it cancels the run (see `Agent.Turn.cancel`). */
  readonly cancel: Deferred.Deferred<void>
  /** Completed when the router starts closing: its runs' publishers stop waiting for readers. */
  readonly closing: Deferred.Deferred<void>
  /** The connected readers (the requester's reservation included), whose unread frames are kept. */
  readonly readers: Set<Reader>
  /** Bumped whenever the readers change, so a stale grace timer does nothing. */
  generation: number
  /** Whether a `RunFinished` arrived (the stream ending otherwise is an error frame). */
  sawFinished: boolean
}

/** @internal */
export const makeEntry = (key: string, capacity: number, closing: Deferred.Deferred<void>): Effect.Effect<Entry> =>
  Effect.map(
    Effect.all([Deferred.make<void>(), Deferred.make<void>(), Deferred.make<void>(), Deferred.make<void>()]),
    ([changed, progress, finished, cancel]): Entry => ({
      key,
      runIds: new Set(),
      approvals: new Set(),
      capacity,
      frames: [],
      evictedUpTo: -1,
      lastId: -1,
      offset: 0,
      done: false,
      changed,
      progress,
      finished,
      cancel,
      closing,
      readers: new Set(),
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

const wake = (entry: Entry): Effect.Effect<void> =>
  Effect.suspend(() => {
    const previous = entry.progress
    entry.progress = Deferred.unsafeMake(FiberId.none)
    return Deferred.succeed(previous, undefined)
  })

/**
 * Evicts the oldest frames every connected reader has read while the buffer is full; whether
 * there is room for one more frame.
 */
const makeRoom = (entry: Entry): boolean => {
  if (entry.frames.length < entry.capacity) return true
  let slowest = Infinity
  for (const reader of entry.readers) slowest = Math.min(slowest, reader.last)
  while (entry.frames.length >= entry.capacity && entry.frames[0]!.id <= slowest) {
    entry.evictedUpTo = entry.frames.shift()!.id
  }
  return entry.frames.length < entry.capacity
}

/**
 * Waits until the buffer has room: a full buffer whose oldest frame a connected reader has not
 * read yet holds the publisher (and so the run: see the agent's event policy) until that reader
 * moves on or leaves. A run being canceled, or a router closing, waits for nobody: its last events
 * are added past the capacity (what the agent's own buffer still held for the run, at most its
 * `events.buffer` batches, and the run's last events: moved here, not new ones).
 */
const room = (entry: Entry): Effect.Effect<void> =>
  Effect.suspend(() => {
    // Taken before looking: a reader that moves on from now on completes this one.
    const progress = entry.progress
    if (makeRoom(entry)) return Effect.void
    return Effect.flatMap(
      Effect.zip(Deferred.isDone(entry.cancel), Deferred.isDone(entry.closing)),
      ([canceled, closing]) =>
        canceled || closing ? Effect.void : Effect.zipRight(
          Effect.raceAll([
            Deferred.await(progress),
            Deferred.await(entry.cancel),
            Deferred.await(entry.closing)
          ]),
          room(entry)
        )
    )
  })

/**
 * Buffers one event and wakes the readers. When the buffer is full, the oldest frames every
 * connected reader has read are evicted; while the slowest connected reader has not read the
 * oldest one, this waits for it (see `room`). @internal
 */
export const publish = (entry: Entry, event: Event.Event | undefined): Effect.Effect<void> =>
  Effect.zipRight(
    room(entry),
    Effect.suspend(() => {
      if (event?._tag === "RunStarted" && entry.runIds.size > 0) entry.offset = entry.lastId + 1
      if (event?._tag === "RunStarted") entry.runIds.add(event.runId)
      if (event?._tag === "RunFinished") entry.sawFinished = true
      const id = event === undefined ? entry.lastId + 1 : entry.offset + event.sequence
      entry.lastId = id
      entry.frames.push({ id, event })
      return signal(entry)
    })
  )

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
const expiredItem: Item = { _tag: "Expired" }

type Timers = { readonly grace: Duration.Duration; readonly timers: FiberSet.FiberSet<void, never> }

/**
 * A reader's place held for the client that started the run, from before the run starts until
 * that client's response stream takes it (`subscribe`) or the request ends without reading
 * (`release`): the grace counts from when the requester stops reading, never before it started,
 * and the run's frames are kept for it from the first one.
 *
 * @internal
 */
export interface Reservation {
  held: boolean
  readonly reader: Reader
}

/** Counts a reader (at the run's start) for the entry until the reservation is taken over or released. @internal */
export const reserve = (entry: Entry): Effect.Effect<Reservation> =>
  Effect.sync(() => {
    const reader: Reader = { last: -1 }
    entry.readers.add(reader)
    entry.generation++
    return { held: true, reader }
  })

/** Gives the reserved place up (once; nothing after a `subscribe` took it over). @internal */
export const release = (entry: Entry, reservation: Reservation, options: Timers): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (!reservation.held) return Effect.void
    reservation.held = false
    return leave(entry, reservation.reader, options)
  })

/**
 * The frames after `after` (-1: from the start), then each new one until the run's end; a
 * heartbeat whenever `idle` passes without one. While the stream is read the entry counts it as a
 * connected reader (taking over `reservation`'s place when it is still held): no frame it has not
 * read is evicted, the publisher waits for it instead. A reader that comes after the frames it
 * asks for were evicted gets `Expired` and ends, without ever counting as a reader. When the last
 * reader leaves before the end, the run is canceled after `grace` unless a reader comes back.
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
    const reader = yield* Effect.acquireRelease(
      Effect.sync((): Reader | undefined => {
        if (reservation?.held === true) {
          reservation.held = false
          reservation.reader.last = after
          entry.generation++
          return reservation.reader
        }
        // Evicted between the request's check and now: this reader never joins.
        if (expired(entry, after)) return undefined
        const joined: Reader = { last: after }
        entry.readers.add(joined)
        entry.generation++
        return joined
      }),
      (joined) => joined === undefined ? Effect.void : leave(entry, joined, options)
    )
    if (reader === undefined) return Stream.make(expiredItem)
    const next: Effect.Effect<Chunk.Chunk<Item>, Option.Option<never>> = Effect.suspend(() => {
      let from = entry.frames.length
      while (from > 0 && entry.frames[from - 1]!.id > reader.last) from--
      if (from < entry.frames.length) {
        const fresh = entry.frames.slice(from).map((frame): Item => ({ _tag: "Frame", frame }))
        reader.last = entry.lastId
        return Effect.as(wake(entry), Chunk.unsafeFromArray(fresh))
      }
      if (entry.done) return Effect.fail(Option.none())
      return Deferred.await(entry.changed).pipe(
        Effect.timeout(options.idle),
        Effect.match({ onFailure: () => Chunk.of(heartbeatItem), onSuccess: () => Chunk.empty<Item>() })
      )
    })
    return Stream.repeatEffectChunkOption(next)
  }))

const leave = (entry: Entry, reader: Reader, options: Timers): Effect.Effect<void> =>
  Effect.suspend(() => {
    entry.readers.delete(reader)
    entry.generation++
    return Effect.zipRight(wake(entry), watch(entry, options))
  })

/**
 * Cancels the run after the grace unless a reader comes (or the run ends) first; nothing when
 * it has readers.
 */
const watch = (entry: Entry, options: Timers): Effect.Effect<void> =>
  Effect.suspend(() => {
    const generation = entry.generation
    if (entry.readers.size > 0 || entry.done) return Effect.void
    if (Duration.toMillis(options.grace) <= 0) return Deferred.succeed(entry.cancel, undefined)
    // May be forked from a finalizer: the timer must stay interruptible (the router's close ends it).
    return FiberSet.run(
      options.timers,
      Effect.interruptible(
        Effect.sleep(options.grace).pipe(
          Effect.zipRight(Effect.suspend(() =>
            entry.generation === generation && entry.readers.size === 0 && !entry.done
              ? Deferred.succeed(entry.cancel, undefined)
              : Effect.void
          )),
          Effect.asVoid
        )
      )
    ).pipe(Effect.asVoid)
  })
