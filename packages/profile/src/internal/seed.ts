/**
 * Reading a source profile: the walk over declared entries, seeding a clone from it and the
 * fingerprint of what was copied. The source is only ever read (lstat, stat, readdir,
 * readlink, realpath, read).
 *
 * @internal
 */
import * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import * as NodeCrypto from "node:crypto"
import * as NodeFs from "node:fs"
import { ProfileCollision, ProfileError } from "../Profile.js"
import type { ResolvedOptions } from "../Profile.js"
import type { EntryClass, ProfileLayout } from "../ProfileLayout.js"
import * as Layout from "../ProfileLayout.js"
import * as glob from "./glob.js"

/** A declared entry of the source: a regular file, or a symlink that resolves to one. @internal */
export interface SourceEntry {
  readonly path: string
  readonly absolute: string
  readonly class: EntryClass
  readonly kind: "file" | "symlink"
  readonly reserved: boolean
}

/** How an entry was brought into the clone (used to recognise it before replacing it). @internal */
export type Seeded =
  | { readonly kind: "copy"; readonly sha256: string }
  | { readonly kind: "symlink"; readonly target: string }
  | { readonly kind: "hardlink"; readonly ino: number }

/** @internal */
export const io = (path: string) => (cause: unknown): ProfileError =>
  new ProfileError({
    reason: "Io",
    path,
    detail: cause instanceof Error ? cause.message : String(cause)
  })

/**
 * Runs synchronous file system calls; a thrown error becomes `Io` on `path`.
 *
 * The profile's metadata calls (lstat, stat, mkdir, readdir, realpath, symlink, rename, rm) and
 * its small files (markers, manifests, the source's configuration entries) take microseconds
 * each when synchronous, where every promise call is a round trip through the libuv thread pool:
 * tens to hundreds of microseconds each on a loaded machine, and a clone's make and close take
 * about seventy of them. Contents of unbounded size (session transcripts) stay asynchronous.
 *
 * @internal
 */
export const sync = <A>(path: string, f: () => A): Effect.Effect<A, ProfileError> =>
  Effect.try({ try: f, catch: io(path) })

/**
 * Creates `file` exclusively (never following or reusing an existing entry) with `content` and
 * permission bits `mode`. The umask may clear bits of `mode` at creation: they are set again,
 * a metadata write made only when needed (each one a journal transaction on ext4).
 *
 * @internal
 */
export const writeNewSync = (file: string, content: string | Uint8Array, mode: number): void => {
  const fd = NodeFs.openSync(file, "wx", mode)
  try {
    NodeFs.writeFileSync(fd, content)
    if ((NodeFs.fstatSync(fd).mode & 0o7777) !== mode) NodeFs.fchmodSync(fd, mode)
  } finally {
    NodeFs.closeSync(fd)
  }
}

/** @internal */
export const sha256 = (data: string | Uint8Array): string => NodeCrypto.createHash("sha256").update(data).digest("hex")

/**
 * Whether the entry at `absolute` is still exactly what seeding put there (a provider that
 * replaced or edited it made it its own).
 *
 * @internal
 */
export const stillSeeded = (absolute: string, seeded: Seeded) =>
  Effect.gen(function*() {
    const info = yield* lstat(absolute)
    if (info === undefined) return false
    switch (seeded.kind) {
      case "symlink":
        return info.isSymbolicLink() && (yield* sync(absolute, () => NodeFs.readlinkSync(absolute))) === seeded.target
      case "hardlink":
        return info.isFile() && info.ino === seeded.ino
      case "copy":
        return info.isFile() && sha256(yield* sync(absolute, () => NodeFs.readFileSync(absolute))) === seeded.sha256
    }
  })

/** lstat that answers `undefined` for a missing entry. @internal */
export const lstat = (path: string): Effect.Effect<NodeFs.Stats | undefined, ProfileError> =>
  sync(path, () => NodeFs.lstatSync(path, { throwIfNoEntry: false }))

const allGlobs = (layout: ProfileLayout): ReadonlyArray<string> => [
  ...layout.classes.settings,
  ...layout.classes.mcp,
  ...layout.classes.skills,
  ...layout.classes.auth
]

/**
 * Every declared entry under `source`, sorted by path. Symlinks are followed for reading
 * (a symlinked directory is walked, cycles are cut by real path); dangling links, sockets and
 * other special files are skipped. Directories no declared glob can reach are not walked.
 *
 * @internal
 */
