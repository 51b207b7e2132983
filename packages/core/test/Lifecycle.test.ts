/**
 * Random interleavings of an agent's lifecycle, each case with real processes, a real gateway
 * socket, real clones: runs and thread turns (resumed from their checkpoint), consumers that
 * stop early or are interrupted, CLIs that ignore SIGTERM or keep working after their answer,
 * a tool call in flight, bounded and unbounded closes, two closes at once, a close from inside
 * a stream consumer, and the agent rebuilt on a new gateway port.
 *
 * After every case: exactly one RunStarted (first) and one RunFinished (last) for every admitted
 * run read to its end, and in `thread.events` for every admitted thread turn (read to its end or
 * not), no marked process, no clone, the source profile byte-identical, every closed agent's
 * token refused (401).
 *
 * Runs: TETHER_LIFECYCLE_RUNS (default 1000). Most cases run a shell as the CLI (a few ms per
 * process); a tool call in flight needs the fake CLI (a real MCP client), used sparingly.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import { Agent, ThreadStore } from "@tether/core"
import type { AgentError, Driver, Event, Thread } from "@tether/core"
import { Gateway } from "@tether/gateway"
import { FakeCli, Harness, Reference } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as NodePath from "node:path"

const numRuns = Number(process.env["TETHER_LIFECYCLE_RUNS"] ?? 1000)

const Block = Tool.make("block", {
  description: "Blocks until interrupted.",
  input: { id: Schema.String },
  output: Schema.Struct({ ok: Schema.Boolean }),
  revision: "block/v1"
})
const Tools = Toolkit.make(Block)
const ToolsLive = Tools.toLayer({ block: () => Effect.never })

type Kind = "plain" | "slow" | "hang" | "linger" | "tool"

type Command =
  | {
    readonly _tag: "Start"
    readonly kind: Kind
    readonly thread: boolean
    readonly stopAfter: number | undefined
    /** The consumer closes the agent (bounded) when it sees this run's first event. */
    readonly closeInside: boolean
  }
  | { readonly _tag: "Interrupt"; readonly index: number }
  | { readonly _tag: "Close"; readonly deadlineMs: number; readonly twice: boolean }
  | { readonly _tag: "Rebuild" }
  | { readonly _tag: "Wait"; readonly ms: number }

const command: FastCheck.Arbitrary<Command> = FastCheck.oneof(
  {
    weight: 6,
    arbitrary: FastCheck.record({
      _tag: FastCheck.constant("Start" as const),
      kind: FastCheck.oneof(
        { weight: 16, arbitrary: FastCheck.constantFrom<Kind>("plain", "slow", "linger") },
        { weight: 2, arbitrary: FastCheck.constant<Kind>("hang") },
        { weight: 1, arbitrary: FastCheck.constant<Kind>("tool") }
      ),
      thread: FastCheck.boolean(),
      stopAfter: FastCheck.option(FastCheck.integer({ min: 1, max: 4 }), { nil: undefined, freq: 3 }),
      closeInside: FastCheck.integer({ min: 0, max: 9 }).map((n) => n < 2)
    })
  },
  {
    weight: 2,
    arbitrary: FastCheck.record({ _tag: FastCheck.constant("Interrupt" as const), index: FastCheck.nat(5) })
  },
  {
    weight: 2,
    arbitrary: FastCheck.record({
      _tag: FastCheck.constant("Close" as const),
      deadlineMs: FastCheck.integer({ min: 0, max: 150 }),
      twice: FastCheck.boolean()
    })
  },
  { weight: 1, arbitrary: FastCheck.constant({ _tag: "Rebuild" as const }) },
  {
    weight: 2,
    arbitrary: FastCheck.record({
      _tag: FastCheck.constant("Wait" as const),
      ms: FastCheck.integer({ min: 0, max: 40 })
    })
  }
)

