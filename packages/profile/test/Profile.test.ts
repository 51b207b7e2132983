import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Scope from "effect/Scope"
import * as NodeChild from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Profile from "../src/Profile.js"
import type * as ProfileLayout from "../src/ProfileLayout.js"
import { layoutAt, populate, snapshot, tempDir, write } from "./fixtures/tree.js"
import { capturedWarnings, handOver, runUnprivileged, scratchProfile, tooDeep } from "./fixtures/unprivileged.js"

interface World {
  readonly source: string
  readonly outside: string
  readonly root: string
  readonly layout: ProfileLayout.ProfileLayout
}

const world = Effect.gen(function*() {
  const base = yield* tempDir()
  const source = NodePath.join(base, "source")
  const outside = NodePath.join(base, "outside")
  const root = NodePath.join(base, "clones")
  NodeFs.mkdirSync(source)
  NodeFs.mkdirSync(outside)
  populate(source, outside)
  return { source, outside, root, layout: layoutAt(source) } satisfies World
})

const run = <A, E>(effect: Effect.Effect<A, E, NodeContext.NodeContext | Scope.Scope>) =>
  effect.pipe(Effect.scoped, Effect.provide(NodeContext.layer))

const selections = (w: World, options: Profile.CloneOptions): ReadonlyArray<Profile.Selection> => [
  Profile.native({ ...options, root: w.root }),
  Profile.dedicated(w.source, { ...options, root: w.root }),
  Profile.cloneNative(w.root, options),
  Profile.cloneFrom(w.source, w.root, options)
]

const optionSets: ReadonlyArray<Profile.CloneOptions> = [
  {},
  { auth: "copy" },
  { auth: "none" },
  { settings: false, mcp: false, skills: false, auth: "link" },
  { settings: true, mcp: false, skills: true, auth: "copy" }
]

const owner = { agentId: "agent-1" }

