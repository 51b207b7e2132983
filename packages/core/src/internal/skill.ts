/**
 * Skills: the pure constructors, the snapshot taken at construction (every file read once,
 * bounded, UTF-8 text only) and the content digest the thread fingerprint covers.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Predicate from "effect/Predicate"
import { constants as NodeFsConstants } from "node:fs"
import * as NodeFs from "node:fs/promises"
import * as NodePath from "node:path"
import * as Yaml from "yaml"
import type * as Skill from "../Skill.js"
import { SkillError } from "../Skill.js"
import { sha256 } from "./hash.js"

/** The same symbol as `Skill.TypeId` (defined there; read here without an evaluation-time import). @internal */
export const TypeId: typeof Skill.TypeId = Symbol.for("@tether/core/Skill") as typeof Skill.TypeId

/** @internal */
export const skillFile = "SKILL.md"

/** @internal */
export const limits = {
  files: 256,
  fileBytes: 1024 * 1024,
  totalBytes: 8 * 1024 * 1024,
  descriptionChars: 1024
} as const

const namePattern = /^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$/

/** @internal */
export const isValidName = (name: string): boolean => namePattern.test(name)

const Proto = {
  [TypeId]: TypeId,
  toJSON(this: Skill.Skill) {
    return { _id: "@tether/core/Skill", ...this }
  }
}

/** @internal */
export const isSkill = (u: unknown): u is Skill.Skill => Predicate.hasProperty(u, TypeId)

/** @internal */
export const dir = (path: string, options?: { readonly name?: string | undefined }): Skill.Skill =>
  Object.freeze(Object.assign(Object.create(Proto), {
    _tag: "Dir" as const,
    // A path that is not a string (a JavaScript caller's unset variable) is refused when the agent
    // is built (`NotFound`), never thrown here.
    name: options?.name ?? (typeof path === "string" ? NodePath.basename(path) : String(path)),
    path
  }))

/** @internal */
export const inline = (name: string, markdown: string): Skill.Skill =>
  Object.freeze(Object.assign(Object.create(Proto), { _tag: "Inline" as const, name, markdown }))

const error = (skill: string, reason: SkillError["reason"], detail: string) => new SkillError({ skill, reason, detail })

const isMapping = (u: unknown): u is { readonly [key: string]: unknown } =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/** @internal */
export const frontMatter = (markdown: string): Either.Either<Skill.FrontMatter | undefined, string> => {
  const lines = markdown.replace(/^\uFEFF/, "").split(/\r?\n/)
  if (lines[0]?.trimEnd() !== "---") return Either.right(undefined)
  const end = lines.findIndex((line, i) => i > 0 && (line.trimEnd() === "---" || line.trimEnd() === "..."))
  if (end < 0) return Either.right(undefined)
  // `merge`: the CLIs' readers apply `<<` merge keys (Claude Code's Bun.YAML does): a key merged
  // in is one the CLI sees.
  const document = Yaml.parseDocument(lines.slice(1, end).join("\n"), { prettyErrors: false, merge: true })
  if (document.errors.length > 0) {
    return Either.left(`the front matter is not valid YAML: ${document.errors[0]!.message.split("\n")[0]}`)
  }
  let data: unknown
  try {
    data = document.toJS({ maxAliasCount: 100 }) ?? {}
  } catch (cause) {
    // An unresolved alias or an alias bomb is no parse error: `toJS` throws for it.
    return Either.left(
      `the front matter is not valid YAML: ${String((cause as Error)?.message ?? cause).split("\n")[0]}`
    )
  }
  if (!isMapping(data)) return Either.left("the front matter is not a YAML mapping")
  let indirect = false
  Yaml.visit(document, {
    Alias: () => {
      indirect = true
      return Yaml.visit.BREAK
    },
    Node: (_, node) => {
      if (node.anchor === undefined) return undefined
      indirect = true
      return Yaml.visit.BREAK
    },
    Pair: (_, pair) => {
      if (!(Yaml.isScalar(pair.key) && pair.key.value === "<<")) return undefined
      indirect = true
      return Yaml.visit.BREAK
    }
  })
  return Either.right({ data, body: lines.slice(end + 1).join("\n"), indirect })
}

