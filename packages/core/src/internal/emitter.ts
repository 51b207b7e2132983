/**
 * Stamps run events (runId, strictly increasing sequence, time) and publishes them on the
 * run's bounded queue. Under backpressure content deltas are dropped and counted in a
 * `Dropped` that precedes the next critical event; in blocking mode nothing is dropped.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Take from "effect/Take"
import type { RunError } from "../AgentError.js"
import * as Event from "../Event.js"
import type * as Handoff from "./handoff.js"

function fastDelta<A extends Event.TextDelta | Event.ReasoningDelta>(
  constructor: { readonly prototype: A },
  tag: A["_tag"]
): (runId: string, sequence: number, time: number, text: string) => A {
  function Delta(this: Record<string, unknown>, runId: string, sequence: number, time: number, text: string) {
    this["runId"] = runId
    this["sequence"] = sequence
    this["time"] = time
    this["text"] = text
    this["_tag"] = tag
  }
  Delta.prototype = constructor.prototype
  const Constructor = Delta as unknown as new(runId: string, sequence: number, time: number, text: string) => A
  return (runId, sequence, time, text) => new Constructor(runId, sequence, time, text)
}

/** The stamp every event carries. @internal */
export interface Base {
  readonly runId: string
  readonly sequence: number
  readonly time: number
}

/**
 * An event to publish: a critical event built when it is stamped, or a content delta (which
 * may be dropped under backpressure) built on the fast path. A driver's `TextDelta` or
 * `ReasoningDelta` output is a content delta as it is: a run hands it over without a copy.
 *
 * @internal
 */
export type Pending =
  | { readonly _tag?: undefined; readonly build: (base: Base) => Event.Event }
  | { readonly _tag: "TextDelta" | "ReasoningDelta"; readonly text: string; readonly build?: undefined }

/** @internal */
export interface Emitter {
  /**
   * Publishes the events in order (backpressure on critical events). Nothing is published after
   * the run's `RunFinished`: an input acknowledged by the provider once the run has ended (its
   * `InputDelivered`) is not the run's any more.
   */
  readonly emit: (pending: ReadonlyArray<Pending>) => Effect.Effect<void>
  /**
   * The same, stamped and (when the queue has room) published when called rather than when the
   * returned effect runs; the effect then only waits for room. For a caller that runs the effect
   * at once: a batch that went straight to the queue leaves no effect holding its events (an
   * effect that holds a run's data keeps it through V8's young-generation collections).
   */
  readonly emitNow: (pending: ReadonlyArray<Pending>) => Effect.Effect<void>
  readonly end: (error: RunError | undefined) => Effect.Effect<void>
  /** Ends the stream with a defect (a bug), kept whole. */
  readonly failCause: (cause: Cause.Cause<never>) => Effect.Effect<void>
}

/**
 * Content-delta events built on the hot path from fields already known to be valid: the same
 * own properties, in the same order, and the same prototype as the class constructor gives
 * (so `instanceof`, equality and encoding hold), without its per-instance cost.
 *
 * @internal
 */
export const textDelta: (runId: string, sequence: number, time: number, text: string) => Event.TextDelta = fastDelta(
  Event.TextDelta,
  "TextDelta"
)

/** @internal */
export const reasoningDelta: (runId: string, sequence: number, time: number, text: string) => Event.ReasoningDelta =
  fastDelta(Event.ReasoningDelta, "ReasoningDelta")

/** @internal */
export const critical = (build: (base: Base) => Event.Event): Pending => ({ build })

/**
 * The emitter of a run whose events nobody reads (`Agent.run` without a thread: its caller gets
 * the run's result or error from the run's own exit). Nothing is built, stamped or buffered.
 *
 * @internal
 */
export const discarding: Emitter = {
  emit: () => Effect.void,
  emitNow: () => Effect.void,
  end: () => Effect.void,
  failCause: () => Effect.void
}