describe("Profile.clone", () => {
  it.live("leaves the source and what its symlinks point at byte-identical, for every selection and option", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const before = snapshot(w.source)
      const outsideBefore = snapshot(w.outside)
      for (const options of optionSets) {
        for (const selection of selections(w, options)) {
          yield* Effect.scoped(Effect.gen(function*() {
            const clone = yield* Profile.clone(selection, w.layout, owner)
            expect(clone.dir).not.toBe(w.source)
            expect(clone.source).toBe(w.source)
            // Materialize over a linked auth file, a copied setting that is a symlink in the
            // source, a file inside a symlinked skills directory, and new files.
            yield* clone.materialize([
              { path: "auth.json", content: "{\"token\":\"clone\"}" },
              { path: "credentials/outside", content: "replaced" },
              { path: "conf/b.toml", content: "b = 3\n" },
              { path: "skills/ext/SKILL.md", content: "# clone\n" },
              { path: "tether/mcp.json", content: "{}", mode: 0o640 }
            ])
            expect(NodeFs.readFileSync(NodePath.join(clone.dir, "auth.json"), "utf8")).toBe("{\"token\":\"clone\"}")
            expect(NodeFs.statSync(NodePath.join(clone.dir, "tether/mcp.json")).mode & 0o777).toBe(0o640)
            // The provider writes into its own clone as well.
            write(clone.dir, "sessions/new.jsonl", "{}\n")
            write(clone.siblings["tmp"]!, "scratch", "x")
            expect(snapshot(w.source)).toEqual(before)
            expect(snapshot(w.outside)).toEqual(outsideBefore)
          }))
          expect(snapshot(w.source)).toEqual(before)
          expect(snapshot(w.outside)).toEqual(outsideBefore)
          expect(NodeFs.readdirSync(w.root)).toEqual([])
        }
      }
    })))

  it.live("refuses a layout whose logs are in a directory the clone does not have, creating nothing", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      for (const name of ["cache", "constructor", "../home"]) {
        const layout = { ...w.layout, logs: { home: ["logs/**"], [name]: ["*.log"] } }
        const error = yield* Effect.flip(Profile.clone(Profile.cloneFrom(w.source, w.root), layout, owner))
        expect(error).toMatchObject({ _tag: "ProfileError", reason: "InvalidPath", path: name })
      }
      expect(NodeFs.existsSync(w.root) ? NodeFs.readdirSync(w.root) : []).toEqual([])
      // `profile` and the layout's own siblings are where logs may be.
      const clone = yield* Profile.clone(
        Profile.cloneFrom(w.source, w.root),
        { ...w.layout, logs: { profile: ["logs/**"], tmp: ["*.log"] } },
        owner
      )
      expect(NodeFs.existsSync(clone.dir)).toBe(true)
    })))

  it.live("creates a 0700 clone with the declared entries, siblings, selector env and an ownership marker", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const clone = yield* Profile.clone(Profile.cloneFrom(w.source, w.root), w.layout, owner)
      expect(NodeFs.statSync(clone.root).mode & 0o777).toBe(0o700)
      expect(NodeFs.statSync(clone.dir).mode & 0o777).toBe(0o700)
      expect(NodePath.dirname(clone.root)).toBe(w.root)
      expect(clone.env).toEqual({ FAKE_CONFIG_DIR: clone.dir, FAKE_HOME: clone.dir })
      expect(Object.keys(clone.siblings).sort()).toEqual(["home", "tmp"])
      for (const sibling of Object.values(clone.siblings)) {
        expect(NodePath.dirname(sibling)).toBe(clone.root)
        expect(NodeFs.readdirSync(sibling)).toEqual([])
        expect(NodeFs.statSync(sibling).mode & 0o777).toBe(0o700)
      }
      const files = Object.entries(snapshot(clone.dir)).filter(([, n]) => n.type !== "dir").map(([p]) => p)
      expect(files.sort()).toEqual([
        "auth.json",
        "conf/a.toml",
        "conf/b.toml",
        "credentials/key",
        "credentials/outside",
        "mcp.json",
        "settings.json",
        "skills/ext/SKILL.md",
        "skills/local/SKILL.md"
      ])
      // Auth is linked to the source entry; settings are private regular files with the source's mode.
      expect(NodeFs.readlinkSync(NodePath.join(clone.dir, "auth.json"))).toBe(NodePath.join(w.source, "auth.json"))
      expect(NodeFs.lstatSync(NodePath.join(clone.dir, "conf/b.toml")).isFile()).toBe(true)
      expect(NodeFs.lstatSync(NodePath.join(clone.dir, "settings.json")).mode & 0o777).toBe(0o640)
      expect(NodeFs.lstatSync(NodePath.join(clone.dir, "skills/ext")).isDirectory()).toBe(true)
      const marker = JSON.parse(NodeFs.readFileSync(NodePath.join(clone.root, ".tether-clone.json"), "utf8"))
      expect(marker).toMatchObject({ pid: process.pid, agentId: "agent-1", source: w.source, provider: "fake" })
      expect(marker.startTime).toMatch(/^\d+$/)
    })))

  it.live("gives copied and materialized files their exact modes under a umask that clears their bits", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      NodeFs.chmodSync(NodePath.join(w.source, "settings.json"), 0o664)
      const previous = process.umask(0o077)
      yield* Effect.addFinalizer(() => Effect.sync(() => process.umask(previous)))
      const clone = yield* Profile.clone(Profile.cloneFrom(w.source, w.root), w.layout, owner)
      yield* clone.materialize([{ path: "tether/mcp.json", content: "{}", mode: 0o644 }])
      expect(NodeFs.lstatSync(NodePath.join(clone.dir, "settings.json")).mode & 0o777).toBe(0o664)
      expect(NodeFs.lstatSync(NodePath.join(clone.dir, "tether/mcp.json")).mode & 0o777).toBe(0o644)
    })))

  it.live("copies auth as private files with `copy` and leaves it out with `none`", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const copied = yield* Profile.clone(Profile.cloneFrom(w.source, w.root, { auth: "copy" }), w.layout, owner)
      const auth = NodePath.join(copied.dir, "auth.json")
      expect(NodeFs.lstatSync(auth).isFile()).toBe(true)
      expect(NodeFs.lstatSync(auth).ino).not.toBe(NodeFs.statSync(NodePath.join(w.source, "auth.json")).ino)
      const none = yield* Profile.clone(Profile.cloneFrom(w.source, w.root, { auth: "none" }), w.layout, owner)
      expect(NodeFs.existsSync(NodePath.join(none.dir, "auth.json"))).toBe(false)
      expect(NodeFs.existsSync(NodePath.join(none.dir, "credentials"))).toBe(false)
    })))

  it.live("removes the clone when the scope closes with a failure", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const scope = yield* Scope.make()
      const clone = yield* Profile.clone(Profile.cloneFrom(w.source, w.root), w.layout, owner).pipe(
        Scope.extend(scope)
      )
      yield* clone.materialize([{ path: "tether/a", content: "a" }])
      expect(NodeFs.existsSync(clone.root)).toBe(true)
      yield* Scope.close(scope, Exit.fail("spawn failed"))
      expect(NodeFs.existsSync(clone.root)).toBe(false)
      expect(NodeFs.readdirSync(w.root)).toEqual([])
      // A late write after close recreates nothing.
      expect(yield* Effect.flip(clone.materialize([{ path: "tether/late", content: "x" }]))).toMatchObject({
        _tag: "ProfileError",
        reason: "CloneClosed"
      })
      expect(NodeFs.readdirSync(w.root)).toEqual([])
    })))

  it.live("removes the clone when the fiber holding it is interrupted", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const ready = yield* Deferred.make<string>()
      const fiber = yield* Effect.fork(Effect.scoped(Effect.gen(function*() {
        const clone = yield* Profile.clone(Profile.cloneFrom(w.source, w.root), w.layout, owner)
        yield* clone.materialize([{ path: "tether/a", content: "a" }])
        yield* Deferred.succeed(ready, clone.root)
        return yield* Effect.never
      })))
      const root = yield* Deferred.await(ready)
      expect(NodeFs.existsSync(root)).toBe(true)
      yield* Fiber.interrupt(fiber)
      expect(NodeFs.existsSync(root)).toBe(false)
      expect(NodeFs.readdirSync(w.root)).toEqual([])
    })))

  it.live("removes at close a clone in which the CLI left read-only directories (Go's module cache)", () =>
    run(Effect.gen(function*() {
      const { dir, root, source } = yield* scratchProfile
      NodeFs.writeFileSync(NodePath.join(source, "settings.json"), "{}")
      handOver(dir)
      const before = snapshot(source)
      const outcome = yield* runUnprivileged(dir, "close", source, root)
      expect(NodePath.dirname(String(outcome.clone))).toBe(root)
      expect(NodeFs.readdirSync(root)).toEqual([])
      expect(snapshot(source)).toEqual(before)
    })))

  it.live("a clone it cannot remove at close stays marked as this host's, never reclaimed while the host lives", () =>
    run(Effect.gen(function*() {
      const { root, source } = yield* scratchProfile
      const warnings = capturedWarnings()
      const stuck = yield* Effect.scoped(Effect.gen(function*() {
        const clone = yield* Profile.clone(Profile.cloneFrom(source, root), layoutAt(source), owner)
        tooDeep(clone.siblings["home"]!)
        return clone.root
      })).pipe(Effect.provide(warnings.layer))
      expect(warnings.lines).toEqual(["ERROR profile clone removal failed"])
      const marker = JSON.parse(NodeFs.readFileSync(NodePath.join(stuck, ".tether-clone.json"), "utf8"))
      expect(marker).toMatchObject({ pid: process.pid, agentId: owner.agentId })
      expect(yield* Profile.reclaim({ root })).toEqual([])
      expect(NodeFs.existsSync(stuck)).toBe(true)
      NodeChild.execFileSync("rm", ["-rf", stuck])
    })))

  it.live("refuses a clone root inside the source, also through a symlink, creating nothing", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const before = snapshot(w.source)
      const outsideBefore = snapshot(w.outside)
      const base = NodePath.dirname(w.source)
      NodeFs.symlinkSync(w.source, NodePath.join(base, "to-source"))
      NodeFs.symlinkSync(NodePath.join(w.source, "skills"), NodePath.join(base, "to-skills"))
      const roots = [
        w.source,
        NodePath.join(w.source, "clones"),
        NodePath.join(w.source, "skills"),
        NodePath.join(w.source, "new", "clones"),
        NodePath.join(base, "to-source"),
        NodePath.join(base, "to-source", "clones"),
        NodePath.join(base, "to-skills", "clones")
      ]
      for (const root of roots) {
        for (
          const selection of [
            Profile.cloneFrom(w.source, root),
            Profile.cloneNative(root),
            Profile.dedicated(w.source, { root })
          ]
        ) {
          const error = yield* Effect.flip(Effect.scoped(Profile.clone(selection, w.layout, owner)))
          expect(error).toMatchObject({
            _tag: "ProfileError",
            reason: "UnsafeRoot",
            detail: "inside the source profile"
          })
        }
      }
      // Reached through a symlinked source path too.
      const linked = NodePath.join(base, "to-source")
      const error = yield* Effect.flip(
        Profile.clone(Profile.cloneFrom(linked, NodePath.join(w.source, "c")), w.layout, owner)
      )
      expect(error).toMatchObject({ _tag: "ProfileError", reason: "UnsafeRoot" })
      expect(snapshot(w.source)).toEqual(before)
      expect(snapshot(w.outside)).toEqual(outsideBefore)
      // A missing native profile: a root inside it would create it.
      const missing = NodePath.join(base, "missing")
      const refused = yield* Effect.flip(
        Profile.clone(Profile.cloneNative(NodePath.join(missing, "clones")), layoutAt(missing), owner)
      )
      expect(refused).toMatchObject({ _tag: "ProfileError", reason: "UnsafeRoot" })
      expect(NodeFs.existsSync(missing)).toBe(false)
      // A sibling whose name starts like the source's is outside it.
      const beside = `${w.source}-clones`
      yield* Effect.scoped(Profile.clone(Profile.cloneFrom(w.source, beside), w.layout, owner))
      expect(NodeFs.readdirSync(beside)).toEqual([])
      expect(snapshot(w.source)).toEqual(before)
    })))

  it.live("fails with ProfileCollision Reserved before launch when a source entry sits at a reserved name", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      write(w.source, "hosted-mcp.json", "{}")
      const layout = { ...w.layout, classes: { ...w.layout.classes, mcp: ["mcp.json", "hosted-mcp.json"] } }
      const error = yield* Effect.flip(Effect.scoped(Profile.clone(Profile.cloneFrom(w.source, w.root), layout, owner)))
      expect(error).toMatchObject({ _tag: "ProfileCollision", reason: "Reserved", path: "hosted-mcp.json" })
      expect(NodeFs.readdirSync(w.root)).toEqual([])
      // Not brought into the clone (MCP not selected): no collision.
      const ok = yield* Profile.clone(Profile.cloneFrom(w.source, w.root, { mcp: false }), layout, owner)
      expect(NodeFs.existsSync(NodePath.join(ok.dir, "hosted-mcp.json"))).toBe(false)
    })))

  it.live("fails with SourceMissing for an explicit source that does not exist; a missing native profile is empty", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const missing = NodePath.join(w.root, "..", "nope")
      const error = yield* Effect.flip(Profile.clone(Profile.dedicated(missing, { root: w.root }), w.layout, owner))
      expect(error).toMatchObject({ _tag: "ProfileError", reason: "SourceMissing" })
      const empty = yield* Profile.clone(Profile.cloneNative(w.root), layoutAt(missing), owner)
      expect(NodeFs.readdirSync(empty.dir)).toEqual([])
      expect(NodeFs.existsSync(missing)).toBe(false)
    })))
})

