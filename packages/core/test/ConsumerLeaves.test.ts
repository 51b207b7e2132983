// A live thread turn whose consumer stops reading while something outside the turn's own fiber
// still has to publish on it: an input sent into the turn, an approval the run settles at its end.
// The turn's buffer is shut by then; the publication still reaches `thread.events`, and neither
// the caller of `send` nor the run's end is interrupted by it.
import { describe, expect, it } from "@effect/vitest"
import { Approval, Driver, ThreadStore } from "@tether/core"
import { Reference } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import { watch, withThreads } from "./fixtures/threadTest.js"

/** Starts a turn in the background; resolves once `tag` has been read from it. */
const readUntil = <E>(stream: Stream.Stream<{ readonly _tag: string }, E>, tag: string) =>
  Effect.gen(function*() {
    const seen: Array<string> = []
    const fiber = yield* stream.pipe(
      Stream.runForEach((event) => Effect.sync(() => seen.push(event._tag))),
      Effect.fork
    )
    while (!seen.includes(tag)) yield* Effect.sleep("10 millis")
    return fiber
  })

/** The reference live driver with `patch` applied to each session it attaches. */
const patched = (
  base: Driver.Driver,
  patch: (session: Driver.LiveSession, context: Driver.LiveContext) => Driver.LiveSession,
  approvals = false
): Driver.Driver => ({
  ...base,
  ...(approvals ? { approvals: { live: true } } : {}),
  live: {
    ...base.live!,
    attach: (channel, context) => Effect.map(base.live!.attach(channel, context), (session) => patch(session, context))
  }
})

const tags = (events: ReadonlyArray<{ readonly _tag: string }>) => events.map((event) => event._tag)

describe("a live turn whose consumer leaves", () => {
  it.live("an input sent into it still gets its delivery; nothing follows the run's RunFinished", () => {
    const base = Reference.driver({
      live: true,
      respond: (prompt) =>
        prompt === "long" ? [{ _tag: "$sleep", ms: 30_000, untilInput: false }] : Reference.answer(prompt)
    })
    // The provider acknowledges the input only after the consumer has gone.
    const slowSteer = patched(base, (session) => ({
      ...session,
      steer: (text) => Effect.tap(session.steer!(text), () => Effect.sleep("400 millis"))
    }))
    return withThreads(() => ThreadStore.layerMemory, ({ make }) =>
      Effect.gen(function*() {
        const agent = yield* make(slowSteer)
        const thread = yield* agent.thread("k")
        yield* thread.run("warm")
        const watcher = yield* watch(thread.events)
        const turn = yield* readUntil(thread.stream("long"), "ProcessStarted")
        const send = yield* Effect.fork(thread.send("also this"))
        yield* Effect.sleep("150 millis")
        yield* Fiber.interrupt(turn)
        const exit = yield* Fiber.await(send)
        expect(Exit.isSuccess(exit) ? exit.value : String(exit)).toBe("Injected")
        yield* thread.close
        const observed = tags(yield* Fiber.join(watcher))
        // Acknowledged after the run ended: the input is not the canceled run's event any more
        // (nothing follows a run's RunFinished), the caller has its delivery.
        expect(observed.filter((tag) => tag === "RunFinished")).toHaveLength(1)
        expect(observed).not.toContain("InputDelivered")
        expect(observed.at(-1)).toBe("RunFinished")
      }))
  }, 60_000)

  it.live("an approval still pending is settled deny, and thread.events sees the run's RunFinished", () => {
    const base = Reference.driver({
      live: true,
      respond: (prompt) =>
        prompt === "ask"
          ? [{ _tag: "TextDelta", text: "asking" }, { _tag: "$sleep", ms: 60_000 }]
          : Reference.answer(prompt)
    })
    // The provider asks from a fiber of its own, as a live driver's permission callback does.
    const decisions: Array<Approval.Decision> = []
    const asking = patched(base, (session, context) => ({
      ...session,
      turn: (request) =>
        request.prompt !== "ask" ? session.turn(request) : Stream.merge(
          session.turn(request),
          Stream.execute(Effect.forkDaemon(
            context.approve!({ toolName: "Bash", kind: "command", input: { command: "ls" }, command: "ls" }).pipe(
              Effect.tap((decision) => Effect.sync(() => decisions.push(decision))),
              Effect.delay("100 millis")
            )
          ))
        )
    }), true)
    return withThreads(() => ThreadStore.layerMemory, ({ make }) =>
      Effect.gen(function*() {
        const agent = yield* make(asking, { approvals: {} })
        const thread = yield* agent.thread("k")
        yield* thread.run("warm")
        const watcher = yield* watch(thread.events)
        const turn = yield* readUntil(thread.stream("ask"), "ApprovalRequested")
        yield* Fiber.interrupt(turn)
        yield* thread.close
        const observed = tags(yield* Fiber.join(watcher))
        expect(observed.filter((tag) => tag === "ApprovalResolved")).toHaveLength(1)
        expect(observed.at(-1)).toBe("RunFinished")
        expect(decisions.map((decision) => decision._tag)).toEqual(["Deny"])
      }))
  }, 60_000)
})
