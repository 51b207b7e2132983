/**
 * The reserved hosted tool `read_skill`: lists the agent's skills and reads a skill's
 * `SKILL.md` or another of its files, from the snapshot taken at construction.
 *
 * @internal
 */
import * as Tool from "@tether/tool/Tool"
import * as Toolkit from "@tether/tool/Toolkit"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type * as Skill from "../Skill.js"
import { skillFile } from "./skill.js"

/** @internal */
export const name = "read_skill" as const

const Summary = Schema.Struct({
  name: Schema.String,
  description: Schema.String,
  files: Schema.Array(Schema.String)
})

const Output = Schema.Struct({
  skills: Schema.optional(Schema.Array(Summary)),
  skill: Schema.optional(Schema.String),
  path: Schema.optional(Schema.String),
  content: Schema.optional(Schema.String)
})

const Input = {
  skill: Schema.optional(Schema.String).annotations({
    description: "The skill to read; omit to list every skill."
  }),
  path: Schema.optional(Schema.String).annotations({
    description: `A file of the skill, relative to its root (default ${skillFile}).`
  })
}

const describeTool = (skills: ReadonlyArray<Skill.Loaded>): string =>
  [
    "Lists and reads this agent's skills (folders of instructions for specific tasks).",
    "Call with no arguments to list them, with `skill` to read its SKILL.md, and with `skill`",
    "and `path` to read another file of that skill. Read a skill before doing the task it covers.",
    "",
    "Skills:",
    ...skills.map((skill) => `- ${skill.name}${skill.description === "" ? "" : `: ${skill.description}`}`)
  ].join("\n")

/** @internal */
export const makeTool = (skills: ReadonlyArray<Skill.Loaded>) =>
  Tool.make(name, {
    description: describeTool(skills),
    input: Input,
    output: Output,
    title: "Read skill",
    revision: "read_skill/v1",
    annotations: { readOnly: true, idempotent: true, openWorld: false }
  })

/**
 * `undefined` unless `path` is a plain relative path: no empty, `.` or `..` segment, no leading
 * `/`, no backslash, no NUL. Nothing outside a skill can be named.
 *
 * @internal
 */
export const normalizePath = (path: string): string | undefined => {
  if (path === "" || path.length > 1024 || path.startsWith("/") || /[\\\0]/.test(path)) return undefined
  const segments = path.split("/")
  return segments.some((segment) => segment === "" || segment === "." || segment === "..")
    ? undefined
    : segments.join("/")
}

/** @internal */
export const handler = (skills: ReadonlyArray<Skill.Loaded>) => {
  const byName = new Map(skills.map((skill) => [skill.name, skill]))
  const list = skills.map((skill) => ({
    name: skill.name,
    description: skill.description,
    files: skill.files.map((file) => file.path)
  }))
  return (input: { readonly skill?: string | undefined; readonly path?: string | undefined }) =>
    Effect.gen(function*() {
      if (input.skill === undefined) {
        if (input.path !== undefined) {
          return yield* Tool.reject("invalid_arguments", "Give `skill` together with `path`.")
        }
        return { skills: list }
      }
      const skill = byName.get(input.skill)
      if (skill === undefined) {
        return yield* Tool.reject(
          "unknown_skill",
          `There is no skill named ${
            JSON.stringify(input.skill.slice(0, 64))
          }. Call read_skill without arguments to list the skills.`
        )
      }
      const path = normalizePath(input.path ?? skillFile)
      if (path === undefined) {
        return yield* Tool.reject(
          "invalid_path",
          "The path must be relative to the skill's root, without `..`, `.` or empty segments."
        )
      }
      const file = skill.files.find((candidate) => candidate.path === path)
      if (file === undefined) {
        return yield* Tool.reject(
          "not_found",
          `Skill ${skill.name} has no file ${JSON.stringify(path)}. Its files: ${
            skill.files.map((f) => f.path).join(", ")
          }.`.slice(0, 4096)
        )
      }
      return { skill: skill.name, path, content: file.content }
    })
}

/**
 * The `read_skill` toolkit of these skills and the handler services it needs.
 *
 * @internal
 */
export const make = (skills: ReadonlyArray<Skill.Loaded>) => {
  const tool = makeTool(skills)
  const toolkit = Toolkit.make(tool)
  return {
    toolkit,
    context: toolkit.toContext({ [name]: handler(skills) })
  }
}
