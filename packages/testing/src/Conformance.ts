/**
 * The driver conformance suite: numbered clauses any driver must pass when run through
 * `Agent.make`. It is framework-neutral: each clause is an `Effect`; a test file registers them,
 * e.g. `for (const c of Conformance.clauses(subject)) it.live(`${c.id} ${c.title}`, () => c.run)`.
 *
 * @since 0.1.0
 */
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import { Agent } from "@tether/core"
import type { Driver, Event } from "@tether/core"
import type { Gateway } from "@tether/gateway"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Harness from "./Harness.js"

/**
 * A clause that did not hold.
 *
 * @since 0.1.0
 * @category errors
 */
export class ConformanceFailure
  extends Schema.TaggedError<ConformanceFailure>("@tether/testing/ConformanceFailure")("ConformanceFailure", {
    clause: Schema.String,
    detail: Schema.String
  })
{
  override get message(): string {
    return `clause ${this.clause}: ${this.detail}`
  }
}

/**
 * The driver under test and the turns that make its provider behave as each clause needs.
 *
 * @since 0.1.0
 * @category models
 */
export interface Subject {
  readonly driver: Driver.Driver
  /** A turn the provider completes successfully. */
  readonly plain: Agent.Input
  /** The final text `plain` produces, when it is deterministic. */
  readonly plainText?: string
  /** A turn the provider keeps working on for at least several seconds (for cancellation). */
  readonly slow: Agent.Input
  /** A turn after which the provider exits without its terminal record, if it can be made to. */
  readonly crash?: Agent.Input
  /** What `Agent.make` needs besides a scope (default `Harness.layer`). */
  readonly layer?: Layer.Layer<
    Gateway.Gateway | CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path
  >
  /** Extra agent options (model, env, processes…). */
  readonly options?: Partial<Agent.Options<typeof Toolkit.empty>>
}

/**
 * One clause of the driver contract: its id (as in DESIGN), its title, and the check, which fails
 * with `ConformanceFailure` naming the clause.
 *
 * @since 0.1.0
 * @category models
 */
export interface Clause {
  readonly id: string
  readonly title: string
  readonly run: Effect.Effect<void, unknown>
}

const check = (clause: string, condition: boolean, detail: string): Effect.Effect<void, ConformanceFailure> =>
  condition ? Effect.void : Effect.fail(new ConformanceFailure({ clause, detail }))

const withAgent = <A, E>(
  subject: Subject,
  body: (agent: Agent.Agent, sandbox: Harness.Sandbox) => Effect.Effect<A, E>,
  driver: Driver.Driver = subject.driver,
  extra: Partial<Agent.Options<typeof Toolkit.empty>> = {}
) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    return yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver,
        definition: { instructions: "", skills: [], tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        ...subject.options,
        ...extra
      })
      return yield* body(agent, sandbox)
    }).pipe(Effect.scoped, Effect.provide(subject.layer ?? Harness.layer))
  }).pipe(Effect.scoped)

const orderOf = (clause: string, events: ReadonlyArray<Event.Event>) =>
  Effect.gen(function*() {
    const tags = events.map((event) => event._tag)
    yield* check(clause, tags[0] === "RunStarted", `the first event is ${tags[0]}, not RunStarted`)
    yield* check(clause, tags[tags.length - 1] === "RunFinished", `the last event is ${tags[tags.length - 1]}`)
    yield* check(clause, tags.filter((tag) => tag === "RunStarted").length === 1, "RunStarted is not unique")
    yield* check(clause, tags.filter((tag) => tag === "RunFinished").length === 1, "RunFinished is not unique")
    const runIds = new Set(events.map((event) => event.runId))
    yield* check(clause, runIds.size === 1, "events carry several runIds")
    for (let i = 1; i < events.length; i++) {
      yield* check(clause, events[i]!.sequence > events[i - 1]!.sequence, `sequence does not increase at ${i}`)
    }
  })

/**
 * The numbered clauses for `subject`.
 *
 * @example
 * ```ts
 * import { it } from "@effect/vitest"
 * import { Conformance, Reference } from "@tether/testing"
 *
 * // Your driver's test file: one test per clause of the driver contract.
 * const subject: Conformance.Subject = {
 *   driver: Reference.driver(),
 *   plain: "hello",
 *   slow: "work for a while"
 * }
 * for (const clause of Conformance.clauses(subject)) {
 *   it.live(`${clause.id}: ${clause.title}`, () => clause.run)
 * }
 * ```
 *
 * @since 0.1.0
 * @category clauses
 */
