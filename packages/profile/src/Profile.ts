/**
 * Provider profile selections and isolated execution clones.
 *
 * Every selection yields an execution clone: the configured source profile is only ever read.
 * A clone is a fresh 0700 directory `<root>/<random>/` holding `profile/` (the directory the
 * provider's selector variable points at), one empty directory per layout sibling (`home`,
 * `tmp`, ...), an ownership marker and a manifest of the entries a driver materialized.
 *
 * Clone roots: `native()` and `dedicated(dir)` put clones under `defaultRoot()`
 * (`<os.tmpdir()>/tether-clones-<uid>`, created 0700 and refused if it is a symlink, owned by
 * another user or open to group/others); `cloneNative(root)` and `cloneFrom(source, root)` put
 * them under the given root (created 0700 when missing).
 *
 * @since 0.1.0
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as internal from "./internal/clone.js"
import * as inspection from "./internal/inspect.js"
import type { EntryClass, ProfileLayout } from "./ProfileLayout.js"

/**
 * How authentication entries reach a clone: `link` is a symlink to the source entry (a hard
 * link where symlinks fail), so token rotation by the provider reaches the source; `copy` is a
 * private copy; `none` leaves them out.
 *
 * @since 0.1.0
 * @category models
 */
export type AuthMode = "link" | "copy" | "none"

/**
 * Which declared classes are brought into a clone. Defaults: settings, MCP declarations and
 * skills copied, auth `link`, sessions in `defaultSessionsRoot()`.
 *
 * `sessions` is the directory of the session stores (one subdirectory per stable identity)
 * where clones keep the layout's session entries between agents, so a thread resumes after the
 * agent is rebuilt; created 0700 when missing; `false` keeps sessions inside each clone only
 * (they are removed with it). A directory inside the source profile fails with `ProfileError`
 * (`UnsafeRoot`).
 *
 * @since 0.1.0
 * @category models
 */
export interface CloneOptions {
  readonly settings?: boolean
  readonly mcp?: boolean
  readonly skills?: boolean
  readonly auth?: AuthMode
  /** @since 0.2.0 */
  readonly sessions?: string | false
}

/**
 * `CloneOptions` plus the directory clones are created in (default `defaultRoot()`). A root
 * inside the source profile (also through a symlink) fails with `ProfileError` (`UnsafeRoot`).
 *
 * @since 0.1.0
 * @category models
 */
export interface SelectionOptions extends CloneOptions {
  readonly root?: string
}

/**
 * The selection's options with their defaults applied: which classes of the source profile are
 * cloned (settings, MCP configuration, skills), how authentication reaches the clone, and where
 * sessions are kept.
 *
 * @since 0.1.0
 * @category models
 */
export interface ResolvedOptions {
  readonly settings: boolean
  readonly mcp: boolean
  readonly skills: boolean
  readonly auth: AuthMode
  /** Absent: `defaultSessionsRoot()`. @since 0.2.0 */
  readonly sessions?: string | false
}

/**
 * Where the source profile is and where its clones live. `root: undefined` means `defaultRoot()`.
 *
 * @since 0.1.0
 * @category models
 */
export type Selection =
  | { readonly _tag: "Native"; readonly root: string | undefined; readonly options: ResolvedOptions }
  | {
    readonly _tag: "Dedicated"
    readonly dir: string
    readonly root: string | undefined
    readonly options: ResolvedOptions
  }
  | { readonly _tag: "CloneNative"; readonly root: string; readonly options: ResolvedOptions }
  | {
    readonly _tag: "CloneFrom"
    readonly source: string
    readonly root: string
    readonly options: ResolvedOptions
  }

const resolve = (options: CloneOptions | undefined): ResolvedOptions => ({
  settings: options?.settings ?? true,
  mcp: options?.mcp ?? true,
  skills: options?.skills ?? true,
  auth: options?.auth ?? "link",
  ...(options?.sessions === undefined ? {} : { sessions: options.sessions })
})

/**
 * The provider's native default location (`layout.nativeDefault(process.env)`). A missing
 * native profile clones as an empty profile.
 *
 * @example
 * ```ts
 * import * as NodeContext from "@effect/platform-node/NodeContext"
 * import { Agent } from "@tether/core"
 * import { Claude } from "@tether/drivers"
 * import { Gateway } from "@tether/gateway"
 * import { Profile } from "@tether/profile"
 * import { Toolkit } from "@tether/tool"
 * import { Effect } from "effect"
 *
 * // The user's own profile of the driver's CLI (e.g. `~/.claude`), cloned for the agent under the
 * // default root: the agent uses the user's login, never changes the profile.
 * const program = Agent.make({
 *   driver: Claude.driver(),
 *   definition: { instructions: "", tools: Toolkit.empty },
 *   workspace: "/srv/repo",
 *   profile: Profile.native()
 * }).pipe(Effect.scoped, Effect.provide([Gateway.layer(), NodeContext.layer]))
 * ```
 *
 * @since 0.1.0
 * @category selections
 */
