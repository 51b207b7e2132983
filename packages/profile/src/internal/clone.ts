/**
 * Execution clones: acquisition, materialization with an ownership manifest, and removal.
 *
 * @internal
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import { globalValue } from "effect/GlobalValue"
import * as Scope from "effect/Scope"
import * as NodeCrypto from "node:crypto"
import * as NodeFs from "node:fs"
import * as NodeFsPromises from "node:fs/promises"
import { ProfileCollision, ProfileError, ProfileInUse } from "../Profile.js"
import type {
  ExecutionProfile,
  MaterializedFile,
  MaterializeOptions,
  Owner,
  Selection,
  SessionLoad,
  SessionSync
} from "../Profile.js"
import type { ProfileLayout } from "../ProfileLayout.js"
import * as owner from "./owner.js"
import { clonePrefix, reclaim } from "./reclaim.js"
import { removeTree } from "./removeTree.js"
import {
  io,
  lstat,
  readRegular,
  readRegularSync,
  seed,
  type Seeded,
  sha256,
  stillSeeded,
  sync,
  walk,
  writeNewSync
} from "./seed.js"
import * as sessions from "./sessions.js"
import { canonical, ensureRoot, inside, resolveSource, rootOf } from "./source.js"
import { withSpan } from "./span.js"

export { reclaim } from "./reclaim.js"
export { defaultSessionsRoot } from "./sessions.js"
export { defaultRoot } from "./source.js"

/** Dedicated sources held by live agents of this process: canonical path → agent id. */
const dedicatedInUse = globalValue(Symbol.for("@tether/profile/dedicatedInUse"), () => new Map<string, string>())
/** Roots already reclaimed by this process. */
const reclaimedRoots = globalValue(Symbol.for("@tether/profile/reclaimedRoots"), () => new Set<string>())

interface CloneState {
  readonly seeded: Map<string, Seeded>
  readonly manifest: Map<string, owner.ManifestEntry>
  /** Serializes `materialize` calls and the removal at close. */
  readonly lock: Effect.Semaphore
  /** The identity's session store and what this clone last synchronized with it. */
  sessions: { readonly store: sessions.SessionStore; readonly baseline: sessions.Baseline } | undefined
  closed: boolean
}

/**
 * A fresh name beside `file`, created exclusively (`wx`): an entry a process of the run planted
 * at a predictable name (a link into the source) is never written through.
 */
const temporaryOf = (file: string) => `${file}.${process.pid}-${NodeCrypto.randomBytes(6).toString("hex")}.tmp`

const writeJsonSync = (file: string, value: unknown): void => {
  const temporary = temporaryOf(file)
  writeNewSync(temporary, JSON.stringify(value, null, 2), 0o600)
  NodeFs.renameSync(temporary, file)
}

const writeJson = (file: string, value: unknown) => sync(file, () => writeJsonSync(file, value))

// The close bounds the release below with a timeout (DESIGN §6). Its checks and the marker's
// rewrite go through the promise API, which a call that hangs (a stuck network file system) does
// not hold up. The removal of the clone is synchronous calls in slices (`removeTree`): the timeout
// fires between any two slices, but not inside a call that hangs, which holds the event loop
// until it returns (as a clone that saves its sessions on close already could: its session save
// reads and writes small files synchronously; an agent's clones do not save on close). The
// promise API's recursive remove cost ~3 ms of every close: an awaited round trip per call,
// three calls per entry.

const writeJsonAsync = (file: string, value: unknown) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const temporary = temporaryOf(file)
    yield* fs.writeFileString(temporary, JSON.stringify(value, null, 2), { mode: 0o600, flag: "wx" })
    yield* fs.rename(temporary, file)
  }).pipe(Effect.mapError(io(file)))

const lstatAsync = (path: string) =>
  Effect.tryPromise({
    try: () =>
      NodeFsPromises.lstat(path).catch((e: NodeJS.ErrnoException) =>
        e.code === "ENOENT" ? undefined : Promise.reject(e)
      ),
    catch: io(path)
  })

const entryStateAsync = (absolute: string, entry: owner.ManifestEntry) =>
  Effect.gen(function*() {
    const info = yield* lstatAsync(absolute)
    if (info === undefined) return "missing" as const
    if (!info.isFile()) return "modified" as const
    const content = yield* Effect.tryPromise({ try: () => readRegular(absolute), catch: io(absolute) })
    return content !== undefined && sha256(content) === entry.sha256 ? "intact" as const : "modified" as const
  })

