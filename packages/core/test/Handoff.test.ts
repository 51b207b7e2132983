/**
 * The bounded buffer between a run's stages (stdout lines → the run, the run's events → its
 * consumer): order, ends, backpressure and shutdown, as `Queue` + `Stream.fromQueue` gave them.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"
import * as Handoff from "../src/internal/handoff.js"

const chunk = (...values: Array<number>) => Take.chunk(Chunk.unsafeFromArray(values))

/** Lets every forked fiber run until it waits. */
const settle = Effect.repeatN(Effect.yieldNow(), 20)

describe("Handoff", () => {
  it.effect("delivers the takes in order and ends at Take.end", () =>
    Effect.gen(function*() {
      const handoff = Handoff.make<number, string>(8)
      yield* handoff.offer(chunk(1, 2))
      expect(handoff.unsafeOffer(chunk(3))).toBe(true)
      // With room, offerNow has offered before its effect runs, and the effect holds nothing.
      expect(handoff.offerNow(chunk())).toBe(Effect.void)
      expect(handoff.size()).toBe(3)
      yield* handoff.offer(Take.of(4))
      yield* handoff.offer(Take.end)
      expect(handoff.size()).toBe(5)
      expect(Chunk.toReadonlyArray(yield* Stream.runCollect(handoff.stream))).toEqual([1, 2, 3, 4])
      expect(handoff.size()).toBe(0)
    }))

  it.effect("a failed take fails the stream after the values before it", () =>
    Effect.gen(function*() {
      const handoff = Handoff.make<number, string>(8)
      yield* handoff.offer(chunk(1))
      yield* handoff.offer(Take.fail("boom"))
      const seen: Array<number> = []
      const exit = yield* Effect.exit(Stream.runForEach(handoff.stream, (n) => Effect.sync(() => seen.push(n))))
      expect(seen).toEqual([1])
      expect(exit).toEqual(Exit.fail("boom"))
    }))

  it.effect("pull gives one take's values at a time; None at Take.end, Some with a take's failure", () =>
    Effect.gen(function*() {
      const handoff = Handoff.make<number, string>(8)
      yield* handoff.offer(chunk(1, 2))
      yield* handoff.offer(chunk(3))
      yield* handoff.offer(Take.end)
      expect(Chunk.toReadonlyArray(yield* handoff.pull)).toEqual([1, 2])
      expect(Chunk.toReadonlyArray(yield* handoff.pull)).toEqual([3])
      expect(yield* Effect.exit(handoff.pull)).toEqual(Exit.fail(Option.none()))
      const failing = Handoff.make<number, string>(8)
      yield* failing.offer(Take.fail("boom"))
      expect(yield* Effect.exit(failing.pull)).toEqual(Exit.fail(Option.some("boom")))
    }))

  it.effect("a reader waits for the next take; a writer waits for room past the capacity", () =>
    Effect.gen(function*() {
      const handoff = Handoff.make<number, never>(2)
      const reader = yield* Effect.fork(Stream.runCollect(handoff.stream))
      yield* settle
      expect(reader.unsafePoll()).toBeNull()
      // The reader takes the first at once; then two fill the buffer and the fourth waits.
      yield* handoff.offer(Take.of(1))
      yield* settle
      expect(handoff.size()).toBe(0)
      expect(reader.unsafePoll()).toBeNull()
      yield* Fiber.interrupt(reader)
      yield* handoff.offer(Take.of(2))
      yield* handoff.offer(Take.of(3))
      expect(handoff.unsafeOffer(Take.of(4))).toBe(false)
      // Without room, offerNow's effect is the waiting offer.
      const writer = yield* Effect.fork(
        Effect.zipRight(handoff.offerNow(Take.of(4)), handoff.offer(Take.end))
      )
      yield* settle
      expect(writer.unsafePoll()).toBeNull()
      expect(handoff.size()).toBe(2)
      // A second reader, after the first stopped, goes on where it left off.
      expect(Chunk.toReadonlyArray(yield* Stream.runCollect(handoff.stream))).toEqual([2, 3, 4])
      expect(yield* Fiber.await(writer)).toEqual(Exit.void)
    }))

  it.effect("shutdown interrupts a waiting reader and a waiting writer; later offers are refused", () =>
    Effect.gen(function*() {
      const empty = Handoff.make<number, never>(1)
      const reader = yield* Effect.fork(Stream.runCollect(empty.stream))
      const full = Handoff.make<number, never>(1)
      yield* full.offer(Take.of(1))
      const writer = yield* Effect.fork(full.offer(Take.of(2)))
      yield* settle
      yield* empty.shutdown
      yield* full.shutdown
      expect(Exit.isInterrupted(yield* Fiber.await(reader))).toBe(true)
      expect(Exit.isInterrupted(yield* Fiber.await(writer))).toBe(true)
      expect(full.size()).toBe(0)
      expect(full.unsafeOffer(Take.of(3))).toBe(false)
      expect(Exit.isInterrupted(yield* Effect.exit(full.offer(Take.of(3))))).toBe(true)
      expect(Exit.isInterrupted(yield* Effect.exit(Stream.runCollect(full.stream)))).toBe(true)
    }))
})