const quote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`

/**
 * The CLI of most cases: a shell printing the reference protocol (`Driver.Output` lines). The
 * prompt is the kind of run; a resumed turn answers in the session it resumes. A `linger` CLI
 * keeps working 100 ms after its answer and records, in `<workspace>/signals/<run id>`, a
 * SIGTERM received in that time: close must let it finish (its exit grace is longer).
 */
const shellDriver: Driver.Driver = {
  ...Reference.driver({ capabilities: { resume: true } }),
  prepare: (request) => {
    const session = request.session._tag === "Fork" ? request.session.id : request.session.id
    const line = (output: unknown) => quote(JSON.stringify(output))
    const started = line({ _tag: "SessionStarted", sessionId: session, model: "shell-model" })
    const answer = [
      line({ _tag: "TextDelta", text: "answer" }),
      line({ _tag: "Message", role: "assistant", text: "answer" }),
      line({
        _tag: "Terminal",
        ok: true,
        text: "answer",
        usage: { inputTokens: 1, outputTokens: 1 },
        model: "shell-model",
        session,
        error: undefined,
        raw: {}
      })
    ].join(" ")
    const script = request.prompt === "slow"
      ? `printf '%s\\n' ${started}; exec sleep 60`
      : request.prompt === "hang"
      ? `trap '' TERM; printf '%s\\n' ${started}; while :; do sleep 1; done`
      : request.prompt === "linger"
      ? `printf '%s\\n' ${started} ${answer}; trap "echo TERM > ${
        quote(`${request.workspace}/signals/${request.runId}`)
      }; exit 143" TERM; sleep 0.1`
      : `printf '%s\\n' ${started} ${answer}`
    return Effect.succeed({
      command: "/bin/sh",
      args: ["-c", script],
      env: { PATH: request.hostEnv["PATH"] ?? "/usr/bin:/bin" },
      cwd: request.workspace,
      stdin: undefined,
      files: [{ path: "mcp.json", content: JSON.stringify({ url: request.hosted.url }) }]
    })
  }
}

const fakeCli = FakeCli.driver({ capabilities: { resume: true } })

const inputOf = (kind: Kind, useFakeCli: boolean): string => {
  if (!useFakeCli) return kind
  switch (kind) {
    case "plain":
      return FakeCli.script({ op: "text", text: "plain" })
    case "slow":
      return FakeCli.script({ op: "text", text: "slow" }, { op: "sleep", ms: 60_000 })
    case "hang":
      return FakeCli.script({ op: "text", text: "hang" }, { op: "hang" })
    case "linger":
      return FakeCli.script({ op: "result", text: "linger" }, { op: "linger", ms: 100 })
    case "tool":
      return FakeCli.script({ op: "call", tool: "block", input: { id: "x" } })
  }
}

type RunFailure = AgentError.RunError | AgentError.AgentClosed | AgentError.InvalidTurn | Thread.RunFailure

interface Started {
  readonly command: Command & { readonly _tag: "Start" }
  readonly agent: number
  /** When the turn started, the thread's checkpoint (when no other turn of the thread was in flight). */
  readonly checkpoint: Option.Option<Option.Option<ThreadStore.ThreadRecord>>
  readonly events: Array<Event.Event>
  readonly fiber: Fiber.RuntimeFiber<void, RunFailure | AgentError.CloseTimeout>
  interrupted: boolean
}

interface Built {
  readonly agent: Agent.Agent
  readonly token: Harness.Observed
  readonly thread: Thread.Thread | undefined
  /** Everything the thread's `events` delivered, subscribed before its first turn; ends at close. */
  readonly threadEvents: Fiber.RuntimeFiber<ReadonlyArray<Event.Event>> | undefined
}

const notAdmitted = (cause: string) =>
  ["AgentClosed", "ThreadBusy", "ThreadClosed", "UnsupportedCapability"].some((tag) => cause.includes(tag))

