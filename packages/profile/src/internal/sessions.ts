/**
 * The per-identity session store: the provider's session entries (transcripts, rollouts) kept
 * outside the execution clones so that a thread resumes in a later clone of the same identity
 * (a rebuilt agent after a host restart). A clone is seeded from the store by copy and saves
 * back by copy, one file at a time through a temporary file and a rename, so concurrent clones
 * of one identity never see a torn file (the last writer wins per file).
 *
 * Store layout: `<sessions root>/<sha256(identity)[0..32]>/{profile,tmp}`; `profile/` mirrors
 * the session entries relative to the profile root, `tmp/` holds temporary files while saving.
 *
 * The default root is persistent per-user state (`$XDG_STATE_HOME/tether/sessions`, else
 * `~/.local/state/tether/sessions`): a checkpoint kept in a database outlives a reboot, and so
 * must the session it points at.
 *
 * @internal
 */
import * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import * as NodeCrypto from "node:crypto"
import * as NodeFsSync from "node:fs"
import * as NodeFs from "node:fs/promises"
import * as NodeOs from "node:os"
import { ProfileError } from "../Profile.js"
import type { Selection, SessionLoad, SessionSync } from "../Profile.js"
import type { ProfileLayout } from "../ProfileLayout.js"
import * as Layout from "../ProfileLayout.js"
import * as glob from "./glob.js"
import { io, lstat, sha256, sync } from "./seed.js"
import { canonical, ensureRoot, inside } from "./source.js"

/**
 * `$XDG_STATE_HOME/tether/sessions` when that variable is an absolute path (the XDG base
 * directory rule), else `<home>/.local/state/tether/sessions`.
 *
 * @internal
 */
export const defaultSessionsRoot = (env: { readonly [name: string]: string | undefined } = process.env): string => {
  const state = env["XDG_STATE_HOME"]
  const base = state !== undefined && state.startsWith("/")
    ? state
    : `${env["HOME"] !== undefined && env["HOME"].startsWith("/") ? env["HOME"] : NodeOs.homedir()}/.local/state`
  return `${base}/tether/sessions`
}

/** The directory name of one identity in a sessions root. @internal */
export const storeKey = (identity: string): string => sha256(`tether-sessions\0${identity}`).slice(0, 32)

/** @internal */
export interface SessionStore {
  /** `<sessions root>/<key>` */
  readonly dir: string
  /** Mirror of the session entries, relative to the profile root. */
  readonly profile: string
  /** Temporary files of in-progress saves (same file system as `profile`, so rename is atomic). */
  readonly tmp: string
}

/** What a clone last synchronized with the store: relative path → sha256 of the content. @internal */
export type Baseline = Map<string, string>

/** Temporary files older than this are leftovers of a killed writer. */
const staleTmpMillis = 60 * 60_000

/**
 * Whether `rel` is a session entry of `layout`: it matches a `sessions` glob and is neither a
 * declared source class nor reserved (those belong to the source or to the driver).
 *
 * @internal
 */
export const isSessionPath = (layout: ProfileLayout, rel: string): boolean =>
  Layout.isSession(layout, rel) && Layout.classify(layout, rel) === undefined && !Layout.isReserved(layout, rel)

/**
 * Opens the store of `identity`, or `undefined` when the layout declares no session entries or
 * the selection disabled the store. The identity's 0700 directories are made by its first save.
 * The default root is checked like the default clone root (plain directory, owned by this user,
 * 0700); a store inside the source profile is refused.
 *
 * @internal
 */
export const open = (selection: Selection, layout: ProfileLayout, sourceCanonical: string, identity: string) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const option = selection.options.sessions
    if ((layout.classes.sessions ?? []).length === 0 || option === false) return undefined
    const requested = path.resolve(option ?? defaultSessionsRoot())
    const unsafe = () =>
      new ProfileError({ reason: "UnsafeRoot", path: requested, detail: "inside the source profile" })
    // Checked before anything is created, through symlinked ancestors, and again after.
    if (inside(sourceCanonical, yield* canonical(requested))) return yield* unsafe()
    const root = yield* ensureRoot(requested, option === undefined)
    const real = yield* sync(root, () => NodeFsSync.realpathSync.native(root))
    if (inside(sourceCanonical, real)) return yield* unsafe()
    const dir = path.join(real, storeKey(identity))
    const store: SessionStore = { dir, profile: path.join(dir, "profile"), tmp: path.join(dir, "tmp") }
    // The identity's directories are made by its first save (an agent that never saves a session
    // leaves none behind); ones that exist are checked now, as the first save would.
    if ((yield* lstat(dir)) !== undefined) yield* ensureStore(store)
    return store
  })

