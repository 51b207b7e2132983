/**
 * The approvals broker: exactly once under every interleaving of host answers (twice, late,
 * for unknown ids), the handler, the deadline, a cancel and the agent's close (TestClock).
 */
import { describe, expect, it } from "@effect/vitest"
import type { ApprovalAlreadyResolved, ApprovalNotFound } from "@tether/core/AgentError"
import * as Approval from "@tether/core/Approval"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/TestClock"
import * as Approvals from "../src/internal/approvals.js"

interface Recorded {
  readonly requested: Array<Approval.ApprovalRequest>
  readonly resolved: Array<{ readonly id: string; readonly decision: Approval.Decision; readonly by: string }>
}

const recorder = () => {
  const recorded: Recorded = { requested: [], resolved: [] }
  const sink: Approvals.Sink = {
    requested: (request) => Effect.sync(() => void recorded.requested.push(request)),
    resolved: (request, decision, by) =>
      Effect.sync(() => void recorded.resolved.push({ id: request.id, decision, by }))
  }
  return { recorded, sink }
}

const bashAsk = { toolName: "Bash", kind: "command", input: { command: "ls" }, command: "ls" } as const

const decisionArb = FastCheck.oneof(
  FastCheck.constant(Approval.allow),
  FastCheck.constant(Approval.allowForSession),
  FastCheck.string({ maxLength: 12 }).map(Approval.deny)
)

type Action =
  | { readonly _tag: "answer"; readonly decision: Approval.Decision }
  | { readonly _tag: "unknown" }
  | { readonly _tag: "cancel" }
  | { readonly _tag: "close" }

const actionArb: FastCheck.Arbitrary<Action> = FastCheck.oneof(
  decisionArb.map((decision) => ({ _tag: "answer", decision }) as const),
  FastCheck.constant({ _tag: "unknown" } as const),
  FastCheck.constant({ _tag: "cancel" } as const),
  FastCheck.constant({ _tag: "close" } as const)
)

// Distinct instants (ms): the deadline, the handler's answer and each action never tie.
const scenarioArb = FastCheck.record({
  times: FastCheck.uniqueArray(FastCheck.integer({ min: 1, max: 200 }), { minLength: 8, maxLength: 8 }),
  actions: FastCheck.array(actionArb, { maxLength: 6 }),
  handler: FastCheck.option(decisionArb, { nil: undefined }),
  fallback: decisionArb
})

type Outcome = Either.Either<void, ApprovalNotFound | ApprovalAlreadyResolved>

