import { describe, expect, it } from "@effect/vitest"
import type { Agent, Event } from "@tether/core"
import { ThreadStore } from "@tether/core"
import { FakeCli, Harness } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as Threads from "./fixtures/threads.js"

const keys = ["a", "b\u0000", "ç/😀"] as const
type Key = typeof keys[number]
type Outcome = "success" | "failure" | "crash" | "cancel"

type Op =
  | { readonly _tag: "Run"; readonly key: Key; readonly outcome: Outcome }
  | { readonly _tag: "Concurrent"; readonly key: Key; readonly outcomes: readonly [Outcome, Outcome] }
  | { readonly _tag: "Fork"; readonly from: Key; readonly to: Key }
  | { readonly _tag: "ResumeOnly"; readonly key: Key }

const key = FastCheck.constantFrom(...keys)
const outcome = FastCheck.constantFrom<Outcome>("success", "success", "failure", "crash", "cancel")
const op: FastCheck.Arbitrary<Op> = FastCheck.oneof(
  FastCheck.record({ _tag: FastCheck.constant("Run" as const), key, outcome }),
  FastCheck.record({
    _tag: FastCheck.constant("Concurrent" as const),
    key,
    outcomes: FastCheck.tuple(outcome, outcome)
  }),
  FastCheck.record({ _tag: FastCheck.constant("Fork" as const), from: key, to: key }),
  FastCheck.record({ _tag: FastCheck.constant("ResumeOnly" as const), key })
)

const script = (outcome: Outcome): string => {
  switch (outcome) {
    case "success":
      return FakeCli.script({ op: "sleep", ms: 40 }, { op: "text", text: "ok" })
    case "failure":
      return FakeCli.script({ op: "result", ok: false, error: "refused" })
    case "crash":
      return FakeCli.script({ op: "text", text: "partial" }, { op: "crash", code: 7 })
    case "cancel":
      return FakeCli.script({ op: "sleep", ms: 5_000 })
  }
}

interface Model {
  readonly session: string
  readonly turns: number
}

/**
 * Runs the ops against one agent and store, keeping a model of what must be committed, and
 * checks the invariants after every op.
 */
