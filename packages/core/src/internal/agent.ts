/**
 * Agent construction (validate + freeze → register → clone → admit) and the wiring of the
 * ordered close as the scope's finalizer.
 *
 * @internal
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Gateway from "@tether/gateway/Gateway"
import * as Profile from "@tether/profile/Profile"
import type * as Catalog from "@tether/tool/Catalog"
import type { ToolDefinitionError } from "@tether/tool/Tool"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { randomUUID } from "node:crypto"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as NodeProcess from "node:process"
import type * as Agent from "../Agent.js"
import { AgentClosed, AgentConfigError, ApprovalNotFound, InvalidTurn, UnsupportedCapability } from "../AgentError.js"
import type { RunError } from "../AgentError.js"
import type * as Driver from "../Driver.js"
import type * as Event from "../Event.js"
import type { Result } from "../Result.js"
import { NoActiveTurn } from "../Thread.js"
import * as Approvals from "./approvals.js"
import * as Close from "./close.js"
import * as Compatibility from "./compatibility.js"
import * as Definition from "./definition.js"
import * as Emitter from "./emitter.js"
import * as Handoff from "./handoff.js"
import * as Hosts from "./hosts.js"
import * as Live from "./live.js"
import * as Process from "./process.js"
import * as Run from "./run.js"
import * as RunLogs from "./runLogs.js"
import * as Structured from "./structured.js"
import * as Thread from "./thread.js"
import { makeMemory, ThreadStore } from "./threadStore.js"
import * as ToolPolicy from "./toolPolicy.js"
import * as Tracing from "./tracing.js"

/** @internal */
export const hostedKey = "tether"

// The orphan sweep runs once per host process, at its first agent.
let orphansReaped = false

const configError = (reason: AgentConfigError["reason"], detail: string, cause?: unknown) =>
  new AgentConfigError({ reason, detail, ...(cause === undefined ? {} : { cause }) })

/** Validates the options besides the definition (`Definition.validate` checks that); no I/O. @internal */
export const validate = (options: Agent.Options<never>) =>
  Effect.gen(function*() {
    const { driver } = options
    if (typeof options.workspace !== "string" || !options.workspace.startsWith("/")) {
      return yield* configError("InvalidOptions", "workspace must be an absolute path")
    }
    if (options.identity !== undefined && (typeof options.identity.id !== "string" || options.identity.id === "")) {
      return yield* configError("InvalidOptions", "identity.id must be a non-empty string")
    }
    const approvalsProblem = Approvals.validate(options.approvals)
    if (approvalsProblem !== undefined) return yield* configError("InvalidOptions", approvalsProblem)
    const unsupported = (capability: string, detail: string) =>
      new UnsupportedCapability({ driver: driver.name, capability, detail })
    if (!driver.capabilities.mcpTransports.includes("http")) {
      return yield* unsupported("mcpTransports", "the hosted tools need an http MCP transport")
    }
    if (options.approvals !== undefined) {
      const liveUsable = driver.approvals?.live === true && driver.live !== undefined &&
        options.live?.threads !== false
      if (driver.approvals?.tool === undefined && !liveUsable) {
        return yield* unsupported(
          "approvals",
          driver.approvals?.live === true
            ? "the driver asks approvals on live threads only, and live threads are turned off (live.threads: false)"
            : "the driver declares no approval mechanism (Driver.approvals)"
        )
      }
    }
    const sandbox = options.policy?.sandbox
    if (sandbox !== undefined && !driver.capabilities.sandbox.includes(sandbox)) {
      return yield* unsupported("sandbox", `sandbox level ${sandbox} is not available`)
    }
  })

/** Sandbox levels, narrowest first. */
const sandboxOrder: ReadonlyArray<Driver.SandboxLevel> = ["readOnly", "workspaceWrite", "unrestricted"]

/**
 * Why a turn may not run at sandbox level `level`, if it may not: the driver lacks the level, or
 * it is wider than the agent's (`readOnly` only, when the agent set none).
 */
const sandboxOfTurn = (
  driver: Driver.Driver,
  agentLevel: Driver.SandboxLevel | undefined,
  level: Driver.SandboxLevel
): InvalidTurn | undefined => {
  if (!sandboxOrder.includes(level) || !driver.capabilities.sandbox.includes(level)) {
    return new InvalidTurn({
      reason: "UnsupportedCapability",
      detail: `driver ${driver.name} has no sandbox level ${String(level)} (it has: ${
        driver.capabilities.sandbox.join(", ") || "none"
      })`
    })
  }
  const ceiling = agentLevel ?? "readOnly"
  return sandboxOrder.indexOf(level) > sandboxOrder.indexOf(ceiling)
    ? new InvalidTurn({
      reason: "PolicyWidened",
      detail: `the turn's sandbox level ${level} is wider than the agent's (${
        agentLevel ?? "none set: a turn may only ask readOnly"
      })`
    })
    : undefined
}

