import { describe, expect, it } from "@effect/vitest"
import { Skill } from "@tether/core"
import * as Toolkit from "@tether/tool/Toolkit"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import * as ReadSkill from "../src/internal/readSkill.js"
import { load } from "../src/internal/skill.js"

/** A fresh temporary directory, removed when the scope closes. */
const tempDir = Effect.acquireRelease(
  Effect.sync(() => NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "tether-skill-"))),
  (dir) => Effect.sync(() => NodeFs.rmSync(dir, { recursive: true, force: true }))
)

const writeTree = (root: string, files: Record<string, string | Uint8Array>) => {
  for (const [path, content] of Object.entries(files)) {
    NodeFs.mkdirSync(NodePath.dirname(NodePath.join(root, path)), { recursive: true })
    NodeFs.writeFileSync(NodePath.join(root, path), content)
  }
}

const reviewMd = [
  "---",
  "name: review",
  "description: \"Reviews a pull request against the house rules.\"",
  "---",
  "# Review",
  "Read rules/style.md first."
].join("\n")

const skillDir = (parent: string, name: string, files: Record<string, string | Uint8Array>) => {
  const dir = NodePath.join(parent, name)
  NodeFs.mkdirSync(dir, { recursive: true })
  writeTree(dir, files)
  return dir
}

const failure = <A, E>(effect: Effect.Effect<A, E>) => Effect.flip(effect)

describe("Skill constructors", () => {
  it("names a directory skill after its folder unless a name is given; values are frozen", () => {
    const plain = Skill.dir("/srv/skills/review")
    expect(plain).toMatchObject({ _tag: "Dir", name: "review", path: "/srv/skills/review" })
    expect(Skill.dir("/srv/skills/Review_Tool", { name: "review-tool" }).name).toBe("review-tool")
    expect(Skill.isSkill(plain)).toBe(true)
    expect(Skill.isSkill({ _tag: "Dir", name: "review", path: "/x" })).toBe(false)
    expect(Object.isFrozen(plain)).toBe(true)
    const inline = Skill.inline("triage", "# Triage\nLabel issues.")
    expect(inline).toMatchObject({ _tag: "Inline", name: "triage", markdown: "# Triage\nLabel issues." })
    expect(Object.isFrozen(inline)).toBe(true)
  })
})

