/**
 * The driver conformance suite: numbered clauses any driver must pass when run through
 * `Agent.make`. It is framework-neutral: each clause is an `Effect`; a test file registers them,
 * e.g. `for (const c of Conformance.clauses(subject)) it.live(`${c.id} ${c.title}`, () => c.run)`.
 * A live driver (`Driver.live`, DESIGN §12) also passes the live clauses L1–L5, added when the
 * subject says how to drive its provider (`Subject.live`).
 *
 * @since 0.1.0
 */
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import { Agent } from "@tether/core"
import type { Driver, Event, Thread } from "@tether/core"
import { Gateway } from "@tether/gateway"
import { ProfileLayout } from "@tether/profile"
import { Tool, Toolkit } from "@tether/tool"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
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
  /**
   * A turn after which the provider exits without its terminal record, if it can be made to.
   * Without it, clause C8 (crash) is left out.
   */
  readonly crash?: Agent.Input
  /**
   * What `Agent.make` needs besides a scope (default `Harness.layer`). The live clauses wrap its
   * gateway (`Harness.recordingLayer`) to probe every token of the agent after close.
   */
  readonly layer?: Layer.Layer<
    Gateway.Gateway | CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path
  >
  /** Extra agent options (model, env, processes…). */
  readonly options?: Partial<Agent.Options<typeof Toolkit.empty>>
  /** How to drive a live driver's provider: given, `clauses` adds the live clauses L1–L5. */
  readonly live?: LiveSubject
  /**
   * How long a clause may take (default 75 s, under a test timeout of 90 s): a driver that never
   * ends a turn fails the clause (`ConformanceFailure` naming it) instead of hanging the test.
   */
  readonly clauseTimeout?: Duration.DurationInput
}

/**
 * What the live clauses need besides `Subject`: a turn that calls a hosted tool (the provider is
 * then provably inside its turn, where input can be steered in and an interrupt lands), and,
 * when the test can tell, how many requests the provider's model received.
 *
 * @since 0.3.0
 * @category models
 */
export interface LiveSubject {
  /**
   * A turn in which the provider calls the hosted tool `wait` (`liveTools`) with `{ ms }`, then
   * answers once it has the result.
   */
  readonly callWait: (ms: number) => Agent.Input
  /**
   * How many requests the provider's model has received so far (a scripted model server's
   * count). Given, the clauses interrupt or kill a slow turn only once its request reached the
   * model; otherwise as soon as its process is known.
   */
  readonly modelRequests?: Effect.Effect<number>
  /**
   * Options of the turn after the crash in L4 (e.g. a narrowed `toolPolicy`: a driver whose
   * resume is slow checks a policy change in the same restart).
   */
  readonly afterCrash?: Omit<Agent.Turn, "input">
}

/**
 * The hosted tools of the live clauses' agents: `wait` (`{ ms }`, sleeps that long, answers
 * `{ waited }`) and `echo` (`{ text }`, answers `ECHO:<text>`). `LiveSubject.callWait` makes the
 * provider call `wait`.
 *
 * @since 0.3.0
 * @category live
 */
export const liveTools = Toolkit.make(
  Tool.make("wait", {
    description: "Wait for the given number of milliseconds.",
    input: { ms: Schema.Number },
    output: Schema.Struct({ waited: Schema.Number }),
    revision: "wait/v1"
  }),
  Tool.make("echo", {
    description: "Echo the text.",
    input: { text: Schema.String },
    output: Schema.String,
    revision: "echo/v1"
  })
)

const liveToolsLayer = liveTools.toLayer({
  wait: ({ ms }) => Effect.as(Effect.sleep(ms), { waited: ms }),
  echo: ({ text }) => Effect.succeed(`ECHO:${text}`)
})

/**
 * The input clause L3 sends into a running turn (to find it in the model's requests).
 *
 * @since 0.3.0
 * @category live
 */