const runCase = (commands: ReadonlyArray<Command>, useFakeCli: boolean) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const before = yield* Harness.treeDigest(sandbox.source)
    Fs.mkdirSync(NodePath.join(sandbox.workspace, "signals"))
    const { agents, started, threadEvents } = yield* Effect.gen(function*() {
      const agents: Array<Built> = []
      // Each agent gets a gateway of its own (a rebuilt agent: a new port and a new token); a
      // bystander registration keeps each listener up, so a closed agent's token is seen to get 401.
      const build = Effect.gen(function*() {
        const observed: Array<Harness.Observed> = []
        const gateway = yield* Gateway.make()
        const recording = {
          redactor: gateway.redactor,
          register: (executor: Parameters<typeof gateway.register>[0]) =>
            Effect.tap(gateway.register(executor), (registration) =>
              Effect.sync(() => observed.push({ url: registration.url, token: registration.token })))
        }
        yield* recording.register(yield* Toolkit.executor(Toolkit.empty))
        const agent: Agent.Agent = yield* Agent.make({
          driver: useFakeCli ? fakeCli : shellDriver,
          definition: { instructions: "", skills: [], tools: Tools },
          workspace: sandbox.workspace,
          profile: sandbox.selection,
          processes: { killGrace: "100 millis", exitGrace: "2 seconds" }
        }).pipe(Effect.provideService(Gateway.Gateway, recording))
        const thread = yield* Effect.option(agent.thread("lifecycle-thread"))
        if (agents.length > 0) {
          expect(agent.fingerprint).toBe(agents[0]!.agent.fingerprint)
        }
        const subscribed = yield* Deferred.make<void>()
        const threadEvents = Option.isNone(thread) ? undefined : yield* thread.value.events.pipe(
          Stream.onStart(Deferred.succeed(subscribed, undefined)),
          Stream.runCollect,
          Effect.map((chunk): ReadonlyArray<Event.Event> =>
            Array.from(chunk)
          ),
          Effect.fork
        )
        if (threadEvents !== undefined) yield* Deferred.await(subscribed)
        agents.push({ agent, token: observed[1]!, thread: Option.getOrUndefined(thread), threadEvents })
      })
      yield* build
      const started: Array<Started> = []
      let closeStarted = false
      const current = () => agents[agents.length - 1]!
      const threadBusy = () =>
        started.some((run) => run.command.thread && run.agent === agents.length - 1 && run.fiber.unsafePoll() === null)
      for (const cmd of commands) {
        switch (cmd._tag) {
          case "Start": {
            const { agent, thread } = current()
            const events: Array<Event.Event> = []
            const input = inputOf(cmd.kind === "tool" && !useFakeCli ? "plain" : cmd.kind, useFakeCli)
            const checkpoint = cmd.thread && thread !== undefined && !threadBusy() && !closeStarted
              ? Option.some(yield* Effect.orDie(thread.snapshot))
              : Option.none()
            const source = cmd.thread && thread !== undefined ? thread.stream(input) : agent.stream(input)
            let closing = false
            const stream = source.pipe(Stream.tap((event) => {
              events.push(event)
              if (!cmd.closeInside || closing) return Effect.void
              closing = true
              // The consumer itself closes the agent, then keeps reading its run to the end.
              return agent.close({ timeout: "10 seconds" })
            }))
            const fiber = yield* (cmd.stopAfter === undefined ? stream : Stream.take(stream, cmd.stopAfter)).pipe(
              Stream.runDrain,
              Effect.fork
            )
            started.push({ command: cmd, agent: agents.length - 1, checkpoint, events, fiber, interrupted: false })
            if (cmd.closeInside) closeStarted = true
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
            const close = current().agent.close({ timeout: `${cmd.deadlineMs} millis` })
            const exits = yield* Effect.all(cmd.twice ? [close, close] : [close], { concurrency: 2 }).pipe(
              Effect.map(() => [] as ReadonlyArray<unknown>),
              Effect.catchTag("CloseTimeout", (error) => Effect.succeed([error]))
            )
            for (const error of exits) expect(error).toMatchObject({ _tag: "CloseTimeout" })
            break
          }
          case "Rebuild": {
            // The host restarts the agent: the old one closes, a new one (new port, new token)
            // resumes its thread from the store.
            yield* current().agent.close()
            yield* build
            closeStarted = false
            break
          }
          case "Wait":
            yield* Effect.sleep(`${cmd.ms} millis`)
        }
      }
      // An unbounded close completes, and again (idempotent); a run after it is refused.
      for (const { agent } of agents) {
        yield* agent.close()
        yield* agent.close()
        expect((yield* Effect.flip(agent.run("late")))._tag).toBe("AgentClosed")
      }
      for (const run of started) yield* Fiber.await(run.fiber)
      // Each thread's events ended with its agent's close.
      const threadEvents: Array<ReadonlyArray<Event.Event>> = []
      for (const { threadEvents: fiber } of agents) {
        threadEvents.push(fiber === undefined ? [] : yield* Fiber.join(fiber))
      }
      // Every gateway still serves (its bystander is registered): each agent's token gets 401.
      for (const { token } of agents) expect(yield* Harness.probe(token)).toBe(401)
      return { agents, started, threadEvents }
    }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(ToolsLive, NodeContext.layer, ThreadStore.layerMemory)))

    for (const run of started) {
      const exit = run.fiber.unsafePoll()!
      const tags = run.events.map((event) => event._tag)
      const count = (tag: string) => tags.filter((t) => t === tag).length
      expect(count("RunStarted")).toBeLessThanOrEqual(1)
      expect(count("RunFinished")).toBeLessThanOrEqual(1)
      if (run.interrupted || run.command.stopAfter !== undefined) continue
      const failure = Exit.isFailure(exit) ? String(exit.cause) : ""
      if (tags.length === 0) {
        // Refused before admission (closed agent, busy or closed thread): nothing was published.
        expect(notAdmitted(failure), failure).toBe(true)
        continue
      }
      // Admitted and read to its end: exactly one RunStarted first, one RunFinished last, and the
      // stream's end agrees with the RunFinished outcome.
      expect(count("RunStarted")).toBe(1)
      expect(count("RunFinished")).toBe(1)
      expect(tags[0]).toBe("RunStarted")
      const finished = run.events[run.events.length - 1]!
      expect(finished._tag).toBe("RunFinished")
      expect(run.events.map((event) => event.sequence)).toEqual(run.events.map((_, i) => i))
      if (finished._tag === "RunFinished") {
        expect(Exit.isSuccess(exit), failure).toBe(finished.outcome === "success")
        // A CLI that delivered its answer is never signalled while it finishes within its grace.
        if (finished.outcome === "success" && run.command.kind === "linger" && !useFakeCli) {
          expect(Fs.existsSync(NodePath.join(sandbox.workspace, "signals", finished.runId))).toBe(false)
        }
        // A thread turn started with no other turn in flight resumes the checkpoint it saw.
        if (finished.outcome === "success" && Option.isSome(run.checkpoint)) {
          const session = run.events.find((event) => event._tag === "SessionStarted")
          const record = run.checkpoint.value
          expect(session?._tag === "SessionStarted" && session.resumed).toBe(Option.isSome(record))
          if (Option.isSome(record)) expect(finished.result.session).toBe(record.value.session)
        }
      }
    }
    // thread.events pairs every admitted turn, whether its caller read it to the end, stopped
    // early or was interrupted: exactly one RunStarted (first) and one RunFinished (last) per run.
    for (const [index, events] of threadEvents.entries()) {
      const byRun = new Map<string, Array<Event.Event>>()
      for (const event of events) byRun.set(event.runId, [...(byRun.get(event.runId) ?? []), event])
      for (const [runId, runEvents] of byRun) {
        const tags = runEvents.map((event) => event._tag)
        expect(tags.filter((tag) => tag === "RunStarted"), runId).toHaveLength(1)
        expect(tags.filter((tag) => tag === "RunFinished"), runId).toHaveLength(1)
        expect(tags[0], runId).toBe("RunStarted")
        expect(tags[tags.length - 1], runId).toBe("RunFinished")
      }
      // Every thread turn whose own consumer saw it admitted is there too.
      for (const run of started) {
        if (!run.command.thread || run.agent !== index) continue
        const own = run.events.find((event) => event._tag === "RunStarted")
        if (own !== undefined) expect(byRun.has(own.runId), own.runId).toBe(true)
      }
    }
    for (const { agent } of agents) expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
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
            FastCheck.array(command, { minLength: 1, maxLength: 6 }),
            FastCheck.nat(39),
            (commands, pick) => {
              // A tool call in flight needs the fake CLI (a real MCP client, ~10x the cost of a
              // shell); it also plays the other kinds in one case out of forty.
              const useFakeCli = commands.some((cmd) => cmd._tag === "Start" && cmd.kind === "tool") || pick === 0
              return Effect.runPromise(runCase(commands, useFakeCli))
            }
          ),
          { numRuns, endOnFailure: true }
        )
      ),
    { timeout: 900_000 }
  )
})