export const native = (options?: SelectionOptions): Selection => ({
  _tag: "Native",
  root: options?.root,
  options: resolve(options)
})

/**
 * A profile directory reserved to one live agent of this process: a second live agent
 * selecting the same directory fails with `ProfileInUse`. The directory must exist.
 *
 * @example
 * ```ts
 * import * as NodeContext from "@effect/platform-node/NodeContext"
 * import { Agent } from "@tether/core"
 * import { Claude } from "@tether/drivers"
 * import { Gateway } from "@tether/gateway"
 * import { Profile } from "@tether/profile"
 * import { Toolkit } from "@tether/tool"
 * import { Effect } from "effect"
 *
 * // A directory this agent uses as it is (one live agent at a time).
 * const program = Agent.make({
 *   driver: Claude.driver(),
 *   definition: { instructions: "", tools: Toolkit.empty },
 *   workspace: "/srv/repo",
 *   profile: Profile.dedicated("/srv/agents/reviewer/.claude")
 * }).pipe(Effect.scoped, Effect.provide([Gateway.layer(), NodeContext.layer]))
 * ```
 *
 * @since 0.1.0
 * @category selections
 */
export const dedicated = (dir: string, options?: SelectionOptions): Selection => ({
  _tag: "Dedicated",
  dir,
  root: options?.root,
  options: resolve(options)
})

/**
 * The native profile, cloned under `root`.
 *
 * @example
 * ```ts
 * import * as NodeContext from "@effect/platform-node/NodeContext"
 * import { Agent } from "@tether/core"
 * import { Claude } from "@tether/drivers"
 * import { Gateway } from "@tether/gateway"
 * import { Profile } from "@tether/profile"
 * import { Toolkit } from "@tether/tool"
 * import { Effect } from "effect"
 *
 * // The native profile cloned under a root of your choice; the CLI's sessions kept in a store that
 * // outlives the clone.
 * const program = Agent.make({
 *   driver: Claude.driver(),
 *   definition: { instructions: "", tools: Toolkit.empty },
 *   workspace: "/srv/repo",
 *   profile: Profile.cloneNative("/var/tmp/agent-clones", { sessions: "/srv/sessions" })
 * }).pipe(Effect.scoped, Effect.provide([Gateway.layer(), NodeContext.layer]))
 * ```
 *
 * @since 0.1.0
 * @category selections
 */
export const cloneNative = (root: string, options?: CloneOptions): Selection => ({
  _tag: "CloneNative",
  root,
  options: resolve(options)
})

/**
 * The profile at `source` (which must exist), cloned under `root`.
 *
 * @example
 * ```ts
 * import * as NodeContext from "@effect/platform-node/NodeContext"
 * import { Agent } from "@tether/core"
 * import { Claude } from "@tether/drivers"
 * import { Gateway } from "@tether/gateway"
 * import { Profile } from "@tether/profile"
 * import { Toolkit } from "@tether/tool"
 * import { Effect } from "effect"
 *
 * // A prepared profile (its settings, skills and login) cloned for each agent; `auth: copy` copies
 * // the credentials instead of linking them.
 * const program = Agent.make({
 *   driver: Claude.driver(),
 *   definition: { instructions: "", tools: Toolkit.empty },
 *   workspace: "/srv/repo",
 *   profile: Profile.cloneFrom("/srv/profiles/claude", "/var/tmp/agent-clones", { auth: "copy" })
 * }).pipe(Effect.scoped, Effect.provide([Gateway.layer(), NodeContext.layer]))
 * ```
 *
 * @since 0.1.0
 * @category selections
 */
export const cloneFrom = (source: string, root: string, options?: CloneOptions): Selection => ({
  _tag: "CloneFrom",
  source,
  root,
  options: resolve(options)
})

/**
 * Options of `ExecutionProfile.materialize`.
 *
 * @since 0.2.0
 * @category models
 */
export interface MaterializeOptions {
  /** Rewrite an entry this clone materialized that was changed since, instead of failing. */
  readonly replaceChanged?: boolean
}

/**
 * A file a driver writes into the clone: `path` is relative to the profile directory,
 * `/` separated, without `..`; `mode` defaults to `0o600`.
 *
 * @since 0.1.0
 * @category models
 */
