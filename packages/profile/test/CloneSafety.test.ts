// What a clone never does to what is not its own: reclaiming a root removes only clones (never a
// source profile kept beside them, nor a user's directory named like one), the identity of a
// missing native profile does not change once it is created, and a clone whose acquisition
// failed leaves no directory and holds no dedicated source.
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Profile from "../src/Profile.js"
import { sessionLayout } from "./fixtures/sessions.js"
import { layoutAt, populate, snapshot, tempDir, write } from "./fixtures/tree.js"

const run = <A, E>(effect: Effect.Effect<A, E, NodeContext.NodeContext | Scope.Scope>) =>
  effect.pipe(Effect.scoped, Effect.provide(NodeContext.layer))

const hourAgo = () => new Date(Date.now() - 60 * 60_000)

describe("clone safety: reclaim, identity and failed acquisition", () => {
  it.live("a source profile beside its clones (same parent directory) is never removed by the root's reclaim", () =>
    run(Effect.gen(function*() {
      const base = yield* tempDir()
      // A prepared profile kept beside the clones of it: `/srv/agents/c-claude` cloned under `/srv/agents`.
      const source = NodePath.join(base, "c-claude")
      const outside = yield* tempDir()
      NodeFs.mkdirSync(source)
      populate(source, outside)
      // Set up an hour ago (any profile older than the 10-minute grace).
      NodeFs.utimesSync(source, hourAgo(), hourAgo())
      const before = snapshot(source)
      const exit = yield* Effect.exit(
        Profile.clone(Profile.cloneFrom(source, base), layoutAt(source), { agentId: "a" })
      )
      expect(NodeFs.existsSync(source)).toBe(true)
      expect(snapshot(source)).toEqual(before)
      expect(Exit.isSuccess(exit)).toBe(true)
    })))

  it.live("a source holding only directories beside its clones is spared by the reclaim its clone runs", () =>
    run(Effect.gen(function*() {
      const base = yield* tempDir()
      // Looks like a clone killed before its marker: directories only, a clone's name, old.
      const source = NodePath.join(base, "c-codex1")
      NodeFs.mkdirSync(NodePath.join(source, "skills", "review"), { recursive: true })
      NodeFs.utimesSync(source, hourAgo(), hourAgo())
      const made = yield* Profile.clone(Profile.cloneFrom(source, base), layoutAt(source), { agentId: "a" })
      expect(NodeFs.readdirSync(source)).toEqual(["skills"])
      expect(NodeFs.readdirSync(base).sort()).toEqual([NodePath.basename(made.root), "c-codex1"].sort())
    })))

  it.live("reclaims an unmarked directory only when it holds nothing but what a clone holds", () =>
    run(Effect.gen(function*() {
      const root = yield* tempDir()
      const dir = (name: string, files: Record<string, string>, dirs: ReadonlyArray<string> = []) => {
        const at = NodePath.join(root, name)
        NodeFs.mkdirSync(at)
        for (const sub of dirs) NodeFs.mkdirSync(NodePath.join(at, sub))
        for (const [file, content] of Object.entries(files)) NodeFs.writeFileSync(NodePath.join(at, file), content)
        return at
      }
      // Clones whose creation was killed: empty, a torn marker, the temporary file of a manifest.
      const empty = dir("c-empty1", {})
      const torn = dir("c-torn01", { ".tether-clone.json": `{"version":1,"pi` }, ["profile", "home"])
      const pending = dir("c-tmp001", { ".tether-manifest.json.123-0123456789ab.tmp": "{" }, ["profile"])
      // A user's directories that happen to be named like clones, in a shared root (`/var/tmp`).
      const user = dir("c-user01", { "notes.txt": "mine" }, ["profile"])
      const linked = dir("c-link01", {}, ["profile"])
      NodeFs.symlinkSync("profile", NodePath.join(linked, "home"))
      const reclaimed = yield* Profile.reclaim({ root, unmarkedGraceMillis: -1 })
      expect([...reclaimed].sort()).toEqual([empty, pending, torn])
      expect(NodeFs.readdirSync(root).sort()).toEqual(["c-link01", "c-user01"])
      expect(NodeFs.readFileSync(NodePath.join(user, "notes.txt"), "utf8")).toBe("mine")
    })))

  it.live("the identity of a native profile under a symlinked path is stable once the profile is created", () =>
    run(Effect.gen(function*() {
      const base = yield* tempDir()
      // `/home` -> `/data/home`: the user's home is reached through a link.
      const real = NodePath.join(base, "data-home")
      const home = NodePath.join(base, "home")
      NodeFs.mkdirSync(real)
      NodeFs.symlinkSync(real, home)
      const native = NodePath.join(home, ".fake")
      const layout = sessionLayout(native)
      const sessions = NodePath.join(base, "sessions")
      const root = NodePath.join(base, "clones")
      const selection = Profile.native({ root, sessions })
      // The agent runs before the user ever made the native profile (API key in the environment).
      const first = yield* Effect.gen(function*() {
        const scope = yield* Scope.make()
        const clone = yield* Profile.clone(selection, layout, { agentId: "a" }).pipe(Scope.extend(scope))
        write(clone.dir, "sessions/s.jsonl", "turn 1")
        yield* clone.saveSessions
        yield* Scope.close(scope, Exit.void)
        return clone
      })
      // `inspect` reports the identity `clone` uses.
      expect.soft((yield* Profile.inspect(selection, layout)).identity).toBe(first.identity)
      // Later the user logs in: the native profile now exists.
      NodeFs.mkdirSync(native)
      const second = yield* Profile.clone(selection, layout, { agentId: "b" })
      expect.soft(second.identity).toBe(first.identity)
      expect.soft((yield* Profile.inspect(selection, layout)).identity).toBe(first.identity)
      expect.soft(NodeFs.existsSync(NodePath.join(second.dir, "sessions/s.jsonl"))).toBe(true)
    })))

  it.live("a clone whose acquisition failed leaves no directory and holds no dedicated lock", () =>
    run(Effect.gen(function*() {
      const base = yield* tempDir()
      const source = NodePath.join(base, "source")
      const outside = NodePath.join(base, "outside")
      const root = NodePath.join(base, "clones")
      NodeFs.mkdirSync(source)
      NodeFs.mkdirSync(outside)
      populate(source, outside)
      // A source entry at a name the driver reserves: the clone fails `Reserved` before launch.
      write(source, "hosted-mcp.json", "{}")
      const fixture = layoutAt(source)
      const layout = { ...fixture, classes: { ...fixture.classes, mcp: ["mcp.json", "hosted-mcp.json"] } }
      const selection = Profile.dedicated(source, { root })
      const failed = yield* Effect.flip(Profile.clone(selection, layout, { agentId: "a" }))
      expect(failed._tag).toBe("ProfileCollision")
      // The failed acquisition left nothing on disk...
      expect.soft(NodeFs.readdirSync(root)).toEqual([])
      // ...and the user, having removed the offending entry, gets the clone (not ProfileInUse).
      NodeFs.rmSync(NodePath.join(source, "hosted-mcp.json"))
      const retry = yield* Effect.either(Profile.clone(selection, layout, { agentId: "a" }))
      expect.soft(retry._tag === "Left" ? retry.left._tag : "Right").toBe("Right")
    })))
})