/**
 * Live threads (DESIGN §12) under random interleavings, on the live reference driver (a real
 * Node process per thread speaking its JSON-lines protocol, with a real MCP client): turns,
 * input sent into a running turn, interrupts (the turn's `cancel`, the consumer's fiber), tool-
 * policy changes, kills of the live process mid-turn, and closes of the agent (idle or with a
 * busy turn) after which a new agent reopens the threads from the store.
 *
 * Invariants: every turn read to its end has one RunStarted first and one RunFinished last, its
 * outcome as its operation demands (success, canceled, failure with `RunError`); a delivered
 * input is its turn's `InputDelivered`; once its warm process committed a turn, a thread's turns
 * stay on it (same pid, `reused`) until a policy change, a crash or a close, after which a fresh process resumes the
 * checkpoint when one was committed; at every pause at most one live process (process group) per
 * thread; after the last close no marked process, no clone, the source profile byte-identical,
 * every token of every agent refused (401).
 *
 * Runs: TETHER_LIVE_LIFECYCLE_RUNS (default 30).
 */
const liveRuns = Number(process.env["TETHER_LIVE_LIFECYCLE_RUNS"] ?? 30)

type LiveOp =
  | { readonly _tag: "Turn"; readonly thread: number }
  | { readonly _tag: "Send"; readonly thread: number }
  | { readonly _tag: "Interrupt"; readonly thread: number; readonly consumer: boolean }
  | { readonly _tag: "Policy"; readonly thread: number }
  | { readonly _tag: "Crash"; readonly thread: number }
  | { readonly _tag: "Close"; readonly busy: boolean }