describe("ExecutionProfile.materialize", () => {
  it.live("records owned entries in a manifest and rewrites them while unchanged", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const clone = yield* Profile.clone(Profile.cloneFrom(w.source, w.root), w.layout, owner)
      yield* clone.materialize([{ path: "tether/a.json", content: "1" }, { path: "settings.json", content: "{}" }])
      yield* clone.materialize([{ path: "tether/a.json", content: "2" }])
      expect(NodeFs.readFileSync(NodePath.join(clone.dir, "tether/a.json"), "utf8")).toBe("2")
      const manifest = JSON.parse(NodeFs.readFileSync(NodePath.join(clone.root, ".tether-manifest.json"), "utf8"))
      expect(manifest.entries.map((e: { path: string; owner: string }) => [e.path, e.owner]).sort()).toEqual([
        ["settings.json", "agent-1"],
        ["tether/a.json", "agent-1"]
      ])
    })))

  it.live("a skill folder it writes holds only the batch's files: the source skill's copies under it go", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      write(w.source, "skills/local/scripts/run.sh", "echo source\n")
      write(w.source, "skills/local/notes/more.md", "source notes\n")
      const clone = yield* Profile.clone(Profile.cloneFrom(w.source, w.root), w.layout, owner)
      const files = (dir: string) =>
        (NodeFs.readdirSync(dir, { recursive: true }) as Array<string>)
          .filter((rel) => NodeFs.statSync(NodePath.join(dir, rel)).isFile()).sort()
      yield* clone.materialize([{ path: "skills/local/SKILL.md", content: "# the agent's\n" }])
      expect(files(NodePath.join(clone.dir, "skills/local"))).toEqual(["SKILL.md"])
      // The other skills and the source are untouched.
      expect(files(NodePath.join(clone.dir, "skills/ext"))).toEqual(["SKILL.md"])
      expect(files(NodePath.join(w.source, "skills/local"))).toEqual(["SKILL.md", "notes/more.md", "scripts/run.sh"])
      // A copy the CLI changed in the clone is no longer the clone's own: refused, nothing written.
      const other = yield* Profile.clone(Profile.cloneFrom(w.source, w.root), w.layout, { agentId: "agent-2" })
      NodeFs.writeFileSync(NodePath.join(other.dir, "skills/local/scripts/run.sh"), "echo changed\n")
      expect(yield* Effect.flip(other.materialize([{ path: "skills/local/SKILL.md", content: "# x\n" }])))
        .toMatchObject({ _tag: "ProfileCollision", reason: "Unowned", path: "skills/local/scripts/run.sh" })
      expect(NodeFs.readFileSync(NodePath.join(other.dir, "skills/local/SKILL.md"), "utf8")).toBe("# local\n")
    })))

  it.live("refuses entries it does not own, changed entries, links on the way and invalid paths, writing nothing", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const clone = yield* Profile.clone(Profile.cloneFrom(w.source, w.root), w.layout, owner)
      const fail = (files: ReadonlyArray<Profile.MaterializedFile>) => Effect.flip(clone.materialize(files))
      write(clone.dir, "sessions/cli.jsonl", "cli")
      expect(yield* fail([{ path: "sessions/cli.jsonl", content: "x" }])).toMatchObject({
        _tag: "ProfileCollision",
        reason: "Unowned"
      })
      expect(yield* fail([{ path: "sessions/cli.jsonl/x", content: "x" }])).toMatchObject({ reason: "Unowned" })
      // A seeded entry the provider replaced is no longer the clone's.
      NodeFs.rmSync(NodePath.join(clone.dir, "mcp.json"))
      write(clone.dir, "mcp.json", "{\"by\":\"cli\"}")
      expect(yield* fail([{ path: "mcp.json", content: "x" }])).toMatchObject({ reason: "Unowned" })
      yield* clone.materialize([{ path: "tether/a.json", content: "1" }])
      write(clone.dir, "tether/a.json", "user edit")
      expect(yield* fail([{ path: "tether/a.json", content: "2" }])).toMatchObject({ reason: "UserModified" })
      // Unless the caller owns every change in its clone (an agent restoring what the CLI edited).
      yield* clone.materialize([{ path: "tether/a.json", content: "2" }], { replaceChanged: true })
      expect(NodeFs.readFileSync(NodePath.join(clone.dir, "tether/a.json"), "utf8")).toBe("2")
      yield* clone.materialize([{ path: "tether/a.json", content: "3" }])
      NodeFs.symlinkSync(w.outside, NodePath.join(clone.dir, "linked"))
      expect(yield* fail([{ path: "linked/x", content: "x" }])).toMatchObject({
        reason: "ThroughLink",
        path: "linked"
      })
      for (const path of ["", "/etc/passwd", "../escape", "a/../../b", "a//b", "./a"]) {
        expect(yield* fail([{ path, content: "x" }])).toMatchObject({ _tag: "ProfileError", reason: "InvalidPath" })
      }
      expect(yield* fail([{ path: "tether/d", content: "1" }, { path: "tether/d", content: "2" }])).toMatchObject({
        reason: "InvalidPath"
      })
      expect(yield* fail([{ path: "tether/p", content: "1" }, { path: "tether/p/q", content: "2" }])).toMatchObject({
        reason: "InvalidPath"
      })
      // A batch with one refused entry writes none of them.
      expect(yield* fail([{ path: "tether/new", content: "x" }, { path: "mcp.json", content: "x" }])).toMatchObject({
        reason: "Unowned"
      })
      expect(NodeFs.existsSync(NodePath.join(clone.dir, "tether/new"))).toBe(false)
      expect(NodeFs.readdirSync(w.outside).sort()).toEqual(["ext-skill", "shared-settings.toml", "token.json"])
    })))

  it.live("keeps a materialized entry the user changed at close, removes the rest and marks the clone retained", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const root = yield* Effect.scoped(Effect.gen(function*() {
        const clone = yield* Profile.clone(Profile.cloneFrom(w.source, w.root), w.layout, owner)
        yield* clone.materialize([{ path: "tether/keep.json", content: "1" }, {
          path: "tether/drop.json",
          content: "1"
        }])
        write(clone.dir, "tether/keep.json", "changed by the user")
        return clone.root
      }))
      expect(snapshot(NodePath.join(root, "profile"))).toMatchObject({
        "tether/keep.json": { type: "file" }
      })
      expect(Object.keys(snapshot(NodePath.join(root, "profile")))).toEqual(["tether", "tether/keep.json"])
      expect(NodeFs.readdirSync(root).sort()).toEqual([".tether-clone.json", ".tether-manifest.json", "profile"])
      const marker = JSON.parse(NodeFs.readFileSync(NodePath.join(root, ".tether-clone.json"), "utf8"))
      expect(marker.retained).toEqual(["tether/keep.json"])
      // A retained clone is never reclaimed automatically, even though its owner is gone.
      expect(yield* Profile.reclaim({ root: w.root })).toEqual([])
      expect(NodeFs.existsSync(root)).toBe(true)
    })))
})

