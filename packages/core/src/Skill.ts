/**
 * Skills: named folders of instructions (`SKILL.md` plus any files it refers to) that an agent
 * carries in its definition. Attaching a skill installs the reserved hosted tool `read_skill`,
 * through which the model lists and reads them on every driver; drivers that can also project
 * skills natively into the execution clone do so from the same snapshot.
 *
 * @since 0.1.0
 */
import type * as Either from "effect/Either"
import * as Schema from "effect/Schema"
// The internal module imports this one back (for `SkillError`): nothing here reads it while
// the modules are being evaluated, only when called.
import * as internal from "./internal/skill.js"

/**
 * The brand of skill values (see `isSkill`).
 *
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("@tether/core/Skill") as never

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * A skill as declared: a directory holding `SKILL.md`, or inline markdown. Immutable data;
 * nothing is read or checked until the agent is built.
 *
 * @since 0.1.0
 * @category models
 */
export type Skill =
  | {
    readonly [TypeId]: TypeId
    readonly _tag: "Dir"
    readonly name: string
    /** Absolute path of the skill's directory. */
    readonly path: string
  }
  | {
    readonly [TypeId]: TypeId
    readonly _tag: "Inline"
    readonly name: string
    /** The content of its `SKILL.md`. */
    readonly markdown: string
  }

/**
 * One file of a skill: a `/`-separated path relative to the skill's root and its UTF-8 text.
 *
 * @since 0.1.0
 * @category models
 */
export interface SkillContentFile {
  readonly path: string
  readonly content: string
}

/**
 * The snapshot of a skill taken when the agent is built: every file read once (sorted by path,
 * `SKILL.md` among them), its description and its content digest. `read_skill` and every native
 * projection serve this snapshot, so later changes on disk never reach a running agent.
 *
 * @since 0.1.0
 * @category models
 */
export interface Loaded {
  readonly name: string
  /**
   * The front matter's `description` of `SKILL.md` (a YAML string, trimmed; block scalars and
   * quoting read as YAML reads them), else its first non-heading line.
   */
  readonly description: string
  readonly source: "dir" | "inline"
  /**
   * SHA-256 (hex) over the name, the description and every file's path and content: the part
   * of the thread compatibility fingerprint that covers this skill.
   */
  readonly digest: string
  readonly files: ReadonlyArray<SkillContentFile>
}

/**
 * A skill could not be loaded. Raised by `Agent.make` (wrapped in an `AgentConfigError`) before
 * any provider process starts.
 *
 * - `InvalidName`: not 1-64 lowercase letters, digits and inner hyphens;
 * - `NotFound`: the directory does not exist, is not a directory or is not an absolute path;
 * - `MissingSkillFile`: no `SKILL.md` at the root (or empty inline markdown);
 * - `Unreadable`: a file could not be read, is not UTF-8 text, is a link or special file (also one
 *   swapped in while the skill is read), or has a path `read_skill` cannot name (a backslash, over
 *   1024 characters);
 * - `TooLarge`: over 256 files, a file over 1 MiB, or over 8 MiB in total;
 * - `InvalidFrontMatter`: `SKILL.md` opens a front matter block that is not a YAML mapping (the
 *   CLIs would not load the skill natively either).
 *
 * @since 0.1.0
 * @category errors
 */
export class SkillError extends Schema.TaggedError<SkillError>("@tether/core/SkillError")("SkillError", {
  skill: Schema.String,
  reason: Schema.Literal("InvalidName", "NotFound", "MissingSkillFile", "Unreadable", "TooLarge", "InvalidFrontMatter"),
  detail: Schema.String
}) {
  override get message(): string {
    return `skill ${JSON.stringify(this.skill)}: ${this.reason}: ${this.detail}`
  }
}

/**
 * Whether a value is a skill built by this module's constructors.
 *
 * @since 0.1.0
 * @category guards
 */
export const isSkill = (u: unknown): u is Skill => internal.isSkill(u)

/**
 * A skill read from a directory that holds `SKILL.md`. Its name defaults to the directory's
 * last path segment; pass `{ name }` when the folder name is not a valid skill name.
 *
 * @since 0.1.0
 * @category constructors
 */
export const dir = (path: string, options?: { readonly name?: string | undefined }): Skill =>
  internal.dir(path, options)

/**
 * A skill given as markdown: it becomes the skill's `SKILL.md` (inline skills have no other
 * files).
 *
 * @since 0.1.0
 * @category constructors
 */
export const inline = (name: string, markdown: string): Skill => internal.inline(name, markdown)

/**
 * The YAML front matter of a `SKILL.md`: the mapping between a first line `---` and the next
 * line `---` (or `...`), and the markdown after it.
 *
 * @since 0.2.0
 * @category models
 */
export interface FrontMatter {
  /** The mapping, with aliases resolved and YAML merge keys (`<<`) applied, as the CLIs read it. */
  readonly data: { readonly [key: string]: unknown }
  readonly body: string
  /**
   * Whether the block uses anchors, aliases or merge keys: a reader that resolves them otherwise
   * (or not at all) can see other keys than `data` holds. A driver that must know exactly which
   * keys its CLI sees writes such a block anew from `data`.
   *
   * @since 0.4.0
   */
  readonly indirect: boolean
}

/**
 * Reads the front matter of a `SKILL.md` with a YAML parser (the one reader core and the
 * drivers share), applying YAML merge keys as Claude Code's reader does. `Right(undefined)`: the
 * markdown has no front matter block; `Left(detail)`: the block is not valid YAML or not a mapping.
 *
 * @since 0.2.0
 * @category loading
 */
export const frontMatter = (markdown: string): Either.Either<FrontMatter | undefined, string> =>
  internal.frontMatter(markdown)