const liveThread = FastCheck.integer({ min: 0, max: 1 })
const liveOp: FastCheck.Arbitrary<LiveOp> = FastCheck.oneof(
  { weight: 4, arbitrary: FastCheck.record({ _tag: FastCheck.constant("Turn" as const), thread: liveThread }) },
  { weight: 2, arbitrary: FastCheck.record({ _tag: FastCheck.constant("Send" as const), thread: liveThread }) },
  {
    weight: 2,
    arbitrary: FastCheck.record({
      _tag: FastCheck.constant("Interrupt" as const),
      thread: liveThread,
      consumer: FastCheck.boolean()
    })
  },
  { weight: 2, arbitrary: FastCheck.record({ _tag: FastCheck.constant("Policy" as const), thread: liveThread }) },
  { weight: 2, arbitrary: FastCheck.record({ _tag: FastCheck.constant("Crash" as const), thread: liveThread }) },
  { weight: 1, arbitrary: FastCheck.record({ _tag: FastCheck.constant("Close" as const), busy: FastCheck.boolean() }) }
)

/** The provider of the live reference driver: `slow` works a minute, `steer` waits for input. */
const liveDriver = Reference.driver({
  live: true,
  respond: (prompt) =>
    prompt === "slow"
      ? [{ _tag: "TextDelta", text: "working" }, { _tag: "$sleep", ms: 60_000 }]
      : prompt === "steer"
      ? [
        { _tag: "TextDelta", text: "waiting" },
        { _tag: "$sleep", ms: 60_000, untilInput: true },
        ...Reference.answer("steered")
      ]
      : Reference.answer(prompt)
})

const LiveTools = Toolkit.make(
  Tool.make("echo", {
    description: "Echo.",
    input: { text: Schema.String },
    output: Schema.String,
    revision: "echo/v1"
  }),
  Tool.make("other", { description: "Other.", input: {}, output: Schema.String, revision: "other/v1" })
)
const LiveToolsLive = LiveTools.toLayer({ echo: ({ text }) => Effect.succeed(text), other: () => Effect.succeed("") })

