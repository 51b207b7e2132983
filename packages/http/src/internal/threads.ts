/**
 * The thread handles a router keeps open: one per thread key (and per way of opening it), shared
 * by that key's requests and runs. A handle's close retires the thread's warm live process, so a
 * handle opened and closed per request would make every turn start a cold one: the handles of a
 * key close only once the key has been idle for the idle timeout, when more keys than the cap are
 * open (least recently used idle keys first), and with the router's scope.
 *
 * @internal
 */
import type * as Thread from "@tether/core/Thread"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import * as FiberSet from "effect/FiberSet"
import type * as Scope from "effect/Scope"

/** How a handle was opened: continue-or-start, or `resumeOnly` (its turns fail when nothing is committed). @internal */
export type Mode = "continue" | "resumeOnly"

interface Slot<E> {
  readonly key: string
  readonly handles: Map<Mode, Deferred.Deferred<Thread.Thread, E>>
  /** Requests and runs using the key's handles now. */
  users: number
  lastUsed: number
  /** Whether an idle timer is armed for the slot. */
  timed: boolean
}

/** @internal */
export interface Pool<E> {
  /**
   * Runs `f` with the key's handle opened in `mode` (opening it when the key has none), counting
   * as a user of the key until `f` ends. Fails with the opening's failure, or `closed` once the
   * router's scope is closing.
   */
  readonly use: <A, E2, R>(
    key: string,
    mode: Mode,
    f: (thread: Thread.Thread) => Effect.Effect<A, E2, R>
  ) => Effect.Effect<A, E | E2, R>
}

/**
 * The pool, in the router's scope: closing the scope closes every handle (canceling the turns
 * still running on them) and waits for the closes.
 *
 * @internal
 */
