/**
 * Live threads (DESIGN §12): the agent's warm provider processes, one per thread at most, each
 * attached to its driver's live session. The pool decides reuse (same compatibility, same
 * session), shuts processes down when idle, over the cap (least recently used first), on a
 * change, when one ends on its own between turns, and at close, always the same way: graceful
 * shutdown, then the group's SIGTERM and SIGKILL, then the process's credentials are revoked,
 * what it wrote is scrubbed, and its credentials are released.
 *
 * @internal
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import type * as Gateway from "@tether/gateway/Gateway"
import { isSession, mayHoldSessions, ownedBy, type ProfileLayout, sessionOwner } from "@tether/profile/ProfileLayout"
import * as Clock from "effect/Clock"
import type * as EffectContext from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberMap from "effect/FiberMap"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type * as Tracer from "effect/Tracer"
import * as FsSync from "node:fs"
import * as NodePath from "node:path"
import * as Approval from "../Approval.js"
import * as Driver from "../Driver.js"
import * as Process from "./process.js"
import * as Redaction from "./redaction.js"
import type * as RunLogs from "./runLogs.js"
import * as ScrubFiles from "./scrubFiles.js"

/** A thread's warm live process. @internal */
export interface Warm {
  readonly key: string
  /** The turn compatibility it was opened for (fingerprint, effective tools, model). */
  readonly reuse: string
  readonly running: Process.Running
  readonly session: Driver.LiveSession
  /** The provider session the process carries, once a turn of it was committed. */
  sessionId: string | undefined
  /**
   * The committed turns that session holds (the record's `turns` after this process's last
   * commit): a record another host advanced since is not what the process carries.
   */
  turns: number | undefined
  busy: boolean
  lastUsed: number
  /** Delivers input into the running turn (set while a turn runs). */
  steer: ((input: string) => Effect.Effect<Driver.Delivery, Driver.ProtocolError>) | undefined
  /** Asks the running turn's approvals (set while a turn runs, when the agent has approvals). */
  approve: ((ask: Driver.ApprovalAsk) => Effect.Effect<Approval.Decision>) | undefined
  /** The running turn's span (set while a turn runs): the process's host tool calls are its children. */
  span: Tracer.AnySpan | undefined
  retired: boolean
  /** Shuts the process down (once; every caller waits for that one shutdown). */
  readonly retire: Effect.Effect<void>
  /**
   * Notes the session a turn on the process reported. While the process was opened on a fresh
   * session (`New`, `Fork`) and no turn began to commit, nothing refers to its sessions: their
   * entries leave the clone when the process is shut down (a fork's source never does).
   */
  readonly reported: (session: string) => void
  /**
   * A turn begins to commit the process's session: from now on it may be a checkpoint's (a commit
   * interrupted in flight may have landed), and its entries stay in the clone.
   */
  readonly committing: () => void
}

/**
 * Claims (for `ScrubFiles.scrub`'s `discard`) the clone's session entries owned by one of
 * `sessions` and by none of `keep`: files the layout's `sessions` globs match under `dir`, and the
 * directories that may hold them (with a trailing separator). `undefined` when there is no session.
 *
 * @internal
 */
export const sessionEntries = (
  dir: string,
  layout: ProfileLayout,
  sessions: ReadonlyArray<string>,
  keep: ReadonlyArray<string> = []
): ((path: string) => boolean) | undefined => {
  if (sessions.length === 0) return undefined
  const root = dir + NodePath.sep
  return (path) => {
    if (!path.startsWith(root)) return false
    const directory = path.endsWith(NodePath.sep)
    const rel = path.slice(root.length, directory ? -1 : undefined).split(NodePath.sep).join("/")
    if (directory ? !mayHoldSessions(layout, rel) : !isSession(layout, rel)) return false
    const owner = sessionOwner(layout, directory ? `${rel}/` : rel)
    return owner !== undefined && sessions.some((session) => ownedBy(owner, session)) &&
      !keep.some((session) => ownedBy(owner, session))
  }
}

/** What opening a live process needs from the agent. @internal */
/** How long a failed attach waits for the rest of the process's stderr. */
const stderrGrace = Duration.millis(500)