export const walk = (source: string, layout: ProfileLayout) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const patterns = allGlobs(layout)
    const entries: Array<SourceEntry> = []
    const visit = (
      dir: string,
      rel: string,
      ancestors: ReadonlySet<string>
    ): Effect.Effect<void, ProfileError> =>
      Effect.gen(function*() {
        const names = yield* sync(dir, () => NodeFs.readdirSync(dir))
        names.sort()
        for (const name of names) {
          const absolute = path.join(dir, name)
          const relative = rel === "" ? name : `${rel}/${name}`
          const link = yield* lstat(absolute)
          if (link === undefined) continue
          let info = link
          if (link.isSymbolicLink()) {
            const target = yield* sync(absolute, () => {
              try {
                return NodeFs.statSync(absolute)
              } catch {
                return undefined
              }
            })
            if (target === undefined) continue
            info = target
          }
          if (info.isDirectory()) {
            if (!glob.couldMatchBelow(patterns, relative)) continue
            const real = yield* sync(absolute, () => NodeFs.realpathSync.native(absolute))
            if (ancestors.has(real)) continue
            yield* visit(absolute, relative, new Set([...ancestors, real]))
          } else if (info.isFile()) {
            const cls = Layout.classify(layout, relative)
            if (cls === undefined) continue
            entries.push({
              path: relative,
              absolute,
              class: cls,
              kind: link.isSymbolicLink() ? "symlink" : "file",
              reserved: Layout.isReserved(layout, relative)
            })
          }
        }
      })
    const root = yield* sync(source, () => NodeFs.realpathSync.native(source))
    yield* visit(source, "", new Set([root]))
    return entries
  })

const included = (entry: SourceEntry, options: ResolvedOptions): boolean =>
  entry.class === "auth" ? options.auth !== "none" : options[entry.class]

/**
 * Brings the included entries of `source` into `profileDir` (an empty directory). Copies are
 * regular files with the source's permission bits; auth in `link` mode is a symlink to the
 * source entry, or a hard link to its resolved file where symlinks fail. Returns what was
 * seeded and the fingerprint of the copied non-auth entries. A reserved entry fails with
 * `ProfileCollision` before anything is written.
 *
 * @internal
 */
export const seed = (
  entries: ReadonlyArray<SourceEntry>,
  profileDir: string,
  options: ResolvedOptions
) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const selected = entries.filter((entry) => included(entry, options))
    const reserved = selected.find((entry) => entry.reserved)
    if (reserved !== undefined) {
      return yield* new ProfileCollision({ reason: "Reserved", path: reserved.path })
    }
    const seeded = new Map<string, Seeded>()
    const digest = NodeCrypto.createHash("sha256")
    for (const entry of selected) {
      const target = path.join(profileDir, ...entry.path.split("/"))
      const parent = path.dirname(target)
      if (parent !== profileDir) yield* sync(target, () => NodeFs.mkdirSync(parent, { recursive: true, mode: 0o700 }))
      if (entry.class === "auth" && options.auth === "link") {
        const linked: Seeded = yield* sync(target, () => NodeFs.symlinkSync(entry.absolute, target)).pipe(
          Effect.as<Seeded>({ kind: "symlink", target: entry.absolute }),
          Effect.orElse(() =>
            sync(entry.absolute, () => NodeFs.realpathSync.native(entry.absolute)).pipe(
              Effect.tap((real) => sync(target, () => NodeFs.linkSync(real, target))),
              Effect.flatMap(() => lstat(target)),
              Effect.map((info): Seeded => ({ kind: "hardlink", ino: info?.ino ?? -1 }))
            )
          )
        )
        seeded.set(entry.path, linked)
        continue
      }
      // Content and mode of one open file (one read of the source, no second lookup).
      const { content, mode } = yield* sync(entry.absolute, () => {
        const fd = NodeFs.openSync(entry.absolute, "r")
        try {
          return { mode: NodeFs.fstatSync(fd).mode & 0o777, content: NodeFs.readFileSync(fd) }
        } finally {
          NodeFs.closeSync(fd)
        }
      })
      yield* sync(target, () => writeNewSync(target, content, mode))
      const contentDigest = sha256(content)
      seeded.set(entry.path, { kind: "copy", sha256: contentDigest })
      if (entry.class !== "auth") {
        digest.update(`${entry.class}\0${entry.path}\0${contentDigest}\n`)
      }
    }
    return { seeded, fingerprint: digest.digest("hex") }
  })