describe("identity and fingerprint", () => {
  it.live("is stable across clones; changes with copied settings, MCP and skills; never with auth", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const take = (options?: Profile.CloneOptions) =>
        Effect.scoped(
          Profile.clone(Profile.cloneFrom(w.source, w.root, options), w.layout, owner).pipe(
            Effect.map((c) => ({ fingerprint: c.fingerprint, identity: c.identity, dir: c.dir }))
          )
        )
      const first = yield* take()
      const second = yield* take()
      expect(second.dir).not.toBe(first.dir)
      expect(second.fingerprint).toBe(first.fingerprint)
      expect(first.fingerprint).toMatch(/^[0-9a-f]{64}$/)
      expect(second.identity).toBe(first.identity)
      expect(first.identity).toBe(`fake:${NodeFs.realpathSync(w.source)}`)
      // Auth rotation, linked or copied, and undeclared session data leave it unchanged.
      write(w.source, "auth.json", "{\"token\":\"rotated\"}", 0o600)
      write(w.outside, "token.json", "{\"token\":\"rotated\"}", 0o600)
      write(w.source, "sessions/other.jsonl", "{}")
      expect((yield* take()).fingerprint).toBe(first.fingerprint)
      expect((yield* take({ auth: "copy" })).fingerprint).toBe(first.fingerprint)
      expect((yield* take({ auth: "none" })).fingerprint).toBe(first.fingerprint)
      write(w.source, "settings.json", "{\"theme\":\"light\"}", 0o640)
      const changed = yield* take()
      expect(changed.fingerprint).not.toBe(first.fingerprint)
      write(w.outside, "ext-skill/SKILL.md", "# ext v2\n")
      const skill = yield* take()
      expect(skill.fingerprint).not.toBe(changed.fingerprint)
      write(w.source, "mcp.json", "{\"mcpServers\":{\"a\":{}}}")
      expect((yield* take()).fingerprint).not.toBe(skill.fingerprint)
      expect((yield* take({ mcp: false })).fingerprint).not.toBe((yield* take()).fingerprint)
      const custom = yield* Effect.scoped(
        Profile.clone(Profile.cloneFrom(w.source, w.root), w.layout, { agentId: "a", identity: "tenant/1" })
      )
      expect(custom.identity).toBe("tenant/1")
    })))
})