export interface Context {
  readonly marker: string
  readonly driver: Driver.Driver
  readonly live: Driver.Live
  readonly hostedKey: string
  readonly registration: {
    readonly url: string
    readonly tokenVariable: string
    readonly credential: Gateway.Registration["credential"]
  }
  readonly redactor: Gateway.Redactor
  readonly profile: {
    readonly dir: string
    readonly siblings: { readonly [name: string]: string }
    readonly materialize: (
      files: ReadonlyArray<Driver.MaterializedFile>
    ) => Effect.Effect<void, { readonly message: string }>
  }
  readonly limits: Process.Limits
  readonly killGrace: Duration.Duration
  readonly processes: Set<Process.Running>
  /** The agent's per-process logs, removed once none of its processes runs. */
  readonly logs: RunLogs.RunLogs
  readonly reapers: FiberSet.FiberSet<void, never>
  readonly services: EffectContext.Context<FileSystem.FileSystem | Path.Path>
  /** Present when the agent has approvals: the session gets `LiveContext.approve`. */
  readonly approvals?: unknown
}

/** Why a live process could not be opened (a run failure of the turn). @internal */
export interface OpenFailure {
  readonly reason: "PrepareFailed" | "SpawnFailed" | "ProtocolError"
  readonly detail: string
  readonly cause?: unknown
}

const encoder = (frame: string | Driver.SecretFrame): string =>
  typeof frame === "string"
    ? frame
    : frame.secrets.reduce(
      (text, secret) => text.split(secret.placeholder).join(Redacted.value(secret.value)),
      frame.text
    )

/**
 * Spawns the thread's live process from `request` (prompt empty) on two credentials of its own
 * (the one its environment carries under the token variable, and the session's `hostedToken`,
 * also in its environment under the token variable's name plus `_S`) and attaches the driver's
 * session. Everything it acquired is released by its `retire`; a failure releases it at once.
 *
 * @internal
 */