export interface MaterializedFile {
  readonly path: string
  readonly content: string | Uint8Array
  readonly mode?: number
}

/**
 * Who a clone belongs to. `identity` overrides the default identity (`<provider>:<source>`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Owner {
  readonly agentId: string
  readonly identity?: string
  /**
   * Whether closing the clone saves its changed session entries to the store (default `true`).
   * An owner that saves what it needs itself (`saveSession` after each turn it wants to keep)
   * turns it off, so that nothing else (another run's transcript) is ever persisted.
   *
   * @since 0.2.0
   */
  readonly saveSessionsOnClose?: boolean
  /**
   * Applied to the content of every session entry before it is written to the session store
   * (e.g. scrubbing credentials a CLI printed into its transcript). Absent: copied unchanged.
   *
   * @since 0.2.0
   */
  readonly redactSession?: (content: Uint8Array) => Uint8Array
}

/**
 * What one save of session entries did (relative paths, sorted).
 *
 * @since 0.2.0
 * @category models
 */
export interface SessionSync {
  /** Entries written to the store: new in the clone or changed since seeding or the last save. */
  readonly saved: ReadonlyArray<string>
  /** Entries the clone deleted, removed from the store (unless another clone changed them since). */
  readonly removed: ReadonlyArray<string>
}

/**
 * What one load of a session's entries from the store did (relative paths, sorted).
 *
 * @since 0.4.0
 * @category models
 */
export interface SessionLoad {
  /** Entries written into the clone: missing there, or different from the store's copy. */
  readonly loaded: ReadonlyArray<string>
  /** Entries of the session the clone had and the store does not, removed from the clone. */
  readonly removed: ReadonlyArray<string>
}

/**
 * A live execution clone, valid until its scope closes.
 *
 * @since 0.1.0
 * @category models
 */
