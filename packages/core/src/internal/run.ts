/**
 * One run: prepare the invocation, materialize its files, spawn, parse stdout into events,
 * build the result as soon as the terminal record arrives, and hand a still-exiting process
 * to the agent's reaper.
 *
 * @internal
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import type * as Gateway from "@tether/gateway/Gateway"
import type * as Catalog from "@tether/tool/Catalog"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as EffectContext from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as Sink from "effect/Sink"
import * as Stream from "effect/Stream"
import * as Tracer from "effect/Tracer"
import { RunError } from "../AgentError.js"
import type * as Driver from "../Driver.js"
import { ProtocolError } from "../Driver.js"
import * as Event from "../Event.js"
import { Raw, Result, type ThreadOpening, TranscriptMessage, TranscriptToolCall, Usage } from "../Result.js"
import type { TranscriptEntry } from "../Result.js"
import * as Approvals from "./approvals.js"
import * as Emitter from "./emitter.js"
import * as LineParser from "./lineParser.js"
import * as Live from "./live.js"
import * as Process from "./process.js"
import * as Redaction from "./redaction.js"
import type * as RunLogs from "./runLogs.js"
import * as ScrubFiles from "./scrubFiles.js"
import type * as Structured from "./structured.js"
import * as Tracing from "./tracing.js"

/** What a run needs from its agent. @internal */
export interface Context {
  readonly marker: string
  readonly driver: Driver.Driver
  readonly hostedKey: string
  readonly registration: {
    readonly url: string
    readonly tokenVariable: string
    /** Mints the credential of one provider process (scoped: released once the run is done with it). */
    readonly credential: Gateway.Registration["credential"]
  }
  /** Scrubs live token values out of everything the run emits or persists. */
  readonly redactor: Gateway.Redactor
  readonly profile: {
    readonly dir: string
    readonly siblings: { readonly [name: string]: string }
    readonly env: { readonly [name: string]: string }
    readonly materialize: (
      files: ReadonlyArray<Driver.MaterializedFile>
    ) => Effect.Effect<void, { readonly message: string }>
  }
  readonly workspace: string
  readonly instructions: string
  /** The definition's skills, snapshotted into the clone. */
  readonly skills: ReadonlyArray<Driver.SkillFiles>
  /** The definition's external MCP sources. */
  readonly mcp: ReadonlyArray<Driver.McpServer>
  readonly tools: ReadonlyArray<string>
  readonly sandbox: Driver.SandboxLevel | undefined
  readonly hostEnv: { readonly [name: string]: string | undefined }
  readonly limits: Process.Limits
  /** How long the reaper lets a process exit on its own after its terminal record. */
  readonly exitGrace: Duration.Duration
  /** SIGTERM → SIGKILL grace. */
  readonly killGrace: Duration.Duration
  readonly processes: Set<Process.Running>
  /** The agent's per-process logs (`ProfileLayout.logs`), removed once none of its processes runs. */
  readonly logs: RunLogs.RunLogs
  readonly reapers: FiberSet.FiberSet<void, never>
  readonly services: EffectContext.Context<FileSystem.FileSystem | Path.Path>
  /** The agent's warm live processes (threads run live when the driver has `live`). */
  readonly pool?: Live.Pool
  /**
   * The agent's approvals, when it has them: the broker that answers each request, and how to
   * serve a driver's approver tool on the gateway for one run (its own registration, never the
   * hosted tools').
   */
  readonly approvals?: {
    readonly broker: Approvals.Broker
    readonly key: string
    readonly register: (
      executor: Catalog.Executor
    ) => Effect.Effect<Gateway.Registration, Gateway.GatewayError, Scope.Scope>
  }
}

/** @internal */
export interface Request {
  readonly runId: string
  readonly prompt: string
  readonly model: string | undefined
  readonly session: Driver.SessionRequest
  /** The thread whose turn this run is (absent for an agent's own run). */
  readonly threadKey?: string
  /**
   * This turn's effective tools (a per-turn tool policy); default: every tool of the agent. The
   * process's own credential lists and calls exactly these.
   */
  readonly tools?: ReadonlyArray<string>
  /**
   * A thread's checkpoint commit: after a clean terminal record and the provider process's exit
   * (it may still be writing the session the checkpoint points at), before `RunFinished`.
   */
  readonly commit?: (result: Result) => Effect.Effect<void, { readonly message: string }>
  /** A thread's session save (a live turn saves again once its CLI stopped writing the turn). */
  readonly save?: (session: string) => Effect.Effect<void, { readonly message: string }>
  /**
   * A thread's session load: the committed copy of the session a `Resume` resumes or a `Fork`
   * forks, from the session store into the clone, before a process is started on it (another
   * host may have committed a later turn of it; a failed turn may have left this clone's copy
   * past it).
   */
  readonly load?: (session: string) => Effect.Effect<void, { readonly message: string }>
  /** This turn's policy over the CLI's built-in tools. */
  readonly builtinTools?: Driver.InvocationRequest["builtinTools"]
  /** This turn's sandbox level (checked to narrow the agent's); default: the agent's. */
  readonly sandbox?: Driver.SandboxLevel
  /** A thread turn: how it opened its session (a `ThreadOpened` event, `Result.thread`). */
  readonly opening?: ThreadOpening
  /**
   * A thread turn: called once the provider has taken the session before any of its outputs
   * (a live turn's process is attached to it), so a resume can no longer be rejected.
   */
  readonly accepted?: () => void
  /** Completed once the run's provider process is gone (or was never spawned). */
  readonly reaped?: Deferred.Deferred<void>
  /**
   * A live thread turn: runs on the thread's warm process (opened if there is none that this
   * turn may reuse, `reuse` being its compatibility).
   */
  readonly live?: { readonly key: string; readonly reuse: string }
  /**
   * A structured-output attempt: a native driver gets its JSON Schema, and what the provider
   * returned for it is left in it before `RunFinished`.
   */
  readonly structured?: Structured.Attempt
}

interface State {
  model: string | undefined
  session: string | undefined
  usage: Usage | undefined
  lastAssistant: string | undefined
  transcript: Array<TranscriptEntry>
  /** Each call id's transcript entry (its latest call), and whether that call ended. */
  calls: Map<string, { readonly index: number; ended: boolean }>
  terminal: Driver.Terminal | undefined
  running: Process.Running | undefined
  overflow: boolean
  /** Approval id → its transcript entry. */
  approvals: Map<string, number>
  /** The run is a live thread's turn: its process, and its credential, outlive it. */
  live: boolean
  /**
   * A thread turn began to commit its checkpoint: from then on its session may be a record's (a
   * commit interrupted in flight may have landed all the same), and it stays in the clone.
   */
  committing: boolean
  /** How the run ended, once `finished` knows (`true`: its result was returned). */
  ok: boolean | undefined
}

