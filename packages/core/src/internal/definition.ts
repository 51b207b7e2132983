/**
 * The agent definition (instructions, skills, tools, MCP sources): validated against the
 * driver's capabilities and the reserved names, snapshotted, and frozen deep before anything
 * else happens at construction.
 *
 * @internal
 */
import type * as Catalog from "@tether/tool/Catalog"
import type { ToolDefinitionError } from "@tether/tool/Tool"
import * as Toolkit from "@tether/tool/Toolkit"
import * as Effect from "effect/Effect"
import * as NodePath from "node:path"
import { AgentConfigError, UnsupportedCapability } from "../AgentError.js"
import type * as Driver from "../Driver.js"
import type * as Mcp from "../Mcp.js"
import { McpSourceError } from "../Mcp.js"
import type * as Skill from "../Skill.js"
import * as McpInternal from "./mcp.js"
import * as ReadSkill from "./readSkill.js"
import * as SkillInternal from "./skill.js"

/** What the host passed. @internal */
export interface Input {
  readonly instructions: string
  readonly skills?: ReadonlyArray<Skill.Skill> | undefined
  readonly tools: Toolkit.Any
  readonly mcp?: ReadonlyArray<Mcp.Source> | undefined
}

/** What the definition is checked against. @internal */
export interface Rules {
  readonly driver: string
  readonly capabilities: Driver.Capabilities
  /** The reserved MCP server key of the hosted tools. */
  readonly hostedKey: string
  /**
   * `true` for an environment name that could collide with the gateway's per-registration
   * token variable (or another variable the library sets); the `TETHER_` prefix is always
   * refused besides.
   */
  readonly reservedVariable: (name: string) => boolean
}

/** The deep-frozen read-only view of a definition. @internal */
export interface View {
  readonly instructions: string
  readonly skills: ReadonlyArray<Skill.Skill>
  readonly tools: Toolkit.Any
  readonly mcp: ReadonlyArray<Mcp.Source>
}

/** @internal */
export interface Validated {
  readonly view: View
  /** The snapshots of the skills, by name. */
  readonly skills: ReadonlyArray<Skill.Loaded>
  /** The catalog of the direct tools (without `read_skill`). */
  readonly catalog: Catalog.Catalog
}

/** Freezes `value` and everything reachable from it (own enumerable properties). @internal */
export const deepFreeze = <A>(value: A): A => {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key])
  }
  return value
}

const invalid = (detail: string, cause?: unknown) =>
  new AgentConfigError({ reason: "InvalidDefinition", detail, ...(cause === undefined ? {} : { cause }) })

// Never the URL, headers or env: they may carry credentials.
const describeSource = (source: Mcp.Source, index: number): string =>
  `mcp[${index}] ${JSON.stringify(String(source.key).slice(0, 80))} (${String(source._tag).slice(0, 16)})`

/** A copy of a source that shares nothing with the caller's object. */
const copySource = (source: Mcp.Source): Mcp.Source => {
  const tools = source.tools === undefined ? {} : { tools: [...source.tools] }
  return source._tag === "stdio"
    ? {
      _tag: "stdio",
      key: source.key,
      command: source.command,
      args: [...source.args],
      env: { ...source.env },
      ...tools
    }
    : {
      _tag: source._tag,
      key: source.key,
      url: source.url,
      headers: { ...source.headers },
      bearerTokenEnv: source.bearerTokenEnv,
      ...tools
    }
}

const checkSources = (sources: ReadonlyArray<Mcp.Source>, rules: Rules) =>
  Effect.gen(function*() {
    const keys = new Map<string, number>()
    for (const [index, source] of sources.entries()) {
      const folded = source.key.toLowerCase()
      const previous = keys.get(folded)
      if (previous !== undefined) {
        const error = new McpSourceError({
          key: source.key,
          reason: "DuplicateKey",
          detail: `${describeSource(sources[previous]!, previous)} and ${describeSource(source, index)} share a key`
        })
        return yield* invalid(error.message, error)
      }
      keys.set(folded, index)
      if (!rules.capabilities.mcpTransports.includes(source._tag)) {
        return yield* new UnsupportedCapability({
          driver: rules.driver,
          capability: "mcpTransports",
          detail: `${describeSource(source, index)} uses the ${source._tag} transport`
        })
      }
    }
  })

const checkToolNames = (catalog: Catalog.Catalog, sources: ReadonlyArray<Mcp.Source>) =>
  Effect.gen(function*() {
    const owners = new Map<string, string>()
    for (const descriptor of catalog.descriptors) {
      if (descriptor.name === ReadSkill.name) {
        return yield* invalid(`tool ${JSON.stringify(ReadSkill.name)} is reserved for the agent's skills`)
      }
      owners.set(descriptor.name, "the direct tools")
    }
    for (const [index, source] of sources.entries()) {
      const owner = describeSource(source, index)
      for (const tool of source.tools ?? []) {
        const previous = owners.get(tool)
        if (previous !== undefined) {
          return yield* invalid(`tool ${JSON.stringify(tool)} is defined twice: by ${previous} and by ${owner}`)
        }
        if (tool === ReadSkill.name) {
          return yield* invalid(`tool ${JSON.stringify(ReadSkill.name)} of ${owner} is reserved for the agent's skills`)
        }
        owners.set(tool, owner)
      }
    }
  })

