/**
 * Loading a skill: a front matter `toJS` refuses is a typed error, every listed file can be named
 * by `read_skill`, a file too large is `TooLarge` before it is read, and a tree changed while it
 * is read (a file or a folder swapped for a link) never puts an outside file in the snapshot.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Skill } from "@tether/core"
import { FakeCli, Harness } from "@tether/testing"
import * as Toolkit from "@tether/tool/Toolkit"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as NodeChild from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import { load } from "../src/internal/skill.js"

const tempDir = Effect.acquireRelease(
  Effect.sync(() => NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "tether-skill-load-"))),
  (dir) => Effect.sync(() => NodeFs.rmSync(dir, { recursive: true, force: true }))
)

const skillDir = (root: string, name: string) => {
  const dir = NodePath.join(root, name)
  NodeFs.mkdirSync(dir)
  NodeFs.writeFileSync(NodePath.join(dir, "SKILL.md"), `# ${name}\nUse it.`)
  return dir
}

describe("a front matter the YAML library cannot turn into data", () => {
  const unresolvedAlias = "---\ndescription: *nope\n---\n# Body\nText."
  // Seven levels of ten aliases each: 10^7 nodes once expanded.
  const aliasBomb = (() => {
    const lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    let previous = "a"
    for (let i = 0; i < 6; i++) {
      lines.push(`b${i}: &b${i} [${Array(10).fill(`*${previous}`).join(", ")}]`)
      previous = `b${i}`
    }
    return ["---", ...lines, "---", "# Body", "Text."].join("\n")
  })()

  it("Skill.frontMatter answers Left for an unresolved alias or an alias bomb (it threw)", () => {
    for (const markdown of [unresolvedAlias, aliasBomb]) {
      expect(Either.isLeft(Skill.frontMatter(markdown))).toBe(true)
    }
  })

  it.effect("loading fails with SkillError InvalidFrontMatter, not a defect", () =>
    Effect.gen(function*() {
      for (const markdown of [unresolvedAlias, aliasBomb]) {
        const exit = yield* Effect.exit(load(Skill.inline("triage", markdown)))
        expect(exit).toMatchObject({
          _tag: "Failure",
          cause: { _tag: "Fail", error: { reason: "InvalidFrontMatter" } }
        })
      }
    }))

  it.live("Agent.make fails with AgentConfigError and leaves nothing", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const exit = yield* Effect.exit(
        Agent.make({
          driver: FakeCli.driver(),
          definition: { instructions: "", skills: [Skill.inline("triage", unresolvedAlias)], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        }).pipe(Effect.scoped, Effect.provide(Harness.layer))
      )
      expect(exit).toMatchObject({ _tag: "Failure", cause: { _tag: "Fail", error: { _tag: "AgentConfigError" } } })
      expect(yield* Harness.entries(sandbox.root)).toEqual([])
    }).pipe(Effect.scoped))
})

describe("every file of a loaded skill can be read by read_skill", () => {
  it.scoped("a file name with a backslash is Unreadable at load (read_skill refused the path it listed)", () =>
    Effect.gen(function*() {
      const dir = skillDir(yield* tempDir, "review")
      NodeFs.writeFileSync(NodePath.join(dir, "notes\\windows.md"), "backslash in the name")
      const error = yield* Effect.flip(load(Skill.dir(dir)))
      expect(error).toMatchObject({ reason: "Unreadable" })
      expect(error.detail).toContain("notes\\windows.md")
    }))

  it.scoped("a path over 1024 characters is Unreadable at load; one of 1024 loads", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      // Eight folders of 120 characters; the file name makes up the rest.
      const folders = Array.from({ length: 8 }, (_, i) => `${String(i)}${"d".repeat(119)}`)
      const prefix = folders.join("/").length + 1
      for (const [name, length] of [["fits", 1024], ["over", 1025]] as const) {
        const dir = skillDir(root, name)
        NodeFs.mkdirSync(NodePath.join(dir, ...folders), { recursive: true })
        NodeFs.writeFileSync(NodePath.join(dir, ...folders, "f".repeat(length - prefix)), "deep")
      }
      const fits = yield* load(Skill.dir(NodePath.join(root, "fits")))
      expect(fits.files.map((file) => file.path.length).sort((a, b) => a - b)).toEqual([8, 1024])
      expect(yield* Effect.flip(load(Skill.dir(NodePath.join(root, "over"))))).toMatchObject({ reason: "Unreadable" })
    }))
})

describe("limits", () => {
  it.scoped("a file over 2 GiB (sparse) is TooLarge, checked before it is read (it was Unreadable)", () =>
    Effect.gen(function*() {
      const dir = skillDir(yield* tempDir, "huge")
      NodeFs.writeFileSync(NodePath.join(dir, "big.txt"), "")
      NodeFs.truncateSync(NodePath.join(dir, "big.txt"), 3 * 1024 * 1024 * 1024)
      expect(yield* Effect.flip(load(Skill.dir(dir)))).toMatchObject({ _tag: "SkillError", reason: "TooLarge" })
    }))
})

describe("a skill tree changed while it is read", () => {
  // Another process keeps swapping an entry of the skill for a link to the outside and back, by
  // renames: `z-notes.md` (a file) for a link to `outside/notes.md`, or `z-sub/` (a folder) for a
  // link to `outside/`. 200 files are read between the listing and that entry.
  const swapping = (entry: "z-notes.md" | "z-sub") =>
    Effect.gen(function*() {
      const root = yield* tempDir
      const outside = NodePath.join(root, "outside")
      NodeFs.mkdirSync(outside)
      NodeFs.writeFileSync(NodePath.join(outside, "notes.md"), "TOP-SECRET")
      const dir = skillDir(root, "racy")
      for (let i = 0; i < 200; i++) NodeFs.writeFileSync(NodePath.join(dir, `a-${String(i).padStart(3, "0")}.md`), "x")
      const real = NodePath.join(root, "real")
      if (entry === "z-sub") {
        NodeFs.mkdirSync(real)
        NodeFs.writeFileSync(NodePath.join(real, "notes.md"), "harmless")
      } else {
        NodeFs.writeFileSync(real, "harmless")
      }
      NodeFs.symlinkSync(entry === "z-sub" ? outside : NodePath.join(outside, "notes.md"), NodePath.join(root, "link"))
      yield* Effect.acquireRelease(
        Effect.sync(() =>
          NodeChild.spawn(process.execPath, [
            "-e",
            `const fs = require("fs"), p = require("path")
             const [root, entry] = process.argv.slice(1)
             const target = p.join(root, "racy", entry)
             const swap = (a, b) => { try { fs.renameSync(target, p.join(root, b)); fs.renameSync(p.join(root, a), target) } catch {} }
             fs.renameSync(p.join(root, "real"), target)
             for (;;) { swap("link", "real"); swap("real", "link") }`,
            root,
            entry
          ], { stdio: "ignore" })
        ),
        // Gone before the folder is removed: a last rename would race the removal.
        (child) =>
          Effect.async<void>((resume) => {
            if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
            child.once("exit", () => resume(Effect.void))
            child.kill("SIGKILL")
          })
      )
      let loads = 0
      let leaks = 0
      const deadline = Date.now() + 2_000
      while (Date.now() < deadline) {
        const exit = yield* Effect.exit(load(Skill.dir(dir)))
        loads++
        if (Exit.isSuccess(exit) && exit.value.files.some((file) => file.content.includes("TOP-SECRET"))) leaks++
        if (Exit.isFailure(exit)) {
          expect(exit.cause, String(exit.cause)).toMatchObject({ _tag: "Fail", error: { _tag: "SkillError" } })
        }
      }
      expect({ loads: loads > 3, leaks }).toEqual({ loads: true, leaks: 0 })
    }).pipe(Effect.scoped)

  it.live("a file swapped for a link to an outside file never reaches the snapshot", () => swapping("z-notes.md"))
  it.live("a folder swapped for a link to an outside folder never reaches the snapshot", () => swapping("z-sub"))
})