/**
 * The warm processes whose outputs carried a live token in some turn. Their stdout tail is kept
 * out of a result: the process's credential lives as long as the process, and a CLI streams text
 * in pieces (Claude Code's `stream_event` `text_delta` records, a tool input's `input_json_delta`),
 * each too short for a window to recognise (a piece of a few characters is no token, and masking
 * every short run that occurs in a token would mask most of the text), while joining them gives
 * the token back. The outputs parsed from those records are scrubbed as a stream (`Redaction`),
 * which is what tells that a token went by; dropping the tail of such a process is sound whatever
 * the driver's record format and costs nothing on a clean turn. A one-shot run's credential is
 * revoked when its terminal record arrives, before its result is built: its tail is kept.
 */
const carriedToken = new WeakSet<Process.Running>()

/**
 * Notes that the run's outputs carried a live token: on a live thread's turn, its process's
 * stdout tail is kept out of every later result.
 *
 * @internal
 */
export const noteToken = (state: Pick<State, "live" | "running">): void => {
  if (state.live && state.running !== undefined) carriedToken.add(state.running)
}

// Drivers may hand plain objects; the result and events carry `Usage` instances (encodable).
const toUsage = (usage: Usage): Usage => usage instanceof Usage ? usage : new Usage(usage, true)

const outputToEvents = (
  output: Driver.Output,
  state: State,
  session: Driver.SessionRequest,
  into: Array<Emitter.Pending>
): void => {
  switch (output._tag) {
    case "SessionStarted": {
      state.session = output.sessionId
      if (output.model !== undefined) state.model = output.model
      const resumed = session._tag === "Resume"
      into.push(Emitter.critical((base) =>
        new Event.SessionStarted({
          ...base,
          sessionId: output.sessionId,
          ...(output.model === undefined ? {} : { model: output.model }),
          resumed
        }, true)
      ))
      return
    }
    case "TextDelta":
    case "ReasoningDelta":
      // Published as it is (the emitter builds the event from its text).
      into.push(output)
      return
    case "Message": {
      if (output.role === "assistant") state.lastAssistant = output.text
      state.transcript.push(new TranscriptMessage({ role: output.role, text: output.text }, true))
      into.push(Emitter.critical((base) => new Event.Message({ ...base, role: output.role, text: output.text }, true)))
      return
    }
    case "ToolCall": {
      const fields = {
        phase: output.phase,
        callId: output.callId,
        name: output.name,
        source: output.source,
        ...(output.input === undefined ? {} : { input: output.input }),
        ...(output.output === undefined ? {} : { output: output.output }),
        ...(output.isError === undefined ? {} : { isError: output.isError })
      }
      const call = state.calls.get(output.callId)
      // A call id seen again after its call ended starts a call of its own: a provider may give
      // the calls of successive model responses the same id.
      if (call === undefined || (call.ended && output.phase === "start")) {
        state.calls.set(output.callId, { index: state.transcript.length, ended: output.phase === "end" })
        const { phase: _, ...entry } = fields
        state.transcript.push(new TranscriptToolCall(entry, true))
      } else {
        const index = call.index
        if (output.phase === "end") call.ended = true
        const previous = state.transcript[index] as TranscriptToolCall
        const { phase: _, ...entry } = fields
        state.transcript[index] = new TranscriptToolCall({
          ...previous,
          ...entry,
          ...(entry.input === undefined && previous.input !== undefined ? { input: previous.input } : {})
        }, true)
      }
      into.push(Emitter.critical((base) => new Event.ToolCall({ ...base, ...fields }, true)))
      return
    }
    case "Usage": {
      const usage = toUsage(output.usage)
      state.usage = usage
      into.push(Emitter.critical((base) => new Event.Usage({ ...base, usage }, true)))
      return
    }
    case "Notice":
      into.push(Emitter.critical((base) =>
        new Event.Notice({
          ...base,
          level: output.level,
          kind: output.kind,
          message: output.message,
          ...(output.raw === undefined ? {} : { raw: output.raw })
        }, true)
      ))
      return
    case "Terminal": {
      state.terminal = output
      if (output.usage !== undefined) state.usage = toUsage(output.usage)
      if (output.session !== undefined) state.session = output.session
      if (output.model !== undefined) state.model = output.model
      return
    }
  }
}

/**
 * A `Raw` whose `stdout` is the text of `tail`, decoded when it is first read and kept from then
 * on as an ordinary field (equal, encoded and printed alike: each reads the field). Only for a
 * tail that `Redaction.windowKeeps`: its text needs no scrubbing.
 */
const rawDecodedOnRead = (fields: Omit<Raw, "stdout">, tail: Process.RawTail): Raw => {
  const raw = new Raw({ ...fields, stdout: "" }, true)
  const settle = (stdout: string): string => {
    Object.defineProperty(raw, "stdout", { value: stdout, writable: true, enumerable: true, configurable: true })
    return stdout
  }
  Object.defineProperty(raw, "stdout", {
    get: () => settle(Process.decodeTail(tail)),
    set: settle,
    enumerable: true,
    configurable: true
  })
  return raw
}

/**
 * The raw output of a run: bounded tails, scrubbed as windows (a token cut by an edge is replaced
 * too); a live process's stdout tail is left out once its outputs carried a token (`carriedToken`).
 *
 * @internal
 */
export const rawOf = (
  ctx: Pick<Context, "redactor">,
  state: Pick<State, "live" | "running" | "terminal">
): Raw => {
  const running = state.running
  const terminal = state.terminal === undefined ? {} : { terminal: state.terminal.raw }
  if (running === undefined) {
    return new Raw({ stdout: "", stderr: "", stdoutBytes: 0, stderrBytes: 0, ...terminal }, true)
  }
  const stdout = running.stdoutTail()
  const stderr = running.stderrTail()
  if (state.live && carriedToken.has(running)) {
    return new Raw({
      stdout: "",
      stderr: ctx.redactor.window(Process.decodeTail(stderr)),
      stdoutBytes: stdout.total,
      stderrBytes: stderr.total,
      ...terminal
    }, true)
  }
  const fields = {
    stderr: ctx.redactor.window(Process.decodeTail(stderr)),
    stdoutBytes: stdout.total,
    stderrBytes: stderr.total,
    ...terminal
  }
  // Decoding the tail of a large output is most of what a run's end costs: a tail with nothing
  // to scrub is decoded only if someone reads it.
  return Redaction.windowKeeps(ctx.redactor, stdout)
    ? rawDecodedOnRead(fields, stdout)
    : new Raw({ ...fields, stdout: ctx.redactor.window(Process.decodeTail(stdout)) }, true)
}

const resultOf = (ctx: Context, request: Request, state: State): Result => {
  const model = state.model ?? request.model
  return new Result({
    runId: request.runId,
    provider: ctx.driver.name,
    ...(model === undefined ? {} : { model }),
    text: state.terminal?.text ?? state.lastAssistant ?? "",
    ...(state.usage === undefined ? {} : { usage: state.usage }),
    ...(state.session === undefined ? {} : { session: state.session }),
    transcript: state.transcript.slice(),
    raw: rawOf(ctx, state),
    effectiveTools: request.tools ?? ctx.tools,
    instructions: ctx.instructions,
    ...(request.opening === undefined ? {} : { thread: request.opening })
  }, true)
}

