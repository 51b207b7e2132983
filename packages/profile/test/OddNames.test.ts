// File names that are not valid UTF-8 (a Latin-1 `café`, bytes 63 61 66 e9). Linux allows
// any byte but `/` and NUL in a name; a repository checked out, an archive unpacked or a cache a
// tool writes under the clone's `home`/`tmp` can hold such names.
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as NodeChild from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Profile from "../src/Profile.js"
import { layoutAt, tempDir } from "./fixtures/tree.js"
import { capturedWarnings } from "./fixtures/unprivileged.js"

const run = <A, E>(effect: Effect.Effect<A, E, NodeContext.NodeContext | Scope.Scope>) =>
  effect.pipe(Effect.scoped, Effect.provide(NodeContext.layer))

/** `<dir>/<prefix>caf\xe9`: a name that is not valid UTF-8, as a Buffer path. */
const latin1 = (dir: string, prefix = "") => Buffer.concat([Buffer.from(`${dir}/${prefix}caf`), Buffer.from([0xe9])])

const world = Effect.gen(function*() {
  const base = yield* tempDir("tether-profile-odd-")
  const source = NodePath.join(base, "source")
  const root = NodePath.join(base, "clones")
  NodeFs.mkdirSync(NodePath.join(source, "skills", "local"), { recursive: true })
  NodeFs.writeFileSync(NodePath.join(source, "settings.json"), "{}")
  NodeFs.writeFileSync(NodePath.join(source, "skills", "local", "SKILL.md"), "# local\n")
  // `rm -rf` at the end: Node's rmSync would do too, this is belt and braces.
  yield* Effect.addFinalizer(() => Effect.sync(() => NodeChild.spawnSync("rm", ["-rf", base])))
  return { base, source, root, layout: layoutAt(source) }
})

describe("names that are not UTF-8", () => {
  it.live("a clone in which the CLI left a file with a non-UTF-8 name is removed at close", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const warnings = capturedWarnings()
      const cloneRoot = yield* Effect.scoped(Effect.gen(function*() {
        const clone = yield* Profile.clone(Profile.cloneFrom(w.source, w.root), w.layout, { agentId: "odd" })
        // What a CLI (or a shell the model ran) leaves under the clone's home.
        NodeFs.writeFileSync(latin1(clone.siblings["home"]!), "x")
        return clone.root
      })).pipe(Effect.provide(warnings.layer))
      expect(warnings.lines).toEqual([])
      expect(NodeFs.existsSync(cloneRoot)).toBe(false)
    })))

  it.live("a source skill file with a non-UTF-8 name is never silently dropped from the clone or from inspect", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      NodeFs.writeFileSync(latin1(NodePath.join(w.source, "skills", "local"), "notes-"), "# notes\n")
      const expected = ["SKILL.md", Buffer.from("notes-caf\xe9", "latin1")].map((n) => Buffer.from(n).toString("hex"))
        .sort()
      // Either the entry is brought into the clone as it is, or the clone fails saying so.
      const cloned = yield* Effect.either(
        Profile.clone(Profile.cloneFrom(w.source, w.root), w.layout, { agentId: "odd" })
      )
      if (cloned._tag === "Right") {
        const copied = NodeFs.readdirSync(Buffer.from(NodePath.join(cloned.right.dir, "skills", "local")), {
          encoding: "buffer"
        }).map((name) => name.toString("hex")).sort()
        expect(copied).toEqual(expected)
      } else {
        expect(cloned.left).toMatchObject({ _tag: "ProfileError", reason: "InvalidPath" })
      }
      // Either inspect reports it, or it fails saying so.
      const report = yield* Effect.either(Profile.inspect(Profile.cloneFrom(w.source, w.root), w.layout))
      if (report._tag === "Right") {
        expect(report.right.declared.filter((e) => e.class === "skills")).toHaveLength(2)
      } else {
        expect(report.left).toMatchObject({ _tag: "ProfileError", reason: "InvalidPath" })
      }
    })))
})