export const steerInput = "steered input 7f3a"

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
        const sandbox = yield* Harness.sandbox
        // The agent's scope closes (core reaps and removes or retains its clone) while the
        // sandbox is still there to look into.
        const marker = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: subject.driver,
            definition: { instructions: "", skills: [], tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            ...subject.options
          })
          yield* Effect.asVoid(agent.run(subject.plain))
          yield* agent.close()
          return agent.marker
        }).pipe(Effect.scoped, Effect.provide(subject.layer ?? Harness.layer))
        const left = yield* Harness.markedProcesses(marker)
        yield* check("C4", left.length === 0, `processes left: ${left.join(",")}`)
        const clones = yield* Harness.entries(sandbox.root)
        yield* check("C4", clones.length === 0, `clones left: ${clones.join(",")}`)
      }).pipe(Effect.scoped)
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
          const outcome = yield* agent.stream(crash).pipe(
            Stream.runForEach((event) => Effect.sync(() => events.push(event))),
            Effect.either
          )
          if (Either.isRight(outcome)) {
            return yield* new ConformanceFailure({
              clause: "C8",
              detail: "the crash turn succeeded: `crash` must make the provider exit without its terminal record"
            })
          }
          const error = outcome.left
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
  list.push({
    id: "C9",
    title: "sessions: a plain run's own session entries leave the clone once its process is gone",
    run: withAgent(subject, (agent, sandbox) =>
      Effect.gen(function*() {
        const result = yield* agent.run(subject.plain)
        const session = result.session
        if (session === undefined) return
        // Nothing resumes a plain run: a long-lived agent's clone must not keep one transcript per run.
        const layout = subject.driver.layout
        const own = Effect.sync(() =>
          sessionEntries(sandbox.root, layout).filter((rel) => {
            const owner = ProfileLayout.sessionOwner(layout, rel)
            return owner !== undefined && ProfileLayout.ownedBy(owner, session)
          })
        )
        yield* eventually(
          "C9",
          "removal of the plain run's session entries",
          Effect.map(own, (left) => left.length === 0)
        )
        yield* Effect.asVoid(agent.run(subject.plain))
      }))
  }, {
    id: "C10",
    title: "files: the clone does not grow with plain runs (per-process logs leave it)",
    run: withAgent(subject, (agent, sandbox) =>
      Effect.gen(function*() {
        yield* agent.run(subject.plain)
        const before = new Set(cloneFiles(sandbox.root))
        yield* agent.run(subject.plain)
        yield* agent.run(subject.plain)
        // A long-lived agent's clone must not grow by a file per run: once each process is gone,
        // what it wrote for itself alone (its transcript: C9; its logs: `ProfileLayout.logs`)
        // goes. A CLI may replace a file of its previous process by one of another name.
        let after: ReadonlyArray<string> = []
        yield* eventually(
          "C10",
          "clone back to its size after the first run",
          Effect.sync(() => {
            after = cloneFiles(sandbox.root)
            return after.length <= before.size
          })
        ).pipe(Effect.mapError((failure) =>
          new ConformanceFailure({
            clause: "C10",
            detail: `${failure.detail}: ${before.size} files, then ${after.length}; new: ${
              after.filter((file) => !before.has(file)).join(", ")
            }`
          })
        ))
      }))
  })
  if (subject.live !== undefined) list.push(...liveClauses(subject, subject.live))
  const timeout = Duration.decode(subject.clauseTimeout ?? "75 seconds")
  return list.map((clause) => ({
    ...clause,
    run: Effect.timeoutFail(clause.run, {
      duration: timeout,
      onTimeout: () =>
        new ConformanceFailure({ clause: clause.id, detail: `not done within ${Duration.format(timeout)}` })
    })
  }))
}

/**
 * Every entry under `dir` but its directories, walked one directory at a time: a directory that
 * vanishes while it is read (a CLI removing its own temporary files as it exits, codex's
 * `tmp/arg0-linux/codex-arg0…`) is skipped, where a recursive `readdirSync` throws `ENOENT`.
 */