type Failure = {
  readonly reason: RunError["reason"]
  readonly detail: string
  readonly exit?: Process.ProcessExit
  readonly cause?: unknown
}

const fail = (failure: Failure) => Effect.fail(failure)

/** How long a failed run waits for the end of the CLI's stderr after the CLI exited. */
const stderrGrace = Duration.millis(500)

/** How many errors of a `cause` chain are rebuilt; the rest of a longer one (or a cycle) is cut. */
const causeChain = 16

/**
 * A failure's cause (or a defect) as it may leave the library: token values replaced. An `Error`
 * is checked as Effect renders it (`renderErrorCause`: its `cause` chain too) and in its own
 * fields; one that holds a token is rebuilt as an `Error` with its name, message, stack, own
 * fields and `cause` chain scrubbed. What that walk does not reach (hidden fields, maps, sets,
 * URLs, bytes inside them) the redactor's `value` reads as `util.inspect` shows it: an error still
 * holding a token becomes an `Error` with its name whose message is that text, scrubbed. Only
 * failures pay for it.
 *
 * @internal
 */
export const scrubCause = (redactor: Gateway.Redactor, cause: unknown): unknown => {
  const scrubbed = scrubFields(redactor, cause, 0)
  const checked = redactor.value(scrubbed)
  if (typeof checked !== "string" || typeof scrubbed !== "object" || scrubbed === null) return checked
  const out = new Error(checked)
  if (scrubbed instanceof Error) out.name = scrubbed.name
  delete out.stack
  return out
}

/** The defects of a cause (its failures stripped) scrubbed as `scrubCause` does: the same cause when none held a token. */
const scrubDefects = (redactor: Gateway.Redactor, cause: Cause.Cause<never>): Cause.Cause<never> => {
  const defects = Chunk.toReadonlyArray(Cause.defects(cause))
  const scrubbed = defects.map((defect) => scrubCause(redactor, defect))
  return scrubbed.every((defect, i) => defect === defects[i])
    ? cause
    : scrubbed.reduce<Cause.Cause<never>>((all, defect) => Cause.parallel(all, Cause.die(defect)), Cause.empty)
}

const scrubFields = (redactor: Gateway.Redactor, cause: unknown, depth: number): unknown => {
  if (cause instanceof ProtocolError) {
    const detail = redactor.text(cause.detail)
    return detail === cause.detail ? cause : new ProtocolError({ reason: cause.reason, detail })
  }
  if (cause instanceof Error) {
    if (depth >= causeChain) return redactor.text(String(cause))
    const message = redactor.text(cause.message)
    const stack = cause.stack === undefined ? undefined : redactor.text(cause.stack)
    let changed = message !== cause.message || stack !== cause.stack
    const fields: Array<readonly [string, unknown]> = []
    for (const key of Object.keys(cause)) {
      if (key === "message" || key === "stack" || key === "cause") continue
      const field = (cause as unknown as Record<string, unknown>)[key]
      const next = scrubFields(redactor, field, depth + 1)
      if (next !== field) changed = true
      fields.push([redactor.text(key), next])
      if (fields[fields.length - 1]![0] !== key) changed = true
    }
    const hasCause = "cause" in cause
    const inner = hasCause ? scrubFields(redactor, cause.cause, depth + 1) : undefined
    if (hasCause && inner !== cause.cause) changed = true
    if (!changed) return cause
    const scrubbed = new Error(message, hasCause ? { cause: inner } : undefined)
    scrubbed.name = cause.name
    if (stack === undefined) delete scrubbed.stack
    else scrubbed.stack = stack
    for (const [key, next] of fields) (scrubbed as unknown as Record<string, unknown>)[key] = next
    return scrubbed
  }
  return redactor.value(cause)
}

/** The process's credential, from its minting at spawn to its release. */
interface Held {
  credential: Gateway.Credential | undefined
  scope: Scope.CloseableScope | undefined
  /** The process was spawned (its release then ends the process side). */
  spawned: boolean
  processDone: boolean
  runDone: boolean
  /** When the process was spawned (ms): files it wrote are newer. */
  spawnedAt: number
  /** The files the driver materialized for this run (absolute): never scrubbed. */
  materialized: ReadonlySet<string>
  /** The run's approver registration (one-shot approvals through the gateway), and its scope. */
  approver: Gateway.Registration | undefined
  approverScope: Scope.CloseableScope | undefined
  approverCredential: Gateway.Credential | undefined
}

/**
 * Runs one admitted run to its end, publishing every event (exactly one `RunStarted`, one
 * `RunFinished`, last) and then ending the queue with the result or the `RunError`. When the
 * consumer is gone its queue is shut down and publishing stops at once.
 *
 * @internal
 */