export const open = (
  ctx: Context,
  key: string,
  reuse: string,
  request: Driver.InvocationRequest
): Effect.Effect<Warm, OpenFailure> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      let current: Warm | undefined
      let spawnedAt = 0
      let materialized: ReadonlySet<string> = new Set()
      const credentials: Array<Gateway.Credential> = []
      let running: Process.Running | undefined
      // The sessions of a fresh opening while no turn began to commit (`Warm.reported`): nothing
      // refers to them (a thread turn that commits nothing leaves no record), so their entries go
      // with the process. A `Resume` opening's session is a checkpoint's; a fork's source is kept.
      const opening = request.session
      const forkedFrom = opening._tag === "Fork" ? [opening.from] : []
      let uncommitted: Set<string> | undefined = opening._tag === "Resume" ? undefined : new Set([opening.id])
      // The process group is gone first (nothing writes any more), its credentials are revoked
      // (401), then what it wrote is scrubbed while the redactor still knows its tokens, then
      // everything is released (the credentials forgotten).
      const release = Effect.suspend(() =>
        (running === undefined ? Effect.void : running.close(ctx.killGrace)).pipe(
          Effect.zipRight(Effect.forEach(credentials, (credential) => credential.revoke, { discard: true })),
          Effect.zipRight(
            running === undefined ? Effect.void : Effect.suspend(() =>
              ScrubFiles.scrub({
                roots: [ctx.profile.dir, ...Object.values(ctx.profile.siblings)],
                since: spawnedAt,
                skip: materialized,
                redact: ctx.redactor.bytes,
                discard: uncommitted === undefined
                  ? undefined
                  : sessionEntries(ctx.profile.dir, ctx.driver.layout, Array.from(uncommitted), forkedFrom),
                seen: ctx.logs.found
              })
            )
          ),
          Effect.ensuring(Effect.sync(exited)),
          Effect.zipRight(Scope.close(scope, Exit.void))
        )
      )
      // Once per counted process, however its release ends.
      let counted = false
      const exited = () => {
        if (!counted) return
        counted = false
        ctx.logs.exited()
      }
      const opened = Effect.gen(function*() {
        const invocation = yield* restore(Effect.provide(ctx.live.open(request), ctx.services)).pipe(
          Effect.mapError((error): OpenFailure => ({ reason: "PrepareFailed", detail: error.message, cause: error }))
        )
        yield* restore(ctx.profile.materialize(invocation.files)).pipe(
          Effect.mapError((error): OpenFailure => ({ reason: "PrepareFailed", detail: error.message, cause: error }))
        )
        materialized = new Set(invocation.files.map((file) => `${ctx.profile.dir}/${file.path}`))
        const mint = ctx.registration.credential({
          tools: request.hosted.tools,
          injectedArguments: ctx.driver.injectedArguments ?? [],
          parent: () => current?.span
        }).pipe(Scope.extend(scope), Effect.tap((credential) => Effect.sync(() => credentials.push(credential))))
        const environment = yield* mint
        const sessionCredential = yield* mint
        spawnedAt = Date.now()
        // Counted before it starts: no log is removed while it might be writing one.
        counted = true
        ctx.logs.spawned()
        const spawned = yield* Process.spawn(
          invocation,
          {
            [ctx.registration.tokenVariable]: Redacted.value(environment.token),
            // The session's token as well, for an agent whose MCP configuration references it
            // (`${tokenVariable}_S`, the ACP driver's `headerSecrets: "environment"`): a secret
            // header given inline would reach a command line.
            [`${ctx.registration.tokenVariable}_S`]: Redacted.value(sessionCredential.token),
            [Process.markerVariable]: ctx.marker
          },
          ctx.limits,
          { input: "open" }
        ).pipe(
          Effect.tapErrorCause(() => Effect.sync(exited)),
          Effect.mapError((error): OpenFailure => ({
            reason: "SpawnFailed",
            detail: `could not start the provider CLI \`${invocation.command}\` (${error.message}${
              invocation.commandSource === undefined ? "" : `; ${invocation.command}: ${invocation.commandSource}`
            }): ${
              ctx.driver.install ?? "install the CLI"
            }, or set the driver's \`binary\` option to the path of its executable`
          }))
        )
        running = spawned
        ctx.processes.add(spawned)
        // Closed before the credentials (finalizers run in reverse): the group is gone first.
        yield* Scope.addFinalizer(
          scope,
          spawned.close(ctx.killGrace).pipe(Effect.ensuring(Effect.sync(() => ctx.processes.delete(spawned))))
        )
        const input = spawned.input!
        const channel: Driver.Channel = {
          write: (frame) =>
            Effect.flatMap(
              input.write(encoder(frame) + "\n"),
              (written) =>
                written
                  ? Effect.void
                  : Effect.fail(new Driver.ProtocolError({ reason: "ProviderError", detail: "stdin is closed" }))
            ),
          // A line over the limit ends the session's input: the turn then fails without its terminal.
          lines: spawned.lines.pipe(Stream.catchAll(() => Stream.empty)),
          closeInput: input.close
        }
        // The session's approval requests go to the turn running on the process; with none
        // running (a request the CLI makes between turns), the answer is deny.
        const approve = (ask: Driver.ApprovalAsk): Effect.Effect<Approval.Decision> =>
          Effect.suspend(() =>
            current?.approve === undefined
              ? Effect.succeed(Approval.deny("No turn is running; the action was not run."))
              : current.approve(ask)
          )
        const attachScope = yield* Scope.fork(scope, ExecutionStrategy.sequential)
        const session = yield* restore(ctx.live.attach(channel, {
          hostedKey: ctx.hostedKey,
          session: request.session,
          hostedTools: request.hosted.tools,
          request,
          hostedToken: sessionCredential.token,
          hostedToolsListed: sessionCredential.listed,
          ...(ctx.approvals === undefined ? {} : { approve })
        })).pipe(
          Scope.extend(attachScope),
          // A process that ended before it answered (a bad flag, a disabled account) said why on
          // stderr: its last lines (scrubbed) join the error, as for a one-shot run. The wait is
          // interruptible (this runs masked), so the timeout cuts it short for a process still
          // alive, whose stderr has not ended.
          Effect.catchAll((error) =>
            error.reason === "ResumeRejected"
              // A session to resume that is gone: the thread starts fresh at once.
              ? Effect.fail<OpenFailure>({ reason: "ProtocolError", detail: error.message, cause: error })
              : Effect.interruptible(spawned.stderrEnded).pipe(
                Effect.timeout(Duration.min(ctx.killGrace, stderrGrace)),
                Effect.ignore,
                Effect.zipRight(Effect.suspend(() => {
                  const excerpt = Redaction.stderrExcerpt(ctx.redactor, Process.decodeTail(spawned.stderrTail()))
                  return Effect.fail<OpenFailure>({
                    reason: "ProtocolError",
                    detail: error.message + (excerpt === "" ? "" : `; the end of its stderr:\n${excerpt}`),
                    cause: error
                  })
                }))
              )
          )
        )
        return { spawned, session }
      })
      const { session, spawned } = yield* opened.pipe(Effect.onError(() => release))
      const done = yield* Deferred.make<void>()
      let started = false
      const warm: Warm = {
        key,
        reuse,
        running: spawned,
        session,
        sessionId: undefined,
        turns: undefined,
        busy: true,
        lastUsed: Date.now(),
        steer: undefined,
        approve: undefined,
        span: undefined,
        retired: false,
        retire: Effect.suspend(() => {
          warm.retired = true
          if (!started) {
            started = true
            // A fiber of the agent's reapers: no caller's interruption cuts it between its steps,
            // and the agent's close waits for it.
            const work = session.shutdown.pipe(
              Effect.timeout(ctx.killGrace),
              Effect.ignore,
              Effect.zipRight(spawned.exit.pipe(Effect.timeout(ctx.killGrace), Effect.ignore)),
              Effect.zipRight(release),
              Effect.interruptible,
              Effect.ensuring(Deferred.done(done, Exit.void))
            )
            return Effect.zipRight(FiberSet.run(ctx.reapers, work), Deferred.await(done))
          }
          return Deferred.await(done)
        }),
        reported: (id) => {
          if (uncommitted !== undefined && !forkedFrom.includes(id)) uncommitted.add(id)
        },
        committing: () => {
          uncommitted = undefined
        }
      }
      current = warm
      return warm
    })
  )