describe("Skill.load", () => {
  it.scoped("snapshots every file of a directory, sorted, with the frontmatter description", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      const dir = skillDir(root, "review", { "SKILL.md": reviewMd, "rules/style.md": "Use tabs.", "a.txt": "A" })
      const loaded = yield* load(Skill.dir(dir))
      expect(loaded.name).toBe("review")
      expect(loaded.source).toBe("dir")
      expect(loaded.description).toBe("Reviews a pull request against the house rules.")
      expect(loaded.files).toEqual([
        { path: "SKILL.md", content: reviewMd },
        { path: "a.txt", content: "A" },
        { path: "rules/style.md", content: "Use tabs." }
      ])
      expect(loaded.digest).toMatch(/^[0-9a-f]{64}$/)
    }))

  it.scoped("the digest covers content, not location, and changes with any file", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      const files = { "SKILL.md": reviewMd, "rules/style.md": "Use tabs." }
      const a = yield* load(Skill.dir(skillDir(NodePath.join(root, "a"), "review", files)))
      const b = yield* load(Skill.dir(skillDir(NodePath.join(root, "b"), "review", files)))
      expect(b.digest).toBe(a.digest)
      const c = yield* load(
        Skill.dir(skillDir(NodePath.join(root, "c"), "review", { ...files, "rules/style.md": "Use spaces." }))
      )
      expect(c.digest).not.toBe(a.digest)
      const renamed = yield* load(Skill.dir(NodePath.join(root, "a", "review"), { name: "review-two" }))
      expect(renamed.digest).not.toBe(a.digest)
    }))

  it.effect("an inline skill is its SKILL.md; the description is its first non-heading line", () =>
    Effect.gen(function*() {
      const loaded = yield* load(Skill.inline("triage", "# Triage\n\nLabel new issues by area.\nMore."))
      expect(loaded.source).toBe("inline")
      expect(loaded.description).toBe("Label new issues by area.")
      expect(loaded.files).toEqual([{ path: "SKILL.md", content: "# Triage\n\nLabel new issues by area.\nMore." }])
      const same = yield* load(Skill.inline("triage", "# Triage\n\nLabel new issues by area.\nMore."))
      expect(same.digest).toBe(loaded.digest)
    }))

  it.effect("the front matter reads as YAML: block scalars, quoting, multi-line values; invalid YAML is refused", () =>
    Effect.gen(function*() {
      const describe = (markdown: string) =>
        load(Skill.inline("review", markdown)).pipe(Effect.map((l) => l.description))
      expect(yield* describe("---\ndescription: |\n  Reviews a pull request.\n  Twice.\nname: review\n---\n# Body"))
        .toBe(
          "Reviews a pull request.\nTwice."
        )
      expect(yield* describe("---\ndescription: >-\n  Folded\n  into one line\n---\nBody")).toBe("Folded into one line")
      expect(yield* describe("---\ndescription: 'It''s quoted: with a colon'\n---\nBody")).toBe(
        "It's quoted: with a colon"
      )
      expect(yield* describe("---\n\"description\": \"Key quoted\" # a comment\n---\nBody")).toBe("Key quoted")
      expect(yield* describe("---\ndescription: plain\n  continued on the next line\n---\nBody")).toBe(
        "plain continued on the next line"
      )
      // Not a string: the body's first line describes the skill.
      expect(yield* describe("---\ndescription: [a, b]\n---\n# Title\nFrom the body.")).toBe("From the body.")
      expect(yield* describe("---\nname: review\n---\n\nFrom the body.")).toBe("From the body.")
      for (const broken of ["---\ndescription: [unclosed\n---\nBody", "---\n- a list\n---\nBody"]) {
        const error = yield* failure(load(Skill.inline("review", broken)))
        expect(error).toMatchObject({ reason: "InvalidFrontMatter", skill: "review" })
      }
      expect(Skill.frontMatter("no front matter")).toEqual(Either.right(undefined))
      expect(Skill.frontMatter("---\nname: x\n---\nrest")).toEqual(
        Either.right({ data: { name: "x" }, body: "rest", indirect: false })
      )
      // Merge keys applied, as Claude Code's reader does; anchors, aliases and merges are said.
      expect(Skill.frontMatter("---\nbase: &b\n  name: x\n<<: *b\n---\nrest")).toEqual(
        Either.right({ data: { base: { name: "x" }, name: "x" }, body: "rest", indirect: true })
      )
    }))

  it.scoped("refuses unknown directories, a missing SKILL.md and invalid names", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      const missing = yield* failure(load(Skill.dir(NodePath.join(root, "nope"))))
      expect(missing).toMatchObject({ _tag: "SkillError", skill: "nope", reason: "NotFound" })
      const relative = yield* failure(load(Skill.dir("skills/review")))
      expect(relative.reason).toBe("NotFound")
      NodeFs.writeFileSync(NodePath.join(root, "file"), "x")
      expect((yield* failure(load(Skill.dir(NodePath.join(root, "file"))))).reason).toBe("NotFound")
      const empty = skillDir(root, "empty", { "README.md": "no skill here" })
      expect(yield* failure(load(Skill.dir(empty)))).toMatchObject({ reason: "MissingSkillFile" })
      const nested = skillDir(root, "nested", { "docs/SKILL.md": "nested only" })
      expect((yield* failure(load(Skill.dir(nested)))).reason).toBe("MissingSkillFile")
      const badFolder = skillDir(root, "Bad_Name", { "SKILL.md": "x" })
      const bad = yield* failure(load(Skill.dir(badFolder)))
      expect(bad).toMatchObject({ reason: "InvalidName", skill: "Bad_Name" })
      expect((yield* load(Skill.dir(badFolder, { name: "bad-name" }))).name).toBe("bad-name")
      for (const name of ["", "-x", "x-", "a".repeat(65), "UPPER", "a b", "../x"]) {
        expect((yield* failure(load(Skill.inline(name, "# x\ny")))).reason).toBe("InvalidName")
      }
      expect((yield* failure(load(Skill.inline("blank", "  \n")))).reason).toBe("MissingSkillFile")
    }))

  it.scoped("refuses links, non-UTF-8 files and oversized content", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      const outside = NodePath.join(root, "secret.txt")
      NodeFs.writeFileSync(outside, "secret")
      const linked = skillDir(root, "linked", { "SKILL.md": "# x\ny" })
      NodeFs.symlinkSync(outside, NodePath.join(linked, "secret.txt"))
      const link = yield* failure(load(Skill.dir(linked)))
      expect(link).toMatchObject({ reason: "Unreadable" })
      expect(link.message).toContain("secret.txt")
      const binary = skillDir(root, "binary", { "SKILL.md": "# x\ny", "blob.bin": new Uint8Array([0xff, 0xfe, 0x00]) })
      expect(yield* failure(load(Skill.dir(binary)))).toMatchObject({ reason: "Unreadable" })
      const big = skillDir(root, "big", { "SKILL.md": "# x\ny", "big.txt": "x".repeat(1024 * 1024 + 1) })
      expect(yield* failure(load(Skill.dir(big)))).toMatchObject({ reason: "TooLarge" })
      const many: Record<string, string> = { "SKILL.md": "# x\ny" }
      for (let i = 0; i < 256; i++) many[`f/${i}.txt`] = "x"
      expect(yield* failure(load(Skill.dir(skillDir(root, "many", many))))).toMatchObject({ reason: "TooLarge" })
    }))
})