export const make = <E>(options: {
  readonly open: (key: string, mode: Mode) => Effect.Effect<Thread.Thread, E>
  /** The failure of a request that comes once the router is closing. */
  readonly closed: E
  readonly idleTimeout: Duration.Duration
  readonly max: number
}): Effect.Effect<Pool<E>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const idleMillis = Duration.toMillis(options.idleTimeout)
    const max = Math.max(1, options.max)
    // Opens, idle timers and closes run on the router's fibers: a request that goes away leaves
    // none of them half done.
    const fibers = yield* FiberSet.make<void, never>()
    // In least recently used order (a key is moved to the end when used).
    const slots = new Map<string, Slot<E>>()
    const closing = new Map<string, Deferred.Deferred<void>>()
    let closed = false

    // Takes the slot out at once (a request for its key now waits for the close, so its next
    // handle never races the retirement of the warm process); the effect closes its handles.
    const beginClose = (slot: Slot<E>): Effect.Effect<void> => {
      if (slots.get(slot.key) === slot) slots.delete(slot.key)
      const done = Deferred.unsafeMake<void>(FiberId.none)
      closing.set(slot.key, done)
      return Effect.forEach(
        Array.from(slot.handles.values()),
        (handle) => Effect.ignore(Effect.flatMap(Deferred.await(handle), (thread) => thread.close)),
        { concurrency: "unbounded", discard: true }
      ).pipe(
        Effect.ensuring(Effect.suspend(() => {
          if (closing.get(slot.key) === done) closing.delete(slot.key)
          return Deferred.succeed(done, undefined)
        })),
        Effect.uninterruptible
      )
    }

    // One timer per idle slot: it sleeps until the slot has been idle for the timeout (a use in
    // between moves that moment on), then closes it.
    const idleTimer = (slot: Slot<E>): Effect.Effect<void> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        if (slots.get(slot.key) !== slot || slot.users > 0) {
          slot.timed = false
          return Effect.void
        }
        const remaining = slot.lastUsed + idleMillis - now
        if (remaining > 0) {
          return Effect.zipRight(Effect.interruptible(Effect.sleep(Duration.millis(remaining))), idleTimer(slot))
        }
        slot.timed = false
        return beginClose(slot)
      })

    type Entered =
      | { readonly _tag: "Slot"; readonly slot: Slot<E> }
      | { readonly _tag: "Closing"; readonly done: Deferred.Deferred<void> }
      | { readonly _tag: "Closed" }

    const enter = (key: string): Effect.Effect<Entered> =>
      Effect.suspend((): Effect.Effect<Entered> => {
        if (closed) return Effect.succeed({ _tag: "Closed" })
        // The key's previous handles are still closing: its next handle opens after that.
        const done = closing.get(key)
        if (done !== undefined) return Effect.succeed({ _tag: "Closing", done })
        let slot = slots.get(key)
        if (slot !== undefined) {
          slots.delete(key)
        } else {
          slot = { key, handles: new Map(), users: 0, lastUsed: 0, timed: false }
        }
        slots.set(key, slot)
        slot.users++
        const entered: Entered = { _tag: "Slot", slot }
        return Effect.as(makeRoom, entered)
      })

    // Over the cap: the least recently used idle keys close (a key in use is never closed for
    // room: while every key is in use the count may exceed the cap). Checked when a key is used
    // and when one goes idle: after a burst of turns on more keys than the cap, the keys beyond
    // it close as their turns end, not at the next request or their idle timeout.
    const makeRoom: Effect.Effect<void> = Effect.suspend(() => {
      if (slots.size <= max) return Effect.void
      const excess: Array<Slot<E>> = []
      for (const candidate of slots.values()) {
        if (slots.size - excess.length <= max) break
        if (candidate.users === 0) excess.push(candidate)
      }
      const closes = excess.map(beginClose)
      return Effect.forEach(closes, (close) => FiberSet.run(fibers, close), { discard: true })
    })

    const leave = (slot: Slot<E>): Effect.Effect<void> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        slot.users--
        slot.lastUsed = now
        if (slot.users > 0 || slots.get(slot.key) !== slot) return Effect.void
        // A key none of whose handles opened keeps nothing open.
        if (slot.handles.size === 0) {
          slots.delete(slot.key)
          return Effect.void
        }
        // Room first (this key may be the least recently used one), then the idle timer of a key
        // still open.
        return Effect.zipRight(
          makeRoom,
          Effect.suspend(() => {
            if (slot.timed || slots.get(slot.key) !== slot) return Effect.void
            slot.timed = true
            return Effect.asVoid(FiberSet.run(fibers, idleTimer(slot)))
          })
        )
      })

    const handle = (slot: Slot<E>, mode: Mode): Effect.Effect<Thread.Thread, E> =>
      Effect.suspend(() => {
        const existing = slot.handles.get(mode)
        if (existing !== undefined) return Deferred.await(existing)
        // Past the close's start the fibers' set may be closed too: nothing opens any more.
        if (closed) return Effect.fail(options.closed)
        const opening = Deferred.unsafeMake<Thread.Thread, E>(FiberId.none)
        slot.handles.set(mode, opening)
        const open = options.open(slot.key, mode).pipe(
          Effect.exit,
          Effect.flatMap((exit) => {
            // A failed opening is not kept: the next request tries again.
            if (exit._tag === "Failure" && slot.handles.get(mode) === opening) slot.handles.delete(mode)
            return Deferred.done(opening, exit)
          }),
          Effect.onInterrupt(() =>
            Effect.suspend(() => {
              if (slot.handles.get(mode) === opening) slot.handles.delete(mode)
              return Deferred.fail(opening, options.closed)
            })
          ),
          Effect.asVoid
        )
        return Effect.zipRight(FiberSet.run(fibers, open), Deferred.await(opening))
      })

    const use = <A, E2, R>(
      key: string,
      mode: Mode,
      f: (thread: Thread.Thread) => Effect.Effect<A, E2, R>
    ): Effect.Effect<A, E | E2, R> =>
      Effect.acquireUseRelease(
        enter(key),
        (entered): Effect.Effect<A, E | E2, R> => {
          switch (entered._tag) {
            case "Closed":
              return Effect.fail(options.closed)
            case "Closing":
              return Effect.zipRight(Deferred.await(entered.done), use(key, mode, f))
            case "Slot":
              return Effect.flatMap(handle(entered.slot, mode), f)
          }
        },
        (entered) => entered._tag === "Slot" ? leave(entered.slot) : Effect.void
      )

    // Registered after the fibers' set: runs before it, so the turns still running are canceled
    // by their thread's close (their readers get `RunFinished`), then the timers are interrupted.
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        closed = true
        const closes = Array.from(slots.values()).map(beginClose)
        return Effect.zipRight(
          Effect.all(closes, { concurrency: "unbounded", discard: true }),
          Effect.forEach(Array.from(closing.values()), Deferred.await, { discard: true })
        )
      })
    )

    return { use }
  })
