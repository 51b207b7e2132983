import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as NodeChild from "node:child_process"
import * as NodeFs from "node:fs"
import * as Os from "node:os"
import * as NodePath from "node:path"
import { removeTree } from "../src/internal/removeTree.js"
import { handOver, readOnlyTree, runUnprivileged, scratch, tooDeep } from "./fixtures/unprivileged.js"

const withDir = <A>(body: (dir: string) => Effect.Effect<A>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => NodeFs.mkdtempSync(NodePath.join(Os.tmpdir(), "tether-remove-"))),
    body,
    (dir) => Effect.sync(() => NodeFs.rmSync(dir, { recursive: true, force: true }))
  )

const remove = (root: string) => Effect.promise(() => removeTree(root))

const modeOf = (path: string) => NodeFs.lstatSync(path).mode & 0o7777

/** The mode of `dir` and of everything under it, by absolute path. */
const modes = (dir: string) =>
  Object.fromEntries(
    [dir, ...NodeFs.readdirSync(dir, { recursive: true }).map((rel) => NodePath.join(dir, String(rel)))]
      .map((path) => [path, modeOf(path)])
  )

/** How the removal of `root` failed (`removed` when it did not). */
const failure = (root: string) =>
  Effect.promise(() => removeTree(root).then(() => "removed", (error: unknown) => String(error)))

