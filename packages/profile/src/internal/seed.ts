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
import * as NodeFsPromises from "node:fs/promises"
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

const { O_NOFOLLOW, O_NONBLOCK, O_RDONLY } = NodeFs.constants

/**
 * The bytes of the regular file at `file`, `undefined` for anything else (missing, a link, a
 * FIFO, a device, a directory): opened without following a link or waiting for a FIFO's writer,
 * then checked through the descriptor, so a swap after an `lstat` cannot make the read block.
 *
 * @internal
 */
export const readRegularSync = (file: string): Buffer | undefined => {
  let fd: number
  try {
    fd = NodeFs.openSync(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === "ENOENT" || code === "ELOOP" || code === "ENXIO" || code === "ENOTDIR") return undefined
    throw error
  }
  try {
    return NodeFs.fstatSync(fd).isFile() ? NodeFs.readFileSync(fd) : undefined
  } finally {
    NodeFs.closeSync(fd)
  }
}

/** `readRegularSync` through the promise API. @internal */
export const readRegular = async (file: string): Promise<Buffer | undefined> => {
  const handle = await NodeFsPromises.open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK).catch(
    (error: NodeJS.ErrnoException) =>
      error.code === "ENOENT" || error.code === "ELOOP" || error.code === "ENXIO" || error.code === "ENOTDIR"
        ? undefined
        : Promise.reject(error)
  )
  if (handle === undefined) return undefined
  try {
    return (await handle.stat()).isFile() ? await handle.readFile() : undefined
  } finally {
    await handle.close()
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
        if (!info.isFile()) return false
        return (yield* sync(absolute, () => readRegularSync(absolute)).pipe(
          Effect.map((content) => content !== undefined && sha256(content) === seeded.sha256)
        ))
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
        const raw = yield* sync(dir, () => NodeFs.readdirSync(dir, { encoding: "buffer" }))
        const names = raw.map((bytes) => ({ bytes, name: bytes.toString("utf8") }))
        names.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
        for (const { bytes, name } of names) {
          const absolute = path.join(dir, name)
          const relative = rel === "" ? name : `${rel}/${name}`
          if (!Buffer.from(name, "utf8").equals(bytes)) {
            // A name that is not UTF-8 cannot be a declared entry's path: one the layout would
            // copy fails the clone rather than going missing from it.
            const info = yield* sync(absolute, () => {
              try {
                return NodeFs.statSync(Buffer.concat([Buffer.from(`${dir}/`), bytes]))
              } catch {
                return undefined
              }
            })
            const declared = info?.isDirectory() === true
              ? glob.couldMatchBelow(patterns, relative)
              : info?.isFile() === true && Layout.classify(layout, relative) !== undefined
            if (declared) {
              return yield* new ProfileError({
                reason: "InvalidPath",
                path: absolute,
                detail: "a declared entry whose name is not UTF-8 cannot be copied"
              })
            }
            continue
          }
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
      // Content and mode of one open file (one read of the source, no second lookup). Opened
      // without blocking: a FIFO swapped in since the walk would wait for a writer, holding the
      // event loop; what is no longer a regular file is skipped, as the walk skips it.
      const read = yield* sync(entry.absolute, () => {
        const fd = NodeFs.openSync(entry.absolute, NodeFs.constants.O_RDONLY | NodeFs.constants.O_NONBLOCK)
        try {
          const info = NodeFs.fstatSync(fd)
          return info.isFile() ? { mode: info.mode & 0o777, content: NodeFs.readFileSync(fd) } : undefined
        } finally {
          NodeFs.closeSync(fd)
        }
      })
      if (read === undefined) continue
      const { content, mode } = read
      yield* sync(target, () => writeNewSync(target, content, mode))
      const contentDigest = sha256(content)
      seeded.set(entry.path, { kind: "copy", sha256: contentDigest })
      if (entry.class !== "auth") {
        digest.update(`${entry.class}\0${entry.path}\0${contentDigest}\n`)
      }
    }
    return { seeded, fingerprint: digest.digest("hex") }
  })
