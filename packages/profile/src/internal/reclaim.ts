/**
 * Reclaiming clones left behind by dead owners (a host that was SIGKILLed never ran its
 * finalizers), and reading the clones of a root.
 *
 * @internal
 */
import * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as NodeFsSync from "node:fs"
import * as NodeFs from "node:fs/promises"
import type { ReclaimOptions } from "../Profile.js"
import * as owner from "./owner.js"
import { removeTree } from "./removeTree.js"
import { io, lstat, readRegular, sync } from "./seed.js"
import { defaultRoot, inside } from "./source.js"
import { withSpan } from "./span.js"

/** Names produced by `mkdtemp(<root>/c-)`: nothing else in a root is ever removed. @internal */
export const clonePrefix = "c-"
const cloneName = /^c-[A-Za-z0-9]{6}$/

/** @internal */
export interface FoundClone {
  readonly dir: string
  readonly marker: owner.Marker | undefined
  readonly mtimeMs: number
}

/**
 * A marker's or manifest's text, `undefined` when it is not a regular file of at most 1 MiB or
 * cannot be read: no link followed, no FIFO waited on.
 *
 * @internal
 */
export const readText = (file: string) =>
  Effect.tryPromise({
    try: () =>
      NodeFs.lstat(file).then(
        (info) =>
          info.isFile() && info.size <= 1024 * 1024
            ? readRegular(file).then((bytes) => bytes?.toString("utf8"))
            : undefined
      ).catch(() => undefined),
    catch: io(file)
  })

/** The clone directories of `root` (none when it does not exist), with their markers. @internal */
export const listClones = (root: string) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const names = yield* Effect.tryPromise({
      try: () => NodeFs.readdir(root).catch((e: NodeJS.ErrnoException) => e.code === "ENOENT" ? [] : Promise.reject(e)),
      catch: io(root)
    })
    const found: Array<FoundClone> = []
    for (const name of names.sort()) {
      if (!cloneName.test(name)) continue
      const dir = path.join(root, name)
      const info = yield* lstat(dir)
      if (info === undefined || !info.isDirectory()) continue
      const text = yield* readText(path.join(dir, owner.markerName))
      const marker = text === undefined ? undefined : Option.getOrUndefined(owner.decodeMarker(text))
      found.push({ dir, marker, mtimeMs: info.mtimeMs })
    }
    return found
  })

/**
 * Whether `name`, at the top of a clone, is a file a clone holds there: its marker, its manifest,
 * or the temporary file of a rewrite of either (`<name>.<pid>-<random>.tmp`, beside it) that a
 * killed host left.
 */
const cloneFile = (name: string): boolean =>
  [owner.markerName, owner.manifestName].some((file) =>
    name === file || (name.startsWith(`${file}.`) && name.endsWith(".tmp"))
  )

/**
 * Whether the top of an unmarked `dir` holds nothing but what a clone's does: directories (its
 * `profile` and the layout's siblings) and `cloneFile`s. A clone is created empty and gets its
 * marker before anything else, so one whose creation was killed holds nothing, a torn marker or,
 * once the marker is lost, its directories; a user's directory that happens to be named like a
 * clone (a source profile kept beside its clones, anything in a shared root) holds files of its
 * own and is never removed. One that cannot be read is not taken for a clone either.
 */
const holdsOnlyCloneEntries = (dir: string) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    for (const name of yield* sync(dir, () => NodeFsSync.readdirSync(dir))) {
      const info = yield* lstat(path.join(dir, name))
      // Gone since the listing (another process reclaiming the same directory): nothing of its own.
      if (info === undefined) continue
      if (!(cloneFile(name) ? info.isFile() : info.isDirectory())) return false
    }
    return true
  }).pipe(Effect.orElseSucceed(() => false))

/**
 * Removes the stale clones of a root. A clone that cannot be removed is a logged warning, not a
 * failure: it stays (its marker, removed last, with it) and the others are still removed.
 * `spare` (a real path: the source profile a clone is being made of) is never removed, nor a
 * directory that holds it, whatever it looks like.
 *
 * @internal
 */
export const reclaim = (options?: ReclaimOptions, spare?: string) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const root = path.resolve(options?.root ?? defaultRoot())
    const grace = options?.unmarkedGraceMillis ?? 10 * 60_000
    const removed: Array<string> = []
    // `spare` is a real path and the root as spelled: compared through the root's real path.
    const realRoot = yield* sync(root, () => NodeFsSync.realpathSync.native(root)).pipe(
      Effect.orElseSucceed(() => root)
    )
    const holdsSpare = (dir: string) => spare !== undefined && inside(path.join(realRoot, path.basename(dir)), spare)
    for (const found of yield* listClones(root)) {
      if (holdsSpare(found.dir)) continue
      const stale = found.marker === undefined
        ? Date.now() - found.mtimeMs > grace && (yield* holdsOnlyCloneEntries(found.dir))
        : found.marker.retained === undefined && !owner.ownerAlive(found.marker)
      if (!stale) continue
      // Another process may reclaim the same directory at the same time: what is gone is no error.
      const done = yield* Effect.tryPromise({
        try: () => removeTree(found.dir, { last: owner.markerName }),
        catch: io(found.dir)
      }).pipe(
        Effect.as(true),
        Effect.catchAll((error) =>
          Effect.as(
            Effect.logWarning("reclaiming a stale profile clone failed").pipe(
              Effect.annotateLogs({ clone: found.dir, error: error.message })
            ),
            false
          )
        )
      )
      if (done) removed.push(found.dir)
    }
    return removed
  }).pipe(withSpan("Profile.reclaim"))
