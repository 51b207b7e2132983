/**
 * Native projection of the agent's skills into a CLI's skills folder (an optimization: the
 * hosted `read_skill` tool serves the same snapshot on every driver).
 *
 * @internal
 */
import type * as Driver from "@tether/core/Driver"
import * as Skill from "@tether/core/Skill"
import * as Either from "effect/Either"

/**
 * Front-matter keys that grant the CLI what the host decides: Claude Code runs a skill's
 * `allowed-tools` without asking the host's approvals, registers its `hooks` (commands run on the
 * CLI's events) and starts its `mcpServers` / `lspServers`. A projected skill leaves them out;
 * `read_skill` serves the skill as written.
 */
const granting = ["allowed-tools", "hooks", "mcpServers", "lspServers"]

/**
 * `SKILL.md` as the CLIs load it: YAML frontmatter with `name` and `description` (the CLIs skip
 * a skill without them). Present keys are kept as written; missing ones are added from the
 * skill's name and description (JSON strings are valid YAML scalars) as lines under the opening
 * `---`. A mapping that cannot take such lines (flow style, indented), or that holds a key which
 * grants tools (`granting`), is written anew instead, one key a line, its values as JSON (valid
 * YAML), without those keys.
 *
 * @internal
 */
export const skillMarkdown = (skill: Driver.SkillFiles, markdown: string): string => {
  const description = skill.description === "" ? `Skill ${skill.name}.` : skill.description
  const read = Skill.frontMatter(markdown)
  // Core refused an invalid front matter when the skill was loaded: nothing to add to one.
  if (Either.isLeft(read)) return markdown
  const found = read.right
  const grants = found !== undefined && granting.some((key) => Object.hasOwn(found.data, key))
  const missing = [
    ...(found !== undefined && Object.hasOwn(found.data, "name") ? [] : [`name: ${JSON.stringify(skill.name)}`]),
    ...(found !== undefined && Object.hasOwn(found.data, "description")
      ? []
      : [`description: ${JSON.stringify(description)}`])
  ]
  if (found === undefined) return ["---", ...missing, "---", "", markdown].join("\n")
  if (missing.length === 0 && !grants) return markdown
  if (!grants) {
    // Lines inserted under the opening `---` keep the file as written (comments, block scalars),
    // but only a block mapping at column 0 takes them.
    const lines = markdown.split(/\r?\n/)
    const inserted = [lines[0]!, ...missing, ...lines.slice(1)].join("\n")
    const check = Skill.frontMatter(inserted)
    if (
      Either.isRight(check) && check.right !== undefined && Object.hasOwn(check.right.data, "name") &&
      Object.hasOwn(check.right.data, "description")
    ) return inserted
  }
  const present: Array<string> = []
  for (const [key, value] of Object.entries(found.data)) {
    if (granting.includes(key)) continue
    let written: string | undefined
    try {
      written = JSON.stringify(value)
    } catch {
      // A value an alias made cyclic has no JSON form: written without it (never the file as
      // written, which may grant tools).
      if (grants) continue
      return markdown
    }
    if (written !== undefined) present.push(`${JSON.stringify(key)}: ${written}`)
  }
  return ["---", ...missing, ...present, "---", found.body].join("\n")
}

/**
 * The files that project every skill under `root` (relative to the clone), one folder per skill.
 *
 * @internal
 */
export const project = (
  skills: ReadonlyArray<Driver.SkillFiles>,
  root: string
): ReadonlyArray<Driver.MaterializedFile> =>
  skills.flatMap((skill) =>
    skill.files.map((file) => ({
      path: `${root}/${skill.name}/${file.path}`,
      content: file.path === "SKILL.md" ? skillMarkdown(skill, file.content) : file.content,
      mode: 0o600
    }))
  )