const executorOf = (skills: ReadonlyArray<Skill.Loaded>) =>
  Effect.gen(function*() {
    const readSkill = ReadSkill.make(skills)
    const context = yield* readSkill.context
    return yield* Toolkit.executor(readSkill.toolkit).pipe(Effect.provide(context))
  })

describe("read_skill", () => {
  it.scoped("lists the skills and reads SKILL.md or a file, from the snapshot taken at load", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      const dir = skillDir(root, "review", { "SKILL.md": reviewMd, "rules/style.md": "Use tabs." })
      const skills = [
        yield* load(Skill.dir(dir)),
        yield* load(Skill.inline("triage", "# Triage\nLabel issues."))
      ]
      // Later changes on disk never reach the agent.
      NodeFs.writeFileSync(NodePath.join(dir, "rules/style.md"), "CHANGED")
      const executor = yield* executorOf(skills)
      const [descriptor] = executor.catalog.descriptors
      expect(descriptor?.name).toBe("read_skill")
      expect(descriptor?.annotations).toEqual({ readOnlyHint: true, idempotentHint: true, openWorldHint: false })
      expect(descriptor?.description).toContain("- review: Reviews a pull request against the house rules.")
      expect(descriptor?.description).toContain("- triage: Label issues.")

      const list = yield* executor.execute("read_skill", {})
      expect(list).toMatchObject({
        _tag: "Success",
        structuredContent: {
          skills: [
            {
              name: "review",
              description: "Reviews a pull request against the house rules.",
              files: ["SKILL.md", "rules/style.md"]
            },
            { name: "triage", description: "Label issues.", files: ["SKILL.md"] }
          ]
        }
      })
      expect(yield* executor.execute("read_skill", { skill: "review" })).toMatchObject({
        _tag: "Success",
        structuredContent: { skill: "review", path: "SKILL.md", content: reviewMd }
      })
      expect(yield* executor.execute("read_skill", { skill: "review", path: "rules/style.md" })).toMatchObject({
        _tag: "Success",
        structuredContent: { content: "Use tabs." }
      })
      const missing = yield* executor.execute("read_skill", { skill: "review", path: "rules/none.md" })
      expect(missing).toMatchObject({ _tag: "Rejected", code: "not_found" })
      const unknown = yield* executor.execute("read_skill", { skill: "deploy" })
      expect(unknown).toMatchObject({ _tag: "Rejected", code: "unknown_skill" })
      const pathOnly = yield* executor.execute("read_skill", { path: "SKILL.md" })
      expect(pathOnly).toMatchObject({ _tag: "Rejected", code: "invalid_arguments" })
    }))

  it.effect("refuses path traversal and every non-plain relative path", () =>
    Effect.gen(function*() {
      const executor = yield* executorOf([yield* load(Skill.inline("triage", "# T\nx"))])
      for (
        const path of [
          "../triage/SKILL.md",
          "/etc/passwd",
          "a/../SKILL.md",
          "./SKILL.md",
          "..",
          "",
          "a//b",
          "..\\..\\x",
          "SKILL.md\u0000"
        ]
      ) {
        expect(yield* executor.execute("read_skill", { skill: "triage", path })).toMatchObject({
          _tag: "Rejected",
          code: "invalid_path"
        })
      }
    }))

  it.effect.prop(
    "any path with a `..` segment is refused; any success is exactly a snapshot file",
    [FastCheck.array(FastCheck.constantFrom("..", ".", "SKILL.md", "rules", "style.md", "", "/", "x\\y"), {
      minLength: 1,
      maxLength: 5
    })],
    ([segments]) =>
      Effect.gen(function*() {
        const skill = yield* load(Skill.inline("triage", "# T\nx"))
        const withRules = {
          ...skill,
          files: [...skill.files, { path: "rules/style.md", content: "Use tabs." }]
        }
        const executor = yield* executorOf([withRules])
        const path = segments.join("/")
        const outcome = yield* executor.execute("read_skill", { skill: "triage", path })
        if (segments.includes("..")) expect(outcome._tag).toBe("Rejected")
        if (outcome._tag === "Success") {
          const file = withRules.files.find((f) => f.path === path)
          expect(file).toBeDefined()
          expect(outcome.structuredContent).toEqual({ skill: "triage", path, content: file!.content })
        }
      }),
    { fastCheck: { numRuns: 40 } }
  )
})