/** The process group of `pid`, while it runs. */
const groupOf = (pid: number): number | undefined => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2])
  } catch {
    return undefined
  }
}

const liveCase = (ops: ReadonlyArray<LiveOp>) =>
  Effect.gen(function*() {
    const observed: Array<Harness.Observed> = []
    const sandbox = yield* Harness.sandbox
    const before = yield* Harness.treeDigest(sandbox.source)
    const markers = yield* Effect.gen(function*() {
      const gateway = yield* Gateway.Gateway
      yield* gateway.register(yield* Toolkit.executor(Toolkit.empty))
      const markers: Array<string> = []
      const open = Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver: liveDriver,
          definition: { instructions: "", skills: [], tools: LiveTools },
          workspace: sandbox.workspace,
          profile: sandbox.selection,
          processes: { killGrace: "1 second", exitGrace: "2 seconds" }
        })
        markers.push(agent.marker)
        return { agent, threads: [yield* agent.thread("zero"), yield* agent.thread("one")] }
      })
      let current = yield* open
      // The model of each thread: its warm process, whether its policy is narrowed, whether a
      // turn was committed (a fresh process then resumes), every pid it ever ran on.
      const warm: Array<number | undefined> = [undefined, undefined]
      const narrowed = [false, false]
      const committed = [false, false]
      // Whether the warm process itself committed a turn: core reuses a process only then (one
      // whose turns were all canceled is replaced by a fresh one resuming the checkpoint).
      const proven = [false, false]
      const pids: Array<Set<number>> = [new Set(), new Set()]
      const policy = (i: number) => narrowed[i] ? { toolPolicy: { allow: ["echo"] } } : {}

      const pidIn = (events: ReadonlyArray<Event.Event>) =>
        events.flatMap((e) => e._tag === "ProcessStarted" ? [e] : [])
      /** Checks a finished turn of thread `i` against the model and moves the model on. */
      const settle = (i: number, events: ReadonlyArray<Event.Event>, outcome: "success" | "canceled" | "failure") => {
        const tags = events.map((e) => e._tag)
        expect(tags.at(-1)).toBe("RunFinished")
        expect(tags.filter((t) => t === "RunStarted" || t === "RunFinished")).toHaveLength(2)
        expect(events.at(-1)).toMatchObject({ _tag: "RunFinished", outcome })
        started(i, events)
        if (outcome === "success") committed[i] = proven[i] = true
      }
      /** Checks the start of a turn of thread `i` against the model; its process is warm now. */
      const started = (i: number, events: ReadonlyArray<Event.Event>) => {
        expect(events[0]?._tag).toBe("RunStarted")
        expect(events.map((e) => e.sequence)).toEqual(events.map((_, n) => n))
        const started = pidIn(events)
        expect(started).toHaveLength(1)
        const { pid, reused } = started[0]!
        if (warm[i] !== undefined && proven[i]) {
          // The thread's warm process serves the turn.
          expect(pid).toBe(warm[i])
          expect(reused).toBe(true)
        } else if (pid !== warm[i]) {
          proven[i] = false
          expect(reused).toBeUndefined()
          expect(pids[i]!.has(pid)).toBe(false)
          const opened = events.find((e): e is Event.ThreadOpened => e._tag === "ThreadOpened")
          expect(opened?.opening.mode).toBe(committed[i] ? "resumed" : "started")
        }
        pids[i]!.add(pid)
        warm[i] = pid
      }
      const forked = (i: number, input: string, extra: Partial<Agent.Turn> = {}) =>
        Effect.gen(function*() {
          const events: Array<Event.Event> = []
          const fiber = yield* current.threads[i]!.stream({ input, ...policy(i), ...extra }).pipe(
            Stream.runForEach((event) => Effect.sync(() => events.push(event))),
            Effect.either,
            Effect.fork
          )
          // The provider is inside the turn once its first output arrived.
          while (!events.some((e) => e._tag === "TextDelta")) yield* Effect.sleep("5 millis")
          return { events, fiber }
        })

      for (const op of ops) {
        switch (op._tag) {
          case "Turn":
          case "Policy": {
            const i = op.thread
            if (op._tag === "Policy") {
              narrowed[i] = !narrowed[i]
              warm[i] = undefined
            }
            const events = Array.from(
              yield* Stream.runCollect(current.threads[i]!.stream({ input: "hello", ...policy(i) }))
            )
            settle(i, events, "success")
            break
          }
          case "Send": {
            const i = op.thread
            const turn = yield* forked(i, "steer")
            const delivery = yield* current.threads[i]!.send("more input")
            expect(delivery).toBe("Injected")
            const outcome = yield* Fiber.join(turn.fiber)
            expect(outcome._tag).toBe("Right")
            settle(i, turn.events, "success")
            expect(turn.events.filter((e) => e._tag === "InputDelivered")).toMatchObject([
              { text: "more input", delivery: "Injected" }
            ])
            break
          }
          case "Interrupt": {
            const i = op.thread
            const cancel = yield* Deferred.make<void>()
            const turn = yield* forked(i, "slow", { cancel: Deferred.await(cancel) })
            if (op.consumer) {
              // The consumer's fiber goes: the turn's own events end with it; the thread's
              // events would show its RunFinished. The process stays warm for the next turn.
              yield* Fiber.interrupt(turn.fiber)
              started(i, turn.events)
            } else {
              yield* Deferred.succeed(cancel, undefined)
              const outcome = yield* Fiber.join(turn.fiber)
              expect(outcome._tag).toBe("Left")
              settle(i, turn.events, "canceled")
            }
            break
          }
          case "Crash": {
            const i = op.thread
            const turn = yield* forked(i, "slow")
            const pid = pidIn(turn.events)[0]!.pid
            process.kill(-pid, "SIGKILL")
            const outcome = yield* Fiber.join(turn.fiber)
            expect(outcome._tag === "Left" && outcome.left).toMatchObject({ _tag: "RunError" })
            settle(i, turn.events, "failure")
            warm[i] = undefined
            break
          }
          case "Close": {
            const busy = op.busy ? yield* forked(0, "slow") : undefined
            yield* current.agent.close()
            if (busy !== undefined) {
              const outcome = yield* Fiber.join(busy.fiber)
              expect(outcome._tag).toBe("Left")
              expect(busy.events.at(-1)).toMatchObject({ _tag: "RunFinished" })
              expect(busy.events.at(-1)).not.toMatchObject({ outcome: "success" })
            }
            expect(yield* Harness.markedProcesses(markers.at(-1)!)).toEqual([])
            warm[0] = undefined
            warm[1] = undefined
            current = yield* open
            break
          }
        }
        // At a pause: at most one live process (group) per thread, and it is the thread's warm one.
        const groups = new Set<number>()
        for (const pid of yield* Harness.markedProcesses(markers.at(-1)!)) {
          const group = groupOf(pid)
          if (group !== undefined) groups.add(group)
        }
        expect([...groups].every((group) => warm.includes(group)), `groups ${[...groups]} warm ${warm}`).toBe(true)
      }
      yield* current.agent.close()
      // The bystander keeps the listener up: every credential of every agent is refused now.
      for (const credential of observed.slice(1)) expect(yield* Harness.probe(credential)).toBe(401)
      return markers
    }).pipe(
      Effect.scoped,
      Effect.provide(Layer.mergeAll(LiveToolsLive, Harness.recordingLayer(observed), ThreadStore.layerMemory))
    )
    for (const marker of markers) expect(yield* Harness.markedProcesses(marker)).toEqual([])
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    expect(yield* Harness.treeDigest(sandbox.source)).toBe(before)
  }).pipe(Effect.scoped)

describe("live thread lifecycle under random interleavings (live reference driver)", () => {
  it.live(
    `holds its invariants over ${liveRuns} cases (real processes, sockets and MCP clients)`,
    () =>
      Effect.promise(() =>
        FastCheck.assert(
          FastCheck.asyncProperty(
            FastCheck.array(liveOp, { minLength: 1, maxLength: 8 }),
            (ops) => Effect.runPromise(liveCase(ops))
          ),
          { numRuns: liveRuns, endOnFailure: true }
        )
      ),
    { timeout: 600_000 }
  )
})