/**
 * `Agent.make`: the options and the definition are validated and the definition frozen (no
 * provider I/O), the tools are bound to their handler services, then the agent is assembled.
 *
 * @internal
 */
/** A plain object's own fields, copied; anything else as it is (validation reports it). */
const copyBag = <A>(value: A): A =>
  typeof value === "object" && value !== null && Object.getPrototypeOf(value) === Object.prototype
    ? { ...value }
    : value

/**
 * The caller's options as they are when `make` is called: every option bag is copied, so a later
 * change to the caller's objects (a wider `policy.sandbox`, another model) never reaches the agent.
 */
const snapshot = (options: Agent.Options<never>): Agent.Options<never> => {
  const copy = copyBag(options)
  if (copy === options) return options
  const bags = ["identity", "policy", "env", "events", "limits", "processes", "threads", "live"] as const
  const out = copy as { [K in (typeof bags)[number]]?: unknown }
  for (const bag of bags) if (out[bag] !== undefined) out[bag] = copyBag(out[bag])
  return copy
}

export const make = (
  given: Agent.Options<never>
): Effect.Effect<
  Agent.Agent,
  AgentConfigError | UnsupportedCapability,
  Scope.Scope | Gateway.Gateway | FileSystem.FileSystem | Path.Path
> =>
  Effect.gen(function*() {
    const options = snapshot(given)
    yield* validate(options)
    yield* Effect.annotateCurrentSpan("agent.provider", options.driver.name)
    const validated = yield* Definition.validate(options.definition, {
      driver: options.driver.name,
      capabilities: options.driver.capabilities,
      hostedKey,
      reservedVariable: (name) => name === Process.markerVariable
    })
    // Requires the direct tools' handler services; `Agent.make`'s signature names them.
    const executor = yield* (Definition.executor(validated) as Effect.Effect<Catalog.Executor, ToolDefinitionError>)
      .pipe(Effect.mapError((error) => configError("InvalidDefinition", error.message, error)))
    return yield* assemble(options, executor, validated)
  }).pipe(Tracing.withSpan("Agent.make"))

/** Registers the tools, acquires the clone and wires the ordered close. @internal */
export const assemble = (
  options: Agent.Options<never>,
  executor: Catalog.Executor,
  validated: Definition.Validated
): Effect.Effect<
  Agent.Agent,
  AgentConfigError,
  Scope.Scope | Gateway.Gateway | FileSystem.FileSystem | Path.Path