describe("approvals broker", () => {
  it.effect.prop(
    "exactly once: the earliest of host, handler, deadline, cancel and close wins; later answers fail",
    [scenarioArb],
    ([{ actions, fallback, handler, times }]) =>
      Effect.gen(function*() {
        const [deadlineAt, handlerAt, ...actionTimes] = times as [number, number, ...Array<number>]
        const scheduled = actions.map((action, i) => ({ action, at: actionTimes[i]! }))
          .sort((a, b) => a.at - b.at)
        const broker = Approvals.make({
          deadline: `${deadlineAt} millis`,
          fallback,
          ...(handler === undefined
            ? {}
            : { handler: () => Effect.as(Effect.sleep(`${handlerAt} millis`), handler) })
        })
        const { recorded, sink } = recorder()
        const fiber = yield* Effect.fork(broker.ask("run-1", "thread-a", bashAsk, sink))
        yield* Effect.yieldNow()
        expect(recorded.requested).toHaveLength(1)
        const request = recorded.requested[0]!
        expect(request).toMatchObject({ runId: "run-1", toolName: "Bash", kind: "command", command: "ls" })
        expect(broker.pending().map((r) => r.id)).toEqual([request.id])

        // The model: the earliest claim wins.
        const claims: Array<{ at: number; by: Approval.DecidedBy; decision: Approval.Decision }> = [
          { at: deadlineAt, by: "deadline", decision: fallback }
        ]
        if (handler !== undefined) claims.push({ at: handlerAt, by: "handler", decision: handler })
        let closing = false
        for (const { action, at } of scheduled) {
          if (action._tag === "answer") claims.push({ at, by: "host", decision: action.decision })
          if (action._tag === "close") closing = true
          if (action._tag === "cancel" || action._tag === "close") {
            claims.push({ at, by: closing ? "close" : "cancel", decision: Approval.canceledDecision })
          }
        }
        const winner = claims.sort((a, b) => a.at - b.at)[0]!

        const outcomes: Array<{ at: number; outcome: Outcome }> = []
        let now = 0
        for (const { action, at } of scheduled) {
          yield* TestClock.adjust(`${at - now} millis`)
          now = at
          switch (action._tag) {
            case "answer":
              outcomes.push({ at, outcome: yield* Effect.either(broker.approve(request.id, action.decision)) })
              break
            case "unknown": {
              const unknown = yield* Effect.either(broker.approve("no-such-approval", Approval.allow))
              expect(Either.isLeft(unknown) && unknown.left._tag).toBe("ApprovalNotFound")
              break
            }
            case "cancel":
              yield* Fiber.interrupt(fiber)
              break
            case "close":
              yield* broker.closing
              yield* Fiber.interrupt(fiber)
              break
          }
        }
        yield* TestClock.adjust("1 second")
        const exit = yield* Fiber.await(fiber)

        expect(recorded.resolved).toEqual([{ id: request.id, decision: winner.decision, by: winner.by }])
        if (winner.by === "cancel" || winner.by === "close") {
          expect(Exit.isInterrupted(exit)).toBe(true)
        } else {
          expect(exit).toEqual(Exit.succeed(winner.decision))
        }
        for (const { at, outcome } of outcomes) {
          if (at === winner.at) expect(Either.isRight(outcome)).toBe(true)
          else {
            expect(Either.isLeft(outcome) && outcome.left).toMatchObject({
              _tag: "ApprovalAlreadyResolved",
              by: winner.by
            })
          }
        }
        // Late answers, after everything: the first answer stays.
        const late = yield* Effect.either(broker.approve(request.id, Approval.allow))
        expect(Either.isLeft(late) && late.left).toMatchObject({ _tag: "ApprovalAlreadyResolved", by: winner.by })
        expect(broker.pending()).toEqual([])
      }),
    { fastCheck: { numRuns: 30 } }
  )

  it.effect("a thread answers only its own runs' approvals; the agent answers any", () =>
    Effect.gen(function*() {
      const broker = Approvals.make({})
      const { recorded, sink } = recorder()
      const a = yield* Effect.fork(broker.ask("run-a", "thread-a", bashAsk, sink))
      const b = yield* Effect.fork(broker.ask("run-b", undefined, bashAsk, sink))
      yield* Effect.yieldNow()
      const [ra, rb] = recorded.requested as [Approval.ApprovalRequest, Approval.ApprovalRequest]
      expect(ra.id).not.toBe(rb.id)
      const wrongThread = yield* Effect.either(broker.approve(ra.id, Approval.allow, "thread-b"))
      expect(Either.isLeft(wrongThread) && wrongThread.left._tag).toBe("ApprovalNotFound")
      const agentRun = yield* Effect.either(broker.approve(rb.id, Approval.allow, "thread-a"))
      expect(Either.isLeft(agentRun) && agentRun.left._tag).toBe("ApprovalNotFound")
      yield* broker.approve(ra.id, Approval.deny("no"), "thread-a")
      yield* broker.approve(rb.id, Approval.allowForSession)
      expect(yield* Fiber.join(a)).toEqual(Approval.deny("no"))
      expect(yield* Fiber.join(b)).toEqual(Approval.allowForSession)
      const again = yield* Effect.either(broker.approve(ra.id, Approval.allow, "thread-b"))
      expect(Either.isLeft(again) && again.left._tag).toBe("ApprovalNotFound")
    }))

  it.effect("settleRun answers deny to what the ending run still waits for; a dying handler denies", () =>
    Effect.gen(function*() {
      const { recorded, sink } = recorder()
      const broker = Approvals.make({})
      const waiting = yield* Effect.fork(broker.ask("run-1", undefined, bashAsk, sink))
      yield* Effect.yieldNow()
      yield* broker.settleRun("run-2")
      expect(recorded.resolved).toEqual([])
      yield* broker.settleRun("run-1")
      expect(recorded.resolved.map((r) => [r.by, r.decision])).toEqual([["cancel", Approval.canceledDecision]])
      expect(yield* Fiber.join(waiting)).toEqual(Approval.canceledDecision)

      const dying = Approvals.make({ handler: () => Effect.die(new Error("boom")) })
      const decision = yield* dying.ask("run-3", undefined, bashAsk, sink)
      expect(decision._tag).toBe("Deny")
      expect(recorded.resolved.at(-1)?.by).toBe("handler")
    }))

  it.effect("an answer that is not a Decision, from the handler or the host, is a deny", () =>
    Effect.gen(function*() {
      const { recorded, sink } = recorder()
      // What a JavaScript handler or caller may hand over: none of these is a Decision.
      const malformed = [{ _tag: "deny" }, { _tag: "Deny" }, { _tag: "Allow", message: 1 }, null, "allow", [], {}]
      for (const answer of malformed) {
        const viaHandler = Approvals.make({ handler: () => Effect.succeed(answer as unknown as Approval.Decision) })
        const decision = yield* viaHandler.ask("run-h", undefined, bashAsk, sink)
        expect(decision._tag, JSON.stringify(answer)).toBe("Deny")
        expect(recorded.resolved.at(-1)).toMatchObject({ by: "handler", decision: { _tag: "Deny" } })

        const broker = Approvals.make({})
        const waiting = yield* Effect.fork(broker.ask("run-a", undefined, bashAsk, sink))
        yield* Effect.yieldNow()
        yield* broker.approve(recorded.requested.at(-1)!.id, answer as unknown as Approval.Decision)
        expect((yield* Fiber.join(waiting))._tag, JSON.stringify(answer)).toBe("Deny")
      }
      // A plain object of a decision's shape type-checks as one, and is that decision.
      const plain = Approvals.make({ handler: () => Effect.succeed({ _tag: "AllowForSession" }) })
      expect(yield* plain.ask("run-p", undefined, bashAsk, sink)).toEqual(Approval.allowForSession)
      const plainDeny = Approvals.make({ handler: () => Effect.succeed({ _tag: "Deny", message: "no" }) })
      expect(yield* plainDeny.ask("run-q", undefined, bashAsk, sink)).toEqual(Approval.deny("no"))
    }))
})