export interface ExecutionProfile {
  /** The clone directory (`<root>/<random>`) holding the profile and its siblings. */
  readonly root: string
  /** Absolute profile directory: the value of the layout's selector variables. */
  readonly dir: string
  /** Absolute sibling directories by layout name (each empty and 0700 at creation). */
  readonly siblings: { readonly [name: string]: string }
  /** Each selector variable mapped to `dir`. */
  readonly env: { readonly [name: string]: string }
  /** Absolute source profile path (never written). */
  readonly source: string
  /**
   * Stable across clones of one source: `owner.identity` or `<provider>:<canonical source>`. A
   * native source not yet created is taken where it will be, through symlinked ancestors: its
   * identity does not change once it exists.
   */
  readonly identity: string
  /**
   * sha256 (hex) over the copied settings, MCP declarations and skills (relative path, class,
   * content); never auth: rotating a linked or copied auth file does not change it.
   */
  readonly fingerprint: string
  /**
   * Writes files into the clone, recording each in the ownership manifest (owner + content
   * sha256). An entry brought from the source (copy or auth link) is replaced, never written
   * through. Fails with `ProfileCollision` before writing anything when an entry exists that
   * the clone does not own (`Unowned`), a previously materialized entry was changed
   * (`UserModified`), or a parent is a symlink (`ThroughLink`, also when the clone's own root or
   * profile directory was replaced by one); with `ProfileError`
   * (`InvalidPath`) for absolute paths, `..`, empty or duplicate paths, or a path that is also
   * the parent directory of another path of the batch; with `ProfileError` (`CloneClosed`)
   * after the clone's scope closed. Calls on one clone run one at a time.
   *
   * With `replaceChanged`, an entry this clone materialized that was changed since (by the CLI
   * the clone serves) is written anew instead of failing `UserModified`.
   */
  readonly materialize: (
    files: ReadonlyArray<MaterializedFile>,
    options?: MaterializeOptions
  ) => Effect.Effect<void, ProfileError | ProfileCollision>
  /**
   * The identity's session store (`<sessions root>/<sha256(identity) prefix>`), or `undefined`
   * when the layout declares no session entries or the selection set `sessions: false`. The
   * directory is made by the identity's first save that has an entry to store: a clone that never
   * saves one leaves nothing under the sessions root.
   *
   * @since 0.2.0
   */
  readonly sessions: string | undefined
  /**
   * Copies the clone's session entries that changed since they were seeded or last saved into
   * the store, each through a temporary file and a rename (a concurrent clone of the same
   * identity reads either the old or the new file, never a torn one; the last writer wins per
   * file); entries the clone deleted are removed from the store unless another clone changed
   * them since. Also runs when the clone closes, before removal. A no-op without a store; fails
   * with `ProfileError` (`CloneClosed`) after the scope closed, `Io` on a file system error.
   * Runs one at a time with `materialize`.
   *
   * @since 0.2.0
   */
  readonly saveSessions: Effect.Effect<SessionSync, ProfileError>
  /**
   * `saveSessions` restricted to one provider session: its own entries and the shared ones
   * (`ProfileLayout.sessionOf`); entries of other sessions are neither saved nor removed. With a
   * layout that cannot tell sessions apart, the same as `saveSessions`.
   *
   * @since 0.2.0
   */
  readonly saveSession: (session: string) => Effect.Effect<SessionSync, ProfileError>
  /**
   * The store's copy of one provider session's own entries (`ProfileLayout.sessionOf`; shared
   * entries are left as they are) into the clone: an entry missing in the clone or different from
   * the store's is written (a temporary file and a rename, never through a link), and the
   * session's entries the store does not have are removed from the clone, unless the store has
   * none of the session at all (then nothing changes). What the clone holds of the session is then
   * what was last saved to the store by any clone of the identity: for a resume by one host of a
   * session another host continued since this clone was made, or of a session a failed turn of
   * this clone wrote past its last save. Call it only while no process of the clone uses the
   * session. A no-op without a store; fails like `saveSessions`.
   *
   * @since 0.4.0
   */
  readonly loadSession: (session: string) => Effect.Effect<SessionLoad, ProfileError>
  /**
   * Removes the entries of these provider sessions from the store and from the clone (shared
   * entries are kept); returns the removed entries, relative to the profile. A no-op without a
   * store or when the layout cannot tell sessions apart.
   *
   * @since 0.2.0
   */
  readonly dropSessions: (sessions: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string>, ProfileError>
  /**
   * Removes from the store the entries of any session not in `keep` that were last saved more than
   * `olderThan` ago (shared entries are kept); returns the removed entries.
   *
   * @since 0.2.0
   */
  readonly pruneSessions: (options: {
    readonly olderThan: Duration.DurationInput
    readonly keep?: ReadonlyArray<string>
  }) => Effect.Effect<ReadonlyArray<string>, ProfileError>
}

/**
 * A profile operation failed: `SourceMissing` (the source profile does not exist), `InvalidPath`,
 * `UnsafeRoot` (the clone root is not a private directory of this user, or a clone root or
 * session store is inside the source profile), `CloneClosed` (the clone
 * was used after its release) or `Io`, with the path concerned.
 *
 * @since 0.1.0
 * @category errors
 */
export class ProfileError extends Schema.TaggedError<ProfileError>("@tether/profile/ProfileError")("ProfileError", {
  reason: Schema.Literal("SourceMissing", "InvalidPath", "UnsafeRoot", "CloneClosed", "Io"),
  path: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return `${this.reason}: ${this.path}: ${this.detail}`
  }
}

/**
 * A dedicated profile already used by a live agent of this process.
 *
 * @since 0.1.0
 * @category errors
 */
export class ProfileInUse extends Schema.TaggedError<ProfileInUse>("@tether/profile/ProfileInUse")("ProfileInUse", {
  dir: Schema.String,
  agentId: Schema.String
}) {
  override get message(): string {
    return `profile ${this.dir} is in use by agent ${this.agentId}`
  }
}

/**
 * An entry the clone must not overwrite. `Reserved`: a source entry sits at a name the layout
 * reserves for the driver.
 *
 * @since 0.1.0
 * @category errors
 */
export class ProfileCollision
  extends Schema.TaggedError<ProfileCollision>("@tether/profile/ProfileCollision")("ProfileCollision", {
    reason: Schema.Literal("Reserved", "Unowned", "UserModified", "ThroughLink"),
    path: Schema.String
  })
{
  override get message(): string {
    return `${this.reason}: ${this.path}`
  }
}

/**
 * Every failure of acquiring an execution profile.
 *
 * @since 0.1.0
 * @category errors
 */
export type ProfileFailure = ProfileError | ProfileInUse | ProfileCollision

/**
 * `<os.tmpdir()>/tether-clones-<uid>`.
 *
 * @since 0.1.0
 * @category utils
 */
export const defaultRoot = (): string => internal.defaultRoot()

/**
 * The default directory of session stores: persistent per-user state,
 * `$XDG_STATE_HOME/tether/sessions` (when that variable is an absolute path), else
 * `~/.local/state/tether/sessions`. Checked like `defaultRoot()` (a plain 0700 directory owned by
 * this user); created when first used.
 *
 * @since 0.2.0
 * @category utils
 */
export const defaultSessionsRoot = (): string => internal.defaultSessionsRoot()

/**
 * Acquires an execution clone of `selection` for `owner`. Clones left by dead owners under the
 * same root are reclaimed first (once per root per process; one that cannot be removed is a
 * logged warning, not a failure; the source profile is never removed, whatever its name). An
 * acquisition that fails or is interrupted removes what it created and releases a `dedicated`
 * source at once. The clone is removed when the scope closes (including failure
 * and interruption), directories the CLI made read-only included, except materialized entries
 * that were changed after being written: those are kept and the clone is marked retained. A
 * clone whose removal fails is logged and keeps its marker (removed last), so a later host
 * reclaims it once this one is gone.
 *
 * @since 0.1.0
 * @category constructors
 */
export const clone: (
  selection: Selection,
  layout: ProfileLayout,
  owner: Owner
) => Effect.Effect<ExecutionProfile, ProfileFailure, Scope.Scope | FileSystem.FileSystem | Path.Path> = (
  selection,
  layout,
  owner
) => internal.clone(selection, layout, owner)

/**
 * Where `reclaim` looks (default `defaultRoot()`) and how old a clone without a readable marker
 * must be before it is removed.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReclaimOptions {
  readonly root?: string
  /**
   * Directories without a readable marker are removed only when older than this (default 10 min),
   * and only when they hold nothing but what a clone holds (directories, its marker, its manifest).
   */
  readonly unmarkedGraceMillis?: number
}

