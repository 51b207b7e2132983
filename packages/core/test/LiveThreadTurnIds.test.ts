/**
 * Turn ids, a second handle's turn, delete and resumeOnly on a live thread whose warm process is up
 * (reference driver): `TurnAlreadyCommitted`, `ThreadBusy`, `ThreadNotFound` as docs/threads.md says.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"

const respond = (prompt: string): ReadonlyArray<Reference.Step> =>
  prompt === "slow" ? [{ _tag: "$sleep", ms: 1_500 }, ...Reference.answer(prompt)] : Reference.answer(prompt)

describe("live thread turn ids and leases", () => {
  it.live(
    "same id twice on a warm thread: TurnAlreadyCommitted; a second handle's turn is ThreadBusy; delete then resumeOnly",
    () =>
      Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        const agent = yield* Agent.make({
          driver: Reference.driver({ live: true, respond }),
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection,
          processes: { killGrace: "500 millis", exitGrace: "500 millis" }
        })
        const a = yield* agent.thread("k")
        const first = yield* a.run({ input: "one", id: "t-1" })
        expect(first.thread?.mode).toBe("started")
        expect(yield* Effect.flip(a.run({ input: "one", id: "t-1" }))).toMatchObject({ _tag: "TurnAlreadyCommitted" })
        const b = yield* agent.thread("k")
        const slow = yield* Effect.fork(a.run({ input: "slow", id: "t-2" }))
        yield* Effect.sleep("300 millis")
        expect(yield* Effect.flip(b.run({ input: "slow", id: "t-2" }))).toMatchObject({ _tag: "ThreadBusy" })
        expect(yield* Effect.flip(b.delete)).toMatchObject({ _tag: "ThreadBusy" })
        const done = yield* Fiber.join(slow)
        expect(done.thread).toMatchObject({ mode: "resumed", fromTurns: 1 })
        expect(yield* Effect.flip(b.run({ input: "slow", id: "t-2" }))).toMatchObject({ _tag: "TurnAlreadyCommitted" })
        const removed = yield* b.delete
        expect(removed.length).toBe(1)
        expect(Option.isNone(yield* a.snapshot)).toBe(true)
        expect(yield* Effect.flip(agent.thread("k", { resumeOnly: true }))).toMatchObject({ _tag: "ThreadNotFound" })
        const fresh = yield* a.run({ input: "again", id: "t-2" })
        expect(fresh.thread?.mode).toBe("started")
        expect(yield* a.snapshot).toMatchObject({ value: { turns: 1, turn: "t-2" } })
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    { timeout: 30_000 }
  )
})
