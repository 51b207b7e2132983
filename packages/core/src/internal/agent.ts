/**
 * Agent construction (validate + freeze → register → clone → admit) and the wiring of the
 * ordered close as the scope's finalizer.
 *
 * @internal
 */
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Gateway from "@tether/gateway/Gateway"
import * as Profile from "@tether/profile/Profile"
import type * as Catalog from "@tether/tool/Catalog"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { randomUUID } from "node:crypto"
import * as NodeProcess from "node:process"
import type * as Agent from "../Agent.js"
import { AgentClosed, AgentConfigError, InvalidTurn, UnsupportedCapability } from "../AgentError.js"
import type { RunError } from "../AgentError.js"
import type * as Driver from "../Driver.js"
import type * as Event from "../Event.js"
import type { Result } from "../Result.js"
import * as Close from "./close.js"
import * as Compatibility from "./compatibility.js"
import * as Definition from "./definition.js"
import * as Emitter from "./emitter.js"
import * as Process from "./process.js"
import * as Run from "./run.js"
import * as Thread from "./thread.js"
import { makeMemory, ThreadStore } from "./threadStore.js"
import * as ToolPolicy from "./toolPolicy.js"
import * as Tracing from "./tracing.js"

/** @internal */
export const hostedKey = "tether"

// The orphan sweep runs once per host process, at its first agent.
let orphansReaped = false

const deepFreeze = <A>(value: A): A => {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key])
  }
  return value
}

const configError = (reason: AgentConfigError["reason"], detail: string, cause?: unknown) =>
  new AgentConfigError({ reason, detail, ...(cause === undefined ? {} : { cause }) })

/** Validates what does not need the toolkit; no I/O. @internal */
export const validate = (options: Agent.Options<never>) =>
  Effect.gen(function*() {
    const { definition, driver } = options
    if (typeof definition.instructions !== "string") {
      return yield* configError("InvalidDefinition", "instructions must be a string")
    }
    if (typeof options.workspace !== "string" || !options.workspace.startsWith("/")) {
      return yield* configError("InvalidOptions", "workspace must be an absolute path")
    }
    if (options.identity !== undefined && (typeof options.identity.id !== "string" || options.identity.id === "")) {
      return yield* configError("InvalidOptions", "identity.id must be a non-empty string")
    }
    const unsupported = (capability: string, detail: string) =>
      new UnsupportedCapability({ driver: driver.name, capability, detail })
    if (!driver.capabilities.mcpTransports.includes("http")) {
      return yield* unsupported("mcpTransports", "the hosted tools need an http MCP transport")
    }
    if (definition.instructions !== "" && !driver.capabilities.instructions) {
      return yield* unsupported("instructions", "the driver cannot send instructions")
    }
    const sandbox = options.policy?.sandbox
    if (sandbox !== undefined && !driver.capabilities.sandbox.includes(sandbox)) {
      return yield* unsupported("sandbox", `sandbox level ${sandbox} is not available`)
    }
  })

/** @internal */
export const make = (
  options: Agent.Options<never>,
  executor: Catalog.Executor,
  validated: Definition.Validated
): Effect.Effect<
  Agent.Agent,
  AgentConfigError,
  Scope.Scope | Gateway.Gateway | CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path
