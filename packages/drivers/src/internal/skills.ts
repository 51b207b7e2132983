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
 * CLI's events) and starts its `mcpServers` / `lspServers`; and it takes a skill folder whose
 * SKILL.md carries a plugin manifest's fields (Claude Code 2.1's list, `mcpServers` to
 * `experimental`) for a plugin of its own, whose hooks, monitors, MCP servers and settings then
 * apply unasked. A projected skill leaves them out; `read_skill` serves the skill as written.
 */
const granting = [
  "allowed-tools",
  "hooks",
  "mcpServers",
  "lspServers",
  "agents",
  "outputStyles",
  "themes",
  "workflows",
  "channels",
  "monitors",
  "settings",
  "userConfig",
  "experimental"
]

/**
 * A skill folder holding `.claude-plugin` (its manifest directory, or anything of that name) is
 * loaded by Claude Code as a plugin (`<name>@skills-dir`) whose `hooks/`, monitors and `.mcp.json`
 * run unasked: the projection leaves it out, at any depth (a sub-folder's SKILL.md is a skill of
 * its own to CodeBuddy Code); `read_skill` still serves every file.
 */
const pluginManifest = (path: string): boolean => path.split("/").includes(".claude-plugin")

/**
 * Whether a SKILL.md of the skill (its own or one in a sub-folder, which CodeBuddy Code loads as a
 * skill of its own) holds "!`command`" or `$ARGUMENTS`: CodeBuddy Code 2.117 runs each such command
 * through its shell when the model loads the skill, asking no permission (even with no shell tool
 * offered), and it first puts the model's `args` of the Skill call in place of `$ARGUMENTS` (then
 * reads the `@path` references of the result): the args would run commands and read files unasked.
 */
const inlineShell = (skill: Driver.SkillFiles): boolean =>
  skill.files.some((file) =>
    (file.path === "SKILL.md" || file.path.endsWith("/SKILL.md")) &&
    (/!`[^`]+`/.test(file.content) || /\$ARGUMENTS\b/.test(file.content))
  )

/**
 * `SKILL.md` as the CLIs load it: YAML frontmatter with `name` and `description` (the CLIs skip
 * a skill without them). Present keys are kept as written; missing ones are added from the
 * skill's name and description (JSON strings are valid YAML scalars) as lines under the opening
 * `---`. A mapping that cannot take such lines (flow style, indented), that holds a key which
 * grants tools (`granting`), or that uses anchors, aliases or merge keys (a reader resolving them
 * otherwise could see another key than core does) is written anew instead, one key a line, its
 * values as JSON (valid YAML), without those keys and without a key named `<<`.
 *
 * @internal
 */
export const skillMarkdown = (
  skill: Driver.SkillFiles,
  markdown: string,
  options: { readonly nested?: boolean } = {}
): string => {
  const description = skill.description === "" ? `Skill ${skill.name}.` : skill.description
  const read = Skill.frontMatter(markdown)
  // Core refused an invalid front matter when the skill was loaded: nothing to add to one. A nested
  // SKILL.md was never read by core: one whose front matter it cannot read (a repeated key, which
  // another reader may take) goes without it.
  if (Either.isLeft(read)) {
    if (options.nested !== true) return markdown
    const lines = markdown.replace(/^\uFEFF/, "").split(/\r?\n/)
    const end = lines.findIndex((line, i) => i > 0 && (line.trimEnd() === "---" || line.trimEnd() === "..."))
    return lines.slice(end + 1).join("\n")
  }
  const found = read.right
  const rewrite = found !== undefined && (found.indirect || granting.some((key) => Object.hasOwn(found.data, key)))
  // A SKILL.md in a sub-folder is not the skill's: only what grants is taken out of it.
  const missing = options.nested === true ? [] : [
    ...(found !== undefined && Object.hasOwn(found.data, "name") ? [] : [`name: ${JSON.stringify(skill.name)}`]),
    ...(found !== undefined && Object.hasOwn(found.data, "description")
      ? []
      : [`description: ${JSON.stringify(description)}`])
  ]
  if (found === undefined) {
    return options.nested === true
      ? markdown
      : ["---", ...missing, "---", "", markdown].join("\n")
  }
  if (missing.length === 0 && !rewrite) return markdown
  if (!rewrite) {
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
    if (granting.includes(key) || key === "<<") continue
    let written: string | undefined
    try {
      written = JSON.stringify(value)
    } catch {
      // A value an alias made cyclic has no JSON form: written without it (never the file as
      // written, which may grant tools).
      if (rewrite) continue
      return markdown
    }
    if (written !== undefined) present.push(`${JSON.stringify(key)}: ${written}`)
  }
  return ["---", ...missing, ...present, "---", found.body].join("\n")
}

/**
 * The files that project every skill under `root` (relative to the clone), one folder per skill.
 * `inlineShell`: a CLI that runs a loaded skill's "!`command`"s unasked (CodeBuddy Code) gets no
 * copy of a skill holding one; `read_skill` serves it as for any CLI.
 *
 * @internal
 */
export const project = (
  skills: ReadonlyArray<Driver.SkillFiles>,
  root: string,
  options: { readonly runsInlineShell?: boolean } = {}
): ReadonlyArray<Driver.MaterializedFile> =>
  (options.runsInlineShell === true ? skills.filter((skill) => !inlineShell(skill)) : skills).flatMap((skill) =>
    skill.files.filter((file) => !pluginManifest(file.path)).map((file) => ({
      path: `${root}/${skill.name}/${file.path}`,
      content: file.path === "SKILL.md"
        ? skillMarkdown(skill, file.content)
        : file.path.endsWith("/SKILL.md")
        ? skillMarkdown(skill, file.content, { nested: true })
        : file.content,
      mode: 0o600
    }))
  )