/** Creates the store's directories when missing (0700), and checks them as a clone root. */
const ensureStore = (store: SessionStore) =>
  Effect.gen(function*() {
    yield* ensureRoot(store.dir, true)
    yield* ensureRoot(store.profile, true)
    yield* ensureRoot(store.tmp, true)
  })

/**
 * Whether the store holds anything, checked as `open` checks it when it does: a store another
 * clone's first save made after this clone opened is read or changed only once checked. A save
 * makes `tmp/` before it writes any entry, so a store without it has no entry yet.
 */
const existingStore = (store: SessionStore) =>
  Effect.flatMap(
    lstat(store.tmp),
    (tmp) => tmp === undefined ? Effect.succeed(false) : Effect.as(ensureStore(store), true)
  )

/**
 * The regular files under `root` that are session entries of `layout`, sorted. Symlinks are
 * never followed nor listed; directories no session glob can reach are not walked.
 *
 * @internal
 */
export const list = (root: string, layout: ProfileLayout) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const patterns = layout.classes.sessions ?? []
    const found: Array<string> = []
    const visit = (dir: string, rel: string): Effect.Effect<void, ProfileError> =>
      Effect.gen(function*() {
        const names = yield* sync(dir, () => {
          try {
            return NodeFsSync.readdirSync(dir)
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code === "ENOENT") return []
            throw e
          }
        })
        for (const name of names.sort()) {
          const relative = rel === "" ? name : `${rel}/${name}`
          const info = yield* lstat(path.join(dir, name))
          if (info === undefined || info.isSymbolicLink()) continue
          if (info.isDirectory()) {
            if (glob.couldMatchBelow(patterns, relative)) yield* visit(path.join(dir, name), relative)
          } else if (info.isFile() && isSessionPath(layout, relative)) {
            found.push(relative)
          }
        }
      })
    yield* visit(root, "")
    return found
  })

/**
 * Files up to this size are read and written synchronously: a session file is read whole anyway,
 * and an awaited read is four round trips through libuv's pool and back through an event loop
 * that is busy at the end of a turn (open, stat, read, close), an awaited write as many. Larger
 * ones (a long session's transcript) go through the pool, so copying them never holds the loop.
 */
const syncBytes = 1024 * 1024

const missing = (e: unknown) => (e as NodeJS.ErrnoException).code === "ENOENT"

/** Reads a file, `undefined` when it vanished (another writer removed it). */
const readIfPresent = (file: string) =>
  Effect.tryPromise({
    try: async () => {
      const size = NodeFsSync.statSync(file, { throwIfNoEntry: false })?.size
      if (size === undefined) return undefined
      try {
        return size <= syncBytes ? NodeFsSync.readFileSync(file) : await NodeFs.readFile(file)
      } catch (e) {
        if (missing(e)) return undefined
        throw e
      }
    },
    catch: io(file)
  })

/** Creates the parents of `rel` under `base`, refusing a symlinked or non-directory parent. */
const makeParents = (base: string, rel: string) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const segments = rel.split("/").slice(0, -1)
    for (let i = 1; i <= segments.length; i++) {
      const dir = path.join(base, ...segments.slice(0, i))
      const info = yield* lstat(dir)
      if (info === undefined) {
        yield* sync(dir, () => {
          try {
            NodeFsSync.mkdirSync(dir, { mode: 0o700 })
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
          }
        })
        const created = yield* lstat(dir)
        if (created === undefined || created.isSymbolicLink() || !created.isDirectory()) {
          return yield* io(dir)("not a plain directory")
        }
      } else if (info.isSymbolicLink() || !info.isDirectory()) {
        return yield* io(dir)("not a plain directory")
      }
    }
  })

const privateMode = (mode: number): number => (mode & 0o700) | 0o600

/**
 * Copies the session entries of the store into `profileDir` (freshly created: nothing is
 * overwritten) and returns the baseline. Removes temporary files left by killed writers.
 *
 * @internal
 */
