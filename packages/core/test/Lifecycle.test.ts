import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type { AgentError, Event } from "@tether/core"
import { Gateway } from "@tether/gateway"
import { FakeCli, Harness, Reference } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"

// Random interleavings of the agent's lifecycle operations, each case with real processes and
// a real gateway socket. Runs: TETHER_LIFECYCLE_RUNS (default 200).
const numRuns = Number(process.env["TETHER_LIFECYCLE_RUNS"] ?? 200)

const Block = Tool.make("block", {
  description: "Blocks until interrupted.",
  input: { id: Schema.String },
  output: Schema.Struct({ ok: Schema.Boolean })
})
const Tools = Toolkit.make(Block)
const ToolsLive = Tools.toLayer({ block: () => Effect.never })

type Command =
  | { readonly _tag: "Start"; readonly kind: "plain" | "slow" | "tool"; readonly stopAfter: number | undefined }
  | { readonly _tag: "Interrupt"; readonly index: number }
  | { readonly _tag: "Close"; readonly deadlineMs: number }
  | { readonly _tag: "Wait"; readonly ms: number }

const command: FastCheck.Arbitrary<Command> = FastCheck.oneof(
  FastCheck.record({
    _tag: FastCheck.constant("Start" as const),
    kind: FastCheck.constantFrom("plain" as const, "slow" as const, "tool" as const),
    stopAfter: FastCheck.option(FastCheck.integer({ min: 1, max: 4 }), { nil: undefined })
  }),
  FastCheck.record({ _tag: FastCheck.constant("Interrupt" as const), index: FastCheck.nat(5) }),
  FastCheck.record({ _tag: FastCheck.constant("Close" as const), deadlineMs: FastCheck.integer({ min: 0, max: 150 }) }),
  FastCheck.record({ _tag: FastCheck.constant("Wait" as const), ms: FastCheck.integer({ min: 0, max: 60 }) })
)

// Plain and slow runs use the light reference driver; a tool call in flight needs the fake CLI
// (a real MCP client of the gateway).
const reference = Reference.driver({
  respond: (prompt) =>
    prompt === "slow"
      ? [{ _tag: "SessionStarted", sessionId: "s", model: undefined }, { _tag: "$sleep", ms: 60_000 }]
      : Reference.answer(prompt)
})

interface Started {
  readonly command: Command & { readonly _tag: "Start" }
  readonly afterCloseStarted: boolean
  readonly events: Array<Event.Event>
  readonly fiber: Fiber.RuntimeFiber<void, AgentError.RunError | AgentError.AgentClosed | AgentError.InvalidTurn>
  interrupted: boolean
}

const runCase = (commands: ReadonlyArray<Command>, useFakeCli: boolean) =>
  Effect.gen(function*() {
    const observed: Array<Harness.Observed> = []
    const sandbox = yield* Harness.sandbox
    const before = yield* Harness.treeDigest(sandbox.source)
    const { marker, started } = yield* Effect.gen(function*() {
      // Another registration keeps the listener up, so the closed agent's token is seen to get 401.
      const gateway = yield* Gateway.Gateway
      yield* gateway.register(yield* Toolkit.executor(Toolkit.empty))
      const agent = yield* Agent.make({
        driver: useFakeCli ? FakeCli.driver() : reference,
        definition: { instructions: "", skills: [], tools: Tools },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        processes: { killGrace: "300 millis", exitGrace: "300 millis" }
      })
      const started: Array<Started> = []
      let closeStarted = false
      for (const cmd of commands) {
        switch (cmd._tag) {
          case "Start": {
            const events: Array<Event.Event> = []
            const input = cmd.kind === "plain"
              ? (useFakeCli ? FakeCli.script({ op: "text", text: "plain" }) : "plain")
              : cmd.kind === "slow"
              ? (useFakeCli ? FakeCli.script({ op: "sleep", ms: 60_000 }) : "slow")
              : FakeCli.script({ op: "call", tool: "block", input: { id: "x" } })
            const stream = agent.stream(input).pipe(Stream.tap((event) => Effect.sync(() => events.push(event))))
            const fiber = yield* (cmd.stopAfter === undefined ? stream : Stream.take(stream, cmd.stopAfter)).pipe(
              Stream.runDrain,
              Effect.fork
            )
            started.push({ command: cmd, afterCloseStarted: closeStarted, events, fiber, interrupted: false })
            break
          }
          case "Interrupt": {
            const target = started[cmd.index % Math.max(1, started.length)]
            if (target !== undefined) {
              target.interrupted = true
              yield* Fiber.interrupt(target.fiber)
            }
            break
          }
          case "Close": {
            closeStarted = true
            const exit = yield* Effect.exit(agent.close({ timeout: `${cmd.deadlineMs} millis` }))
            if (Exit.isFailure(exit)) {
              expect(Exit.causeOption(exit).pipe((cause) => cause._tag === "Some" && String(cause.value))).toContain(
                "CloseTimeout"
              )
            }
            break
          }
          case "Wait":
            yield* Effect.sleep(`${cmd.ms} millis`)
        }
      }
      // An unbounded close completes, and again (idempotent); a run after it is refused.
      yield* agent.close()
      yield* agent.close()
      const late = yield* Effect.flip(agent.run("late"))
      expect(late._tag).toBe("AgentClosed")
      // The gateway still serves (its layer is open): the agent's token gets 401.
      expect(yield* Harness.probe(observed[1]!)).toBe(401)
      return { marker: agent.marker, started }
    }).pipe(Effect.scoped, Effect.provide([ToolsLive, Harness.recordingLayer(observed)]))

    for (const run of started) {
      const exit = yield* Fiber.await(run.fiber)
      const tags = run.events.map((event) => event._tag)
      expect(tags.filter((tag) => tag === "RunStarted").length).toBeLessThanOrEqual(1)
      expect(tags.filter((tag) => tag === "RunFinished").length).toBeLessThanOrEqual(1)
      if (run.afterCloseStarted) {
        // Admission is fenced from the first close on.
        expect(tags).toEqual([])
        if (!run.interrupted) expect(Exit.isFailure(exit) && String(exit.cause)).toContain("AgentClosed")
        continue
      }
      if (!run.interrupted && run.command.stopAfter === undefined && tags.length > 0) {
        // A consumer that read to the end saw exactly one RunStarted first and one RunFinished last.
        expect(tags[0]).toBe("RunStarted")
        expect(tags[tags.length - 1]).toBe("RunFinished")
        expect(run.events.map((event) => event.sequence)).toEqual(run.events.map((_, i) => i))
      }
    }
    expect(yield* Harness.markedProcesses(marker)).toEqual([])
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    expect(yield* Harness.treeDigest(sandbox.source)).toBe(before)
  }).pipe(Effect.scoped)

describe("agent lifecycle under random interleavings", () => {
  it.live(
    `holds its invariants over ${numRuns} cases (real processes and sockets)`,
    () =>
      Effect.promise(() =>
        FastCheck.assert(
          FastCheck.asyncProperty(
            FastCheck.array(command, { minLength: 1, maxLength: 5 }),
            FastCheck.nat(3),
            (commands, pick) => {
              // A tool call needs the fake CLI; otherwise the fake CLI is used in one case out of four.
              const useFakeCli = commands.some((cmd) => cmd._tag === "Start" && cmd.kind === "tool") || pick === 0
              return Effect.runPromise(runCase(commands, useFakeCli))
            }
          ),
          { numRuns, endOnFailure: true }
        )
      ),
    { timeout: 600_000 }
  )
})