/** The agent's warm processes, by thread key. @internal */
export interface Pool {
  /**
   * The key's warm process when this turn may run on it (same compatibility, the session and
   * committed turns the turn resumes, still running, idle), marked busy; otherwise any process of the key is shut
   * down first and `undefined` is returned. `taken` runs in the same uninterruptible step as the
   * process is marked busy (the turn registers what releases it there: an interruption in
   * between would leave it busy for good).
   */
  readonly take: (
    key: string,
    reuse: string,
    session: Driver.SessionRequest,
    turns: number | undefined,
    taken: (warm: Warm) => Effect.Effect<void, never, Scope.Scope>
  ) => Effect.Effect<Warm | undefined, never, Scope.Scope>
  /**
   * Adds a freshly opened (busy) process, shutting down least recently used idle ones over the cap
   * (waiting for them: call it uninterruptibly together with what releases the process). A
   * process that ends on its own while idle is shut down at once (credentials revoked, group reaped).
   */
  readonly add: (warm: Warm) => Effect.Effect<void>
  /**
   * The turn on it ended: idle from now on (shut down after the idle timeout), or shut down now
   * when the process already ended.
   */
  readonly release: (warm: Warm) => Effect.Effect<void>
  readonly get: (key: string) => Warm | undefined
  /** Shuts down the key's process, if any. */
  readonly retire: (key: string) => Effect.Effect<void>
  /**
   * Shuts down the key's process unless a turn runs on it (a turn of another handle of the thread,
   * which may be waiting on an approval: that turn keeps it, and the idle timeout ends it later).
   */
  readonly retireIdle: (key: string) => Effect.Effect<void>
  /** Shuts down every process (the agent's close). */
  readonly retireAll: Effect.Effect<void>
  /**
   * Records the late save of a thread's last committed live turn (it waits for the CLI's session
   * files to go quiet, then saves them again): one per thread key, kept past its process's end.
   */
  readonly settling: (key: string, pending: LateSave) => void
  /**
   * Waits for the key's pending late save, before a turn of the thread writes the session or
   * loads the store's copy over the clone's: nothing of that turn is saved under the last
   * checkpoint, and nothing the last turn still wrote is lost under the load. `now` ends its wait
   * for quiet at once (what changed is saved then): for a turn on the same warm process, which
   * carries whatever the last turn still writes and should not wait; a turn on a fresh process
   * (the last one shut down) lets the files go quiet first.
   */
  readonly settle: (key: string, now: boolean) => Effect.Effect<void>
  /** How many live processes the agent has (for tests). */
  readonly size: () => number
}

