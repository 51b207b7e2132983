/**
 * Where a selection's source profile and clone root are, and the safety checks on the root.
 *
 * @internal
 */
import * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import { ProfileError } from "../Profile.js"
import type { Selection } from "../Profile.js"
import type { ProfileLayout } from "../ProfileLayout.js"
import { lstat, sync } from "./seed.js"

/** @internal */
export const defaultRoot = (): string =>
  `${NodeOs.tmpdir()}/tether-clones-${typeof process.getuid === "function" ? process.getuid() : "user"}`

/** @internal */
export interface ResolvedSource {
  /** Absolute path as selected. */
  readonly path: string
  /** Real path when the source exists, else `path`. */
  readonly canonical: string
  readonly exists: boolean
}

/**
 * The source of a selection. The native default may be missing (an empty profile); an
 * explicit source must be an existing directory.
 *
 * @internal
 */
export const resolveSource = (selection: Selection, layout: ProfileLayout) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const explicit = selection._tag === "Dedicated"
      ? selection.dir
      : selection._tag === "CloneFrom"
      ? selection.source
      : undefined
    const absolute = path.resolve(explicit ?? layout.nativeDefault(process.env))
    const info = yield* sync(absolute, () => {
      try {
        return NodeFs.statSync(absolute)
      } catch {
        return undefined
      }
    })
    if (info === undefined || !info.isDirectory()) {
      if (explicit !== undefined) {
        return yield* new ProfileError({
          reason: "SourceMissing",
          path: absolute,
          detail: info === undefined ? "no such directory" : "not a directory"
        })
      }
      return { path: absolute, canonical: absolute, exists: false } satisfies ResolvedSource
    }
    const canonical = yield* sync(absolute, () => NodeFs.realpathSync.native(absolute))
    return { path: absolute, canonical, exists: true } satisfies ResolvedSource
  })

/** Whether `child` is `parent` or under it (both absolute, normalized). @internal */
export const inside = (parent: string, child: string): boolean => child === parent || child.startsWith(`${parent}/`)

/**
 * The real path of the nearest existing ancestor of `absolute`, joined with the rest: where a
 * directory not yet created would be, through symlinked ancestors.
 *
 * @internal
 */
export const canonical = (absolute: string) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const rest: Array<string> = []
    let current = absolute
    while (true) {
      const real = yield* sync(current, () => {
        try {
          return NodeFs.realpathSync.native(current)
        } catch {
          return undefined
        }
      })
      if (real !== undefined) return path.join(real, ...rest.reverse())
      const parent = path.dirname(current)
      if (parent === current) return absolute
      rest.push(path.basename(current))
      current = parent
    }
  })

/** The clone root of a selection and whether it is the shared default (checked strictly). @internal */
export const rootOf = (selection: Selection): { readonly root: string; readonly strict: boolean } =>
  selection.root === undefined
    ? { root: defaultRoot(), strict: true }
    : { root: selection.root, strict: false }

/**
 * Creates the clone root (0700) when missing. The default root lives in a shared temp directory,
 * so it is refused when it is a symlink, owned by another user or open to group/others.
 *
 * @internal
 */
export const ensureRoot = (root: string, strict: boolean) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const absolute = path.resolve(root)
    // Looked up first: most calls find the directory there, and a `mkdir` that fails on an
    // existing directory costs far more than an `lstat`.
    const existing = yield* lstat(absolute)
    if (existing === undefined) {
      yield* sync(absolute, () => NodeFs.mkdirSync(absolute, { recursive: true, mode: 0o700 }))
    }
    const info = existing ?? (yield* lstat(absolute))
    const unsafe = (detail: string) => new ProfileError({ reason: "UnsafeRoot", path: absolute, detail })
    if (info === undefined) return yield* unsafe("vanished after creation")
    if (strict) {
      if (info.isSymbolicLink() || !info.isDirectory()) return yield* unsafe("not a plain directory")
      if (typeof process.getuid === "function" && info.uid !== process.getuid()) {
        return yield* unsafe("owned by another user")
      }
      if ((info.mode & 0o077) !== 0) return yield* unsafe("accessible to group or others")
    } else {
      const target = info.isSymbolicLink()
        ? yield* sync(absolute, () => NodeFs.statSync(absolute))
        : info
      if (!target.isDirectory()) return yield* unsafe("not a directory")
    }
    return absolute
  })