const check = (ops: ReadonlyArray<Op>, agent: Agent.Agent, store: ThreadStore.ThreadStore["Type"]) =>
  Effect.gen(function*() {
    const model = new Map<Key, Model>()
    const active = new Map<Key, number>()
    let maxActive = 0

    // Drives one turn; tracks the runs in flight per key from their RunStarted / RunFinished.
    const turn = (
      thread: { readonly stream: (input: string) => Stream.Stream<Event.Event, unknown> },
      k: Key,
      o: Outcome
    ) =>
      Effect.suspend(() => {
        let session: string | undefined
        // Runs of this turn started and not yet seen finished (a canceled consumer never sees
        // its RunFinished: the run counts as active until the turn's stream has shut down).
        let open = 0
        const events = thread.stream(script(o)).pipe(
          Stream.tap((event) =>
            Effect.sync(() => {
              if (event._tag === "RunStarted") {
                open++
                active.set(k, (active.get(k) ?? 0) + 1)
                maxActive = Math.max(maxActive, active.get(k)!)
              } else if (event._tag === "RunFinished") {
                open--
                active.set(k, (active.get(k) ?? 0) - 1)
                if (event.outcome === "success") session = event.result.session
              }
            })
          )
        )
        // A cancellation: the consumer stops once the provider process started.
        const consumed = o === "cancel" ? Stream.takeUntil(events, (event) => event._tag === "ProcessStarted") : events
        return Stream.runDrain(consumed).pipe(
          Effect.ensuring(Effect.sync(() => active.set(k, (active.get(k) ?? 0) - open))),
          Effect.either,
          Effect.map((either) => ({ either, session }))
        )
      })

    const commitSuccess = (k: Key, session: string | undefined) => {
      const before = model.get(k)
      model.set(k, before === undefined ? { session: session!, turns: 1 } : { ...before, turns: before.turns + 1 })
    }

    for (const next of ops) {
      switch (next._tag) {
        case "Run": {
          const thread = yield* agent.thread(next.key)
          const { either, session } = yield* turn(thread, next.key, next.outcome)
          expect(either._tag).toBe(next.outcome === "success" || next.outcome === "cancel" ? "Right" : "Left")
          if (next.outcome === "success") commitSuccess(next.key, session)
          break
        }
        case "Concurrent": {
          const thread = yield* agent.thread(next.key)
          const outcomes = yield* Effect.all(
            next.outcomes.map((o) => turn(thread, next.key, o)),
            { concurrency: "unbounded" }
          )
          outcomes.forEach(({ either, session }, index) => {
            const busy = either._tag === "Left" && (either.left as { readonly _tag?: string })._tag === "ThreadBusy"
            if (!busy && next.outcomes[index] === "success") {
              expect(either._tag).toBe("Right")
              commitSuccess(next.key, session)
            }
          })
          break
        }
        case "Fork": {
          const targetBefore = yield* store.get(next.to)
          const source = yield* agent.thread(next.from)
          const forked = yield* Effect.either(source.fork(next.to))
          if (model.has(next.to)) {
            expect(forked._tag === "Left" && forked.left._tag).toBe("ThreadAlreadyExists")
          } else if (!model.has(next.from)) {
            expect(forked._tag === "Left" && forked.left._tag).toBe("ThreadNotFound")
          } else {
            // Fork targets were absent.
            expect(Option.isNone(targetBefore)).toBe(true)
            expect(forked._tag).toBe("Right")
            if (forked._tag === "Right") {
              const result = yield* forked.right.run(script("success"))
              const from = model.get(next.from)!
              expect(result.session).not.toBe(from.session)
              model.set(next.to, { session: result.session!, turns: from.turns + 1 })
            }
          }
          break
        }
        case "ResumeOnly": {
          const opened = yield* Effect.either(agent.thread(next.key, { resumeOnly: true }))
          if (!model.has(next.key)) {
            expect(opened._tag === "Left" && opened.left._tag).toBe("ThreadNotFound")
          } else if (opened._tag === "Right") {
            const { either, session } = yield* turn(opened.right, next.key, "success")
            expect(either._tag).toBe("Right")
            expect(session).toBe(model.get(next.key)!.session)
            commitSuccess(next.key, session)
          } else {
            expect.fail(`resumeOnly failed on a committed thread: ${opened.left._tag}`)
          }
          break
        }
      }
      // A healthy checkpoint is never overwritten by a failure; every record carries the
      // agent's fingerprint at commit time.
      for (const k of keys) {
        const stored = yield* store.get(k)
        const expected = model.get(k)
        if (expected === undefined) {
          expect(Option.isNone(stored)).toBe(true)
        } else {
          expect(Option.getOrThrow(stored)).toMatchObject({
            key: k,
            session: expected.session,
            turns: expected.turns,
            fingerprint: agent.fingerprint
          })
        }
      }
      // At most one run per key at a time.
      expect(maxActive).toBeLessThanOrEqual(1)
    }
  })

for (const [name, storeLayer] of Threads.stores) {
  describe(`Thread invariants (${name} store)`, () => {
    it.live.prop(
      "random runs, concurrent runs, forks and resumeOnly keep every thread invariant",
      [FastCheck.array(op, { minLength: 3, maxLength: 7 })],
      ([ops]) =>
        Effect.gen(function*() {
          const sandbox = yield* Harness.sandbox
          const control = Threads.makeControl()
          let marker = ""
          yield* Effect.gen(function*() {
            const agent = yield* Threads.makeAgent(sandbox, Threads.driver(control))
            marker = agent.marker
            const store = yield* ThreadStore.ThreadStore
            yield* check(ops, agent, store)
          }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(Threads.ToolsLive, Harness.layer, storeLayer())))
          expect(yield* Harness.markedProcesses(marker)).toEqual([])
          expect(yield* Harness.entries(sandbox.root)).toEqual([])
        }).pipe(Effect.scoped),
      { timeout: 120_000, fastCheck: { numRuns: 6 } }
    )
  })
}