/** A late save (`Pool.settling`). @internal */
export interface LateSave {
  readonly fiber: Fiber.RuntimeFiber<void>
  /** Ends the wait now: what changed is saved at once. */
  readonly flush: Deferred.Deferred<void>
}

/** @internal */
export const makePool = (options: {
  readonly idleTimeout: Duration.Duration
  readonly maxProcesses: number
}): Effect.Effect<Pool, never, Scope.Scope> =>
  Effect.gen(function*() {
    const warms = new Map<string, Warm>()
    const lateSaves = new Map<string, LateSave>()
    const timers = yield* FiberMap.make<string>()
    // One per pooled process: it notices a process that ends on its own while idle.
    const watchers = yield* FiberSet.make<void, never>()
    const forget = (warm: Warm) => Effect.sync(() => warms.get(warm.key) === warm && warms.delete(warm.key))
    const retire = (warm: Warm) =>
      Effect.zipRight(
        Effect.zipRight(forget(warm), FiberMap.remove(timers, warm.key)),
        warm.retire
      )
    // Least recently used idle processes go first until the count is within the cap.
    const enforceCap = (room: number) =>
      Effect.suspend(() => {
        const idle = Array.from(warms.values()).filter((warm) => !warm.busy).sort((a, b) => a.lastUsed - b.lastUsed)
        const excess = warms.size + room - options.maxProcesses
        return Effect.forEach(idle.slice(0, Math.max(0, excess)), retire, { discard: true })
      })
    const take = (
      key: string,
      reuse: string,
      session: Driver.SessionRequest,
      turns: number | undefined,
      taken: (warm: Warm) => Effect.Effect<void, never, Scope.Scope>
    ) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const warm = warms.get(key)
          if (warm === undefined) return undefined
          const alive = Option.isNone(yield* warm.running.poll)
          if (
            alive && !warm.retired && !warm.busy && warm.reuse === reuse && session._tag === "Resume" &&
            session.id === warm.sessionId && turns === warm.turns
          ) {
            warm.busy = true
            yield* FiberMap.remove(timers, key)
            yield* taken(warm)
            return warm
          }
          yield* restore(retire(warm))
          return undefined
        })
      )
    // Once the agent's close shut every process down, a process opened by a turn the close is
    // canceling is shut down at once.
    let closed = false
    // A process that ends between turns (a crash, the OOM killer) is shut down at once: its
    // credentials are revoked and what its group left running is reaped, not at the idle timeout.
    // While a turn runs on it, that turn sees the end and shuts it down (or `release` does).
    const watch = (warm: Warm) =>
      warm.running.exit.pipe(
        Effect.zipRight(Effect.suspend(() => warm.busy || warm.retired ? Effect.void : retire(warm)))
      )
    const add = (warm: Warm) =>
      Effect.suspend(() =>
        closed ? warm.retire : Effect.zipRight(
          enforceCap(1),
          Effect.suspend(() => {
            warms.set(warm.key, warm)
            return Effect.asVoid(FiberSet.run(watchers, watch(warm)))
          })
        )
      )
    const release = (warm: Warm) =>
      Effect.suspend(() => {
        warm.busy = false
        warm.steer = undefined
        warm.approve = undefined
        warm.lastUsed = Date.now()
        if (warm.retired) return Effect.void
        // One that ended while the turn ran (its watcher left it to the turn) is shut down now.
        return Effect.flatMap(warm.running.poll, (exit) => {
          if (warm.retired) return Effect.void
          if (Option.isSome(exit)) return retire(warm)
          const idle = Effect.sleep(options.idleTimeout).pipe(
            Effect.zipRight(Effect.suspend(() => warm.busy ? Effect.void : Effect.zipRight(forget(warm), warm.retire)))
          )
          return Effect.zipRight(Effect.asVoid(FiberMap.run(timers, warm.key, idle)), enforceCap(0))
        })
      })
    return {
      take,
      add,
      release,
      get: (key) => warms.get(key),
      retire: (key) =>
        Effect.suspend(() => {
          const warm = warms.get(key)
          return warm === undefined ? Effect.void : retire(warm)
        }),
      retireIdle: (key) =>
        Effect.suspend(() => {
          const warm = warms.get(key)
          return warm === undefined || warm.busy ? Effect.void : retire(warm)
        }),
      retireAll: Effect.suspend(() => {
        closed = true
        return Effect.forEach(Array.from(warms.values()), retire, { concurrency: "unbounded", discard: true })
      }),
      settling: (key, pending) => {
        lateSaves.set(key, pending)
        // Forgotten once done, unless a later one took its place.
        pending.fiber.addObserver(() => {
          if (lateSaves.get(key) === pending) lateSaves.delete(key)
        })
      },
      settle: (key, now) =>
        Effect.suspend(() => {
          const pending = lateSaves.get(key)
          if (pending === undefined) return Effect.void
          const waited = Fiber.await(pending.fiber)
          return now ? Effect.zipRight(Deferred.succeed(pending.flush, undefined), waited) : waited
        }).pipe(Effect.asVoid),
      size: () => warms.size
    } satisfies Pool
  })