export const seed = (store: SessionStore, layout: ProfileLayout, profileDir: string) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const baseline: Baseline = new Map()
    // A store no save has made yet, or one another clone's first save is making now, has nothing
    // to seed.
    if (!(yield* existingStore(store))) return baseline
    for (const name of yield* sync(store.tmp, () => NodeFsSync.readdirSync(store.tmp))) {
      const file = path.join(store.tmp, name)
      const info = yield* lstat(file)
      if (info !== undefined && Date.now() - info.mtimeMs > staleTmpMillis) {
        yield* sync(file, () => NodeFsSync.rmSync(file, { force: true, recursive: true }))
      }
    }
    for (const rel of yield* list(store.profile, layout)) {
      const from = path.join(store.profile, ...rel.split("/"))
      const content = yield* readIfPresent(from)
      if (content === undefined) continue
      const target = path.join(profileDir, ...rel.split("/"))
      if ((yield* lstat(target)) !== undefined) continue
      yield* makeParents(profileDir, rel)
      const mode = privateMode((yield* lstat(from))?.mode ?? 0o600)
      yield* Effect.tryPromise({
        try: () => NodeFs.writeFile(target, content, { flag: "wx", mode }),
        catch: io(target)
      })
      baseline.set(rel, sha256(content))
    }
    return baseline
  })

/** `fsync` of an open file, on libuv's pool (the one call here that can take a while). */
const fsync = (fd: number) =>
  new Promise<void>((resolve, reject) => NodeFsSync.fsync(fd, (error) => error === null ? resolve() : reject(error)))

/** Writes all of `content` at the file's start: synchronously up to `syncBytes`, else on the pool. */
const writeAll = (fd: number, content: Uint8Array): Promise<void> =>
  content.byteLength <= syncBytes
    ? Promise.resolve(NodeFsSync.writeFileSync(fd, content))
    : new Promise((resolve, reject) =>
      NodeFsSync.writeFile(fd, content, (error) => error === null ? resolve() : reject(error))
    )

/**
 * How often a save makes the parents of an entry again when they vanished before its rename:
 * another clone's `drop` or `prune` removes the directories it empties (a project's last
 * session), also the ones a save just made for a new entry there. Each retry needs another
 * removal to land between the parents being made and the rename: a few suffice.
 */
const vanishedParentRetries = 4

/** Whether `dir` is missing (one that cannot be looked up counts as present). */
const missingDir = (dir: string) =>
  Effect.sync(() => {
    try {
      return NodeFsSync.lstatSync(dir, { throwIfNoEntry: false }) === undefined
    } catch {
      return false
    }
  })

/**
 * Writes `content` to `<store>/profile/<rel>` through a temporary file, made durable, and a
 * rename. The open, mode, close and rename are synchronous metadata calls (each a few
 * microseconds, where awaiting each cost a round trip through the event loop); the content goes
 * as `writeAll` says, and the `fsync` is awaited. The parents are made just before the rename,
 * and made again when a concurrent removal took them (`vanishedParentRetries`). The temporary
 * file is removed whenever the write does not complete, failed or interrupted.
 */
const writeAtomically = (store: SessionStore, rel: string, content: Uint8Array, mode: number) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const target = path.join(store.profile, ...rel.split("/"))
    const temporary = path.join(store.tmp, `${process.pid}-${NodeCrypto.randomBytes(8).toString("hex")}`)
    const write = Effect.tryPromise({
      try: async () => {
        const fd = NodeFsSync.openSync(temporary, "wx", mode)
        try {
          await writeAll(fd, content)
          // The umask may have cleared bits of `mode` at creation.
          if ((NodeFsSync.fstatSync(fd).mode & 0o7777) !== mode) NodeFsSync.fchmodSync(fd, mode)
          await fsync(fd)
        } finally {
          NodeFsSync.closeSync(fd)
        }
      },
      catch: io(target)
    })
    const rename = makeParents(store.profile, rel).pipe(
      Effect.zipRight(sync(target, () => NodeFsSync.renameSync(temporary, target))),
      // A failure with the parent gone (the rename's ENOENT, or a `mkdir` under a parent removed
      // since its `lstat`) is that race, and tried again; anything else fails at once.
      Effect.retry({ times: vanishedParentRetries, while: () => missingDir(path.dirname(target)) })
    )
    yield* Effect.zipRight(write, rename).pipe(
      // An interrupted write's promise runs on: it writes into the removed file and never renames
      // it, so nothing is left behind either way.
      Effect.onError(() => Effect.sync(() => NodeFsSync.rmSync(temporary, { force: true })))
    )
  })