> =>
  Effect.gen(function*() {
    const id = randomUUID()
    const marker = Process.makeMarker(id)
    // No process can carry the marker before it is handed out (to a spawn's environment, or read
    // from the agent): until then, close skips scanning the environment of every process on the
    // machine (milliseconds per hundred processes).
    let markerOut = false
    const handOut = () => {
      markerOut = true
      return marker
    }
    // A copy: replacing a function on the caller's driver object later changes nothing here.
    const driver = Object.freeze({ ...options.driver })
    if (!orphansReaped) {
      // What a SIGKILLed host left: its processes first (they may still write), then its clones
      // in every root it recorded.
      orphansReaped = true
      yield* Process.reapOrphans
      yield* Hosts.reclaimDeadHosts
    }
    // The view is frozen deep by the validation; the catalog is frozen by the tool package.
    const definition: Agent.FrozenDefinition = Object.freeze({ ...validated.view, catalog: executor.catalog })
    const tools = definition.catalog.descriptors.map((descriptor) => descriptor.name).sort()
    // Synchronous: one stat and one realpath take microseconds, where each call of the promise
    // API is a round trip through the thread pool (milliseconds on a loaded machine).
    const info = yield* Effect.try({
      try: () => NodeFs.statSync(options.workspace),
      catch: (error) =>
        configError("InvalidOptions", `workspace: ${error instanceof Error ? error.message : String(error)}`)
    })
    if (!info.isDirectory()) {
      return yield* configError("InvalidOptions", "workspace is not a directory")
    }
    let workspace = options.workspace
    try {
      workspace = NodeFs.realpathSync.native(options.workspace)
    } catch {
      // As given: the fingerprint then keys on the path the host chose.
    }

    const gateway = yield* Gateway.Gateway
    const path = yield* Path.Path
    // Recorded before the clone exists: a host killed from here on leaves nothing unfound.
    yield* Hosts.recordRoot(path.resolve(options.profile?.root ?? Profile.defaultRoot()))
    // The registration, the clone and the runs live in scopes of their own, closed only by the
    // ordered close (steps 4, 6, 7): a close whose deadline expires leaves them open (pending),
    // and leaving the agent's scope then never waits on a run that does not drain.
    const registrationScope = yield* Scope.make()
    const cloneScope = yield* Scope.make()
    const workScope = yield* Scope.make()
    const abort = Effect.zipRight(Scope.close(cloneScope, Exit.void), Scope.close(registrationScope, Exit.void))
    // Until the close exists (construction failed or was interrupted), leaving the scope aborts.
    let constructed = false
    yield* Effect.addFinalizer(() =>
      constructed ? Effect.void : Effect.zipRight(Scope.close(workScope, Exit.void), abort)
    )
    const registration = yield* gateway.register(executor).pipe(
      Scope.extend(registrationScope),
      Effect.mapError((error) => configError("Registration", error.message, error)),
      Effect.onError(() => abort)
    )
    // The tenant ends at the first "/": ("acme/eu", "alice") and ("acme", "eu/alice") are two
    // identities, with two session stores. A tenant without "%" or "/" keeps its identity.
    const tenant = (options.identity?.tenant ?? "").replaceAll("%", "%25").replaceAll("/", "%2F")
    const identity = options.identity === undefined ? undefined : `${driver.name}:${tenant}/${options.identity.id}`
    const profile = yield* Profile.clone(options.profile ?? Profile.native(), driver.layout, {
      agentId: id,
      ...(identity === undefined ? {} : { identity }),
      // Threads save their own sessions before each commit; nothing else is kept.
      saveSessionsOnClose: false,
      // A session file copied while another process of the gateway is still running may hold
      // that process's live token.
      redactSession: gateway.redactor.bytes
    }).pipe(
      Scope.extend(cloneScope),
      Effect.mapError((error) => configError("Profile", error.message, error)),
      Effect.onError(() => abort)
    )
    const skills = yield* Definition.materializeSkills(validated, profile).pipe(
      Effect.mapError((error) => configError("Profile", error.message, error)),
      Effect.onError(() => abort)
    )

    const compatibility: Compatibility.CompatibilityInput = {
      driver: driver.name,
      driverConfig: driver.sessionConfig,
      model: options.model,
      workspace,
      instructions: definition.instructions,
      skills: validated.skills.map((skill) => ({ name: skill.name, digest: skill.digest })),
      mcp: definition.mcp,
      catalogFingerprint: definition.catalog.fingerprint,
      policy: options.policy,
      profileIdentity: profile.identity,
      profileFingerprint: profile.fingerprint,
      identity: options.identity === undefined
        ? undefined
        : { id: options.identity.id, tenant: options.identity.tenant }
    }
    const fingerprint = Compatibility.compatibilityFingerprint(compatibility)
    const provided = yield* Effect.serviceOption(ThreadStore)
    const store = Option.isSome(provided) ? provided.value : yield* makeMemory
    const agentClosed = yield* Deferred.make<void>()
    const agentClosing = yield* Deferred.make<void>()
    const exiting = new Map<string, Deferred.Deferred<void>>()

    // A driver prepares the same files for every run of the agent (per-turn state goes in its
    // arguments and environment, never in a file another run's CLI may be reading): write each
    // file only when its content changes, or when the file on disk is no longer the one written
    // (the CLI, or the model through its file tools, edited a projected skill or its context
    // file): the next run's CLI reads what the agent defines, never an earlier run's edit.
    const materializeLock = yield* Effect.makeSemaphore(1)
    const materialized = new Map<string, { readonly key: string; readonly written: string | undefined }>()
    const onDisk = (path: string): string | undefined => {
      const info = NodeFs.lstatSync(NodePath.join(profile.dir, ...path.split("/")), { throwIfNoEntry: false })
      return info === undefined ? undefined : `${info.ino}:${info.size}:${info.mtimeMs}:${info.ctimeMs}`
    }
    const materialize = (files: ReadonlyArray<Driver.MaterializedFile>) =>
      materializeLock.withPermits(1)(Effect.suspend(() => {
        const changed = files.filter((file) => {
          const known = materialized.get(file.path)
          return known === undefined || known.key !== `${file.mode ?? ""}:${file.content}` ||
            known.written === undefined || known.written !== onDisk(file.path)
        })
        return changed.length === 0 ? Effect.void : Effect.tap(
          profile.materialize(changed, { replaceChanged: true }),
          () =>
            Effect.sync(() => {
              for (const file of changed) {
                materialized.set(file.path, { key: `${file.mode ?? ""}:${file.content}`, written: onDisk(file.path) })
              }
            })
        )
      }))
    // The two services a driver's `prepare` and `open` may use, and nothing else of the context
    // `make` ran in (a run's own context, its span among it, stays the run's).
    const services = Context.make(FileSystem.FileSystem, yield* FileSystem.FileSystem).pipe(
      Context.add(Path.Path, yield* Path.Path)
    )
    // The runs, the processes' reapers and the live pool, in the work scope (one extension of
    // the context: each costs about as much as making one of them).
    const { pool, reapers, runs } = yield* Effect.gen(function*() {
      const runs = yield* FiberSet.make<Result, RunError>()
      const reapers = yield* FiberSet.make<void, never>()
      const pool = yield* Live.makePool({
        idleTimeout: Duration.decode(options.live?.idleTimeout ?? "5 minutes"),
        maxProcesses: Math.max(1, options.live?.maxProcesses ?? 8)
      })
      return { pool, reapers, runs }
    }).pipe(Scope.extend(workScope))
    const processes = new Set<Process.Running>()
    const killGrace = Duration.decode(options.processes?.killGrace ?? "2 seconds")
    // Threads run live when the driver offers a live protocol, unless the host turned it off.
    const liveThreads = driver.live !== undefined && options.live?.threads !== false
    // The live session takes a native attempt's JSON Schema per turn (`LiveTurn.outputSchema`).
    const liveStructured = driver.capabilities.liveStructuredOutput === "native"
    // The handler's requirements are the context `make` ran in (its signature names them).
    const broker = options.approvals === undefined
      ? undefined
      : Approvals.make(options.approvals, yield* Effect.context<never>())
    const context: Run.Context = {
      get marker() {
        return handOut()
      },
      driver,
      hostedKey,
      registration,
      redactor: gateway.redactor,
      profile: {
        dir: profile.dir,
        siblings: profile.siblings,
        env: profile.env,
        materialize
      },
      workspace: options.workspace,
      instructions: definition.instructions,
      skills,
      mcp: definition.mcp,
      tools,
      sandbox: options.policy?.sandbox,
      hostEnv: options.env ?? NodeProcess.env,
      limits: {
        maxLineBytes: options.limits?.maxLineBytes ?? 16 * 1024 * 1024,
        maxRawBytes: options.limits?.maxRawBytes ?? 1024 * 1024,
        afterExit: killGrace
      },
      exitGrace: Duration.decode(options.processes?.exitGrace ?? "5 seconds"),
      killGrace,
      processes,
      logs: RunLogs.make(driver.layout, profile),
      reapers,
      services,
      pool,
      ...(broker === undefined ? {} : {
        approvals: {
          broker,
          key: `${hostedKey}_approval`,
          register: (executor: Catalog.Executor) => gateway.register(executor)
        }
      })
    }
    const capacity = Math.max(1, options.events?.buffer ?? 256)
    const blocking = options.events?.blocking ?? false

    const admission = yield* Effect.makeSemaphore(1)
    let fenced = false
    // Built when first needed (an error captures a stack trace): most agents never refuse a run.
    let closedError: AgentClosed | undefined
    const closed = () => closedError ??= new AgentClosed({ agent: id })

    // Steps 1 and 2, the admission fence and the cancellation of the admitted runs, are taken by
    // every close call before the bounded steps: they are immediate, so even a close with a zero
    // deadline refuses new runs and interrupts the running ones (each run then stops its own
    // process, with escalation).
    // (A closed FiberSet cannot be iterated on Effect 3.22: once drained, there is nothing to cancel.)
    let drained = false
    const fence = admission.withPermits(1)(Effect.sync(() => (fenced = true))).pipe(
      // Thread events stop waiting for subscribers that do not read: no run's end waits on them.
      Effect.zipRight(Deferred.succeed(agentClosing, undefined)),
      // Approvals the cancellation cuts short are answered by `close`.
      Effect.zipRight(broker === undefined ? Effect.void : broker.closing),
      Effect.zipRight(Effect.suspend(() =>
        drained ? Effect.void : Effect.forEach(runs, (fiber) => Fiber.interruptFork(fiber), { discard: true })
      ))
    )
    const removeClones = yield* Close.once(Scope.close(cloneScope, Exit.void))
    const revokeRegistration = yield* Close.once(Scope.close(registrationScope, Exit.void))
    const closer = yield* Close.make(id, [
      {
        // Live processes first end gracefully (their turns were just canceled), bounded by the
        // kill grace per step, then their groups are signalled like any process of the agent.
        name: "shutdown-live",
        run: pool.retireAll
      },
      {
        // CLIs that already delivered their terminal record are not signalled here: their reaper
        // gives them their exit grace first (drained in the next step).
        name: "close-processes",
        run: Effect.suspend(() =>
          Effect.forEach(Array.from(processes), (running) =>
            running.terminate(killGrace), {
            concurrency: "unbounded",
            discard: true
          })
        )
      },
      {
        name: "drain-runs",
        run: FiberSet.awaitEmpty(runs).pipe(
          // Every run has published its RunFinished: threads' event streams end now (not when a
          // close's deadline expires with runs still finishing, which a later close drains).
          Effect.zipRight(Deferred.succeed(agentClosed, undefined)),
          Effect.zipRight(FiberSet.awaitEmpty(reapers)),
          Effect.zipRight(Effect.sync(() => (drained = true))),
          Effect.zipRight(Scope.close(workScope, Exit.void))
        )
      },
      {
        name: "reap-leftovers",
        run: Effect.suspend(() => markerOut ? Effect.asVoid(Process.reapMarked(marker)) : Effect.void)
      },
      { name: "remove-clones", run: removeClones },
      { name: "revoke-registration", run: revokeRegistration }
    ])
    const closeTimeout = Duration.decode(options.closeTimeout ?? "30 seconds")
    const close = (timeout: Duration.DurationInput) =>
      Effect.zipRight(fence, closer.close(timeout)).pipe(
        Tracing.withSpan("Agent.close", { attributes: { "agent.id": id, "agent.provider": driver.name } })
      )
    yield* Effect.addFinalizer(() =>
      close(closeTimeout).pipe(
        Effect.catchAll((error) => Effect.logWarning(error.message))
      )
    )
    constructed = true

    // Read once: a later change to the caller's options object never reaches the agent.
    const defaultModel = options.model
    const sessionFailure = (error: { readonly message: string }) => ({ message: `session store: ${error.message}` })
    /**
     * Checks a turn and admits its run: the run's fiber (in the agent's runs) and the turn's
     * `cancel`. The run publishes its events into `queue`; without one (`Agent.run`: nobody reads
     * them) none is built, and the fiber's end is the run's result or the `RunError` its
     * `RunFinished` would carry. The caller owns the fiber from here: it interrupts it when it leaves.
     */
    const admit = (
      input: Agent.Input,
      hooks: Thread.Hooks | undefined,
      queue: Handoff.Handoff<Event.Event, RunError> | undefined
    ): Effect.Effect<
      { readonly fiber: Fiber.RuntimeFiber<Result, RunError>; readonly cancel: Effect.Effect<unknown> | undefined },
      RunError | AgentClosed | InvalidTurn
    > =>
      Effect.gen(function*() {
        const turn: Agent.Turn = typeof input === "string" ? { input } : input
        // A structured-output attempt (`runAs`): its JSON Schema, and on an agent's repair turn
        // the session it resumes.
        const attempt = Structured.attemptOf(input)
        // Completed once the run's provider process is gone: a thread's next turn, and an agent's
        // structured-output repair turn, wait for it.
        const reaped = hooks?.reaped ?? attempt?.reaped
        const neverSpawned = reaped === undefined ? Effect.void : Deferred.succeed(reaped, undefined)
        const runId = randomUUID()
        const emitter = queue === undefined
          ? Emitter.discarding
          : Emitter.make(runId, queue, capacity, blocking, hooks?.observe)
        const model = turn.model ?? defaultModel
        if (turn.toolPolicy !== undefined) {
          const unknown = ToolPolicy.unknownNames(tools, turn.toolPolicy)
          if (unknown.length > 0) {
            // Nothing was spawned: a thread's next turn has no process to wait for.
            yield* neverSpawned
            return yield* new InvalidTurn({
              reason: "UnknownTool",
              detail: `the tool policy names tools the definition does not have: ${unknown.join(", ")}`
            })
          }
        }
        const unmapped = (["allow", "deny"] as const).filter((list) =>
          turn.builtinTools?.[list] !== undefined && !(driver.capabilities.builtinToolPolicy ?? []).includes(list)
        )
        if (unmapped.length > 0) {
          yield* neverSpawned
          return yield* new InvalidTurn({
            reason: "UnsupportedCapability",
            detail: `driver ${driver.name} cannot map a built-in tool policy's ${unmapped.join(" and ")} to its CLI`
          })
        }
        const turnSandbox = turn.builtinTools?.sandbox
        if (turnSandbox !== undefined) {
          const invalid = sandboxOfTurn(driver, options.policy?.sandbox, turnSandbox)
          if (invalid !== undefined) {
            yield* neverSpawned
            return yield* invalid
          }
        }
        const builtinLists = turn.builtinTools?.allow !== undefined || turn.builtinTools?.deny !== undefined
        // A native structured-output attempt runs one-shot unless the driver's live session takes
        // the JSON Schema per turn (its JSON Schema is otherwise a flag of the CLI's invocation,
        // which a warm live process was started without).
        const oneShotAttempt = attempt?.outputSchema !== undefined && !liveStructured
        // A one-shot run (an agent's own run, or such an attempt) of a driver that asks approvals
        // on live threads only fails before spawn: nothing would ask the host.
        if (
          broker !== undefined && driver.approvals?.tool === undefined &&
          (hooks === undefined || !liveThreads || oneShotAttempt)
        ) {
          yield* neverSpawned
          return yield* new InvalidTurn({
            reason: "UnsupportedCapability",
            detail: `driver ${driver.name} asks approvals on live threads only; this turn would run one-shot`
          })
        }
        // The run's span: the run executes in it, and the credential its process gets at spawn is
        // minted in it, so the gateway traces that process's tool calls as the run's children.
        const span = yield* Tracing.startRun({ runId, provider: driver.name, model, threadKey: hooks?.threadKey })
        // A per-turn policy narrows what this run's process credential lists and calls.
        const request: Run.Request = {
          runId,
          prompt: turn.input,
          model,
          session: hooks?.session ??
            (attempt?.resume === undefined
              ? { _tag: "New", id: randomUUID() }
              : { _tag: "Resume", id: attempt.resume }),
          ...(turn.toolPolicy === undefined ? {} : { tools: ToolPolicy.effective(tools, turn.toolPolicy) }),
          ...(turn.builtinTools === undefined || !builtinLists ? {} : {
            builtinTools: {
              ...(turn.builtinTools.allow === undefined ? {} : { allow: [...turn.builtinTools.allow] }),
              ...(turn.builtinTools.deny === undefined ? {} : { deny: [...turn.builtinTools.deny] })
            }
          }),
          ...(turnSandbox === undefined ? {} : { sandbox: turnSandbox }),
          ...(reaped === undefined ? {} : { reaped }),
          ...(hooks === undefined ? {} : {
            threadKey: hooks.threadKey,
            commit: hooks.commit,
            save: hooks.save,
            load: hooks.load,
            opening: hooks.opening,
            accepted: hooks.accepted
          }),
          // A thread of an agent with approvals runs live only when the driver's live session asks
          // them (otherwise one-shot, through its approver tool).
          ...(hooks === undefined || !liveThreads || (broker !== undefined && driver.approvals?.live !== true) ||
              oneShotAttempt
            ? {}
            : {
              live: {
                key: hooks.threadKey,
                // The reuse rule: same fingerprint (the agent's), same effective tools, same model,
                // same built-in tool policy and sandbox level (mapped into the process's arguments at open).
                reuse: JSON.stringify([
                  fingerprint,
                  turn.toolPolicy === undefined ? tools : ToolPolicy.effective(tools, turn.toolPolicy),
                  model ?? null,
                  turn.builtinTools === undefined || !builtinLists ? null : [
                    turn.builtinTools.allow === undefined ? null : [...turn.builtinTools.allow].sort(),
                    turn.builtinTools.deny === undefined ? null : [...turn.builtinTools.deny].sort()
                  ],
                  ...(turnSandbox === undefined ? [] : [turnSandbox])
                ])
              }
            }),
          ...(attempt === undefined ? {} : { structured: attempt })
        }

        const fiber = yield* admission.withPermits(1)(
          fenced
            ? Effect.zipRight(
              neverSpawned,
              Effect.zipRight(Tracing.endRun(span, Exit.fail(closed())), Effect.fail(closed()))
            )
            : FiberSet.run(
              runs,
              Run.execute(context, request, emitter).pipe(
                Effect.withParentSpan(span),
                Effect.onExit((exit) => Tracing.endRun(span, exit))
              )
            )
        )
        return { fiber, cancel: turn.cancel }
      })

    /**
     * Starts a run in the caller's scope (whose close interrupts it) and gives its events' buffer:
     * `stream` reads it as a `Stream`, a thread's `run` drains it directly.
     */
    const start = (
      input: Agent.Input,
      hooks?: Thread.Hooks
    ): Effect.Effect<Handoff.Handoff<Event.Event, RunError>, RunError | AgentClosed | InvalidTurn, Scope.Scope> =>
      Effect.gen(function*() {
        const queue = Handoff.make<Event.Event, RunError>(capacity)
        const { cancel, fiber } = yield* admit(input, hooks, queue)
        yield* Effect.addFinalizer(() => Effect.zipRight(queue.shutdown, Fiber.interrupt(fiber)))
        if (hooks !== undefined) yield* hooks.admitted(fiber)
        // The run's fiber is interrupted, not the consumer: its RunFinished(canceled) still arrives.
        if (cancel !== undefined) yield* Effect.forkScoped(Effect.zipRight(cancel, Fiber.interruptFork(fiber)))
        return queue
      })

    const stream = (
      input: Agent.Input,
      hooks?: Thread.Hooks
    ): Stream.Stream<Event.Event, RunError | AgentClosed | InvalidTurn> =>
      Stream.unwrapScoped(Effect.map(start(input, hooks), (queue) => queue.stream)).pipe(
        Tracing.withStreamSpan("Agent.stream")
      )

    // A thread's `run`, whose turn's events its thread observes: the run's buffer drained by a
    // plain loop of pulls, the same events and end as `stream`'s, without a `Stream` around it (a
    // stream's channel machinery costs about half a millisecond a run, all of it between the run's
    // end and its result). Each chunk is read when it arrives, not in an effect that holds it (such
    // an effect kept the run's events through V8's young-generation collections).
    const runDirect = (
      input: Agent.Input,
      hooks?: Thread.Hooks,
      seen?: (events: ReadonlyArray<Event.Event>) => unknown
    ): Effect.Effect<Result, RunError | AgentClosed | InvalidTurn> =>
      Effect.scoped(Effect.flatMap(start(input, hooks), (queue) => {
        let result: Result | undefined
        const drain: Effect.Effect<Result, RunError> = Effect.matchEffect(queue.pull, {
          onFailure: (end) =>
            end._tag === "Some"
              ? Effect.fail(end.value)
              : result === undefined
              ? Effect.dieMessage("a run ended without its RunFinished event")
              : Effect.succeed(result),
          onSuccess: (chunk) => {
            const events = Chunk.toReadonlyArray(chunk)
            if (seen !== undefined) seen(events)
            for (let i = 0; i < events.length; i++) {
              const event = events[i]!
              if (event._tag === "RunFinished") result = event.result
            }
            return drain
          }
        })
        return drain
      }))
    const threadHost: Thread.Host = {
      provider: driver.name,
      capabilities: driver.capabilities,
      outputSchemaRefusal: driver.outputSchemaRefusal,
      fingerprint,
      components: Compatibility.compatibilityComponents(compatibility),
      revisionless: definition.catalog.descriptors.filter((d) => d.revision === undefined).map((d) => d.name),
      store,
      storeShared: Option.isSome(provided),
      leaseTtl: Duration.decode(options.threads?.leaseTtl ?? "30 seconds"),
      events: { capacity, blocking },
      sessions: {
        save: (session) => Effect.asVoid(Effect.mapError(profile.saveSession(session), sessionFailure)),
        load: (session) => Effect.asVoid(Effect.mapError(profile.loadSession(session), sessionFailure)),
        drop: (sessions) => Effect.mapError(profile.dropSessions(sessions), sessionFailure),
        prune: (olderThan, keep) => Effect.mapError(profile.pruneSessions({ olderThan, keep }), sessionFailure)
      },
      admit: Effect.suspend(() => fenced ? Effect.fail(closed()) : Effect.void),
      stream,
      run: runDirect,
      closed: Deferred.await(agentClosed),
      closing: Deferred.await(agentClosing),
      exiting,
      send: (key, input) =>
        Effect.gen(function*() {
          if (fenced) return yield* closed()
          if (!liveThreads || !driver.capabilities.streamingInput || driver.live === undefined) {
            return yield* new UnsupportedCapability({
              driver: driver.name,
              capability: "streamingInput",
              detail: driver.live === undefined
                ? "the driver has no live protocol: input cannot reach a running turn"
                : !liveThreads
                ? "live threads are turned off (live.threads: false)"
                : "the driver's live protocol cannot take input during a turn"
            })
          }
          const steer = pool.get(key)?.steer
          if (steer === undefined) return yield* new NoActiveTurn({ key })
          // The provider's turn may end before core has read its terminal: the driver says so.
          // The agent's close while the input was on its way cancels the turn and shuts the
          // process down: input left queued is never answered, and one the ended process refused
          // was refused because of the close. Either way the close is what ended the send.
          const delivery = yield* Effect.catchIf(
            steer(input),
            (error) => fenced || error.reason === "NoActiveTurn",
            (): Effect.Effect<never, AgentClosed | NoActiveTurn> =>
              fenced ? Effect.fail(closed()) : Effect.fail(new NoActiveTurn({ key }))
          )
          if (fenced && delivery._tag === "Queued") return yield* closed()
          return delivery._tag
        }),
      // A handle's close (its own turns already ended) leaves a process another handle's turn runs on.
      retireLive: (key) => pool.retireIdle(key),
      settleLive: (key) => pool.settle(key, false),
      leases: Thread.makeLeases(),
      approve: (approvalId, decision, key) =>
        broker === undefined
          ? Effect.fail(new ApprovalNotFound({ id: approvalId }))
          : broker.approve(approvalId, decision, key)
    }

    // Nobody reads a plain run's events: none is built, and its result is its fiber's end. No
    // scope: the caller that leaves interrupts the run (and waits for it), as `start`'s finalizer does.
    const run = (input: Agent.Input): Effect.Effect<Result, RunError | AgentClosed | InvalidTurn> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(restore(admit(input, undefined, undefined)), ({ cancel, fiber }) => {
          const ended = restore(Effect.flatten(Fiber.await(fiber))).pipe(
            Effect.onInterrupt(() => Fiber.interrupt(fiber))
          )
          return cancel === undefined ? ended : Effect.flatMap(
            Effect.forkDaemon(Effect.interruptible(Effect.zipRight(cancel, Fiber.interruptFork(fiber)))),
            (canceler) => Effect.ensuring(ended, Fiber.interrupt(canceler))
          )
        })
      ).pipe(Tracing.withSpan("Agent.run"))

    // An agent's attempts run as plain runs; a repair turn resumes the previous attempt's session.
    const structuredRunner: Structured.Runner<RunError | AgentClosed | InvalidTurn> = {
      driver: driver.name,
      capabilities: driver.capabilities,
      outputSchemaRefusal: driver.outputSchemaRefusal,
      stream: (turn) => stream(turn),
      resumesItself: true,
      // The reaper of the last attempt left the session's entries for a repair turn that did not
      // come: they go once its process is gone, behind the result (the agent's close waits).
      discard: (session, reaped) =>
        Effect.asVoid(FiberSet.run(
          reapers,
          Deferred.await(reaped).pipe(Effect.zipRight(profile.dropSessions([session])), Effect.ignore)
        ))
    }

    return Object.freeze(
      {
        id,
        get marker() {
          return handOut()
        },
        provider: driver.name,
        identity: options.identity === undefined ? undefined : Definition.deepFreeze({ ...options.identity }),
        definition,
        fingerprint,
        thread: (key, threadOptions) => Thread.open(threadHost, key, threadOptions ?? {}),
        pruneThreads: (pruneOptions) => Thread.pruneAll(threadHost, pruneOptions),
        run,
        stream: (input) => stream(input),
        approve: (approvalId, decision) =>
          broker === undefined
            ? Effect.fail(new ApprovalNotFound({ id: approvalId }))
            : broker.approve(approvalId, decision),
        runAs: (schema, input, structuredOptions) =>
          Structured.runAs(structuredRunner, schema, input, structuredOptions).pipe(
            Tracing.withSpan("Agent.runAs")
          ),
        streamAs: (schema, input, structuredOptions) =>
          Structured.streamAs(structuredRunner, schema, input, structuredOptions).pipe(
            Tracing.withStreamSpan("Agent.streamAs")
          ),
        close: (closeOptions) => close(closeOptions?.timeout ?? closeTimeout)
      } satisfies Agent.Agent
    )
  })