const lock = (canonical: string, agentId: string) =>
  Effect.acquireRelease(
    Effect.suspend(() => {
      const holder = dedicatedInUse.get(canonical)
      if (holder !== undefined) return Effect.fail(new ProfileInUse({ dir: canonical, agentId: holder }))
      dedicatedInUse.set(canonical, agentId)
      return Effect.void
    }),
    () => Effect.sync(() => dedicatedInUse.delete(canonical))
  )

const invalid = (path: string, detail: string) => new ProfileError({ reason: "InvalidPath", path, detail })

const segmentsOf = (file: string): ReadonlyArray<string> | undefined => {
  if (file.length === 0 || file.startsWith("/") || file.includes("\0")) return undefined
  const segments = file.split("/")
  return segments.some((s) => s === "" || s === "." || s === "..") ? undefined : segments
}

/** The state of a previously materialized entry on disk. */
const entryState = (absolute: string, entry: owner.ManifestEntry) =>
  Effect.gen(function*() {
    const info = yield* lstat(absolute)
    if (info === undefined) return "missing" as const
    if (!info.isFile()) return "modified" as const
    const content = yield* sync(absolute, () => readRegularSync(absolute))
    return content !== undefined && sha256(content) === entry.sha256 ? "intact" as const : "modified" as const
  })

/** @internal */
export { entryState }

/**
 * The clone's root and profile directory are still plain directories: a process of the run may
 * have replaced one with a link (into the source), which every write below would follow.
 */
const ownDirectories = (cloneRoot: string, profileDir: string) =>
  Effect.gen(function*() {
    for (const dir of [cloneRoot, profileDir]) {
      const info = yield* lstat(dir)
      if (info === undefined || info.isSymbolicLink() || !info.isDirectory()) {
        return yield* new ProfileCollision({ reason: "ThroughLink", path: dir })
      }
    }
  })

const materialize = (
  path: Path.Path,
  profileDir: string,
  agentId: string,
  cloneRoot: string,
  state: CloneState
) =>
(
  files: ReadonlyArray<MaterializedFile>,
  options?: MaterializeOptions
) =>
  Effect.gen(function*() {
    // After close the directory is gone: writing would recreate part of it.
    if (state.closed) return yield* new ProfileError({ reason: "CloneClosed", path: cloneRoot, detail: "scope closed" })
    yield* ownDirectories(cloneRoot, profileDir)
    const planned: Array<{ readonly file: MaterializedFile; readonly rel: string; readonly absolute: string }> = []
    const seen = new Set<string>()
    for (const file of files) {
      const segments = segmentsOf(file.path)
      if (segments === undefined) return yield* invalid(file.path, "not a relative path inside the profile")
      const rel = segments.join("/")
      if (seen.has(rel)) return yield* invalid(file.path, "materialized twice in one batch")
      seen.add(rel)
      // Every existing parent must be a real directory of the clone: never write through a link.
      for (let i = 1; i < segments.length; i++) {
        const parent = segments.slice(0, i).join("/")
        const info = yield* lstat(path.join(profileDir, ...segments.slice(0, i)))
        if (info === undefined) break
        if (info.isSymbolicLink()) return yield* new ProfileCollision({ reason: "ThroughLink", path: parent })
        if (!info.isDirectory()) return yield* new ProfileCollision({ reason: "Unowned", path: parent })
      }
      const absolute = path.join(profileDir, ...segments)
      const info = yield* lstat(absolute)
      if (info !== undefined) {
        const owned = state.manifest.get(rel)
        const seeded = state.seeded.get(rel)
        if (owned !== undefined) {
          if (options?.replaceChanged !== true && (yield* entryState(absolute, owned)) !== "intact") {
            return yield* new ProfileCollision({ reason: "UserModified", path: rel })
          }
        } else if (seeded === undefined || !(yield* stillSeeded(absolute, seeded))) {
          return yield* new ProfileCollision({ reason: "Unowned", path: rel })
        }
      }
      planned.push({ file, rel, absolute })
    }
    for (const { rel } of planned) {
      if (planned.some((other) => other.rel.startsWith(`${rel}/`))) {
        return yield* invalid(rel, "materialized both as a file and as a directory in one batch")
      }
    }
    // A skill folder written here (the folder of a `SKILL.md`) is the agent's skill alone: the
    // clone's copies of a source-profile skill of the same name under it that this batch does not
    // write go, or the CLI would load them with the agent's skill (a script it never mentions).
    // One the CLI changed since the seeding is not the clone's copy any more: refused.
    const skillDirs = planned.filter(({ rel }) => rel.endsWith("/SKILL.md")).map(({ rel }) => rel.slice(0, -9))
    const stale: Array<string> = []
    if (skillDirs.length > 0) {
      for (const [rel, seeded] of state.seeded) {
        if (seen.has(rel) || !skillDirs.some((dir) => rel.startsWith(`${dir}/`))) continue
        const absolute = path.join(profileDir, ...rel.split("/"))
        if ((yield* lstat(absolute)) === undefined) continue
        if (!(yield* stillSeeded(absolute, seeded))) {
          return yield* new ProfileCollision({ reason: "Unowned", path: rel })
        }
        stale.push(rel)
      }
    }
    for (const rel of stale) {
      const absolute = path.join(profileDir, ...rel.split("/"))
      yield* sync(absolute, () => NodeFs.rmSync(absolute, { force: true }))
      state.seeded.delete(rel)
    }
    for (const { absolute, file, rel } of planned) {
      const mode = (file.mode ?? 0o600) & 0o777
      const content = typeof file.content === "string" ? new TextEncoder().encode(file.content) : file.content
      yield* sync(absolute, () => {
        NodeFs.mkdirSync(path.dirname(absolute), { recursive: true, mode: 0o700 })
        // Written beside it (created exclusively), then renamed over it: a CLI of the agent reading
        // the file meanwhile finds the old or the new one whole, never none or half of one; a
        // seeded auth link is replaced, never followed.
        const temporary = temporaryOf(absolute)
        try {
          writeNewSync(temporary, content, mode)
          NodeFs.renameSync(temporary, absolute)
        } catch (error) {
          NodeFs.rmSync(temporary, { force: true })
          throw error
        }
      })
      state.seeded.delete(rel)
      state.manifest.set(rel, { path: rel, sha256: sha256(content), mode, owner: agentId })
    }
    yield* writeJson(path.join(cloneRoot, owner.manifestName), {
      version: 1,
      entries: [...state.manifest.values()]
    })
  }).pipe(
    state.lock.withPermits(1),
    withSpan("Profile.materialize")
  )