/**
 * Saves the clone's session entries that changed since the baseline (new or different content)
 * into the store, and removes from the store the entries the clone deleted, unless another
 * clone changed them since. `exclude` are entries the driver materialized. Updates `baseline`.
 *
 * @internal
 */
export const save = (
  store: SessionStore,
  layout: ProfileLayout,
  profileDir: string,
  baseline: Baseline,
  exclude: ReadonlySet<string>,
  session?: string,
  redact: (content: Uint8Array) => Uint8Array = (content) => content
) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const saved: Array<string> = []
    const removed: Array<string> = []
    const current = new Set<string>()
    // With a session: only its own entries and the shared ones (another session's transcript,
    // e.g. a plain run's, is never persisted on its behalf).
    const concerns = (rel: string) => {
      if (session === undefined) return true
      const owner = Layout.sessionOwner(layout, rel)
      return owner === undefined || Layout.ownedBy(owner, session)
    }
    let ready = false
    for (const rel of yield* list(profileDir, layout)) {
      if (exclude.has(rel) || !concerns(rel)) continue
      const file = path.join(profileDir, ...rel.split("/"))
      const content = yield* readIfPresent(file)
      if (content === undefined) continue
      current.add(rel)
      // The baseline holds digests of what the store holds (seeding and loading take them from
      // it): of the redacted copy, so that an entry the clone deletes is found unchanged below.
      const stored = redact(content)
      const digest = sha256(stored)
      // Unchanged since seeding or the last save: never overwrite another clone's newer copy.
      if (baseline.get(rel) === digest) continue
      if (!ready) {
        yield* ensureStore(store)
        ready = true
      }
      yield* writeAtomically(store, rel, stored, privateMode((yield* lstat(file))?.mode ?? 0o600))
      baseline.set(rel, digest)
      saved.push(rel)
    }
    for (const [rel, digest] of [...baseline]) {
      if (current.has(rel) || !concerns(rel)) continue
      baseline.delete(rel)
      const stored = path.join(store.profile, ...rel.split("/"))
      const content = yield* readIfPresent(stored)
      if (content === undefined || sha256(content) !== digest) continue
      yield* Effect.tryPromise({ try: () => NodeFs.rm(stored, { force: true }), catch: io(stored) })
      removed.push(rel)
    }
    return { saved, removed } satisfies SessionSync
  })

/**
 * Writes `content` over `target` in the clone through a temporary file beside it and a rename (a
 * link at `target` is replaced, never followed).
 */
const replaceInClone = (target: string, content: Uint8Array, mode: number) =>
  Effect.tryPromise({
    try: async () => {
      const temporary = `${target}.tether-${NodeCrypto.randomBytes(6).toString("hex")}`
      try {
        const fd = NodeFsSync.openSync(temporary, "wx", mode)
        try {
          await writeAll(fd, content)
          if ((NodeFsSync.fstatSync(fd).mode & 0o7777) !== mode) NodeFsSync.fchmodSync(fd, mode)
        } finally {
          NodeFsSync.closeSync(fd)
        }
        NodeFsSync.renameSync(temporary, target)
      } catch (e) {
        NodeFsSync.rmSync(temporary, { force: true })
        throw e
      }
    },
    catch: io(target)
  })

/**
 * Puts the store's copy of `session`'s own entries into the clone at `profileDir` where the
 * clone's is missing or differs, and removes the session's entries the store does not have
 * (unless the store has none of the session); the baseline takes the store's digests.
 *
 * @internal
 */