/** @internal */
export const make = (
  runId: string,
  queue: Handoff.Handoff<Event.Event, RunError>,
  capacity: number,
  blocking: boolean,
  /** Sees every stamped batch first, whether or not the run's own consumer is still there. */
  observe?: (events: ReadonlyArray<Event.Event>) => Effect.Effect<void>
): Emitter => {
  let sequence = 0
  let dropped = 0
  const droppedKinds = new Set<string>()
  let time = 0
  /** A run's `RunFinished` is its last event: what is emitted after it is dropped (see `emit`). */
  let finished = false
  const stamp = (build: (base: Base) => Event.Event): Event.Event => build({ runId, sequence: sequence++, time })
  const full = () => queue.size() >= capacity
  /** Stamps the batch (dropping deltas when the queue is full and the run does not block). */
  const build = (pending: ReadonlyArray<Pending>): Array<Event.Event> | undefined => {
    if (pending.length === 0 || finished) return undefined
    time = Date.now()
    // Sized once (a dropped delta or an added `Dropped` changes the count: the length is set at the end).
    const events: Array<Event.Event> = new Array(pending.length)
    let count = 0
    const dropping = !blocking && full()
    for (let i = 0; i < pending.length; i++) {
      const item = pending[i]!
      if (item.build === undefined) {
        if (dropping) {
          dropped++
          droppedKinds.add(item._tag)
          continue
        }
        // The hot path: a delta is built from its fields, with no stamp object in between.
        events[count++] = item._tag === "TextDelta"
          ? textDelta(runId, sequence++, time, item.text)
          : reasoningDelta(runId, sequence++, time, item.text)
        continue
      }
      if (dropped > 0) {
        const lost = dropped
        const kinds = Array.from(droppedKinds).sort()
        dropped = 0
        droppedKinds.clear()
        events[count++] = stamp((base) => new Event.Dropped({ ...base, count: lost, kinds }, true))
      }
      const event = stamp(item.build)
      events[count++] = event
      if (event._tag === "RunFinished") {
        finished = true
        break
      }
    }
    if (count === 0) return undefined
    events.length = count
    return events
  }
  /**
   * Offers a take. Once the buffer is shut down (the run's consumer left) the take is dropped
   * instead of interrupting the caller: the observer has seen its events, and what publishes
   * after that is not always the run's own fiber (the caller of `send` publishing its
   * `InputDelivered`, a pending approval settled at the run's end before its `RunFinished`). The
   * run's fiber is interrupted by its consumer's leaving, not by this.
   *
   * A run that is canceled (its fiber interrupted: the agent's or the thread's close, the turn's
   * `cancel`) waits for no consumer: the take it was waiting to offer, and every one after it (the
   * few last events of a canceled run), go past the buffer's capacity. A consumer that stopped
   * reading without leaving would otherwise hold the close that canceled the run, the wait being in
   * the run's uninterruptible end. The wait itself is interruptible for that, and nothing is lost.
   */
  const deliver = (take: Take.Take<Event.Event, RunError>): Effect.Effect<void> =>
    Effect.suspend(() =>
      queue.unsafeOffer(take) ? Effect.void : Effect.flatMap(
        Effect.exit(Effect.interruptible(queue.offer(take))),
        (exit) =>
          exit._tag === "Success"
            ? Effect.void
            // Interrupted while waiting (or already when it began): past the capacity, unless the
            // consumer left (the take is then dropped, as before).
            : Cause.isInterruptedOnly(exit.cause) && (queue.isShutdown() || queue.unsafeForce(take))
            ? Effect.void
            : Effect.failCause(exit.cause)
      )
    )
  const emit = (pending: ReadonlyArray<Pending>): Effect.Effect<void> =>
    Effect.suspend(() => {
      const events = build(pending)
      if (events === undefined) return Effect.void
      const offer = deliver(Take.chunk(Chunk.unsafeFromArray(events)))
      return observe === undefined ? offer : Effect.zipRight(observe(events), offer)
    })
  const emitNow = (pending: ReadonlyArray<Pending>): Effect.Effect<void> => {
    // An observer runs first, and a blocking run waits for room: both stay in the effect.
    if (observe !== undefined || (blocking && full())) return emit(pending)
    const events = build(pending)
    if (events === undefined) return Effect.void
    const take = Take.chunk(Chunk.unsafeFromArray(events))
    return queue.unsafeOffer(take) ? Effect.void : deliver(take)
  }
  const end = (error: RunError | undefined) => deliver(error === undefined ? Take.end : Take.fail(error))
  const failCause = (cause: Cause.Cause<never>) => deliver(Take.failCause(cause))
  return { emit, emitNow, end, failCause }
}