const entriesUnder = (dir: string): Array<{ readonly path: string; readonly entry: NodeFs.Dirent }> => {
  let entries: Array<NodeFs.Dirent>
  try {
    entries = NodeFs.readdirSync(dir, { withFileTypes: true })
  } catch (error) {
    const code = (error as { readonly code?: unknown }).code
    if (code === "ENOENT" || code === "ENOTDIR") return []
    throw error
  }
  return entries.flatMap((entry) => {
    const path = NodePath.join(dir, entry.name)
    return entry.isDirectory() ? entriesUnder(path) : [{ path, entry }]
  })
}

/** `path` relative to `root`, `/` separated. */
const relativeTo = (root: string, path: string): string => NodePath.relative(root, path).split(NodePath.sep).join("/")

/** The session entries (relative, `/` separated) of every clone's profile under `root`. */
const sessionEntries = (root: string, layout: ProfileLayout.ProfileLayout): ReadonlyArray<string> =>
  (NodeFs.existsSync(root) ? NodeFs.readdirSync(root) : []).flatMap((clone) => {
    const profile = NodePath.join(root, clone, "profile")
    return entriesUnder(profile).flatMap(({ entry, path }) => {
      if (!entry.isFile()) return []
      const rel = relativeTo(profile, path)
      return ProfileLayout.isSession(layout, rel) ? [rel] : []
    })
  })

/** Every file (relative, `/` separated) in the clones under `root`: profiles and siblings. */
const cloneFiles = (root: string): ReadonlyArray<string> => entriesUnder(root).map(({ path }) => relativeTo(root, path))

/** Runs `body` with an agent on the live tools, then checks that nothing of it is left. */
const withLiveAgent = <A, E>(
  clause: string,
  subject: Subject,
  body: (agent: Agent.Agent) => Effect.Effect<A, E, Scope.Scope>
) =>
  Effect.gen(function*() {
    const observed: Array<Harness.Observed> = []
    const credentials: Array<Harness.Observed> = []
    // The subject's own layer is wrapped too: its gateway's tokens are probed as well.
    const layer = Harness.recordingLayer(observed, { credentials, base: subject.layer ?? Harness.layer })
    return yield* Effect.gen(function*() {
      // A bystander registration keeps the gateway listening, so the agent's token is seen refused.
      const gateway = yield* Gateway.Gateway
      yield* gateway.register(yield* Toolkit.executor(Toolkit.empty))
      const sandbox = yield* Harness.sandbox
      const [marker, value] = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver: subject.driver,
          definition: { instructions: "", skills: [], tools: liveTools },
          workspace: sandbox.workspace,
          profile: sandbox.selection,
          processes: { killGrace: "1 second", exitGrace: "2 seconds" },
          ...subject.options as Omit<Partial<Agent.Options<typeof Toolkit.empty>>, "definition">
        })
        return [agent.marker, yield* body(agent)] as const
      }).pipe(Effect.scoped)
      const left = yield* Harness.markedProcesses(marker)
      yield* check(clause, left.length === 0, `processes left after close: ${left.join(",")}`)
      const clones = yield* Harness.entries(sandbox.root)
      yield* check(clause, clones.length === 0, `clones left after close: ${clones.join(",")}`)
      // observed[0] is the bystander; each later one is the agent's registration; each credential
      // was minted from it for one of the agent's processes (the token its CLI used): all revoked.
      yield* check(clause, credentials.length > 0, "no credential of the agent was minted through the gateway")
      for (const credential of [...observed.slice(1), ...credentials]) {
        const status = yield* Harness.probe(credential)
        yield* check(clause, status === 401, `a token of the agent answers ${status} after close`)
      }
      return value
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(liveToolsLayer, layer)))
  })

/** A turn's events, pushed into `events` as they come (readable while it runs), and its end. */
const collect = (stream: Stream.Stream<Event.Event, unknown>, events: Array<Event.Event> = []) =>
  Effect.suspend(() =>
    stream.pipe(
      Stream.runForEach((event) => Effect.sync(() => events.push(event))),
      Effect.either,
      Effect.map((outcome) => ({ events, outcome }))
    )
  )

