/**
 * One run: prepare the invocation, materialize its files, spawn, parse stdout into events,
 * build the result as soon as the terminal record arrives, and hand a still-exiting process
 * to the agent's reaper.
 *
 * @internal
 */
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import * as Cause from "effect/Cause"
import type * as EffectContext from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberSet from "effect/FiberSet"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import { RunError } from "../AgentError.js"
import type * as Driver from "../Driver.js"
import * as Event from "../Event.js"
import { Raw, Result, TranscriptMessage, TranscriptToolCall, Usage } from "../Result.js"
import type { TranscriptEntry } from "../Result.js"
import * as Emitter from "./emitter.js"
import * as Process from "./process.js"

/** What a run needs from its agent. @internal */
export interface Context {
  readonly marker: string
  readonly driver: Driver.Driver
  readonly hostedKey: string
  readonly registration: {
    readonly url: string
    readonly tokenVariable: string
    readonly token: Redacted.Redacted<string>
  }
  readonly profile: {
    readonly dir: string
    readonly siblings: { readonly [name: string]: string }
    readonly env: { readonly [name: string]: string }
    readonly materialize: (
      files: ReadonlyArray<Driver.MaterializedFile>
    ) => Effect.Effect<void, { readonly message: string }>
    /** Copies the provider's changed session files to the identity's session store; never fails. */
    readonly saveSessions: Effect.Effect<void>
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
  readonly reapers: FiberSet.FiberSet<void, never>
  readonly services: EffectContext.Context<CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path>
}

/** @internal */
export interface Request {
  readonly runId: string
  readonly prompt: string
  readonly model: string | undefined
  readonly session: Driver.SessionRequest
  /** The thread whose turn this run is (absent for an agent's own run). */
  readonly threadKey?: string
  /** This turn's effective tools (a per-turn tool policy); default: every tool of the agent. */
  readonly tools?: ReadonlyArray<string>
  /** The narrower credential carrying `tools`: the token variable's value for this run. */
  readonly token?: Redacted.Redacted<string>
  /** A thread's checkpoint commit: after a clean terminal record, before `RunFinished`. */
  readonly commit?: (result: Result) => Effect.Effect<void, { readonly message: string }>
  /** Completed once the run's provider process is gone (or was never spawned). */
  readonly reaped?: Deferred.Deferred<void>
}

interface State {
  model: string | undefined
  session: string | undefined
  usage: Usage | undefined
  lastAssistant: string | undefined
  transcript: Array<TranscriptEntry>
  calls: Map<string, number>
  terminal: Driver.Terminal | undefined
  running: Process.Running | undefined
  overflow: boolean
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
      into.push({ droppable: "TextDelta", text: output.text })
      return
    case "ReasoningDelta":
      into.push({ droppable: "ReasoningDelta", text: output.text })
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
      const index = state.calls.get(output.callId)
      if (index === undefined) {
        state.calls.set(output.callId, state.transcript.length)
        const { phase: _, ...entry } = fields
        state.transcript.push(new TranscriptToolCall(entry, true))
      } else {
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

const resultOf = (ctx: Context, request: Request, state: State): Result => {
  const raw = state.running?.raw() ?? { stdout: "", stderr: "", stdoutBytes: 0, stderrBytes: 0 }
  const model = state.model ?? request.model
  return new Result({
    runId: request.runId,
    provider: ctx.driver.name,
    ...(model === undefined ? {} : { model }),
    text: state.terminal?.text ?? state.lastAssistant ?? "",
    ...(state.usage === undefined ? {} : { usage: state.usage }),
    ...(state.session === undefined ? {} : { session: state.session }),
    transcript: state.transcript.slice(),
    raw: new Raw({ ...raw, ...(state.terminal === undefined ? {} : { terminal: state.terminal.raw }) }, true),
    effectiveTools: request.tools ?? ctx.tools,
    instructions: ctx.instructions
  }, true)
}

type Failure = {
  readonly reason: RunError["reason"]
  readonly detail: string
  readonly exit?: Process.ProcessExit
  readonly cause?: unknown
}

const fail = (failure: Failure) => Effect.fail(failure)

/** The last lines a CLI wrote to stderr, so an error says why it died (the rest is in `raw`). */
const stderrTail = (stderr: string): string => {
  const text = stderr.trimEnd()
  if (text === "") return ""
  const tail = text.length > 2000 ? `…${text.slice(-2000)}` : text
  return `; its stderr ends with:\n${tail}`
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
    overflow: false
  }
  const parseContext: Driver.ParseContext = { hostedKey: ctx.hostedKey, session: request.session }

  const release = (running: Process.Running, exit: Exit.Exit<unknown, unknown>) => {
    const done = Effect.sync(() => ctx.processes.delete(running)).pipe(
      Effect.zipRight(request.reaped === undefined ? Effect.void : Deferred.done(request.reaped, Exit.void))
    )
    if (Exit.isSuccess(exit)) {
      // The result is ready: let the CLI finish on its own (draining stdout so it never blocks),
      // then escalate. The agent's close waits for this fiber.
      const reap = Effect.raceFirst(
        running.drain.pipe(Effect.zipRight(running.exit), Effect.timeout(ctx.exitGrace), Effect.ignore),
        running.exit.pipe(Effect.timeout(ctx.exitGrace), Effect.ignore)
      ).pipe(
        Effect.zipRight(running.close(ctx.killGrace)),
        // A clean run's session is saved once its CLI is gone, so a host killed later still
        // resumes this turn after a restart (and a thread's next turn starts after the save).
        Effect.zipRight(ctx.profile.saveSessions),
        Effect.ensuring(done)
      )
      // Forked from a finalizer: the reaper must not inherit its uninterruptibility, or its
      // timeouts could not cut the waits.
      return Effect.asVoid(FiberSet.run(ctx.reapers, Effect.interruptible(reap)))
    }
    return running.close(ctx.killGrace).pipe(Effect.ensuring(done))
  }

  const body = Effect.gen(function*() {
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
      sandbox: ctx.sandbox,
      hostEnv: ctx.hostEnv
    }).pipe(
      Effect.provide(ctx.services),
      Effect.catchAll((error) => fail({ reason: "PrepareFailed", detail: error.message, cause: error }))
    )
    yield* ctx.profile.materialize(invocation.files).pipe(
      Effect.catchAll((error) => fail({ reason: "PrepareFailed", detail: error.message, cause: error }))
    )
    const running = yield* Effect.acquireRelease(
      Process.spawn(invocation, {
        [ctx.registration.tokenVariable]: Redacted.value(request.token ?? ctx.registration.token),
        [Process.markerVariable]: ctx.marker
      }, ctx.limits).pipe(
        Effect.provide(ctx.services),
        Effect.tap((running) => Effect.sync(() => ctx.processes.add(running))),
        Effect.catchAll((error) =>
          fail({
            reason: "SpawnFailed",
            detail: invocation.commandSource === undefined
              ? error.message
              : `${error.message} (${invocation.command}: ${invocation.commandSource})`
          })
        )
      ),
      release
    )
    state.running = running
    yield* emitter.emit([
      Emitter.critical((base) =>
        new Event.ProcessStarted({ ...base, pid: running.pid, command: running.command }, true)
      )
    ])
    const lines = running.lines.pipe(
      Stream.catchAll(() => {
        state.overflow = true
        return Stream.empty
      })
    )
    yield* ctx.driver.parse(lines, parseContext).pipe(
      Stream.takeUntil((output) => output._tag === "Terminal"),
      Stream.runForEachChunk((chunk) => {
        const pending: Array<Emitter.Pending> = []
        for (const output of chunk) outputToEvents(output, state, request.session, pending)
        return emitter.emit(pending)
      }),
      Effect.catchAll((error) => fail({ reason: "ProtocolError", detail: error.message, cause: error }))
    )
    if (state.terminal !== undefined) {
      if (state.terminal.ok) {
        const result = resultOf(ctx, request, state)
        if (request.commit !== undefined) {
          // Atomic with the lease check in the store; never cut in half by an interruption.
          yield* Effect.uninterruptible(request.commit(result)).pipe(
            Effect.catchAll((error) => fail({ reason: "CheckpointFailed", detail: error.message, cause: error }))
          )
        }
        return result
      }
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
    const classified = ctx.driver.classifyExit?.({
      exitCode: exit.exitCode,
      stderr: running.raw().stderr,
      terminal: undefined,
      session: request.session
    })
    if (classified !== undefined) {
      return yield* fail({ reason: "ProtocolError", detail: classified.message, cause: classified, exit })
    }
    return yield* fail({
      reason: "ExitedWithoutResult",
      detail: (exit.exitCode === undefined
        ? `the provider process was killed by ${exit.signal} before its terminal record`
        : `the provider process exited with code ${exit.exitCode} before its terminal record`) +
        stderrTail(running.raw().stderr),
      exit
    })
  }).pipe(Effect.scoped)

