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
 * `SKILL.md` as the CLIs load it: YAML frontmatter with `name` and `description` (the CLIs skip
 * a skill without them). Present keys are kept as written; missing ones are added from the
 * skill's name and description (JSON strings are valid YAML scalars).
 *
 * @internal
 */
export const skillMarkdown = (skill: Driver.SkillFiles, markdown: string): string => {
  const description = skill.description === "" ? `Skill ${skill.name}.` : skill.description
  const read = Skill.frontMatter(markdown)
  // Core refused an invalid front matter when the skill was loaded: nothing to add to one.
  if (Either.isLeft(read)) return markdown
  const found = read.right
  const missing = [
    ...(found !== undefined && Object.hasOwn(found.data, "name") ? [] : [`name: ${JSON.stringify(skill.name)}`]),
    ...(found !== undefined && Object.hasOwn(found.data, "description")
      ? []
      : [`description: ${JSON.stringify(description)}`])
  ]
  if (found === undefined) return ["---", ...missing, "---", "", markdown].join("\n")
  if (missing.length === 0) return markdown
  const lines = markdown.split(/\r?\n/)
  return [lines[0]!, ...missing, ...lines.slice(1)].join("\n")
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
