/**
 * What a driver declares about its provider's configuration directory.
 *
 * @since 0.1.0
 */
import * as glob from "./internal/glob.js"

/**
 * Glob patterns, relative to the profile root (`*`, `**`, `?`; `/` separated). A pattern that
 * matches a directory covers its whole subtree (`skills` is the same as `skills/**`).
 *
 * @since 0.1.0
 * @category models
 */
export type Globs = ReadonlyArray<string>

/**
 * The class of a profile entry. `auth` entries are never part of a fingerprint.
 *
 * @since 0.1.0
 * @category models
 */
export type EntryClass = "settings" | "mcp" | "skills" | "auth"

/**
 * How one provider keeps its profile: the variables that select the directory, its native
 * location, and which entries are settings, MCP configuration, skills or credentials. A driver
 * exports its layout; the profile module clones by it.
 *
 * @since 0.1.0
 * @category models
 */
export interface ProfileLayout {
  /** Provider name, e.g. `claude`. Part of the stable profile identity. */
  readonly provider: string
  /**
   * Environment variable(s) that select the directory, e.g. `["CLAUDE_CONFIG_DIR"]`. An execution
   * clone sets each of them to the clone's profile directory (`ExecutionProfile.env`).
   */
  readonly selectorEnv: ReadonlyArray<string>
  /** The native default location, from the host's environment (e.g. `$HOME/.claude`). */
  readonly nativeDefault: (env: { readonly [name: string]: string | undefined }) => string
  /**
   * Which entries are settings, MCP declarations, skills and authentication (brought from the
   * source) and sessions (brought from the session store). Entries that match none of them
   * (caches, logs) are never brought into a clone. When an entry matches
   * several classes, `auth` wins, then `mcp`, `settings`, `skills`.
   */
  readonly classes: {
    readonly settings: Globs
    readonly mcp: Globs
    readonly skills: Globs
    readonly auth: Globs
    /**
     * The provider's session entries (transcripts, rollouts, the index it needs to resume), e.g.
     * `projects/**` for Claude. They are never brought from the source profile and never part
     * of a fingerprint: an execution clone seeds them from its identity's session store and
     * saves them back (`ExecutionProfile.saveSessions`, and at close), so a thread resumes in a
     * later clone. An entry that also matches another class or a reserved name is not a session
     * entry. Default: none.
     *
     * @since 0.2.0
     */
    readonly sessions?: Globs
  }
  /**
   * For a session entry that belongs to one provider session alone (its transcript, its rollout),
   * the session id that entry carries, or the part of it the provider writes into the path (at
   * least 8 characters, e.g. Gemini's `session-<time>-<first 8 characters>.json`); `undefined` for
   * entries the sessions share (an index, a project map). Session stores keep a thread's own
   * entries plus the shared ones, and drop a session's entries when its thread is deleted or
   * pruned. Absent: every entry counts as shared (saved after every turn, never dropped).
   *
   * @since 0.2.0
   */
  readonly sessionOf?: (path: string) => string | undefined
  /**
   * Entries the driver materializes itself. A source entry that would be brought into the clone
   * at one of these paths fails the clone with `ProfileCollision` (reason `Reserved`) before launch.
   */
  readonly reserved: Globs
  /**
   * Sibling directories the provider needs beside its profile (e.g. `home`, `tmp`): each clone
   * gets a fresh, empty 0700 directory per name, outside the profile directory (Codex needs
   * `TMPDIR` outside `CODEX_HOME`).
   */
  readonly siblings: ReadonlyArray<string>
  /**
   * Files the provider writes for one process alone that nothing reads once it is gone: its
   * per-process logs (Claude Code's MCP server log per run). Keyed by where they are, `profile`
   * or a sibling's name, each with globs relative to that directory. An agent removes such files,
   * once scrubbed, when no process of its own is running: the file names cannot tell which
   * process a log is, so one is never removed while any process might still be writing it.
   * Default: none (a long-lived agent's clone then keeps one per process).
   *
   * @since 0.3.0
   */
  readonly logs?: { readonly [directory: string]: Globs }
}

/**
 * Checks a layout at construction (returns it unchanged): a convenience for drivers so a layout
 * literal is type-checked against the interface without widening.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <const L extends ProfileLayout>(layout: L): L => layout

/**
 * The class of the entry at `path` (relative, `/` separated), or `undefined` when the layout
 * does not declare it.
 *
 * @since 0.1.0
 * @category utils
 */
export const classify = (layout: ProfileLayout, path: string): EntryClass | undefined => {
  const { auth, mcp, settings, skills } = layout.classes
  if (glob.matches(auth, path)) return "auth"
  if (glob.matches(mcp, path)) return "mcp"
  if (glob.matches(settings, path)) return "settings"
  if (glob.matches(skills, path)) return "skills"
  return undefined
}

/**
 * Whether `path` (relative, `/` separated) is one of the layout's reserved entries.
 *
 * @since 0.1.0
 * @category utils
 */
export const isReserved = (layout: ProfileLayout, path: string): boolean => glob.matches(layout.reserved, path)

/**
 * Whether `patterns` match `path` (relative, `/` separated) or one of its ancestors.
 *
 * @since 0.1.0
 * @category utils
 */
export const matches = (patterns: Globs, path: string): boolean => glob.matches(patterns, path)

/**
 * Whether `path` (relative, `/` separated) matches the layout's `sessions` globs.
 *
 * @since 0.2.0
 * @category utils
 */
export const isSession = (layout: ProfileLayout, path: string): boolean =>
  glob.matches(layout.classes.sessions ?? [], path)

/**
 * Whether the directory at `path` (relative, `/` separated) matches the layout's `sessions` globs
 * or may hold an entry below it that does: a walk looking for session entries enters no other.
 *
 * @since 0.3.0
 * @category utils
 */
export const mayHoldSessions = (layout: ProfileLayout, path: string): boolean =>
  glob.couldMatchBelow(layout.classes.sessions ?? [], path)

/**
 * Whether the session entry at `path` belongs to `session` alone (see `ProfileLayout.sessionOf`).
 * `undefined` when the entry is shared by the sessions (or the layout cannot tell).
 *
 * @since 0.2.0
 * @category utils
 */
export const sessionOwner = (layout: ProfileLayout, path: string): string | undefined => {
  const owner = layout.sessionOf?.(path)
  return owner === undefined || owner.length < 8 ? undefined : owner
}

/**
 * Whether an owner returned by `sessionOf` names `session`: the whole id, or a prefix of it of at
 * least 8 characters.
 *
 * @since 0.2.0
 * @category utils
 */
export const ownedBy = (owner: string, session: string): boolean =>
  owner === session || (owner.length >= 8 && session.startsWith(owner))