export const clauses = (subject: Subject): ReadonlyArray<Clause> => {
  const list: Array<Clause> = [
    {
      id: "C1",
      title: "event order: one RunStarted first, one RunFinished last, increasing sequence",
      run: withAgent(subject, (agent) =>
        Effect.gen(function*() {
          const events = Array.from(yield* Stream.runCollect(agent.stream(subject.plain)))
          yield* orderOf("C1", events)
          const started = events.findIndex((event) => event._tag === "ProcessStarted")
          yield* check("C1", started > 0, "no ProcessStarted after RunStarted")
        }))
    },
    {
      id: "C2",
      title: "terminal detection: the run succeeds with the terminal record and its final text",
      run: withAgent(subject, (agent) =>
        Effect.gen(function*() {
          const events = Array.from(yield* Stream.runCollect(agent.stream(subject.plain)))
          const finished = events[events.length - 1]
          yield* check("C2", finished?._tag === "RunFinished" && finished.outcome === "success", "outcome not success")
          const result = yield* agent.run(subject.plain)
          yield* check("C2", result.raw.terminal !== undefined, "no terminal record in the result")
          yield* check("C2", result.provider === subject.driver.name, "provider is not the driver name")
          if (subject.plainText !== undefined) {
            yield* check("C2", result.text === subject.plainText, `text ${JSON.stringify(result.text)}`)
          }
        }))
    },
    {
      id: "C3",
      title: "cancel: a consumer that stops early cancels the run and its process; the agent stays usable",
      run: withAgent(subject, (agent) =>
        Effect.gen(function*() {
          const seen = yield* agent.stream(subject.slow).pipe(
            Stream.takeUntil((event) => event._tag === "ProcessStarted"),
            Stream.runCollect
          )
          yield* check("C3", Array.from(seen).some((event) => event._tag === "ProcessStarted"), "never started")
          const left = yield* Harness.markedProcesses(agent.marker)
          yield* check("C3", left.length === 0, `processes left after cancel: ${left.join(",")}`)
          yield* Effect.asVoid(agent.run(subject.plain))
        }))
    },
    {
      id: "C4",
      title: "reaping: after close no process of the agent and no clone remain",
      run: Effect.gen(function*() {
        const [marker, root] = yield* withAgent(subject, (agent, sandbox) =>
          Effect.gen(function*() {
            yield* Effect.asVoid(agent.run(subject.plain))
            yield* agent.close()
            return [agent.marker, sandbox.root] as const
          }))
        const left = yield* Harness.markedProcesses(marker)
        yield* check("C4", left.length === 0, `processes left: ${left.join(",")}`)
        const clones = yield* Harness.entries(root)
        yield* check("C4", clones.length === 0, `clones left: ${clones.join(",")}`)
      })
    },
    {
      id: "C5",
      title: "raw capture: stdout is kept and the terminal record is in the result",
      run: withAgent(subject, (agent) =>
        Effect.gen(function*() {
          const result = yield* agent.run(subject.plain)
          yield* check("C5", result.raw.stdoutBytes > 0 && result.raw.stdout.length > 0, "no raw stdout")
        }))
    },
    {
      id: "C6",
      title: "capability errors: what the driver lacks fails before spawn with UnsupportedCapability",
      run: Effect.gen(function*() {
        const lacking: Driver.Driver = {
          ...subject.driver,
          capabilities: { ...subject.driver.capabilities, instructions: false }
        }
        const sandbox = yield* Harness.sandbox
        const error = yield* Agent.make({
          driver: lacking,
          definition: { instructions: "Be brief.", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        }).pipe(Effect.scoped, Effect.provide(subject.layer ?? Harness.layer), Effect.flip)
        yield* check("C6", error._tag === "UnsupportedCapability", `got ${error._tag}`)
        const missing = (["readOnly", "workspaceWrite", "unrestricted"] as const).find((level) =>
          !subject.driver.capabilities.sandbox.includes(level)
        )
        if (missing !== undefined) {
          const sandboxError = yield* Agent.make({
            driver: subject.driver,
            definition: { instructions: "", skills: [], tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            policy: { sandbox: missing }
          }).pipe(Effect.scoped, Effect.provide(subject.layer ?? Harness.layer), Effect.flip)
          yield* check("C6", sandboxError._tag === "UnsupportedCapability", `sandbox: got ${sandboxError._tag}`)
        }
      }).pipe(Effect.scoped)
    },
    {
      id: "C7",
      title: "admission: close is idempotent and a run after close fails with AgentClosed",
      run: withAgent(subject, (agent) =>
        Effect.gen(function*() {
          yield* agent.close()
          yield* agent.close()
          const error = yield* Effect.flip(agent.run(subject.plain))
          yield* check("C7", error._tag === "AgentClosed", `got ${error._tag}`)
        }))
    }
  ]
  const crash = subject.crash
  if (crash !== undefined) {
    list.push({
      id: "C8",
      title: "crash: a provider exiting without its terminal record ends in a RunError with the partial result",
      run: withAgent(subject, (agent) =>
        Effect.gen(function*() {
          const events: Array<Event.Event> = []
          const error = yield* agent.stream(crash).pipe(
            Stream.runForEach((event) => Effect.sync(() => events.push(event))),
            Effect.flip
          )
          yield* check("C8", error._tag === "RunError", `got ${error._tag}`)
          yield* orderOf("C8", events)
          const finished = events[events.length - 1]
          yield* check("C8", finished?._tag === "RunFinished" && finished.outcome === "failure", "outcome not failure")
          if (error._tag === "RunError") {
            yield* check(
              "C8",
              finished?._tag === "RunFinished" && finished.result === error.result,
              "partial result differs"
            )
          }
        }))
    })
  }
  return list
}