/**
 * The clone's files of `session` (by the layout's `sessionOf`), each as `size:mtime`. Only the
 * directories the layout's session globs may reach are read (a CLI's profile also holds skills,
 * logs and caches). @internal
 */
export const sessionFiles = (
  dir: string,
  layout: ProfileLayout,
  session: string
): ReadonlyMap<string, string> => {
  const files = new Map<string, string>()
  const walk = (relative: string) => {
    let entries: Array<FsSync.Dirent> = []
    try {
      entries = FsSync.readdirSync(NodePath.join(dir, relative), { withFileTypes: true })
    } catch {
      return
    }
    for (const entry of entries) {
      const path = relative === "" ? entry.name : `${relative}/${entry.name}`
      if (entry.isDirectory()) {
        if (mayHoldSessions(layout, path)) walk(path)
      } else if (entry.isFile()) {
        const owner = sessionOwner(layout, path)
        if (owner === undefined || !ownedBy(owner, session)) continue
        try {
          const stat = FsSync.statSync(NodePath.join(dir, path))
          files.set(path, `${stat.size}:${stat.mtimeMs}`)
        } catch {
          // removed meanwhile
        }
      }
    }
  }
  walk("")
  return files
}

const same = (a: ReadonlyMap<string, string>, b: ReadonlyMap<string, string>) =>
  a.size === b.size && Array.from(a).every(([path, stamp]) => b.get(path) === stamp)

/** How long a live session's files must stay unchanged to count as written. */
const quiet = 150

/**
 * Waits until the session's files have not changed for a short while (bounded by `bound`, or
 * ended early by `flush`); `true` when they changed since `since`. @internal
 */
export const settle = (
  dir: string,
  layout: ProfileLayout,
  session: string,
  since: ReadonlyMap<string, string>,
  bound: Duration.Duration,
  flush: Deferred.Deferred<void>
): Effect.Effect<boolean> =>
  Effect.gen(function*() {
    const start = yield* Clock.currentTimeMillis
    let last = since
    let lastChange = start
    while (true) {
      yield* Effect.raceFirst(Effect.sleep(25), Deferred.await(flush))
      const now = yield* Clock.currentTimeMillis
      const current = sessionFiles(dir, layout, session)
      if (!same(current, last)) {
        last = current
        lastChange = now
      }
      if (
        now - lastChange >= quiet || now - start >= Duration.toMillis(bound) || (yield* Deferred.isDone(flush))
      ) return !same(last, since)
    }
  })