const checkSkills = (skills: ReadonlyArray<Skill.Skill>) =>
  Effect.gen(function*() {
    const names = new Map<string, number>()
    for (const [index, skill] of skills.entries()) {
      if (!SkillInternal.isSkill(skill)) {
        return yield* invalid(`skills[${index}] is not a skill (use Skill.dir or Skill.inline)`)
      }
      const previous = names.get(skill.name)
      if (previous !== undefined) {
        return yield* invalid(`skills[${previous}] and skills[${index}] are both named ${JSON.stringify(skill.name)}`)
      }
      names.set(skill.name, index)
    }
    return yield* Effect.forEach(skills, (skill) =>
      SkillInternal.load(skill).pipe(Effect.mapError((error) => invalid(error.message, error))))
  })

/**
 * Validates the definition against `rules`, snapshots the skills and returns the deep-frozen
 * view. Fails with `AgentConfigError` (`InvalidDefinition`) or `UnsupportedCapability` for a
 * capability the driver lacks; reads nothing but the skills' directories.
 *
 * @internal
 */
export const validate = (
  input: Input,
  rules: Rules
): Effect.Effect<Validated, AgentConfigError | UnsupportedCapability> =>
  Effect.gen(function*() {
    if (input === null || typeof input !== "object") return yield* invalid("the definition must be an object")
    const { instructions } = input
    if (typeof instructions !== "string") return yield* invalid("instructions must be a string")
    if (instructions.includes("\0")) return yield* invalid("instructions must not contain NUL")
    if (instructions !== "" && !rules.capabilities.instructions) {
      return yield* new UnsupportedCapability({
        driver: rules.driver,
        capability: "instructions",
        detail: "the driver cannot send instructions; pass `instructions: \"\"`"
      })
    }
    const givenSkills = input.skills ?? []
    const mcp = input.mcp ?? []
    const tools = input.tools
    if (!Array.isArray(givenSkills)) return yield* invalid("skills must be an array")
    if (!Array.isArray(mcp)) return yield* invalid("mcp must be an array")
    if (!Toolkit.isToolkit(tools)) return yield* invalid("tools must be a toolkit (use Toolkit.make)")
    // Read once: the caller's array may change while the skills load; what is checked is what is kept.
    const skills: ReadonlyArray<Skill.Skill> = [...givenSkills]
    const copied: Array<Mcp.Source> = []
    for (const [index, source] of (mcp as ReadonlyArray<unknown>).entries()) {
      if (source === null || typeof source !== "object" || !("_tag" in source)) {
        return yield* invalid(`mcp[${index}] is not an MCP source (use Mcp.stdio, Mcp.http or Mcp.sse)`)
      }
      // Checked before copying: a malformed source must fail here, not throw in the copy.
      const error = McpInternal.validate(source as Mcp.Source, rules.hostedKey, rules.reservedVariable)
      if (error !== undefined) {
        return yield* invalid(`${describeSource(source as Mcp.Source, index)}: ${error.message}`, error)
      }
      copied.push(copySource(source as Mcp.Source))
    }
    yield* checkSources(copied, rules)
    const catalog = yield* Toolkit.catalog(tools).pipe(
      Effect.mapError((error) => invalid(error.message, error))
    )
    yield* checkToolNames(catalog, copied)
    const loaded = yield* checkSkills(skills)
    const view: View = deepFreeze({
      instructions,
      skills,
      tools,
      mcp: copied
    })
    // By name (unique): the order of the list is no part of the definition, as a toolkit's is
    // not. Hosts that list skills from a directory (whose order differs between file systems)
    // keep one fingerprint, and `read_skill` lists them alike.
    const byName = [...loaded].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    return { view, skills: Object.freeze(byName), catalog }
  })

/**
 * The toolkit the gateway serves: the direct tools, plus `read_skill` when there are skills,
 * with the context that provides `read_skill`'s handler.
 *
 * @internal
 */
export const hostedToolkit = (validated: Validated) => {
  if (validated.skills.length === 0) return { toolkit: validated.view.tools, context: undefined }
  const readSkill = ReadSkill.make(validated.skills)
  return { toolkit: Toolkit.merge(validated.view.tools, readSkill.toolkit), context: readSkill.context }
}

/**
 * The executor the gateway registers: the direct tools bound to the host's handler services,
 * and `read_skill` bound to the skills' snapshot. Requires the direct tools' handler services.
 *
 * @internal
 */
export const executor = (validated: Validated): Effect.Effect<Catalog.Executor, ToolDefinitionError, unknown> => {
  const hosted = hostedToolkit(validated)
  const context = hosted.context
  return context === undefined
    ? Toolkit.executor(hosted.toolkit)
    : Effect.flatMap(context, (provided) => Effect.provide(Toolkit.executor(hosted.toolkit), provided))
}

/** The directory of the clone that holds the skills' snapshots. @internal */
export const skillsDir = "tether-skills"

/**
 * Writes every skill's snapshot into `<clone>/tether-skills/<name>/` and returns what drivers
 * receive: the directory and the same files as data.
 *
 * @internal
 */
export const materializeSkills = <E>(
  validated: Validated,
  profile: {
    readonly dir: string
    readonly materialize: (files: ReadonlyArray<Driver.MaterializedFile>) => Effect.Effect<void, E>
  }
): Effect.Effect<ReadonlyArray<Driver.SkillFiles>, E> => {
  if (validated.skills.length === 0) return Effect.succeed([])
  const files = validated.skills.flatMap((skill) =>
    skill.files.map((file) => ({ path: `${skillsDir}/${skill.name}/${file.path}`, content: file.content, mode: 0o600 }))
  )
  return Effect.as(
    profile.materialize(files),
    Object.freeze(validated.skills.map((skill) =>
      Object.freeze({
        name: skill.name,
        description: skill.description,
        dir: NodePath.join(profile.dir, skillsDir, skill.name),
        files: skill.files
      })
    ))
  )
}