  const finish = (exit: Exit.Exit<Result, Failure>): Effect.Effect<Result, RunError> => {
    const durationMs = Date.now() - startedAt
    if (state.running === undefined && request.reaped !== undefined) Deferred.unsafeDone(request.reaped, Exit.void)
    if (Exit.isSuccess(exit)) {
      const result = exit.value
      return emitter.emit([
        Emitter.critical((base) => new Event.RunFinished({ ...base, outcome: "success", durationMs, result }, true))
      ]).pipe(Effect.zipRight(emitter.end(undefined)), Effect.as(result))
    }
    const failure: Failure = Cause.isInterruptedOnly(exit.cause)
      ? { reason: "Canceled", detail: "the run was interrupted" }
      : Cause.failureOption(exit.cause).pipe((option) =>
        option._tag === "Some"
          ? option.value
          : { reason: "ProtocolError" as const, detail: "the run failed unexpectedly", cause: Cause.squash(exit.cause) }
      )
    const result = resultOf(ctx, request, state)
    const error = new RunError({
      reason: failure.reason,
      detail: failure.detail,
      result,
      ...(failure.exit?.exitCode === undefined ? {} : { exitCode: failure.exit.exitCode }),
      ...(failure.exit?.signal === undefined ? {} : { signal: failure.exit.signal }),
      ...(failure.cause === undefined ? {} : { cause: failure.cause })
    })
    const outcome = failure.reason === "Canceled" ? "canceled" : "failure"
    return emitter.emit([
      Emitter.critical((base) =>
        new Event.RunFinished({ ...base, outcome, durationMs, reason: failure.reason, result }, true)
      )
    ]).pipe(Effect.zipRight(emitter.end(error)), Effect.exit, Effect.zipRight(Effect.fail(error)))
  }

  return Effect.uninterruptibleMask((restore) =>
    emitter.emit([Emitter.critical((base) =>
      new Event.RunStarted({
        ...base,
        provider: ctx.driver.name,
        ...(request.model === undefined ? {} : { model: request.model }),
        ...(request.threadKey === undefined ? {} : { threadKey: request.threadKey }),
        effectiveTools: request.tools ?? ctx.tools,
        instructions: ctx.instructions
      }, true)
    )]).pipe(
      Effect.zipRight(restore(body)),
      Effect.exit,
      Effect.flatMap((exit) => finish(exit))
    )
  )
}