/**
 * Removes the clones under a root (default `defaultRoot()`) whose marker names an owner process
 * that is no longer alive (pid + start time, so a reused pid does not keep a clone alive; an
 * owner of an earlier boot is dead). An owner in another PID namespace (a container sharing the
 * root) cannot be checked from here and counts as alive. Retained clones and clones of live
 * owners are left alone. A directory without a readable marker (a clone whose creation was killed)
 * is removed past `unmarkedGraceMillis` if it holds nothing a clone does not: a user's directory
 * named like a clone is never removed. Returns the removed directories; a
 * clone that cannot be removed is a logged warning and stays, with its marker. Fails only when
 * the root cannot be read.
 *
 * @since 0.1.0
 * @category reclaim
 */
export const reclaim: (
  options?: ReclaimOptions
) => Effect.Effect<ReadonlyArray<string>, ProfileError, FileSystem.FileSystem | Path.Path> = (options) =>
  internal.reclaim(options)

/**
 * One entry of the source profile that the layout declares (settings, MCP, skills, auth), as
 * `inspect` sees it.
 *
 * @since 0.1.0
 * @category models
 */
export interface DeclaredEntry {
  readonly path: string
  readonly class: EntryClass
  readonly kind: "file" | "symlink"
  /** Whether the entry sits at a reserved name (cloning it would fail). */
  readonly reserved: boolean
}

/**
 * A file written into a clone (instructions, MCP configuration) and whether it is still as
 * written.
 *
 * @since 0.1.0
 * @category models
 */
export interface MaterializedEntry {
  readonly path: string
  readonly owner: string
  readonly sha256: string
  readonly state: "intact" | "modified" | "missing"
}

/**
 * One clone found under the root by `inspect`: its owner (agent id, pid, whether it is alive),
 * whether it is retained, and its materialized files.
 *
 * @since 0.1.0
 * @category models
 */
export interface CloneReport {
  readonly root: string
  readonly agentId: string
  readonly pid: number
  readonly alive: boolean
  readonly retained: boolean
  readonly materialized: ReadonlyArray<MaterializedEntry>
}

/**
 * What `inspect` reports about a selection, read-only: the source profile's declared entries and
 * the clones of it under the root.
 *
 * @since 0.1.0
 * @category models
 */
export interface Inspection {
  readonly source: string
  readonly exists: boolean
  readonly identity: string
  /** Source entries in a declared class, sorted by path. */
  readonly declared: ReadonlyArray<DeclaredEntry>
  /** Clones of this source found under the selection's root, as observed on disk. */
  readonly clones: ReadonlyArray<CloneReport>
}

/**
 * Describes what the layout declares in the selection's source and what is materialized in
 * the clones of that source under the selection's root, only as observed on disk. Reads only.
 *
 * @since 0.1.0
 * @category inspect
 */
export const inspect: (
  selection: Selection,
  layout: ProfileLayout
) => Effect.Effect<Inspection, ProfileError, FileSystem.FileSystem | Path.Path> = (selection, layout) =>
  inspection.inspect(selection, layout)
