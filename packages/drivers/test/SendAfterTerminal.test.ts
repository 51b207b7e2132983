/**
 * `thread.send` once the provider has ended the turn, before core has read the turn's terminal
 * (its consumer holds the run back) or right after the turn's last answer: no turn is running, so
 * `send` answers `NoActiveTurn` (DESIGN §12), never the protocol's refusal as a `ProtocolError`.
 * Claude Code and Codex offline (the pinned CLIs, scripted model servers) and the reference live
 * driver. Before, each of them answered `ProtocolError` here.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import type * as Event from "@tether/core/Event"
import type * as Thread from "@tether/core/Thread"
import { AnthropicServer, Harness, Reference, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { driverFor as claudeDriver } from "./ClaudeLiveHarness.js"
import { offlineCodex } from "./CodexHarness.js"

interface Subject {
  readonly name: string
  readonly make: Effect.Effect<Driver.Driver, unknown, Scope.Scope>
  /** Turns of the natural-timing case. */
  readonly turns: number
}

const subjects: ReadonlyArray<Subject> = [
  {
    name: "reference",
    make: Effect.succeed(Reference.driver({ live: true, respond: (prompt) => Reference.answer(prompt) })),
    turns: 10
  },
  {
    name: "Claude Code",
    make: Effect.map(
      AnthropicServer.make({ respond: () => AnthropicServer.reply("done") }),
      (server) => claudeDriver(server)
    ),
    turns: 0
  },
  {
    name: "Codex",
    make: Effect.map(
      ResponsesServer.make({ script: () => ResponsesServer.text("done") }),
      (server) => offlineCodex(server.baseUrl)
    ),
    turns: 3
  }
]

const withThread = <A, E>(
  subject: Subject,
  events: Agent.Options<typeof Toolkit.empty>["events"],
  body: (thread: Thread.Thread) => Effect.Effect<A, E>
) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const agent = yield* Agent.make({
      driver: yield* subject.make,
      definition: { instructions: "", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection,
      ...(events === undefined ? {} : { events })
    })
    return yield* body(yield* agent.thread("k"))
  }).pipe(Effect.scoped, Effect.provide(Harness.layer))

const outcomeOf = (sent: Either.Either<unknown, { readonly _tag: string }>) =>
  Either.isRight(sent) ? `delivered ${String(sent.right)}` : sent.left._tag

describe("send when the provider's turn is over", () => {
  for (const subject of subjects) {
    it.live(
      `${subject.name}: the consumer holds the run while the provider ends the turn, then sends: NoActiveTurn`,
      () =>
        Effect.gen(function*() {
          const { sent, last } = yield* withThread(subject, { buffer: 1 }, (thread) =>
            Effect.gen(function*() {
              let sent = "not sent"
              let last: Event.Event | undefined
              yield* Stream.runForEach(thread.stream("hello"), (event) =>
                Effect.gen(function*() {
                  last = event
                  if (event._tag !== "ProcessStarted") return
                  // The CLI answers and ends its turn meanwhile; the run waits for this consumer.
                  yield* Effect.sleep("3 seconds")
                  sent = outcomeOf(yield* Effect.either(thread.send("more")))
                }))
              return { sent, last }
            }))
          expect(last).toMatchObject({ _tag: "RunFinished", outcome: "success" })
          expect(sent).toBe("NoActiveTurn")
        }),
      120_000
    )

    if (subject.turns > 0) {
      // Natural timing: a send on each assistant answer is delivered while the turn runs, until one
      // lands after the turn's last answer (Codex refuses it before its `turn/completed` is read).
      it.live(
        `${subject.name}: sends on each answer until one finds the turn over: NoActiveTurn`,
        () =>
          Effect.gen(function*() {
            const refusals = yield* withThread(subject, undefined, (thread) =>
              Effect.gen(function*() {
                const refusals: Array<string> = []
                for (let i = 0; i < subject.turns; i++) {
                  let refused = false
                  yield* Stream.runForEach(thread.stream(`turn ${i}`), (event) =>
                    refused || event._tag !== "Message" || event.role !== "assistant"
                      ? Effect.void
                      : Effect.flatMap(Effect.either(thread.send("more")), (sent) =>
                        Effect.sync(() => {
                          if (Either.isLeft(sent)) {
                            refused = true
                            refusals.push(outcomeOf(sent))
                          }
                        })))
                }
                return refusals
              }))
            expect(refusals).toEqual(Array.from({ length: subject.turns }, () => "NoActiveTurn"))
          }),
        120_000
      )
    }
  }
})