/** Polls `condition` (30 s at most: the clause fails rather than hangs). */
const eventually = (clause: string, what: string, condition: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 30_000
    while (!(yield* condition)) {
      if (Date.now() > deadline) return yield* new ConformanceFailure({ clause, detail: `no ${what} within 30 s` })
      yield* Effect.sleep("25 millis")
    }
  })

const pidsOf = (events: ReadonlyArray<Event.Event>) =>
  events.flatMap((event) => event._tag === "ProcessStarted" ? [event] : [])

const pidOf = (clause: string, events: ReadonlyArray<Event.Event>) =>
  Effect.gen(function*() {
    const started = pidsOf(events)
    yield* check(clause, started.length === 1, `${started.length} ProcessStarted in one turn`)
    return started[0]!.pid
  })

const outcomeOf = (clause: string, events: ReadonlyArray<Event.Event>) =>
  Effect.gen(function*() {
    const last = events[events.length - 1]
    if (last?._tag !== "RunFinished") {
      return yield* new ConformanceFailure({ clause, detail: `the turn ended with ${last?._tag}, not RunFinished` })
    }
    return last
  })

const turn = (clause: string, thread: Thread.Thread, input: Agent.Input) =>
  Effect.gen(function*() {
    const events = Array.from(yield* Stream.runCollect(thread.stream(input)))
    yield* orderOf(clause, events)
    const finished = yield* outcomeOf(clause, events)
    yield* check(clause, finished.outcome === "success", `outcome ${finished.outcome}`)
    return { events, pid: yield* pidOf(clause, events), finished }
  })

/**
 * Forks a turn of `thread` and waits until its provider is working on it: its process is known
 * and, when the subject counts the model's requests, its request reached the model.
 */
const busyTurn = (clause: string, live: LiveSubject, thread: Thread.Thread, input: Agent.Input) =>
  Effect.gen(function*() {
    const before = live.modelRequests === undefined ? 0 : yield* live.modelRequests
    const events: Array<Event.Event> = []
    const fiber = yield* Effect.fork(collect(thread.stream(input), events))
    yield* eventually(clause, "ProcessStarted", Effect.sync(() => pidsOf(events).length > 0))
    if (live.modelRequests !== undefined) {
      yield* eventually(clause, "model request", Effect.map(live.modelRequests, (n) => n > before))
    }
    return { fiber, events, pid: pidsOf(events)[0]!.pid }
  })

const killGroup = (pid: number) =>
  Effect.sync(() => {
    try {
      process.kill(-pid, "SIGKILL")
    } catch {
      // already gone
    }
  })

/**
 * The live clauses L1–L5 for a live driver (also part of `clauses(subject)` when `subject.live`
 * is given). Each clause runs its own agent on `liveTools` and ends by closing it, then checks
 * that no process of the agent, no clone and no valid token of it are left.
 *
 * @since 0.3.0
 * @category clauses
 */