describe("concurrency", () => {
  it.live("a dedicated profile used by a live agent fails ProfileInUse until that agent closes", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const selection = Profile.dedicated(w.source, { root: w.root })
      const scope = yield* Scope.make()
      yield* Profile.clone(selection, w.layout, { agentId: "first" }).pipe(Scope.extend(scope))
      const error = yield* Effect.flip(Effect.scoped(Profile.clone(selection, w.layout, { agentId: "second" })))
      expect(error).toMatchObject({ _tag: "ProfileInUse", agentId: "first", dir: NodeFs.realpathSync(w.source) })
      // Non-dedicated selections of the same source are not exclusive.
      yield* Effect.scoped(Profile.clone(Profile.cloneFrom(w.source, w.root), w.layout, { agentId: "third" }))
      yield* Scope.close(scope, Exit.void)
      yield* Effect.scoped(Profile.clone(selection, w.layout, { agentId: "second" }))
    })))

  it.live("two agents cloning one source concurrently get separate clones that do not interfere", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const before = snapshot(w.source)
      const agent = (agentId: string) =>
        Effect.scoped(Effect.gen(function*() {
          const clone = yield* Profile.clone(Profile.cloneFrom(w.source, w.root), w.layout, { agentId })
          for (let i = 0; i < 20; i++) {
            yield* clone.materialize([{ path: "tether/who", content: `${agentId}-${i}` }, {
              path: "auth.json",
              content: agentId
            }])
            yield* Effect.yieldNow()
            expect(NodeFs.readFileSync(NodePath.join(clone.dir, "tether/who"), "utf8")).toBe(`${agentId}-${i}`)
          }
          return clone.root
        }))
      const [a, b] = yield* Effect.all([agent("a"), agent("b")], { concurrency: 2 })
      expect(a).not.toBe(b)
      expect(NodeFs.readdirSync(w.root)).toEqual([])
      expect(snapshot(w.source)).toEqual(before)
    })))
})