export const execute = (
  ctx: Context,
  request: Request,
  emitter: Emitter.Emitter
): Effect.Effect<Result, RunError> => {
  const startedAt = Date.now()
  const state: State = {
    model: undefined,
    session: undefined,
    usage: undefined,
    lastAssistant: undefined,
    transcript: [],
    calls: new Map(),
    terminal: undefined,
    running: undefined,
    overflow: false,
    approvals: new Map(),
    live: false,
    committing: false,
    ok: undefined
  }
  const outputSchema = request.structured?.outputSchema
  const parseContext: Driver.ParseContext = {
    hostedKey: ctx.hostedKey,
    session: request.session,
    hostedTools: request.tools ?? ctx.tools,
    ...(outputSchema === undefined ? {} : { outputSchema })
  }
  const scrubber = Redaction.makeOutputScrubber(ctx.redactor, () => noteToken(state))
  // A run whose events nobody reads (`Agent.run`): its content deltas reach neither an event nor
  // the result (whose text is the terminal record's or the last message's), so they are skipped.
  const quiet = emitter === Emitter.discarding

  // The process runs on its own credential. It is revoked (401) as soon as the turn's terminal
  // record arrives or the process ends, and released (forgotten by the redactor) only once the
  // process's files were scrubbed and saved and the run published its end: until then every
  // string of the run is scrubbed of it.
  const held: Held = {
    credential: undefined,
    scope: undefined,
    spawned: false,
    processDone: false,
    runDone: false,
    spawnedAt: 0,
    materialized: new Set(),
    approver: undefined,
    approverScope: undefined,
    approverCredential: undefined
  }
  const releaseCredential = Effect.suspend(() =>
    held.processDone && held.runDone && held.scope !== undefined ? Scope.close(held.scope, Exit.void) : Effect.void
  )
  const processDone = Effect.suspend(() => {
    held.processDone = true
    return releaseCredential
  })
  const runDone = Effect.suspend(() => {
    held.runDone = true
    if (!held.spawned) held.processDone = true
    return releaseCredential
  })
  const revoke = Effect.suspend(() =>
    Effect.zipRight(held.credential?.revoke ?? Effect.void, held.approverCredential?.revoke ?? Effect.void)
  )
  // What the process wrote into the clone (transcripts, tool output, logs) is scrubbed in place
  // once it is gone, before the session store copies any of it; `discard` claims what is removed
  // instead.
  const scrubClone = (discard: ((path: string) => boolean) | undefined) =>
    Effect.suspend(() =>
      ScrubFiles.scrub({
        roots: [ctx.profile.dir, ...Object.values(ctx.profile.siblings)],
        since: held.spawnedAt,
        skip: held.materialized,
        redact: ctx.redactor.bytes,
        discard,
        seen: ctx.logs.found
      })
    )
  // The run's own session entries (its transcript), removed by its reaper with its process gone
  // when nothing will read them again, as a long-lived agent's clone would otherwise keep one per
  // run, which every later run's scrub walks:
  // - a plain run's: nothing resumes a plain run;
  // - an agent's structured attempt's whose run did not end with its result (failed, canceled): no
  //   repair turn follows it (one that ended with its result is left to `runAs`, which removes
  //   it once no repair turn follows); a repair turn's session is its own conversation's;
  // - a thread turn's on a fresh session (started, restarted, forked) that did not begin to
  //   commit: no record refers to it, nor ever will, and it was never saved to the session store.
  // A thread turn that resumes keeps its session (the checkpoint's), as does one whose commit
  // began (it may have landed), and a fork never removes the session it forks.
  const ownEntries = (): ((path: string) => boolean) | undefined => {
    const session = request.session
    if (request.threadKey === undefined) {
      const failed = state.ok === false || state.terminal?.ok !== true
      if (request.structured !== undefined && !failed) return undefined
    } else if (session._tag === "Resume" || state.committing) {
      return undefined
    }
    const sessions = state.session === undefined || state.session === session.id
      ? [session.id]
      : [state.session, session.id]
    return Live.sessionEntries(
      ctx.profile.dir,
      ctx.driver.layout,
      sessions,
      session._tag === "Fork" ? [session.from] : []
    )
  }

  // Lets the CLI finish on its own after its terminal record (draining stdout so it never
  // blocks), bounded by the exit grace, then closes its process group.
  /** `settle`, telling how the process ended on its own within the exit grace (none: it was stopped). */
  const settleExit = (running: Process.Running) =>
    Effect.raceFirst(
      running.drain.pipe(Effect.zipRight(running.exit), Effect.timeout(ctx.exitGrace), Effect.ignore),
      running.exit.pipe(Effect.timeout(ctx.exitGrace), Effect.ignore)
    ).pipe(Effect.zipRight(running.poll), Effect.zipLeft(running.close(ctx.killGrace)))
  const settle = (running: Process.Running) => Effect.asVoid(settleExit(running))

  // The process's reaper, forked (into the agent's reapers) as soon as the process runs, while
  // the CLI starts: the run's end only wakes it. Woken `true` (the CLI delivered its terminal
  // record), it lets the CLI finish (exit grace, stdout drained) before any signal; woken `false`,
  // it closes the process group at once. Either way, once the process is gone its credential is
  // dead and what it wrote in the clone is scrubbed (a thread turn saves its session itself,
  // scrubbed, before its commit). Interruptible: forked in the acquisition, it must not inherit
  // its uninterruptibility, or its timeouts could not cut the waits.
  const reaperOf = (running: Process.Running, wake: Deferred.Deferred<boolean>) =>
    Effect.interruptible(
      Deferred.await(wake).pipe(
        Effect.flatMap((graceful) => graceful ? settle(running) : running.close(ctx.killGrace)),
        Effect.zipRight(revoke),
        Effect.zipRight(Effect.suspend(() => scrubClone(ownEntries()))),
        Effect.ensuring(
          Effect.sync(() => {
            ctx.processes.delete(running)
            ctx.logs.exited()
          }).pipe(
            Effect.zipRight(request.reaped === undefined ? Effect.void : Deferred.done(request.reaped, Exit.void)),
            Effect.zipRight(processDone)
          )
        )
      )
    )

  // Runs in the finalizer of the run's scope, often of an interrupted fiber: the termination
  // runs in the reaper's fiber, which no later interruption of the run (a second close, a
  // consumer leaving) can cut between SIGTERM and SIGKILL.
  const release = (
    { reaper, wake }: { readonly reaper: Fiber.RuntimeFiber<void>; readonly wake: Deferred.Deferred<boolean> }
  ) =>
    Effect.suspend(() => {
      if (state.terminal !== undefined) {
        // However the run ends, the CLI may still be writing its session. Nothing waits for its
        // reaper here (the agent's close does, and signals no such CLI itself), which is woken
        // once the run's result was handed over: its set-up is not on the way to the result.
        setImmediate(() => Deferred.unsafeDone(wake, Exit.succeed(true)))
        return Effect.void
      }
      Deferred.unsafeDone(wake, Exit.succeed(false))
      return Effect.asVoid(Fiber.await(reaper))
    })

  /** The events of `outputs`, scrubbed, published when called (see `Emitter.emitNow`). */
  const emitScrubbedNow = (outputs: (sink: (output: Driver.Output) => void) => void): Effect.Effect<void> => {
    const pending: Array<Emitter.Pending> = []
    outputs((output) => outputToEvents(output, state, request.session, pending))
    // After its terminal record the CLI is only finishing: close leaves it to its reaper.
    // (A live process stays the agent's until it is shut down.)
    if (state.terminal !== undefined && state.running !== undefined && request.live === undefined) {
      ctx.processes.delete(state.running)
    }
    return pending.length === 0 ? Effect.void : emitter.emitNow(pending)
  }
  const emitScrubbed = (outputs: (sink: (output: Driver.Output) => void) => void) =>
    Effect.suspend(() => emitScrubbedNow(outputs))

  const invocationRequest = (prompt: string): Driver.InvocationRequest => ({
    runId: request.runId,
    prompt,
    model: request.model,
    profileDir: ctx.profile.dir,
    siblings: ctx.profile.siblings,
    workspace: ctx.workspace,
    hosted: {
      key: ctx.hostedKey,
      url: ctx.registration.url,
      tokenVariable: ctx.registration.tokenVariable,
      tools: request.tools ?? ctx.tools
    },
    instructions: ctx.instructions,
    skills: ctx.skills,
    mcp: ctx.mcp,
    session: request.session,
    sandbox: request.sandbox ?? ctx.sandbox,
    hostEnv: ctx.hostEnv,
    ...(request.builtinTools === undefined ? {} : { builtinTools: request.builtinTools }),
    ...(ctx.approvals === undefined ? {} : { liveApprovals: true })
  })

  // Each approval the run asks for is an event and a transcript entry, its answer another.
  const approvalSink = Approvals.sink(emitter, state.transcript, state.approvals)

  // An over-long stdout line ends the lines; the run then fails with OutputLimit.
  const parseStream = (running: Process.Running): Effect.Effect<void, Driver.ProtocolError> =>
    ctx.driver.parse(
      running.lines.pipe(
        Stream.catchAll(() => {
          state.overflow = true
          return Stream.empty
        })
      ),
      parseContext
    ).pipe(
      // Up to and including the terminal record, then no further chunk is pulled: one step per
      // chunk, in an indexed loop (no copy of the chunk, no iterator result per output).
      // The chunk is read when it arrives, not in the effect returned for it: no effect holds it.
      Stream.run(Sink.forEachChunkWhile((chunk) => {
        const outputs = Chunk.toReadonlyArray(chunk)
        let open = true
        const emitted = emitScrubbedNow((sink) => {
          for (let i = 0; i < outputs.length; i++) {
            const output = outputs[i]!
            if (quiet && (output._tag === "TextDelta" || output._tag === "ReasoningDelta")) continue
            scrubber.push(output, sink)
            if (output._tag === "Terminal") {
              open = false
              return
            }
          }
        })
        return Effect.as(emitted, open)
      }))
    )

  /**
   * The same as `parseStream` with the driver's line function: a loop of pulls of the process's
   * line chunks, each chunk's lines mapped and published in one step, no `Stream` per run. On a
   * protocol error the outputs of the lines before it are published, then it fails.
   */
  const readLines = (
    running: Process.Running,
    onLine: (line: string) => Driver.LineOutputs
  ): Effect.Effect<void, Driver.ProtocolError> => {
    const step: Effect.Effect<void, Driver.ProtocolError> = Effect.matchEffect(running.pullLines, {
      onFailure: (end) => {
        if (end._tag === "Some") state.overflow = true
        return Effect.void
      },
      onSuccess: (chunk) => {
        const lines = Chunk.toReadonlyArray(chunk)
        let open = true
        let failure: Driver.ProtocolError | undefined
        const take = (output: Driver.Output, sink: (output: Driver.Output) => void) => {
          if (quiet && (output._tag === "TextDelta" || output._tag === "ReasoningDelta")) return
          scrubber.push(output, sink)
          if (output._tag === "Terminal") open = false
        }
        const emitted = emitScrubbedNow((sink) => {
          for (let n = 0; n < lines.length && open; n++) {
            const result = onLine(lines[n]!)
            if (Array.isArray(result)) {
              const outputs = result as ReadonlyArray<Driver.Output>
              for (let i = 0; i < outputs.length && open; i++) take(outputs[i]!, sink)
            } else if (LineParser.isProtocolError(result)) {
              failure = result
              return
            } else {
              take(result as Driver.Output, sink)
            }
          }
        })
        return failure !== undefined
          ? Effect.zipRight(emitted, Effect.fail(failure))
          : open
          ? Effect.zipRight(emitted, step)
          : emitted
      }
    })
    return step
  }

  // The run with its process started (in `oneShot`'s acquisition, released by `release`).
  const afterSpawn = (running: Process.Running) =>
    Effect.gen(function*() {
      state.running = running
      yield* emitter.emit([
        Emitter.critical((base) =>
          new Event.ProcessStarted({ ...base, pid: running.pid, command: running.command }, true)
        )
      ])
      // A driver whose parse was built from a line function is read with it directly.
      const lineFunction = LineParser.lineFunctionOf(ctx.driver.parse)
      yield* (lineFunction === undefined ? parseStream(running) : readLines(running, lineFunction(parseContext))).pipe(
        // Deltas held back at the end (or before a protocol failure) are published, scrubbed.
        Effect.zipRight(emitScrubbed(scrubber.flush)),
        Effect.catchAll((error) =>
          emitScrubbed(scrubber.flush).pipe(
            Effect.zipRight(fail({ reason: "ProtocolError", detail: error.message, cause: error }))
          )
        )
      )
      if (state.terminal !== undefined) {
        // The turn is over: the credential is dead before the result leaves the run.
        yield* revoke
        if (state.terminal.ok) {
          const result = resultOf(ctx, request, state)
          if (request.commit !== undefined) {
            // The checkpoint points at the provider's session files, which the CLI may still be
            // writing after its terminal record: the commit (which saves them first) waits for its
            // exit, bounded by the exit grace. Both stay interruptible, so a store that never
            // answers cannot hold the agent's close past its deadline: the store's commit is one
            // transaction guarded by the lease, so an interruption leaves either the new record or
            // the previous one, never half of one.
            // What it wrote is scrubbed before the commit copies its session to the store.
            const exited = yield* settleExit(running)
            // A CLI that failed after its terminal record (a crash while it wrote its session)
            // never overwrites the thread's healthy record.
            if (Option.isSome(exited) && (exited.value.exitCode !== 0 || exited.value.signal !== undefined)) {
              const { exitCode, signal } = exited.value
              return yield* fail({
                reason: "CheckpointFailed",
                detail: `the provider process ${
                  exitCode === undefined ? `was killed by ${signal}` : `exited with code ${exitCode}`
                } after its terminal record: its session may be incomplete, so the thread keeps its last checkpoint`,
                exit: exited.value
              })
            }
            yield* scrubClone(undefined)
            state.committing = true
            yield* request.commit(result).pipe(
              Effect.catchAll((error) => fail({ reason: "CheckpointFailed", detail: error.message, cause: error }))
            )
          }
          return result
        }
        // A thread turn's result, a failure too, comes once its CLI has exited (bounded by the exit
        // grace), as the thread's next turn waits for it anyway; a plain run's does not wait.
        if (request.commit !== undefined) yield* settle(running)
        return yield* fail({
          reason: "ProviderFailed",
          detail: state.terminal.error ?? "the provider reported a failure"
        })
      }
      // No terminal record: the output ended (crash, exit before output) or a line was too long.
      if (state.overflow) {
        yield* running.close(ctx.killGrace)
      }
      const exit = yield* running.exit.pipe(
        Effect.timeout(ctx.killGrace),
        Effect.catchAll(() => running.close(ctx.killGrace).pipe(Effect.zipRight(running.exit)))
      )
      yield* emitter.emit([Emitter.critical((base) =>
        new Event.ProcessExited({
          ...base,
          pid: running.pid,
          ...(exit.exitCode === undefined ? {} : { exitCode: exit.exitCode }),
          ...(exit.signal === undefined ? {} : { signal: exit.signal })
        }, true)
      )])
      if (state.overflow) {
        return yield* fail({
          reason: "OutputLimit",
          detail: `a stdout line exceeded ${ctx.limits.maxLineBytes} bytes`,
          exit
        })
      }
      // The CLI's last words on stderr may still be in the pipe when it exited (bounded: a
      // descendant may hold the pipe open).
      yield* running.stderrEnded.pipe(Effect.timeout(Duration.min(ctx.killGrace, stderrGrace)), Effect.ignore)
      const classified = ctx.driver.classifyExit?.({
        exitCode: exit.exitCode,
        stderr: Process.decodeTail(running.stderrTail()),
        terminal: undefined,
        session: request.session
      })
      if (classified !== undefined) {
        return yield* fail({ reason: "ProtocolError", detail: classified.message, cause: classified, exit })
      }
      const excerpt = Redaction.stderrExcerpt(ctx.redactor, Process.decodeTail(running.stderrTail()))
      return yield* fail({
        reason: "ExitedWithoutResult",
        detail: (exit.exitCode === undefined
          ? `the provider process was killed by ${exit.signal} before its terminal record`
          : `the provider process exited with code ${exit.exitCode} before its terminal record`) +
          (excerpt === "" ? "" : `; the end of its stderr:\n${excerpt}`),
        exit
      })
    })

  /**
   * The committed copy of the session a turn resumes or forks into the clone (see `Request.load`):
   * another host may have committed it since this clone last held it.
   */
  const loadSession = Effect.suspend(() => {
    const session = request.session
    const committed = session._tag === "Resume" ? session.id : session._tag === "Fork" ? session.from : undefined
    return committed === undefined || request.load === undefined
      ? Effect.void
      : request.load(committed).pipe(
        Effect.catchAll((error) =>
          fail({ reason: "PrepareFailed", detail: `the session could not be loaded: ${error.message}`, cause: error })
        )
      )
  })

  const oneShot = Effect.gen(function*() {
    const approverTool = ctx.driver.approvals?.tool
    if (ctx.approvals !== undefined && approverTool !== undefined) {
      const { broker } = ctx.approvals
      // Its registration lives as long as the run's body (closed before the run's end is published).
      held.approverScope = yield* Scope.make()
      held.approver = yield* ctx.approvals.register(
        Approvals.approverExecutor(
          approverTool,
          // What the provider sent is scrubbed of live tokens before anyone sees it.
          (fields) => broker.ask(request.runId, request.threadKey, ctx.redactor.value(fields), approvalSink)
        )
      ).pipe(
        Scope.extend(held.approverScope),
        Effect.catchAll((error) => fail({ reason: "PrepareFailed", detail: error.message, cause: error }))
      )
    }
    const approver = held.approver
    // A one-shot turn of a thread that has a warm live process (Claude's structured-output
    // attempt): the warm process goes, as it does not hold what this turn writes into the session
    // (kept, and reused with the same committed turns when this one does not commit, the next live
    // turn would save the session with this turn's branch in it); then the last live turn's late
    // save lands (once the files are quiet: not lost under the load below).
    if (request.threadKey !== undefined && ctx.pool !== undefined) {
      yield* ctx.pool.retireIdle(request.threadKey)
      yield* ctx.pool.settle(request.threadKey, false)
    }
    yield* loadSession
    const invocation = yield* ctx.driver.prepare({
      runId: request.runId,
      prompt: request.prompt,
      model: request.model,
      profileDir: ctx.profile.dir,
      siblings: ctx.profile.siblings,
      workspace: ctx.workspace,
      hosted: {
        key: ctx.hostedKey,
        url: ctx.registration.url,
        tokenVariable: ctx.registration.tokenVariable,
        tools: request.tools ?? ctx.tools
      },
      instructions: ctx.instructions,
      skills: ctx.skills,
      mcp: ctx.mcp,
      session: request.session,
      sandbox: request.sandbox ?? ctx.sandbox,
      hostEnv: ctx.hostEnv,
      ...(request.builtinTools === undefined ? {} : { builtinTools: request.builtinTools }),
      ...(approver === undefined || approverTool === undefined ? {} : {
        approvals: {
          key: ctx.approvals!.key,
          url: approver.url,
          tokenVariable: approver.tokenVariable,
          tool: approverTool.name
        }
      }),
      ...(outputSchema === undefined ? {} : { outputSchema })
    }).pipe(
      Effect.provide(ctx.services),
      Effect.catchAll((error) => fail({ reason: "PrepareFailed", detail: error.message, cause: error }))
    )
    yield* ctx.profile.materialize(invocation.files).pipe(
      Effect.catchAll((error) => fail({ reason: "PrepareFailed", detail: error.message, cause: error }))
    )
    held.materialized = new Set(invocation.files.map((file) => `${ctx.profile.dir}/${file.path}`))
    return yield* Effect.acquireUseRelease(
      Effect.gen(function*() {
        held.scope = yield* Scope.make()
        const credential = yield* ctx.registration.credential({
          tools: request.tools ?? ctx.tools,
          injectedArguments: ctx.driver.injectedArguments ?? []
        }).pipe(Scope.extend(held.scope))
        held.credential = credential
        // The approver tool runs on a credential of this process too, revoked with it.
        const approverCredential = approver === undefined
          ? undefined
          : yield* approver.credential().pipe(Scope.extend(held.scope))
        held.approverCredential = approverCredential
        held.spawnedAt = Date.now()
        // Counted before it starts: no log is removed while it might be writing one.
        ctx.logs.spawned()
        const running = yield* Process.spawn(invocation, {
          [ctx.registration.tokenVariable]: Redacted.value(credential.token),
          ...(approver === undefined || approverCredential === undefined
            ? {}
            : { [approver.tokenVariable]: Redacted.value(approverCredential.token) }),
          [Process.markerVariable]: ctx.marker
        }, ctx.limits).pipe(
          Effect.tapErrorCause(() => Effect.sync(ctx.logs.exited)),
          Effect.catchAll((error) =>
            fail({
              reason: "SpawnFailed",
              // The command, how the driver chose it (the `binary` option, the app's installed CLI
              // package, the PATH), and how to fix it.
              detail: `could not start the provider CLI \`${invocation.command}\` (${error.message}${
                invocation.commandSource === undefined ? "" : `; ${invocation.command}: ${invocation.commandSource}`
              }): ${
                ctx.driver.install ?? "install the CLI"
              }, or set the driver's \`binary\` option to the path of its executable`
            })
          )
        )
        held.spawned = true
        ctx.processes.add(running)
        const wake = Deferred.unsafeMake<boolean>(FiberId.none)
        const reaper = yield* FiberSet.run(ctx.reapers, reaperOf(running, wake))
        return { running, reaper, wake }
      }),
      ({ running }) => afterSpawn(running),
      release
    )
  })

  // A live thread turn (DESIGN §12): on the thread's warm process, serialized by the thread's
  // lease. The process outlives the turn: an interrupted turn asks the provider to stop it, and
  // the process stays warm unless it failed (then it is shut down; the next turn starts fresh
  // from the last healthy checkpoint).
  const liveTurn = (
    live: { readonly key: string; readonly reuse: string },
    pool: Live.Pool,
    driverLive: Driver.Live
  ): Effect.Effect<Result, Failure, never> =>
    Effect.gen(function*() {
      // The turn resumes the record's session with its committed turns (`fromTurns`).
      const resumedTurns = request.opening?.fromTurns
      // Whether the process may serve the next turn: a turn that failed in the protocol, at the
      // provider or in its commit, or lost its process, leaves it to be shut down.
      let healthy = true
      let ended = false
      let failure: Driver.ProtocolError | undefined
      // Registered in the same uninterruptible step as the process becomes this turn's (taken from
      // the pool, or opened and added to it): an interruption in between would leave it busy, or
      // outside the pool, where neither the idle timeout nor the cap ever ends it.
      const releaseAtEnd = (warm: Live.Warm) =>
        Effect.addFinalizer(() =>
          Effect.suspend(() => {
            // The session the turn reported: a fresh one that no commit began goes with the process.
            if (state.session !== undefined) warm.reported(state.session)
            warm.steer = undefined
            warm.approve = undefined
            warm.span = undefined
            const reaped = request.reaped === undefined ? Effect.void : Deferred.done(request.reaped, Exit.void)
            if (healthy && ended) return Effect.zipRight(pool.release(warm), reaped)
            if (!healthy) return Effect.zipRight(pool.retire(live.key), reaped)
            // Left before its terminal (interrupted, its consumer gone): the provider stops the turn
            // and the process stays warm; one that does not acknowledge in time is shut down. A
            // request still pending is answered (deny) first: an agent may not end a canceled turn
            // while it waits for that answer (Gemini CLI over ACP does not), and would be killed.
            const pending = ctx.approvals === undefined ? Effect.void : ctx.approvals.broker.settleRun(request.runId)
            return Effect.zipRight(pending, warm.session.interrupt).pipe(
              Effect.interruptible,
              Effect.timeout(ctx.killGrace),
              Effect.matchEffect({
                onFailure: () => pool.retire(live.key),
                onSuccess: () => pool.release(warm)
              }),
              Effect.zipRight(reaped)
            )
          })
        )
      const taken = yield* pool.take(live.key, live.reuse, request.session, resumedTurns, releaseAtEnd)
      // The thread's previous live turn's late save ends before this turn writes the session:
      // nothing of this turn's (which may yet fail) is saved under the previous turn's checkpoint.
      // On its warm process at once (what changed is saved now; the process carries the rest); on
      // a fresh one (`take` shut the last down) once the files are quiet, so that what the last
      // turn still wrote is saved, not lost under the store's copy loaded below.
      yield* pool.settle(live.key, taken !== undefined)
      // A fresh process resumes the committed session (a warm one carries it already).
      const warm = taken ?? (yield* Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          yield* restore(loadSession)
          const opened = yield* restore(Live.open(
            { ...ctx, live: driverLive },
            live.key,
            live.reuse,
            invocationRequest("")
          ))
          yield* pool.add(opened)
          yield* releaseAtEnd(opened)
          return opened
        })
      ))
      // Attached: the provider loaded the session (or the warm process carries it already). A
      // driver whose CLI reads a resumed session only later refuses a missing one at its attach.
      request.accepted?.()
      state.running = warm.running
      state.live = true
      // The process's credential was minted in the span of the turn that opened it: this turn's
      // host tool calls are children of this turn's span.
      warm.span = Option.getOrUndefined(yield* Effect.serviceOption(Tracer.ParentSpan))
      // Input sent into the turn and the turn's own outputs are published one batch at a time.
      const lock = yield* Effect.makeSemaphore(1)
      const publish = (outputs: (sink: (output: Driver.Output) => void) => void) =>
        lock.withPermits(1)(emitScrubbed(outputs))
      yield* emitter.emit([
        Emitter.critical((base) =>
          new Event.ProcessStarted({
            ...base,
            pid: warm.running.pid,
            command: warm.running.command,
            ...(taken === undefined ? {} : { reused: true })
          }, true)
        )
      ])
      // The process's approval requests are this turn's while it runs (scrubbed of live tokens).
      if (ctx.approvals !== undefined) {
        const { broker } = ctx.approvals
        warm.approve = (fields) =>
          broker.ask(request.runId, request.threadKey, ctx.redactor.value(fields), approvalSink)
      }
      const steer = warm.session.steer
      if (steer !== undefined) {
        warm.steer = (input) =>
          Effect.tap(steer(input), (delivery) =>
            lock.withPermits(1)(Effect.suspend(() => {
              const text = ctx.redactor.text(input)
              state.transcript.push(new TranscriptMessage({ role: "user", text }, true))
              return emitter.emit([
                Emitter.critical((base) => new Event.InputDelivered({ ...base, text, delivery: delivery._tag }, true))
              ])
            })))
      }
      // A native structured-output attempt on a live thread: the session takes its JSON Schema.
      yield* warm.session.turn({
        runId: request.runId,
        prompt: request.prompt,
        ...(outputSchema === undefined ? {} : { outputSchema })
      }).pipe(
        Stream.takeUntil((output) => output._tag === "Terminal"),
        Stream.runForEachChunk((chunk) =>
          publish((sink) => {
            for (const output of chunk) scrubber.push(output, sink)
          })
        ),
        Effect.zipRight(publish(scrubber.flush)),
        Effect.catchAll((error) => Effect.zipRight(publish(scrubber.flush), Effect.sync(() => (failure = error))))
      )
      if (state.session !== undefined) warm.reported(state.session)
      if (failure !== undefined) {
        healthy = false
        // A session that failed because its process died reports the death, not the symptom.
        const died = yield* warm.running.exit.pipe(
          Effect.timeout(Duration.min(ctx.killGrace, stderrGrace)),
          Effect.option
        )
        if (died._tag === "None") {
          return yield* fail({ reason: "ProtocolError", detail: failure.message, cause: failure })
        }
      }
      if (state.terminal !== undefined) {
        ended = true
        warm.steer = undefined
        if (!state.terminal.ok) {
          // The process now carries the failed turn, which the thread did not commit: it does not
          // serve the next turn, which resumes the last committed checkpoint on a fresh process
          // (as a one-shot thread's next turn does).
          healthy = false
          return yield* fail({
            reason: "ProviderFailed",
            detail: state.terminal.error ?? "the provider reported a failure"
          })
        }
        const result = resultOf(ctx, request, state)
        if (request.commit !== undefined) {
          const session = result.session
          const before = session === undefined
            ? undefined
            : Live.sessionFiles(ctx.profile.dir, ctx.driver.layout, session)
          state.committing = true
          warm.committing()
          yield* request.commit(result).pipe(
            // Not committed: the process carries a turn the thread does not have, so it goes too.
            Effect.catchAll((error) =>
              Effect.zipRight(
                Effect.sync(() => (healthy = false)),
                fail({ reason: "CheckpointFailed", detail: error.message, cause: error })
              )
            )
          )
          // The CLI stays up and may still be writing the turn into its session (Claude Code writes
          // the last message up to ~100 ms after its result): once its files are quiet, what changed
          // since the save is saved again, in the background (the result is not delayed). One such
          // wait per thread: the thread's next turn ends it first (`pool.settle`).
          if (session !== undefined && before !== undefined && request.save !== undefined) {
            const save = request.save
            const flush = yield* Deferred.make<void>()
            pool.settling(live.key, {
              flush,
              fiber: yield* FiberSet.run(
                ctx.reapers,
                Live.settle(ctx.profile.dir, ctx.driver.layout, session, before, ctx.exitGrace, flush).pipe(
                  Effect.interruptible,
                  // A save once started completes: interrupted halfway, its write could land after
                  // a later save's and put older content back.
                  Effect.flatMap((changed) => changed ? Effect.uninterruptible(save(session)) : Effect.void),
                  Effect.catchAll((error) => Effect.logWarning(`a live session's late save failed: ${error.message}`))
                )
              )
            })
          }
        }
        // The process carries the committed session: the next turn resuming it may run on it.
        if (result.session !== undefined && request.commit !== undefined) {
          warm.sessionId = result.session
          // As the thread commits them: a fresh session's first turn is 1.
          const continued = request.opening?.mode === "resumed" || request.opening?.mode === "forked"
          warm.turns = continued ? (resumedTurns ?? 0) + 1 : 1
        }
        return result
      }
      // The session's output ended without the turn's terminal: the process died (or wrote a
      // line over the limit). It is shut down; the next turn starts from the last checkpoint.
      healthy = false
      const exit = yield* warm.running.exit.pipe(
        Effect.timeout(ctx.killGrace),
        Effect.catchAll(() => warm.running.close(ctx.killGrace).pipe(Effect.zipRight(warm.running.exit)))
      )
      yield* emitter.emit([Emitter.critical((base) =>
        new Event.ProcessExited({
          ...base,
          pid: warm.running.pid,
          ...(exit.exitCode === undefined ? {} : { exitCode: exit.exitCode }),
          ...(exit.signal === undefined ? {} : { signal: exit.signal })
        }, true)
      )])
      yield* warm.running.stderrEnded.pipe(Effect.timeout(Duration.min(ctx.killGrace, stderrGrace)), Effect.ignore)
      // The driver reads the CLI's last words as for a one-shot run (e.g. a session to resume that
      // is gone: `ResumeRejected`, which a thread may retry fresh).
      const classified = ctx.driver.classifyExit?.({
        exitCode: exit.exitCode,
        stderr: Process.decodeTail(warm.running.stderrTail()),
        terminal: undefined,
        session: request.session
      })
      if (classified !== undefined) {
        return yield* fail({ reason: "ProtocolError", detail: classified.message, cause: classified, exit })
      }
      const excerpt = Redaction.stderrExcerpt(ctx.redactor, Process.decodeTail(warm.running.stderrTail()))
      return yield* fail({
        reason: "ExitedWithoutResult",
        detail: (exit.exitCode === undefined
          ? `the live provider process was killed by ${exit.signal} before the turn's terminal record`
          : `the live provider process exited with code ${exit.exitCode} before the turn's terminal record`) +
          (excerpt === "" ? "" : `; the end of its stderr:\n${excerpt}`),
        exit
      })
    }).pipe(Effect.scoped)

  const live = request.live
  const pool = ctx.pool
  const driverLive = ctx.driver.live
  const body = live === undefined || pool === undefined || driverLive === undefined
    ? oneShot
    : liveTurn(live, pool, driverLive)

  const finish = (exit: Exit.Exit<Result, Failure>): Effect.Effect<Result, RunError> =>
    Effect.zipRight(
      // A request still pending when the run ends is answered deny, before RunFinished.
      ctx.approvals === undefined ? Effect.void : ctx.approvals.broker.settleRun(request.runId),
      Effect.suspend(() => finished(exit))
    )

  const finished = (exit: Exit.Exit<Result, Failure>): Effect.Effect<Result, RunError> => {
    const durationMs = Date.now() - startedAt
    // Read by the reaper's scrub (`ownEntries`): an agent's structured attempt that failed keeps
    // nothing in the clone.
    state.ok = Exit.isSuccess(exit)
    // Scrubbed with the terminal; read by `runAs` once the run's stream ended.
    if (request.structured !== undefined) request.structured.received = state.terminal?.structuredOutput
    if (state.running === undefined && request.reaped !== undefined) Deferred.unsafeDone(request.reaped, Exit.void)
    if (Exit.isSuccess(exit)) {
      const result = exit.value
      return emitter.emit([
        Emitter.critical((base) => new Event.RunFinished({ ...base, outcome: "success", durationMs, result }, true))
      ]).pipe(Effect.zipRight(emitter.end(undefined)), Effect.as(result))
    }
    if (Cause.isDie(exit.cause)) {
      // A bug (in the driver's parser, in core): it stays a defect, logged with its whole cause,
      // after the run's RunFinished (reason `Defect`).
      const defect = scrubDefects(ctx.redactor, Cause.stripFailures(exit.cause))
      return Effect.logError(`run ${request.runId} died of a defect`, defect).pipe(
        // Not an event of `Run.execute` (Effect's tracer logger would record the cause's text,
        // which may quote the provider's output: docs/tracing.md keeps text off spans).
        Tracing.offSpan,
        Effect.zipRight(emitter.emit([
          Emitter.critical((base) =>
            new Event.RunFinished({
              ...base,
              outcome: "failure",
              durationMs,
              reason: "Defect",
              result: resultOf(ctx, request, state)
            }, true)
          )
        ])),
        Effect.zipRight(emitter.failCause(defect)),
        Effect.exit,
        Effect.zipRight(Effect.failCause(defect))
      )
    }
    const failure: Failure = Cause.isInterruptedOnly(exit.cause)
      ? { reason: "Canceled", detail: "the run was interrupted" }
      : Cause.failureOption(exit.cause).pipe((option) =>
        option._tag === "Some" ? option.value : { reason: "Canceled" as const, detail: "the run was interrupted" }
      )
    const result = resultOf(ctx, request, state)
    const error = new RunError({
      reason: failure.reason,
      // A driver that fails with something other than an Error (against its type) has no message.
      detail: ctx.redactor.text(typeof failure.detail === "string" ? failure.detail : String(failure.detail)),
      result,
      ...(failure.exit?.exitCode === undefined ? {} : { exitCode: failure.exit.exitCode }),
      ...(failure.exit?.signal === undefined ? {} : { signal: failure.exit.signal }),
      ...(failure.cause === undefined ? {} : { cause: scrubCause(ctx.redactor, failure.cause) })
    })
    const outcome = failure.reason === "Canceled" ? "canceled" : "failure"
    return emitter.emit([
      Emitter.critical((base) =>
        new Event.RunFinished({ ...base, outcome, durationMs, reason: failure.reason, result }, true)
      )
    ]).pipe(Effect.zipRight(emitter.end(error)), Effect.exit, Effect.zipRight(Effect.fail(error)))
  }

  const opening = request.opening
  return Effect.uninterruptibleMask((restore) =>
    emitter.emit([
      Emitter.critical((base) =>
        new Event.RunStarted({
          ...base,
          provider: ctx.driver.name,
          ...(request.model === undefined ? {} : { model: request.model }),
          ...(request.threadKey === undefined ? {} : { threadKey: request.threadKey }),
          effectiveTools: request.tools ?? ctx.tools,
          instructions: ctx.instructions
        }, true)
      ),
      ...(opening === undefined ? [] : [Emitter.critical((base) => new Event.ThreadOpened({ ...base, opening }, true))])
    ]).pipe(
      Effect.zipRight(restore(body)),
      Effect.exit,
      Effect.flatMap((exit) =>
        held.approverScope === undefined
          ? finish(exit)
          : Effect.zipRight(Scope.close(held.approverScope, exit), finish(exit))
      ),
      Effect.ensuring(runDone)
    )
  ).pipe(ctx.redactor.logs)
}