export const liveClauses = (subject: Subject, live: LiveSubject): ReadonlyArray<Clause> => {
  const slow: Agent.Turn = typeof subject.slow === "string" ? { input: subject.slow } : subject.slow
  const steers = subject.driver.capabilities.streamingInput
  return [
    {
      id: "L1",
      title: "warm turns: a thread's turns run one after another on one live process",
      run: withLiveAgent("L1", subject, (agent) =>
        Effect.gen(function*() {
          yield* check("L1", subject.driver.live !== undefined, "the driver has no `live` member")
          const thread = yield* agent.thread("L1")
          const turns = [
            yield* turn("L1", thread, subject.plain),
            yield* turn("L1", thread, subject.plain),
            yield* turn("L1", thread, subject.plain)
          ]
          yield* check("L1", new Set(turns.map((t) => t.pid)).size === 1, "the turns ran on different processes")
          for (const [i, t] of turns.entries()) {
            const started = pidsOf(t.events)[0]!
            yield* check("L1", (started.reused === true) === (i > 0), `turn ${i + 1}: reused is ${started.reused}`)
            if (subject.plainText !== undefined) {
              yield* check("L1", t.finished.result.text === subject.plainText, `turn ${i + 1}: text differs`)
            }
          }
        }))
    },
    {
      id: "L2",
      title: "interrupt keeps the process: a canceled turn (slow model, stopped consumer, slow host tool) " +
        "ends RunFinished(canceled) and the next turn runs on the same process",
      run: withLiveAgent("L2", subject, (agent) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("L2")
          const { pid } = yield* turn("L2", thread, subject.plain)
          // The turn's `cancel` while the model is slow.
          const cancel = yield* Deferred.make<void>()
          const slowTurn = yield* busyTurn("L2", live, thread, { ...slow, cancel: Deferred.await(cancel) })
          yield* Deferred.succeed(cancel, undefined)
          const canceled = yield* Fiber.join(slowTurn.fiber)
          yield* check("L2", slowTurn.pid === pid, "the slow turn ran on another process")
          yield* check("L2", (yield* outcomeOf("L2", canceled.events)).outcome === "canceled", "not canceled")
          // The consumer's fiber interrupted: seen on the thread's events.
          const watched: Array<Event.Event> = []
          const subscribed = yield* Deferred.make<void>()
          const watcher = yield* Effect.fork(
            thread.events.pipe(
              Stream.onStart(Deferred.succeed(subscribed, undefined)),
              Stream.runForEach((event) => Effect.sync(() => watched.push(event)))
            )
          )
          yield* Deferred.await(subscribed)
          const consumed = yield* busyTurn("L2", live, thread, slow)
          yield* Fiber.interrupt(consumed.fiber)
          yield* eventually(
            "L2",
            "RunFinished on thread.events",
            Effect.sync(() => watched.some((event) => event._tag === "RunFinished"))
          )
          yield* Fiber.interrupt(watcher)
          const finished = watched.find((event): event is Event.RunFinished => event._tag === "RunFinished")!
          yield* check("L2", finished.outcome === "canceled", `a stopped consumer's turn ended ${finished.outcome}`)
          yield* check("L2", consumed.pid === pid, "the consumer's turn ran on another process")
          // The turn's `cancel` during a slow host tool call.
          const toolCancel = yield* Deferred.make<void>()
          const inTool: Array<Event.Event> = []
          const callTurn = live.callWait(30_000)
          const toolFiber = yield* Effect.fork(collect(
            thread.stream({
              ...(typeof callTurn === "string" ? { input: callTurn } : callTurn),
              cancel: Deferred.await(toolCancel)
            }),
            inTool
          ))
          yield* eventually("L2", "tool call", Effect.sync(() => inTool.some((event) => event._tag === "ToolCall")))
          yield* Deferred.succeed(toolCancel, undefined)
          const inToolEnd = yield* Fiber.join(toolFiber)
          yield* check(
            "L2",
            (yield* outcomeOf("L2", inToolEnd.events)).outcome === "canceled",
            "tool turn not canceled"
          )
          const after = yield* turn("L2", thread, subject.plain)
          yield* check("L2", after.pid === pid, "the turn after the interrupts ran on another process")
        }))
    },
    {
      id: "L3",
      title: "steer: send during a running turn is delivered into it (InputDelivered, transcript), or fails " +
        "UnsupportedCapability when the driver cannot steer; without a running turn it is refused",
      run: withLiveAgent("L3", subject, (agent) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("L3")
          const refused = steers ? "NoActiveTurn" : "UnsupportedCapability"
          const idle = yield* Effect.flip(thread.send("nobody listens"))
          yield* check("L3", idle._tag === refused, `send without a turn: ${idle._tag}`)
          const events: Array<Event.Event> = []
          const fiber = yield* Effect.fork(collect(thread.stream(live.callWait(2_500)), events))
          yield* eventually("L3", "tool call", Effect.sync(() => events.some((event) => event._tag === "ToolCall")))
          const sent = yield* Effect.either(thread.send(steerInput))
          const done = yield* Fiber.join(fiber)
          const finished = yield* outcomeOf("L3", done.events)
          yield* check("L3", finished.outcome === "success", `the turn ended ${finished.outcome}`)
          const calls = done.events.filter((event): event is Event.ToolCall => event._tag === "ToolCall")
          yield* check(
            "L3",
            calls.map((c) => `${c.phase}:${c.name}:${c.source}`).join() === "start:wait:host,end:wait:host",
            "the host tool call is not start and end of `wait`"
          )
          const delivered = done.events.filter((event): event is Event.InputDelivered =>
            event._tag === "InputDelivered"
          )
          if (steers) {
            if (Either.isLeft(sent)) {
              return yield* new ConformanceFailure({ clause: "L3", detail: `send failed: ${sent.left._tag}` })
            }
            yield* check(
              "L3",
              delivered.length === 1 && delivered[0]!.text === steerInput &&
                delivered[0]!.delivery === sent.right,
              "no InputDelivered matching the delivery"
            )
            yield* check(
              "L3",
              finished.result.transcript.some((entry) =>
                entry._tag === "Message" && entry.role === "user" && entry.text === steerInput
              ),
              "the steered input is not in the transcript"
            )
          } else {
            yield* check("L3", Either.isLeft(sent) && sent.left._tag === refused, "send did not fail as unsupported")
            yield* check("L3", delivered.length === 0, "an InputDelivered without a delivery")
          }
          const late = yield* Effect.flip(thread.send("too late"))
          yield* check("L3", late._tag === refused, `send after the turn: ${late._tag}`)
        }))
    },
    {
      id: "L4",
      title:
        "crash: the live process dying mid-turn is a RunError; the next turn resumes the checkpoint on a fresh process",
      run: withLiveAgent("L4", subject, (agent) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("L4")
          const { pid } = yield* turn("L4", thread, subject.plain)
          const crashing = yield* busyTurn("L4", live, thread, slow)
          // Well into the turn: a CLI writes its session files behind its outputs (Claude Code up
          // to ~100 ms after a result), and a kill inside that window loses what the checkpoint's
          // turn wrote last, which this clause does not test.
          yield* Effect.sleep("400 millis")
          yield* killGroup(crashing.pid)
          const crashed = yield* Fiber.join(crashing.fiber)
          const finished = yield* outcomeOf("L4", crashed.events)
          yield* check("L4", finished.outcome === "failure", `the crashed turn ended ${finished.outcome}`)
          yield* check(
            "L4",
            Either.isLeft(crashed.outcome) &&
              (crashed.outcome.left as { readonly _tag?: unknown })._tag === "RunError",
            "the crashed turn did not fail with RunError"
          )
          const plain: Agent.Turn = typeof subject.plain === "string" ? { input: subject.plain } : subject.plain
          const after = yield* turn("L4", thread, { ...plain, ...live.afterCrash })
          yield* check("L4", after.pid !== pid, "the turn after the crash ran on the dead process's pid")
          const opened = after.events.find((event): event is Event.ThreadOpened => event._tag === "ThreadOpened")
          yield* check("L4", opened?.opening.mode === "resumed", `the fresh process ${opened?.opening.mode ?? "?"}`)
        }))
    },
    {
      id: "L5",
      title: "close: an idle and a busy live process are shut down; no process, clone or token is left",
      run: withLiveAgent("L5", subject, (agent) =>
        Effect.gen(function*() {
          yield* turn("L5", yield* agent.thread("L5-idle"), subject.plain)
          const busy = yield* busyTurn("L5", live, yield* agent.thread("L5-busy"), slow)
          yield* agent.close()
          const ended = yield* Fiber.join(busy.fiber)
          const finished = yield* outcomeOf("L5", ended.events)
          yield* check("L5", finished.outcome !== "success", "the busy turn succeeded across close")
        }))
    }
  ]
}