const saveSessions = (
  layout: ProfileLayout,
  profileDir: string,
  state: CloneState,
  who: Owner,
  session?: string
) =>
  state.sessions === undefined
    ? Effect.succeed({ saved: [], removed: [] })
    : sessions.save(
      state.sessions.store,
      layout,
      profileDir,
      state.sessions.baseline,
      new Set(state.manifest.keys()),
      session,
      who.redactSession
    )

/**
 * Saves the session entries, then removes the clone; materialized entries changed since they
 * were written are kept. A failed save is logged and does not keep the clone.
 */
const release = (cloneRoot: string, profileDir: string, layout: ProfileLayout, state: CloneState, who: Owner) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    state.closed = true
    yield* (who.saveSessionsOnClose === false
      ? Effect.void
      : Effect.asVoid(saveSessions(layout, profileDir, state, who))).pipe(
        Effect.catchAllCause((cause) =>
          Effect.logError("saving the session entries of a profile clone failed").pipe(
            Effect.annotateLogs({ clone: cloneRoot, cause })
          )
        )
      )
    const kept: Array<string> = []
    for (const entry of state.manifest.values()) {
      if ((yield* entryStateAsync(path.join(profileDir, ...entry.path.split("/")), entry)) === "modified") {
        kept.push(entry.path)
      }
    }
    if (kept.length === 0) {
      // The marker goes last: a clone that could not be removed stays this host's, reclaimed
      // as such once the host is gone.
      return yield* Effect.tryPromise({
        try: () => removeTree(cloneRoot, { last: owner.markerName }),
        catch: io(cloneRoot)
      })
    }
    const keep = new Set(kept.flatMap((rel) => {
      const segments = rel.split("/")
      return segments.map((_, i) => segments.slice(0, i + 1).join("/"))
    }))
    const prune = (dir: string, rel: string): Effect.Effect<void, ProfileError> =>
      Effect.gen(function*() {
        for (const name of yield* Effect.tryPromise({ try: () => NodeFsPromises.readdir(dir), catch: io(dir) })) {
          const child = rel === "" ? name : `${rel}/${name}`
          const absolute = path.join(dir, name)
          if (!keep.has(child)) {
            yield* Effect.tryPromise({ try: () => removeTree(absolute), catch: io(absolute) })
          } else if ((yield* lstatAsync(absolute))?.isDirectory() === true) {
            yield* prune(absolute, child)
          }
        }
      })
    yield* prune(profileDir, "")
    for (
      const name of yield* Effect.tryPromise({ try: () => NodeFsPromises.readdir(cloneRoot), catch: io(cloneRoot) })
    ) {
      if (name === "profile" || name === owner.markerName || name === owner.manifestName) continue
      const absolute = path.join(cloneRoot, name)
      yield* Effect.tryPromise({ try: () => removeTree(absolute), catch: io(absolute) })
    }
    const markerFile = path.join(cloneRoot, owner.markerName)
    const text = yield* fs.readFileString(markerFile).pipe(Effect.mapError(io(markerFile)))
    const marker = yield* owner.decodeMarker(text).pipe(Effect.mapError(() => io(markerFile)("unreadable marker")))
    yield* writeJsonAsync(markerFile, { ...marker, retained: kept })
    yield* Effect.logWarning("profile clone retained: materialized entries were changed after being written").pipe(
      Effect.annotateLogs({ clone: cloneRoot, kept: kept.join(", ") })
    )
  }).pipe(
    state.lock.withPermits(1),
    Effect.interruptible,
    Effect.timeout(Duration.seconds(30)),
    Effect.catchAllCause((cause) =>
      Effect.logError("profile clone removal failed").pipe(Effect.annotateLogs({ clone: cloneRoot, cause }))
    )
  )