> =>
  Effect.gen(function*() {
    const id = randomUUID()
    const marker = Process.makeMarker(id)
    // A copy: replacing a function on the caller's driver object later changes nothing here.
    const driver = Object.freeze({ ...options.driver })
    if (!orphansReaped) {
      orphansReaped = true
      yield* Process.reapOrphans
    }
    // The view is frozen deep by the validation; the catalog is frozen by the tool package.
    const definition: Agent.FrozenDefinition = Object.freeze({ ...validated.view, catalog: executor.catalog })
    const tools = definition.catalog.descriptors.map((descriptor) => descriptor.name).sort()
    const fs = yield* FileSystem.FileSystem
    const info = yield* fs.stat(options.workspace).pipe(
      Effect.mapError((error) => configError("InvalidOptions", `workspace: ${error.message}`))
    )
    if (info.type !== "Directory") {
      return yield* configError("InvalidOptions", "workspace is not a directory")
    }

    const scope = yield* Effect.scope
    const gateway = yield* Gateway.Gateway
    // Acquisition order gives the release order: clone before registration (steps 6, 7).
    const registrationScope = yield* Scope.fork(scope, ExecutionStrategy.sequential)
    const cloneScope = yield* Scope.fork(scope, ExecutionStrategy.sequential)
    const abort = Effect.zipRight(Scope.close(cloneScope, Exit.void), Scope.close(registrationScope, Exit.void))
    const registration = yield* gateway.register(executor).pipe(
      Scope.extend(registrationScope),
      Effect.mapError((error) => configError("Registration", error.message, error)),
      Effect.onError(() => abort)
    )
    const identity = options.identity === undefined
      ? undefined
      : `${driver.name}:${options.identity.tenant ?? ""}/${options.identity.id}`
    const profile = yield* Profile.clone(options.profile ?? Profile.native(), driver.layout, {
      agentId: id,
      ...(identity === undefined ? {} : { identity })
    }).pipe(
      Scope.extend(cloneScope),
      Effect.mapError((error) => configError("Profile", error.message, error)),
      Effect.onError(() => abort)
    )
    const skills = yield* Definition.materializeSkills(validated, profile).pipe(
      Effect.mapError((error) => configError("Profile", error.message, error)),
      Effect.onError(() => abort)
    )

    const fingerprint = Compatibility.compatibilityFingerprint({
      driver: driver.name,
      driverConfig: driver.sessionConfig,
      model: options.model,
      workspace: yield* fs.realPath(options.workspace).pipe(Effect.orElseSucceed(() => options.workspace)),
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
    })
    const store = yield* Effect.serviceOption(ThreadStore).pipe(
      Effect.flatMap(Option.match({ onNone: () => makeMemory, onSome: Effect.succeed }))
    )
    const agentClosed = yield* Deferred.make<void>()
    const exiting = new Map<string, Deferred.Deferred<void>>()

    // A driver prepares the same files for every run of the agent (the hosted-tools declaration
    // only changes with the registration): write them when they change, not once per run.
    const materializeLock = yield* Effect.makeSemaphore(1)
    let materialized: string | undefined
    const materialize = (files: ReadonlyArray<Driver.MaterializedFile>) =>
      materializeLock.withPermits(1)(Effect.suspend(() => {
        const key = JSON.stringify(files)
        return key === materialized
          ? Effect.void
          : Effect.tap(profile.materialize(files), () => Effect.sync(() => (materialized = key)))
      }))
    const services = yield* Effect.context<CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path>()
    const runs = yield* FiberSet.make<Result, RunError>()
    const reapers = yield* FiberSet.make<void, never>()
    const processes = new Set<Process.Running>()
    const killGrace = Duration.decode(options.processes?.killGrace ?? "2 seconds")
    const context: Run.Context = {
      marker,
      driver,
      hostedKey,
      registration,
      profile: {
        dir: profile.dir,
        siblings: profile.siblings,
        env: profile.env,
        materialize,
        saveSessions: profile.saveSessions.pipe(
          Effect.catchAll((error) => Effect.logWarning("saving provider sessions failed", error.message)),
          Effect.asVoid
        )
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
      reapers,
      services
    }
    const capacity = Math.max(1, options.events?.buffer ?? 256)
    const blocking = options.events?.blocking ?? false

    const admission = yield* Effect.makeSemaphore(1)
    let fenced = false
    const closed = new AgentClosed({ agent: id })

    // Step 1, the admission fence, is taken by every close call before the bounded steps, so
    // even a close with a zero deadline fences admission.
    const fence = admission.withPermits(1)(Effect.sync(() => (fenced = true)))
    const closer = yield* Close.make(id, [
      {
        name: "cancel-runs",
        bound: "1 second",
        run: Effect.forEach(runs, (fiber) => Fiber.interruptFork(fiber), { discard: true })
      },
      {
        name: "close-processes",
        bound: Duration.sum(Duration.times(killGrace, 2), "1 second"),
        run: Effect.suspend(() =>
          Effect.forEach(Array.from(processes), (running) => running.terminate(killGrace), {
            concurrency: "unbounded",
            discard: true
          })
        )
      },
      {
        name: "drain-runs",
        bound: Duration.sum(Duration.times(killGrace, 3), "2 seconds"),
        run: Effect.zipRight(FiberSet.awaitEmpty(runs), FiberSet.awaitEmpty(reapers))
      },
      { name: "reap-leftovers", bound: "5 seconds", run: Effect.asVoid(Process.reapMarked(marker)) },
      { name: "remove-clones", bound: "10 seconds", run: Scope.close(cloneScope, Exit.void) },
      { name: "revoke-registration", bound: "10 seconds", run: Scope.close(registrationScope, Exit.void) }
    ])
    const closeTimeout = Duration.decode(options.closeTimeout ?? "30 seconds")
    // Threads' event streams end after the runs were canceled (their RunFinished(canceled) included).
    const close = (timeout: Duration.DurationInput) =>
      Effect.zipRight(fence, closer.close(timeout)).pipe(
        Effect.ensuring(Deferred.succeed(agentClosed, undefined)),
        Effect.withSpan("Agent.close", { attributes: { "agent.id": id, "agent.provider": driver.name } })
      )
    yield* Effect.addFinalizer(() =>
      close(closeTimeout).pipe(
        Effect.catchAll((error) => Effect.logWarning(error.message))
      )
    )

    // Read once: a later change to the caller's options object never reaches the agent.
    const defaultModel = options.model
    const stream = (
      input: Agent.Input,
      hooks?: Thread.Hooks
    ): Stream.Stream<Event.Event, RunError | AgentClosed | InvalidTurn> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        const turn: Agent.Turn = typeof input === "string" ? { input } : input
        const queue = yield* Queue.bounded<Emitter.Item>(capacity)
        const runId = randomUUID()
        const emitter = Emitter.make(runId, queue, capacity, blocking)
        const model = turn.model ?? defaultModel
        if (turn.toolPolicy !== undefined) {
          const unknown = ToolPolicy.unknownNames(tools, turn.toolPolicy)
          if (unknown.length > 0) {
            // Nothing was spawned: a thread's next turn has no process to wait for.
            if (hooks !== undefined) yield* Deferred.succeed(hooks.reaped, undefined)
            return yield* new InvalidTurn({
              reason: "UnknownTool",
              detail: `the tool policy names tools the definition does not have: ${unknown.join(", ")}`
            })
          }
        }
        const span = yield* Tracing.startRun({ runId, provider: driver.name, model, threadKey: hooks?.key })
        // The run's own credential (narrowed by a per-turn policy), revoked when it ends. Minted
        // in the run's span: the gateway traces the calls made with it as the run's children.
        const credential = yield* registration.restrict(
          turn.toolPolicy === undefined ? tools : ToolPolicy.effective(tools, turn.toolPolicy)
        ).pipe(Effect.withParentSpan(span))
        const request: Run.Request = {
          runId,
          prompt: turn.input,
          model,
          session: hooks?.session ?? { _tag: "New", id: randomUUID() },
          tools: credential.tools,
          token: credential.token,
          ...(hooks === undefined ? {} : { commit: hooks.commit, reaped: hooks.reaped })
        }
        const fiber = yield* admission.withPermits(1)(
          fenced
            ? Effect.zipRight(
              hooks === undefined ? Effect.void : Deferred.succeed(hooks.reaped, undefined),
              Effect.zipRight(Tracing.endRun(span, Exit.fail(closed)), Effect.fail(closed))
            )
            : FiberSet.run(
              runs,
              Run.execute(context, request, emitter).pipe(
                Effect.withParentSpan(span),
                Effect.onExit((exit) => Tracing.endRun(span, exit))
              )
            )
        )
        yield* Effect.addFinalizer(() => Effect.zipRight(Queue.shutdown(queue), Fiber.interrupt(fiber)))
        // The run's fiber is interrupted, not the consumer: its RunFinished(canceled) still arrives.
        if (turn.cancel !== undefined) {
          yield* Effect.forkScoped(Effect.zipRight(turn.cancel, Fiber.interruptFork(fiber)))
        }
        return Stream.fromQueue(queue).pipe(Stream.flattenTake)
      })).pipe(Stream.withSpan("Agent.stream"))

    const run = (input: Agent.Input): Effect.Effect<Result, RunError | AgentClosed | InvalidTurn> =>
      Effect.suspend(() => {
        // Chunk-wise on purpose: `Stream.runFold` folds element by element (recursively).
        let result: Result | undefined
        return stream(input).pipe(
          Stream.runForEachChunk((chunk) =>
            Effect.sync(() => {
              for (const event of chunk) if (event._tag === "RunFinished") result = event.result
            })
          ),
          Effect.flatMap(() =>
            result === undefined
              ? Effect.dieMessage("a run ended without its RunFinished event")
              : Effect.succeed(result)
          )
        )
      }).pipe(Effect.withSpan("Agent.run"))

    return Object.freeze(
      {
        id,
        marker,
        provider: driver.name,
        identity: options.identity === undefined ? undefined : deepFreeze({ ...options.identity }),
        definition,
        fingerprint,
        thread: (key, threadOptions) =>
          Thread.open(
            {
              provider: driver.name,
              capabilities: driver.capabilities,
              fingerprint,
              revisionless: definition.catalog.descriptors.filter((d) => d.revision === undefined).map((d) => d.name),
              store,
              leaseTtl: Duration.decode(options.threads?.leaseTtl ?? "30 seconds"),
              admit: Effect.suspend(() => fenced ? Effect.fail(closed) : Effect.void),
              stream,
              closed: Deferred.await(agentClosed),
              exiting
            },
            key,
            threadOptions ?? {}
          ),
        run,
        stream: (input) => stream(input),
        close: (closeOptions) => close(closeOptions?.timeout ?? closeTimeout)
      } satisfies Agent.Agent
    )
  })
