/**
 * What a driver declares about its provider's configuration directory.
 *
 * @since 0.1.0
 */

/**
 * Glob patterns, relative to the profile root (`*`, `**`, `?`; `/` separated).
 *
 * @since 0.1.0
 * @category models
 */
export type Globs = ReadonlyArray<string>

/**
 * @since 0.1.0
 * @category models
 */
export interface ProfileLayout {
  /** Provider name, e.g. `claude`. */
  readonly provider: string
  /** Environment variable(s) that select the directory, e.g. `["CLAUDE_CONFIG_DIR"]`. */
  readonly selectorEnv: ReadonlyArray<string>
  /** The native default location, from the host's environment (e.g. `$HOME/.claude`). */
  readonly nativeDefault: (env: { readonly [name: string]: string | undefined }) => string
  /** Which entries are settings, MCP declarations, skills and authentication. */
  readonly classes: {
    readonly settings: Globs
    readonly mcp: Globs
    readonly skills: Globs
    readonly auth: Globs
  }
  /** Entries the driver materializes itself: a source entry at one of these is a typed error. */
  readonly reserved: Globs
  /** Sibling directories the provider needs beside its profile (e.g. `home`, `tmp`). */
  readonly siblings: ReadonlyArray<string>
}