const noSync: SessionSync = { saved: [], removed: [] }
const noLoad: SessionLoad = { loaded: [], removed: [] }
const none: ReadonlyArray<string> = []

/**
 * Acquires a clone in the enclosing scope. What is acquired (the dedicated lock, the clone
 * directory) is acquired in a scope of its own, closed as soon as the acquisition fails or is
 * interrupted: a clone that never reached its owner leaves no directory behind and holds no
 * dedicated source until the enclosing scope closes. Once acquired, it closes with that scope.
 *
 * @internal
 */
export const clone = (selection: Selection, layout: ProfileLayout, who: Owner) =>
  Effect.gen(function*() {
    const scope = yield* Scope.fork(yield* Effect.scope, ExecutionStrategy.sequential)
    return yield* acquire(selection, layout, who).pipe(
      Scope.extend(scope),
      Effect.onError((cause) => Scope.close(scope, Exit.failCause(cause)))
    )
  }).pipe(withSpan("Profile.clone"))

const acquire = (selection: Selection, layout: ProfileLayout, who: Owner) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const source = yield* resolveSource(selection, layout)
    const { root: requested, strict } = rootOf(selection)
    // Clones inside the source would change it: refused before anything is created, through
    // symlinked ancestors, and again once the root exists. A missing native source is taken
    // where it would be created, through its symlinked ancestors: the same real path it has
    // once created, so its identity (and session store) stays the same.
    const sourceReal = source.exists ? source.canonical : yield* canonical(source.path)
    const absoluteRoot = path.resolve(requested)
    const unsafe = () =>
      new ProfileError({ reason: "UnsafeRoot", path: absoluteRoot, detail: "inside the source profile" })
    if (inside(sourceReal, yield* canonical(absoluteRoot))) return yield* unsafe()
    const root = yield* ensureRoot(requested, strict)
    if (inside(sourceReal, yield* sync(root, () => NodeFs.realpathSync.native(root)))) return yield* unsafe()
    if (!reclaimedRoots.has(root)) {
      reclaimedRoots.add(root)
      // A stale clone this host cannot remove is no reason to refuse it a new one.
      // The source is spared whatever its name and content (one kept beside its clones).
      yield* reclaim({ root }, sourceReal).pipe(
        Effect.catchAll((error) =>
          Effect.logWarning("reclaiming stale profile clones failed").pipe(
            Effect.annotateLogs({ root, error: error.message })
          )
        )
      )
    }
    if (selection._tag === "Dedicated") yield* lock(sourceReal, who.agentId)
    const identity = who.identity ?? `${layout.provider}:${sourceReal}`
    const entries = source.exists ? yield* walk(source.path, layout) : []
    // Before the clone exists: a refused store creates nothing.
    const store = yield* sessions.open(selection, layout, sourceReal, identity)
    const state: CloneState = {
      seeded: new Map(),
      manifest: new Map(),
      lock: yield* Effect.makeSemaphore(1),
      sessions: undefined,
      closed: false
    }
    // Before the clone exists: a refused layout creates nothing.
    for (const name of Object.keys(layout.logs ?? {})) {
      if (name !== "profile" && !layout.siblings.includes(name)) {
        return yield* invalid(name, "a layout's logs are in `profile` or one of its siblings")
      }
    }
    const cloneRoot = yield* Effect.acquireRelease(
      sync(root, () => {
        const dir = NodeFs.mkdtempSync(path.join(root, clonePrefix))
        try {
          // mkdtemp creates 0700 less the umask: a metadata write only when the umask cleared bits.
          if ((NodeFs.statSync(dir).mode & 0o777) !== 0o700) NodeFs.chmodSync(dir, 0o700)
          // Written in place, not through a rename: the directory is new and private, and a
          // reader that finds the marker missing or torn takes the clone for an unmarked one,
          // which is never reclaimed within the grace period.
          writeNewSync(
            path.join(dir, owner.markerName),
            JSON.stringify(
              {
                version: 1,
                ...owner.self(),
                agentId: who.agentId,
                identity,
                provider: layout.provider,
                source: source.path,
                createdAt: new Date().toISOString()
              } satisfies owner.Marker,
              null,
              2
            ),
            0o600
          )
        } catch (error) {
          // Not yet owned by the scope: a directory without its marker is removed here.
          NodeFs.rmSync(dir, { recursive: true, force: true })
          throw error
        }
        return dir
      }),
      (dir) => release(dir, path.join(dir, "profile"), layout, state, who)
    )
    const dir = path.join(cloneRoot, "profile")
    const siblings: Record<string, string> = {}
    for (const name of layout.siblings) {
      if (segmentsOf(name)?.length !== 1 || name === "profile" || name.startsWith(".tether")) {
        return yield* invalid(name, "a sibling is one plain name other than `profile`")
      }
      siblings[name] = path.join(cloneRoot, name)
    }
    for (const created of [dir, ...Object.values(siblings)]) {
      yield* sync(created, () => NodeFs.mkdirSync(created, { mode: 0o700 }))
    }
    const { fingerprint, seeded } = yield* seed(entries, dir, selection.options)
    for (const [rel, entry] of seeded) state.seeded.set(rel, entry)
    if (store !== undefined) {
      state.sessions = { store, baseline: yield* sessions.seed(store, layout, dir) }
    }
    const env: Record<string, string> = {}
    for (const name of layout.selectorEnv) env[name] = dir
    // Every operation on the store runs one at a time with `materialize` and fails once closed.
    const onStore = <A>(
      name: string,
      empty: A,
      f: (store: sessions.SessionStore) => Effect.Effect<A, ProfileError, Path.Path>
    ) =>
      Effect.suspend(() =>
        state.closed
          ? Effect.fail(new ProfileError({ reason: "CloneClosed", path: cloneRoot, detail: "scope closed" }))
          : state.sessions === undefined
          ? Effect.succeed(empty)
          : Effect.zipRight(
            ownDirectories(cloneRoot, dir).pipe(
              Effect.mapError((e) =>
                new ProfileError({ reason: "Io", path: e.path, detail: "not a plain directory (replaced by a link?)" })
              )
            ),
            f(state.sessions.store)
          )
      ).pipe(
        state.lock.withPermits(1),
        Effect.provideService(Path.Path, path),
        withSpan(name)
      )
    return {
      root: cloneRoot,
      dir,
      siblings,
      env,
      source: source.path,
      identity,
      fingerprint,
      materialize: materialize(path, dir, who.agentId, cloneRoot, state),
      sessions: store?.dir,
      saveSessions: onStore("Profile.saveSessions", noSync, () => saveSessions(layout, dir, state, who)),
      saveSession: (session) =>
        onStore("Profile.saveSession", noSync, () => saveSessions(layout, dir, state, who, session)),
      loadSession: (session) =>
        onStore(
          "Profile.loadSession",
          noLoad,
          (store) => sessions.load(store, layout, dir, state.sessions!.baseline, session)
        ),
      dropSessions: (ids) => onStore("Profile.dropSessions", none, (store) => sessions.drop(store, layout, dir, ids)),
      pruneSessions: (options) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          onStore(
            "Profile.pruneSessions",
            none,
            (store) => sessions.prune(store, layout, now - Duration.toMillis(options.olderThan), options.keep ?? [])
          ))
    } satisfies ExecutionProfile
  })