describe("Profile.inspect", () => {
  it.live("reports the declared entries and what live clones materialized, as on disk", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const selection = Profile.cloneFrom(w.source, w.root)
      const clone = yield* Profile.clone(selection, w.layout, owner)
      yield* clone.materialize([{ path: "tether/a", content: "a" }, { path: "tether/b", content: "b" }])
      write(clone.dir, "tether/b", "edited")
      const report = yield* Profile.inspect(selection, w.layout)
      expect(report.exists).toBe(true)
      expect(report.identity).toBe(clone.identity)
      expect(report.declared.map((d) => `${d.class}:${d.kind}:${d.path}`)).toEqual([
        "auth:file:auth.json",
        "settings:file:conf/a.toml",
        "settings:symlink:conf/b.toml",
        "auth:file:credentials/key",
        "auth:symlink:credentials/outside",
        "mcp:file:mcp.json",
        "settings:file:settings.json",
        "skills:file:skills/ext/SKILL.md",
        "skills:file:skills/local/SKILL.md"
      ])
      expect(report.clones).toHaveLength(1)
      expect(report.clones[0]).toMatchObject({ root: clone.root, agentId: "agent-1", alive: true, retained: false })
      expect(report.clones[0]!.materialized.map((m) => [m.path, m.state])).toEqual([
        ["tether/a", "intact"],
        ["tether/b", "modified"]
      ])
      NodeFs.rmSync(NodePath.join(clone.dir, "tether/a"))
      const again = yield* Profile.inspect(selection, w.layout)
      expect(again.clones[0]!.materialized[0]!.state).toBe("missing")
    })))
})
