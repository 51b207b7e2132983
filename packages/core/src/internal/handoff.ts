/**
 * A bounded buffer of `Take`s from a run's producer to its one consumer: the stdout lines of a
 * process to its run, a run's events to the run's stream. It behaves as `Queue.bounded` read with
 * `Stream.fromQueue(…).pipe(Stream.flattenTake)` did here (capacity counted in takes, offers wait
 * for room, a shutdown interrupts whoever waits and refuses later offers), with one difference
 * that matters: what passed through it is garbage once read.
 *
 * Through an Effect `Queue` whose producer is woken by I/O (a process's stdout), every chunk of a
 * run survived V8's young-generation collections and was promoted (measured: a run of 10,000
 * events promoted about a run's worth of lines and events per collection, and the same happened
 * with `MutableList`'s removed nodes unlinked and with V8's allocation-site pretenuring off). An
 * array and two `Deferred` wake-ups, as here, keep nothing once a take is read.
 *
 * @internal
 */
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"

/** @internal */
export interface Handoff<A, E> {
  /** Waits while the buffer is full; interrupts once it is shut down. */
  readonly offer: (take: Take.Take<A, E>) => Effect.Effect<void>
  /** Offers at once when there is room (and the buffer is open): whether it did. */
  readonly unsafeOffer: (take: Take.Take<A, E>) => boolean
  /** Offers at once past the capacity (when the buffer is open): whether it did. */
  readonly unsafeForce: (take: Take.Take<A, E>) => boolean
  /**
   * Offers when called if there is room (the effect returned is then `Effect.void`, holding
   * nothing); otherwise the effect is `offer`'s, waiting for room. For a caller that runs it at once.
   */
  readonly offerNow: (take: Take.Take<A, E>) => Effect.Effect<void>
  /**
   * The next take's values: fails with `None` at `Take.end`, `Some` with the take's failure.
   * Waits while the buffer is empty; interrupts once it is shut down.
   */
  readonly pull: Effect.Effect<Chunk.Chunk<A>, Option.Option<E>>
  /**
   * The takes' values until `Take.end` (or their failure). One reader at a time; a reader that
   * stops leaves the takes it did not pull for the next one.
   */
  readonly stream: Stream.Stream<A, E>
  /** Discards what is buffered, interrupts a waiting reader or writer. Idempotent. */
  readonly shutdown: Effect.Effect<void>
  /** The takes offered and not yet read. */
  readonly size: () => number
  /** Whether `shutdown` has run. */
  readonly isShutdown: () => boolean
}

/** @internal */
export const make = <A, E>(capacity: number): Handoff<A, E> => {
  // `items[head…]` are waiting; read slots are cleared, and the array is reset once drained.
  const items: Array<Take.Take<A, E>> = []
  let head = 0
  let closed = false
  let readable: Deferred.Deferred<void> | undefined
  let writable: Deferred.Deferred<void> | undefined
  const wake = (deferred: Deferred.Deferred<void> | undefined) => {
    if (deferred !== undefined) Deferred.unsafeDone(deferred, Exit.void)
  }
  const unsafeForce = (take: Take.Take<A, E>): boolean => {
    if (closed) return false
    items.push(take)
    const waiting = readable
    readable = undefined
    wake(waiting)
    return true
  }
  const unsafeOffer = (take: Take.Take<A, E>): boolean => items.length - head < capacity && unsafeForce(take)
  const offer = (take: Take.Take<A, E>): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (closed) return Effect.interrupt
      if (unsafeOffer(take)) return Effect.void
      writable ??= Deferred.unsafeMake<void>(FiberId.none)
      return Effect.zipRight(Deferred.await(writable), offer(take))
    })
  const pull: Effect.Effect<Chunk.Chunk<A>, Option.Option<E>> = Effect.suspend(() => {
    if (head < items.length) {
      const take = items[head]!
      items[head++] = undefined as never
      if (head === items.length) {
        items.length = 0
        head = 0
      }
      const waiting = writable
      writable = undefined
      wake(waiting)
      return Take.done(take)
    }
    if (closed) return Effect.interrupt
    readable ??= Deferred.unsafeMake<void>(FiberId.none)
    return Effect.zipRight(Deferred.await(readable), pull)
  })
  return {
    offer,
    unsafeOffer,
    unsafeForce,
    offerNow: (take) => unsafeOffer(take) ? Effect.void : offer(take),
    pull,
    stream: Stream.repeatEffectChunkOption(pull),
    size: () => items.length - head,
    isShutdown: () => closed,
    shutdown: Effect.sync(() => {
      closed = true
      items.length = 0
      head = 0
      if (readable !== undefined) Deferred.unsafeDone(readable, Exit.interrupt(FiberId.none))
      if (writable !== undefined) Deferred.unsafeDone(writable, Exit.interrupt(FiberId.none))
      readable = writable = undefined
    })
  }
}