describe("removeTree", () => {
  it.live("removes a tree of files, directories and links, never what a link points at", () =>
    withDir((dir) =>
      Effect.gen(function*() {
        const outside = NodePath.join(dir, "outside")
        NodeFs.mkdirSync(outside)
        NodeFs.writeFileSync(NodePath.join(outside, "auth.json"), "{}")
        const tree = NodePath.join(dir, "clone")
        NodeFs.mkdirSync(NodePath.join(tree, "profile", "projects", "deep"), { recursive: true })
        NodeFs.writeFileSync(NodePath.join(tree, "profile", "projects", "deep", "s.jsonl"), "x")
        NodeFs.writeFileSync(NodePath.join(tree, ".tether-clone.json"), "{}")
        NodeFs.mkdirSync(NodePath.join(tree, "home", "empty"), { recursive: true })
        NodeFs.symlinkSync(outside, NodePath.join(tree, "profile", "linked-dir"))
        NodeFs.symlinkSync(NodePath.join(outside, "auth.json"), NodePath.join(tree, "profile", "auth.json"))
        NodeFs.symlinkSync(NodePath.join(dir, "nowhere"), NodePath.join(tree, "dangling"))
        NodeFs.linkSync(NodePath.join(outside, "auth.json"), NodePath.join(tree, "home", "hard.json"))
        yield* remove(tree)
        expect(NodeFs.existsSync(tree)).toBe(false)
        expect(NodeFs.readdirSync(outside)).toEqual(["auth.json"])
        expect(NodeFs.readFileSync(NodePath.join(outside, "auth.json"), "utf8")).toBe("{}")
      })
    ))

  it.live("removes nothing when nothing is there, and a file or a link given as the root", () =>
    withDir((dir) =>
      Effect.gen(function*() {
        yield* remove(NodePath.join(dir, "absent"))
        const file = NodePath.join(dir, "file")
        NodeFs.writeFileSync(file, "x")
        yield* remove(file)
        const target = NodePath.join(dir, "target")
        NodeFs.mkdirSync(target)
        NodeFs.writeFileSync(NodePath.join(target, "kept"), "x")
        const link = NodePath.join(dir, "link")
        NodeFs.symlinkSync(target, link)
        yield* remove(link)
        expect(NodeFs.readdirSync(dir)).toEqual(["target"])
        expect(NodeFs.readdirSync(target)).toEqual(["kept"])
      })
    ))

  it.live("removes a large tree in slices, the event loop running between them", () =>
    withDir((dir) =>
      Effect.gen(function*() {
        // A long-lived agent's clone: a session file per earlier run, in a directory per project.
        const tree = NodePath.join(dir, "clone")
        for (let d = 0; d < 10; d++) {
          const project = NodePath.join(tree, "projects", `p${d}`)
          NodeFs.mkdirSync(project, { recursive: true })
          for (let f = 0; f < 100; f++) NodeFs.writeFileSync(NodePath.join(project, `${f}.jsonl`), "{}")
        }
        let turns = 0
        const timer = setInterval(() => turns++, 0)
        yield* remove(tree)
        clearInterval(timer)
        expect(NodeFs.existsSync(tree)).toBe(false)
        // One synchronous piece would let no timer run before it ends.
        expect(turns).toBeGreaterThan(0)
      })
    ))

  it.live("fails with the file system's error on a path it cannot reach, and removes nothing", () =>
    withDir((dir) =>
      Effect.gen(function*() {
        const file = NodePath.join(dir, "a")
        NodeFs.writeFileSync(file, "x")
        expect(yield* failure(NodePath.join(file, "child"))).toContain("ENOTDIR")
        expect(yield* failure(NodePath.join(dir, "n".repeat(300)))).toContain("ENAMETOOLONG")
        expect(NodeFs.readdirSync(dir)).toEqual(["a"])
      })
    ))

  it.live("as a user bound by permissions, removes read-only, unlistable and unsearchable directories", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = yield* scratch
      const tree = NodePath.join(dir, "clone")
      NodeFs.mkdirSync(NodePath.join(tree, "home"), { recursive: true })
      readOnlyTree(NodePath.join(tree, "home"))
      NodeFs.writeFileSync(NodePath.join(tree, "marker"), "{}", { mode: 0o444 })
      // The root itself read-only: it is part of the tree.
      NodeFs.chmodSync(tree, 0o500)
      handOver(dir)
      expect(yield* runUnprivileged(dir, "remove", tree)).toEqual({ ok: true, results: ["removed"] })
      expect(NodeFs.existsSync(tree)).toBe(false)
      expect(modeOf(dir)).toBe(0o700)
    })))

  it.live("makes only directories of the tree writable: never what a link points at, never the root's parent", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = yield* scratch
      const outside = NodePath.join(dir, "outside")
      const module = readOnlyTree(outside)
      const tree = NodePath.join(dir, "clone")
      // A read-only directory holding links to read-only directories and files outside the tree.
      const links = NodePath.join(tree, "home", "links")
      NodeFs.mkdirSync(links, { recursive: true })
      NodeFs.symlinkSync(module, NodePath.join(links, "module"))
      NodeFs.symlinkSync(NodePath.join(module, "go.mod"), NodePath.join(links, "go.mod"))
      NodeFs.symlinkSync(NodePath.join(outside, "cache", "unlistable"), NodePath.join(links, "unlistable"))
      NodeFs.chmodSync(links, 0o555)
      // A tree whose parent is read-only: its content goes, the tree itself cannot.
      const locked = NodePath.join(dir, "locked")
      NodeFs.mkdirSync(NodePath.join(locked, "clone", "home"), { recursive: true })
      NodeFs.writeFileSync(NodePath.join(locked, "clone", "home", "file"), "x")
      NodeFs.chmodSync(locked, 0o555)
      handOver(dir)
      const before = modes(outside)
      expect(before[module]).toBe(0o555)
      const outcome = yield* runUnprivileged(dir, "remove", tree, NodePath.join(locked, "clone"))
      expect(outcome.results).toEqual(["removed", expect.stringContaining("EACCES")])
      expect(NodeFs.existsSync(tree)).toBe(false)
      expect(modes(outside)).toEqual(before)
      expect(NodeFs.readFileSync(NodePath.join(module, "go.mod"), "utf8")).toBe("module example.com/m\n")
      expect(modeOf(locked)).toBe(0o555)
      expect(NodeFs.readdirSync(NodePath.join(locked, "clone"))).toEqual([])
    })))

  it.live("removes the root's `last` entry after everything else: a removal that fails keeps it", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = yield* scratch
      const tree = NodePath.join(dir, "clone")
      NodeFs.mkdirSync(NodePath.join(tree, "home"), { recursive: true })
      for (const name of [".tether-clone.json", "a", "z"]) NodeFs.writeFileSync(NodePath.join(tree, name), name)
      tooDeep(NodePath.join(tree, "home"))
      const removal = (root: string) =>
        Effect.promise(() => removeTree(root, { last: ".tether-clone.json" }).then(() => "removed", String))
      expect(yield* removal(tree)).toContain("ENAMETOOLONG")
      expect(NodeFs.readdirSync(tree).sort()).toEqual([".tether-clone.json", "home"])
      // `rm` reaches what no full path can.
      NodeChild.execFileSync("rm", ["-rf", NodePath.join(tree, "home")])
      expect(yield* removal(tree)).toBe("removed")
      expect(NodeFs.existsSync(tree)).toBe(false)
    })))
})