/**
 * The `description` of a SKILL.md: the front matter's `description` when it is a non-empty
 * string, else the first non-heading line of the body. Fails when the front matter is invalid.
 *
 * @internal
 */
export const describe = (markdown: string): Either.Either<string, string> =>
  Either.map(frontMatter(markdown), (found) => {
    const described = found?.data["description"]
    if (typeof described === "string" && described.trim() !== "") {
      return described.trim().slice(0, limits.descriptionChars)
    }
    const body = found === undefined ? markdown.replace(/^\uFEFF/, "") : found.body
    const first = body.split(/\r?\n/).map((line) => line.trim()).find((line) => line !== "" && !line.startsWith("#"))
    return (first ?? "").slice(0, limits.descriptionChars)
  })

const decoder = new TextDecoder("utf-8", { fatal: true })

/**
 * Domain-separated SHA-256 over the name, the description and the sorted `(path, sha256)` of
 * every file: equal content gives an equal digest whatever the source directory.
 *
 * @internal
 */
export const digestOf = (
  name: string,
  description: string,
  files: ReadonlyArray<Skill.SkillContentFile>
): string => {
  const sorted = [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
  return sha256(
    "tether/skill/v1\u0000",
    JSON.stringify([name, description]),
    ...sorted.map((file) => `\u0000${JSON.stringify(file.path)}:${sha256(file.content)}`)
  )
}

const snapshot = (
  name: string,
  files: ReadonlyArray<Skill.SkillContentFile>,
  source: Skill.Loaded["source"]
): Effect.Effect<Skill.Loaded, SkillError> => {
  const main = files.find((file) => file.path === skillFile)
  if (main === undefined) {
    return Effect.fail(error(name, "MissingSkillFile", `${skillFile} is missing`))
  }
  const described = describe(main.content)
  if (Either.isLeft(described)) {
    return Effect.fail(error(name, "InvalidFrontMatter", `${skillFile}: ${described.left}`))
  }
  const description = described.right
  const sorted = [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
  return Effect.succeed(Object.freeze({
    name,
    description,
    source,
    digest: digestOf(name, description, sorted),
    files: Object.freeze(sorted.map((file) => Object.freeze({ path: file.path, content: file.content })))
  }))
}

const io = (skill: string, path: string) => (cause: unknown) =>
  error(skill, "Unreadable", `${path}: ${cause instanceof Error ? cause.message : String(cause)}`)

/**
 * A regular file's bytes, read through one descriptor: opened without following a final link
 * (nor blocking on a FIFO), checked to be a regular file within the size limit, then read. Where
 * `/proc` names the opened file, it must be `real` (no directory on the way was swapped for a
 * link): what was listed is what is read, even while the tree changes.
 */
const readRegular = (name: string, child: string, path: string, real: string) =>
  Effect.tryPromise({
    try: async (): Promise<Uint8Array | "TooLarge" | "Special" | "Moved"> => {
      const { O_NOFOLLOW, O_NONBLOCK, O_RDONLY } = NodeFsConstants
      const handle = await NodeFs.open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
      try {
        const info = await handle.stat()
        if (!info.isFile()) return "Special"
        if (info.size > limits.fileBytes) return "TooLarge"
        const opened = await NodeFs.readlink(`/proc/self/fd/${handle.fd}`).catch(() => undefined)
        if (opened !== undefined && opened !== real) return "Moved"
        const bytes = await handle.readFile()
        return bytes.byteLength > limits.fileBytes ? "TooLarge" : bytes
      } finally {
        await handle.close()
      }
    },
    catch: io(name, child)
  }).pipe(Effect.flatMap((read) =>
    read === "Special"
      ? Effect.fail(error(name, "Unreadable", `${child} is not a regular file or directory`))
      : read === "Moved"
      ? Effect.fail(error(name, "Unreadable", `${child} changed while the skill was read`))
      : Effect.succeed(read)
  ))

/** Every regular file under `root` (relative `/` paths); links and special files are refused. */
const readTree = (name: string, root: string) =>
  Effect.gen(function*() {
    // The path `/proc` gives an opened file (the root itself may be reached through a link).
    const realRoot = yield* Effect.tryPromise({ try: () => NodeFs.realpath(root), catch: io(name, root) })
    const files: Array<Skill.SkillContentFile> = []
    let total = 0
    const walk = (relative: string): Effect.Effect<void, SkillError> =>
      Effect.gen(function*() {
        const absolute = relative === "" ? root : NodePath.join(root, relative)
        const entries = yield* Effect.tryPromise({
          try: () => NodeFs.readdir(absolute, { withFileTypes: true }),
          catch: io(name, absolute)
        })
        entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
        for (const entry of entries) {
          const child = relative === "" ? entry.name : `${relative}/${entry.name}`
          if (entry.isDirectory()) {
            yield* walk(child)
          } else if (entry.isFile()) {
            if (files.length >= limits.files) {
              return yield* error(name, "TooLarge", `more than ${limits.files} files`)
            }
            // `read_skill` must be able to name every file it lists.
            if (entry.name.includes("\\") || child.length > 1024) {
              return yield* error(
                name,
                "Unreadable",
                `${child.slice(0, 200)}: a skill file's path has no backslash and at most 1024 characters`
              )
            }
            const bytes = yield* readRegular(name, child, NodePath.join(root, child), NodePath.join(realRoot, child))
            if (bytes === "TooLarge") {
              return yield* error(name, "TooLarge", `${child} is larger than ${limits.fileBytes} bytes`)
            }
            total += bytes.byteLength
            if (total > limits.totalBytes) {
              return yield* error(name, "TooLarge", `the files exceed ${limits.totalBytes} bytes in total`)
            }
            const content = yield* Effect.try({
              try: () => decoder.decode(bytes),
              catch: () => error(name, "Unreadable", `${child} is not UTF-8 text`)
            })
            files.push({ path: child, content })
          } else {
            // A link could point anywhere on the host; a socket or FIFO could block the read.
            return yield* error(name, "Unreadable", `${child} is not a regular file or directory`)
          }
        }
      })
    yield* walk("")
    return files
  })

/**
 * Reads a skill once: its name is checked, a directory skill's tree is snapshotted. Later
 * changes on disk never reach the agent.
 *
 * @internal
 */
export const load = (skill: Skill.Skill): Effect.Effect<Skill.Loaded, SkillError> =>
  Effect.gen(function*() {
    if (typeof skill.name !== "string" || !isValidName(skill.name)) {
      return yield* error(
        String(skill.name).slice(0, 80),
        "InvalidName",
        "a skill name is 1-64 lowercase letters, digits and inner hyphens (pass `{ name }` to rename a folder)"
      )
    }
    if (skill._tag === "Inline") {
      if (typeof skill.markdown !== "string" || skill.markdown.trim() === "") {
        return yield* error(skill.name, "MissingSkillFile", "the inline skill's markdown is empty")
      }
      if (Buffer.byteLength(skill.markdown) > limits.fileBytes) {
        return yield* error(skill.name, "TooLarge", `the markdown is larger than ${limits.fileBytes} bytes`)
      }
      return yield* snapshot(skill.name, [{ path: skillFile, content: skill.markdown }], "inline")
    }
    if (typeof skill.path !== "string" || !NodePath.isAbsolute(skill.path)) {
      return yield* error(skill.name, "NotFound", "a skill directory must be an absolute path")
    }
    const info = yield* Effect.tryPromise({ try: () => NodeFs.stat(skill.path), catch: () => undefined }).pipe(
      Effect.orElseSucceed(() => undefined)
    )
    if (info === undefined) return yield* error(skill.name, "NotFound", `no directory at ${skill.path}`)
    if (!info.isDirectory()) return yield* error(skill.name, "NotFound", `${skill.path} is not a directory`)
    const files = yield* readTree(skill.name, skill.path)
    return yield* snapshot(skill.name, files, "dir")
  })

/** @internal */
export { sha256 }