export const load = (
  store: SessionStore,
  layout: ProfileLayout,
  profileDir: string,
  baseline: Baseline,
  session: string
) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const loaded: Array<string> = []
    const removed: Array<string> = []
    if (!(yield* existingStore(store))) return { loaded, removed } satisfies SessionLoad
    const owns = (rel: string) => {
      const owner = Layout.sessionOwner(layout, rel)
      return owner !== undefined && Layout.ownedBy(owner, session)
    }
    const stored = new Set<string>()
    for (const rel of yield* list(store.profile, layout)) {
      if (!owns(rel)) continue
      const from = path.join(store.profile, ...rel.split("/"))
      const content = yield* readIfPresent(from)
      if (content === undefined) continue
      stored.add(rel)
      const digest = sha256(content)
      const target = path.join(profileDir, ...rel.split("/"))
      const local = (yield* lstat(target))?.isFile() === true ? yield* readIfPresent(target) : undefined
      if (local === undefined || sha256(local) !== digest) {
        yield* makeParents(profileDir, rel)
        yield* replaceInClone(target, content, privateMode((yield* lstat(from))?.mode ?? 0o600))
        loaded.push(rel)
      }
      baseline.set(rel, digest)
    }
    if (stored.size > 0) {
      for (const rel of yield* list(profileDir, layout)) {
        if (!owns(rel) || stored.has(rel)) continue
        yield* removeFile(path.join(profileDir, ...rel.split("/")))
        baseline.delete(rel)
        removed.push(rel)
      }
    }
    return { loaded: loaded.sort(), removed: removed.sort() } satisfies SessionLoad
  })

const removeFile = (file: string) => Effect.tryPromise({ try: () => NodeFs.rm(file, { force: true }), catch: io(file) })

/** Removes the now empty directories between `rel`'s parent and `base` (exclusive). */
const removeEmptyParents = (base: string, rel: string) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const segments = rel.split("/").slice(0, -1)
    for (let i = segments.length; i > 0; i--) {
      const dir = path.join(base, ...segments.slice(0, i))
      const empty = yield* Effect.tryPromise({
        try: () =>
          NodeFs.rmdir(dir).then(() => true, (e: NodeJS.ErrnoException) =>
            e.code === "ENOTEMPTY" || e.code === "EEXIST" || e.code === "ENOENT" ? false : Promise.reject(e)),
        catch: io(dir)
      })
      if (!empty) {
        return
      }
    }
  })

/**
 * Removes from the store, and from the clone at `profileDir` when given, the entries that belong
 * to one of `sessions` alone (`ProfileLayout.sessionOf`); shared entries are kept. Returns the
 * removed entries (relative paths, sorted).
 *
 * @internal
 */
export const drop = (
  store: SessionStore,
  layout: ProfileLayout,
  profileDir: string | undefined,
  sessions: ReadonlyArray<string>
) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const removed: Array<string> = []
    if (sessions.length === 0) return removed
    const dropped = (rel: string) => {
      const owner = Layout.sessionOwner(layout, rel)
      return owner !== undefined && sessions.some((session) => Layout.ownedBy(owner, session))
    }
    const stored = (yield* existingStore(store)) ? yield* list(store.profile, layout) : []
    for (const rel of stored) {
      if (!dropped(rel)) continue
      yield* removeFile(path.join(store.profile, ...rel.split("/")))
      yield* removeEmptyParents(store.profile, rel)
      removed.push(rel)
    }
    if (profileDir !== undefined) {
      for (const rel of yield* list(profileDir, layout)) {
        if (dropped(rel)) yield* removeFile(path.join(profileDir, ...rel.split("/")))
      }
    }
    return removed
  })

/**
 * Removes from the store the entries of one session (`ProfileLayout.sessionOf`) last saved
 * before `before` (epoch milliseconds), unless their session is one of `keep`. Shared entries are
 * kept. Returns the removed entries (relative paths, sorted).
 *
 * @internal
 */
export const prune = (
  store: SessionStore,
  layout: ProfileLayout,
  before: number,
  keep: ReadonlyArray<string>
) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const removed: Array<string> = []
    if (!(yield* existingStore(store))) return removed
    for (const rel of yield* list(store.profile, layout)) {
      const owner = Layout.sessionOwner(layout, rel)
      if (owner === undefined || keep.some((session) => Layout.ownedBy(owner, session))) continue
      const file = path.join(store.profile, ...rel.split("/"))
      const info = yield* lstat(file)
      if (info === undefined || info.mtimeMs >= before) continue
      yield* removeFile(file)
      yield* removeEmptyParents(store.profile, rel)
      removed.push(rel)
    }
    return removed
  })
