import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as NodeChild from "node:child_process"
import * as NodeCrypto from "node:crypto"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import * as Sessions from "../src/internal/sessions.js"
import * as Profile from "../src/Profile.js"
import * as ProfileLayout from "../src/ProfileLayout.js"
import { sessionLayout, sharedVersion } from "./fixtures/sessions.js"
import { layoutAt, populate, snapshot, tempDir, write } from "./fixtures/tree.js"

const run = <A, E>(effect: Effect.Effect<A, E, NodeContext.NodeContext | Scope.Scope>) =>
  effect.pipe(Effect.scoped, Effect.provide(NodeContext.layer))

const world = Effect.gen(function*() {
  const base = yield* tempDir()
  const source = NodePath.join(base, "source")
  const outside = NodePath.join(base, "outside")
  const root = NodePath.join(base, "clones")
  const store = NodePath.join(base, "sessions")
  NodeFs.mkdirSync(source)
  NodeFs.mkdirSync(outside)
  populate(source, outside)
  return { base, source, outside, root, store, layout: sessionLayout(source) }
})
type World = Effect.Effect.Success<typeof world>

const selection = (w: World, options: Profile.CloneOptions = {}) =>
  Profile.cloneFrom(w.source, w.root, { sessions: w.store, ...options })

/** A clone in its own scope, so a test can close it at a chosen point. */
const openClone = (w: World, owner: Profile.Owner, options: Profile.CloneOptions = {}) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const clone = yield* Profile.clone(selection(w, options), w.layout, owner).pipe(Scope.extend(scope))
    return { clone, close: Scope.close(scope, Exit.void) }
  })

/** The store of `alice` after one clone saved `sessions/s.jsonl` ("v1") at its close. */
const savedStore = (w: World) =>
  Effect.gen(function*() {
    const first = yield* openClone(w, alice)
    write(first.clone.dir, "sessions/s.jsonl", "v1")
    yield* first.close
    return first.clone.sessions!
  })

const read = (root: string, rel: string) => NodeFs.readFileSync(NodePath.join(root, rel), "utf8")
const exists = (root: string, rel: string) => NodeFs.existsSync(NodePath.join(root, rel))
const storeFiles = (dir: string) =>
  (NodeFs.readdirSync(NodePath.join(dir, "profile"), { recursive: true, withFileTypes: true }) as Array<NodeFs.Dirent>)
    .filter((d) => d.isFile())
    .map((d) => NodePath.relative(NodePath.join(dir, "profile"), NodePath.join(d.parentPath, d.name)))
    .sort()

const alice = { agentId: "a-1", identity: "fake:tenant/alice" }

describe("ProfileLayout.isSession", () => {
  it("matches the sessions globs (a directory pattern covers its subtree); a layout without sessions has none", () => {
    const layout = sessionLayout("/nowhere")
    expect(ProfileLayout.isSession(layout, "sessions/2026/11/30/rollout-x.jsonl")).toBe(true)
    expect(ProfileLayout.isSession(layout, "index.json")).toBe(true)
    expect(ProfileLayout.isSession(layout, "tether/hosted.json")).toBe(true)
    expect(ProfileLayout.isSession(layout, "state_5.sqlite")).toBe(false)
    expect(ProfileLayout.isSession(layout, "index.json.bak")).toBe(false)
    expect(ProfileLayout.isSession(layoutAt("/nowhere"), "sessions/2026/x.jsonl")).toBe(false)
    // Sessions are not a source class: `classify` is unchanged by them.
    expect(ProfileLayout.classify(layout, "sessions/2026/x.jsonl")).toBeUndefined()
  })
})

describe("Profile session store", () => {
  it.live("round trip: a clone saves its session entries at close, the next clone of the identity is seeded", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const first = yield* openClone(w, alice)
      expect(first.clone.sessions).toBe(NodePath.join(w.store, NodePath.basename(first.clone.sessions!)))
      // The source's own session data is never brought in: sessions come from the store only.
      expect(exists(first.clone.dir, "sessions/2026/rollout.jsonl")).toBe(false)
      write(first.clone.dir, "sessions/2026/11/rollout-1.jsonl", "turn 1\n", 0o600)
      write(first.clone.dir, "index.json", `{"threads":1}`, 0o644)
      write(first.clone.dir, "cache/blob", "not a session")
      yield* first.close
      expect(NodeFs.existsSync(first.clone.root)).toBe(false)
      expect(storeFiles(first.clone.sessions!)).toEqual(["index.json", "sessions/2026/11/rollout-1.jsonl"])
      // Private: directories 0700, files without group/other bits.
      expect(NodeFs.statSync(first.clone.sessions!).mode & 0o777).toBe(0o700)
      expect(NodeFs.statSync(NodePath.join(first.clone.sessions!, "profile/index.json")).mode & 0o777).toBe(0o600)

      const second = yield* openClone(w, { ...alice, agentId: "a-2" })
      expect(second.clone.sessions).toBe(first.clone.sessions)
      expect(read(second.clone.dir, "sessions/2026/11/rollout-1.jsonl")).toBe("turn 1\n")
      expect(read(second.clone.dir, "index.json")).toBe(`{"threads":1}`)
      expect(exists(second.clone.dir, "cache/blob")).toBe(false)
      // An unchanged clone saves nothing; an appended transcript is saved on demand.
      expect(yield* second.clone.saveSessions).toEqual({ saved: [], removed: [] })
      NodeFs.appendFileSync(NodePath.join(second.clone.dir, "sessions/2026/11/rollout-1.jsonl"), "turn 2\n")
      expect(yield* second.clone.saveSessions).toEqual({ saved: ["sessions/2026/11/rollout-1.jsonl"], removed: [] })
      expect(read(NodePath.join(second.clone.sessions!, "profile"), "sessions/2026/11/rollout-1.jsonl"))
        .toBe("turn 1\nturn 2\n")
      // A deleted entry leaves the store.
      NodeFs.rmSync(NodePath.join(second.clone.dir, "index.json"))
      yield* second.close
      expect(storeFiles(second.clone.sessions!)).toEqual(["sessions/2026/11/rollout-1.jsonl"])
      // The seeded copy is a copy: editing the clone never wrote the store before a save.
      expect(NodeFs.readdirSync(NodePath.join(second.clone.sessions!, "tmp"))).toEqual([])
    })))

  it.live("an identity's store is made by its first save: clones that save nothing leave no directory", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const idle = yield* openClone(w, alice)
      expect(yield* idle.clone.saveSessions).toEqual({ saved: [], removed: [] })
      yield* idle.close
      // Nothing was saved: nothing under the sessions root but the root itself.
      expect(NodeFs.existsSync(idle.clone.sessions!)).toBe(false)
      expect(NodeFs.readdirSync(w.store)).toEqual([])

      const first = yield* openClone(w, { ...alice, agentId: "a-2" })
      expect(first.clone.sessions).toBe(idle.clone.sessions)
      write(first.clone.dir, "sessions/s.jsonl", "v1")
      expect(yield* first.clone.saveSessions).toEqual({ saved: ["sessions/s.jsonl"], removed: [] })
      for (const dir of ["", "profile", "tmp"]) {
        expect(NodeFs.statSync(NodePath.join(first.clone.sessions!, dir)).mode & 0o777).toBe(0o700)
      }
      yield* first.close
      const second = yield* openClone(w, { ...alice, agentId: "a-3" })
      expect(read(second.clone.dir, "sessions/s.jsonl")).toBe("v1")
      yield* second.close
    })))

  it.live("a clone opened while another clone's first save is making the store seeds nothing and saves", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const store = yield* Sessions.open(selection(w), w.layout, w.source, alice.identity)
      expect(NodeFs.existsSync(store!.dir)).toBe(false)
      // The other clone's save has made the store and `profile/`, not yet `tmp/`.
      NodeFs.mkdirSync(store!.profile, { recursive: true, mode: 0o700 })
      const clone = yield* tempDir()
      expect(yield* Sessions.seed(store!, w.layout, clone)).toEqual(new Map())
      write(clone, "sessions/s.jsonl", "v1")
      const saved = yield* Sessions.save(store!, w.layout, clone, new Map(), new Set())
      expect(saved).toEqual({ saved: ["sessions/s.jsonl"], removed: [] })
      expect(read(store!.profile, "sessions/s.jsonl")).toBe("v1")
    })))

  it.live("a store another clone made after this one opened is checked before it is read or changed", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const store = (yield* Sessions.open(selection(w), w.layout, w.source, alice.identity))!
      // Made meanwhile, open to the group: never seeded from, pruned or dropped in.
      for (const dir of [store.dir, store.profile, store.tmp]) NodeFs.mkdirSync(dir, { mode: 0o700 })
      write(store.profile, "sessions/s.jsonl", "v1", 0o600)
      NodeFs.chmodSync(store.dir, 0o770)
      const unsafe = { _tag: "ProfileError", reason: "UnsafeRoot" }
      const clone = yield* tempDir()
      expect(yield* Effect.flip(Sessions.seed(store, w.layout, clone))).toMatchObject(unsafe)
      expect(exists(clone, "sessions/s.jsonl")).toBe(false)
      expect(yield* Effect.flip(Sessions.prune(store, w.layout, Date.now() + 1000, []))).toMatchObject(unsafe)
      expect(yield* Effect.flip(Sessions.drop(store, w.layout, undefined, ["s"]))).toMatchObject(unsafe)
      expect(read(store.profile, "sessions/s.jsonl")).toBe("v1")
    })))

  it.live("an identity's store that exists is checked when a clone opens it, before any save", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      NodeFs.chmodSync(yield* savedStore(w), 0o755)
      const refused = yield* Effect.flip(openClone(w, { ...alice, agentId: "a-2" }))
      expect(refused).toMatchObject({ _tag: "ProfileError", reason: "UnsafeRoot" })
    })))

  it.live("the copy in a clone is isolated until saved; saveSessions after close fails with CloneClosed", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const first = yield* openClone(w, alice)
      write(first.clone.dir, "sessions/s.jsonl", "v1")
      yield* first.clone.saveSessions
      write(first.clone.dir, "sessions/s.jsonl", "v2-unsaved")
      expect(read(NodePath.join(first.clone.sessions!, "profile"), "sessions/s.jsonl")).toBe("v1")
      yield* first.close
      expect(read(NodePath.join(first.clone.sessions!, "profile"), "sessions/s.jsonl")).toBe("v2-unsaved")
      const error = yield* Effect.flip(first.clone.saveSessions)
      expect(error).toMatchObject({ _tag: "ProfileError", reason: "CloneClosed" })
    })))

  it.live("identities are isolated: another identity's store is neither seeded nor written", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const a = yield* openClone(w, alice)
      write(a.clone.dir, "sessions/alice.jsonl", "alice")
      yield* a.close
      const b = yield* openClone(w, { agentId: "b-1", identity: "fake:tenant/bob" })
      expect(b.clone.sessions).not.toBe(a.clone.sessions)
      expect(exists(b.clone.dir, "sessions/alice.jsonl")).toBe(false)
      write(b.clone.dir, "sessions/bob.jsonl", "bob")
      yield* b.close
      expect(storeFiles(a.clone.sessions!)).toEqual(["sessions/alice.jsonl"])
      expect(storeFiles(b.clone.sessions!)).toEqual(["sessions/bob.jsonl"])
      // The default identity (provider + canonical source) has a store of its own.
      const c = yield* openClone(w, { agentId: "c-1" })
      expect([a.clone.sessions, b.clone.sessions]).not.toContain(c.clone.sessions)
      expect(c.clone.identity).toBe(`fake:${NodeFs.realpathSync(w.source)}`)
      expect(NodeFs.readdirSync(c.clone.dir)).not.toContain("sessions")
      yield* c.close
    })))

  it.live("the source stays byte-identical through seed, save and close, and a store inside it is refused", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const before = snapshot(w.source)
      const outsideBefore = snapshot(w.outside)
      for (const options of [{}, { auth: "copy" as const }, { auth: "none" as const }]) {
        const clone = yield* openClone(w, alice, options)
        write(clone.clone.dir, "sessions/2026/rollout.jsonl", `{"type":"changed"}\n`)
        yield* clone.clone.saveSessions
        yield* clone.close
      }
      const dedicated = yield* Effect.scoped(Effect.gen(function*() {
        const clone = yield* Profile.clone(
          Profile.dedicated(w.source, { root: w.root, sessions: w.store }),
          w.layout,
          alice
        )
        expect(read(clone.dir, "sessions/2026/rollout.jsonl")).toBe(`{"type":"changed"}\n`)
        write(clone.dir, "sessions/2026/rollout.jsonl", "dedicated\n")
        return clone
      }))
      expect(read(NodePath.join(dedicated.sessions!, "profile"), "sessions/2026/rollout.jsonl")).toBe("dedicated\n")
      for (const store of [w.source, NodePath.join(w.source, "sessions"), NodePath.join(w.source, "new/store")]) {
        const error = yield* Effect.flip(Profile.clone(selection(w, { sessions: store }), w.layout, alice))
        expect(error).toMatchObject({ _tag: "ProfileError", reason: "UnsafeRoot", detail: "inside the source profile" })
      }
      expect(snapshot(w.outside)).toEqual(outsideBefore)
      // Refused before anything was created (`<source>/new/store` does not exist).
      expect(snapshot(w.source)).toEqual(before)
      expect(NodeFs.readdirSync(w.root)).toEqual([])
    })))

  it.live("session entries are never part of the fingerprint", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const empty = yield* openClone(w, alice)
      const noStore = yield* openClone(w, alice, { sessions: false })
      expect(noStore.clone.sessions).toBeUndefined()
      write(empty.clone.dir, "sessions/a.jsonl", "a".repeat(1000))
      write(empty.clone.dir, "index.json", "{}")
      yield* empty.close
      const seeded = yield* openClone(w, alice)
      expect(read(seeded.clone.dir, "sessions/a.jsonl")).toHaveLength(1000)
      expect(seeded.clone.fingerprint).toBe(empty.clone.fingerprint)
      expect(noStore.clone.fingerprint).toBe(empty.clone.fingerprint)
      // Control: the fingerprint does see a settings change, so the equality above can fail.
      write(w.source, "settings.json", `{"theme":"light"}`, 0o640)
      const changed = yield* openClone(w, alice)
      expect(changed.clone.fingerprint).not.toBe(empty.clone.fingerprint)
      yield* Effect.all([seeded.close, noStore.close, changed.close])
    })))

  it.live("a session glob never takes over declared, reserved, materialized or symlinked entries", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const layout: ProfileLayout.ProfileLayout = {
        ...w.layout,
        classes: { ...w.layout.classes, sessions: ["**"] }
      }
      const secret = NodePath.join(w.outside, "secret.txt")
      NodeFs.writeFileSync(secret, "do not copy")
      const saved = yield* Effect.scoped(Effect.gen(function*() {
        const clone = yield* Profile.clone(selection(w), layout, alice)
        yield* clone.materialize([{ path: "hosted-mcp.json", content: "{}" }, {
          path: "own/generated.json",
          content: "1"
        }])
        NodeFs.mkdirSync(NodePath.join(clone.dir, "sessions"), { recursive: true })
        NodeFs.symlinkSync(secret, NodePath.join(clone.dir, "sessions/link.jsonl"))
        NodeFs.symlinkSync(w.outside, NodePath.join(clone.dir, "linked-dir"))
        write(clone.dir, "sessions/real.jsonl", "real")
        return yield* clone.saveSessions
      }))
      expect(saved).toEqual({ saved: ["sessions/real.jsonl"], removed: [] })
      expect(ProfileLayout.isSession(layout, "settings.json")).toBe(true)
    })))

  it.live("saves replace whole files: concurrent readers only ever see a complete version", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const writer = yield* openClone(w, alice)
      const versions = [0, 1, 2, 3].map((i) => `${String(i).repeat(64)}\n`.repeat(16 * 1024))
      const file = "sessions/big.jsonl"
      write(writer.clone.dir, file, versions[0]!)
      yield* writer.clone.saveSessions
      const stored = NodePath.join(writer.clone.sessions!, "profile", file)
      let reads = 0
      let done = false
      const reader = Effect.gen(function*() {
        while (!done) {
          const content = yield* Effect.promise(() => NodeFs.promises.readFile(stored, "utf8"))
          expect(versions).toContain(content)
          reads++
          yield* Effect.yieldNow()
        }
      })
      const save = Effect.gen(function*() {
        for (let round = 1; round <= 24; round++) {
          NodeFs.writeFileSync(NodePath.join(writer.clone.dir, file), versions[round % 4]!)
          expect((yield* writer.clone.saveSessions).saved).toEqual([file])
        }
        done = true
      })
      yield* Effect.all([reader, save], { concurrency: "unbounded" })
      expect(reads).toBeGreaterThan(0)
      expect(NodeFs.readdirSync(NodePath.join(writer.clone.sessions!, "tmp"))).toEqual([])
      yield* writer.close
    })))

  it.live("a saved session file is private with the owner's bits of the clone's file, whatever the umask", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const first = yield* openClone(w, alice)
      write(first.clone.dir, "sessions/s.jsonl", "v1")
      NodeFs.chmodSync(NodePath.join(first.clone.dir, "sessions/s.jsonl"), 0o744)
      // A umask that clears the owner's write bit at creation: the mode is set again.
      const previous = process.umask(0o277)
      yield* Effect.addFinalizer(() => Effect.sync(() => process.umask(previous)))
      yield* first.clone.saveSessions
      process.umask(previous)
      const stored = NodePath.join(first.clone.sessions!, "profile", "sessions/s.jsonl")
      expect(NodeFs.statSync(stored).mode & 0o777).toBe(0o700)
      expect(read(NodePath.join(first.clone.sessions!, "profile"), "sessions/s.jsonl")).toBe("v1")
      yield* first.close
    })))

  it.live("a save that cannot replace the stored file fails with a ProfileError and leaves no temporary file", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const first = yield* openClone(w, alice)
      write(first.clone.dir, "sessions/s.jsonl", "v1")
      yield* first.clone.saveSessions
      // Something put a directory where the stored copy was: the rename onto it fails.
      const stored = NodePath.join(first.clone.sessions!, "profile", "sessions/s.jsonl")
      NodeFs.rmSync(stored)
      NodeFs.mkdirSync(NodePath.join(stored, "in-the-way"), { recursive: true })
      write(first.clone.dir, "sessions/s.jsonl", "v2")
      const error = yield* Effect.flip(first.clone.saveSessions)
      expect(error).toMatchObject({ _tag: "ProfileError" })
      expect(NodeFs.readdirSync(NodePath.join(first.clone.sessions!, "tmp"))).toEqual([])
      // Nothing of the clone was lost: its file is as it was, and saves once the way is clear.
      NodeFs.rmSync(stored, { recursive: true })
      expect((yield* first.clone.saveSessions).saved).toEqual(["sessions/s.jsonl"])
      expect(read(NodePath.join(first.clone.sessions!, "profile"), "sessions/s.jsonl")).toBe("v2")
      yield* first.close
    })))

  it.live("temporary files of a killed writer are removed at the next seed, fresh ones are left to their writer", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const tmp = NodePath.join(yield* savedStore(w), "tmp")
      NodeFs.writeFileSync(NodePath.join(tmp, "old"), "partial")
      NodeFs.writeFileSync(NodePath.join(tmp, "fresh"), "in progress")
      const hourAgo = new Date(Date.now() - 2 * 60 * 60_000)
      NodeFs.utimesSync(NodePath.join(tmp, "old"), hourAgo, hourAgo)
      const second = yield* openClone(w, alice)
      expect(NodeFs.readdirSync(tmp)).toEqual(["fresh"])
      yield* second.close
    })))

  it.live("two live agents of one identity: own entries kept, a shared entry is whole, unchanged copies never win", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const seed = yield* openClone(w, alice)
      write(seed.clone.dir, "sessions/shared.jsonl", "base\n")
      write(seed.clone.dir, "sessions/untouched.jsonl", "base\n")
      yield* seed.close
      const a = yield* openClone(w, { ...alice, agentId: "a-2" })
      const b = yield* openClone(w, { ...alice, agentId: "a-3" })
      // `b` updates `untouched`; `a` keeps its seeded copy, which must not overwrite it.
      write(b.clone.dir, "sessions/untouched.jsonl", "base\nfrom b\n")
      yield* b.clone.saveSessions
      for (const [clone, name] of [[a, "a"], [b, "b"]] as const) {
        for (let i = 0; i < 20; i++) write(clone.clone.dir, `sessions/${name}/${i}.jsonl`, `${name}${i}`)
        write(clone.clone.dir, "sessions/shared.jsonl", `base\n${name}\n`.repeat(4096))
      }
      yield* Effect.all([a.close, b.close], { concurrency: "unbounded" })
      const store = NodePath.join(seed.clone.sessions!, "profile")
      const files = storeFiles(seed.clone.sessions!)
      for (const name of ["a", "b"]) {
        for (let i = 0; i < 20; i++) expect(read(store, `sessions/${name}/${i}.jsonl`)).toBe(`${name}${i}`)
      }
      expect(files).toHaveLength(42)
      expect([`base\na\n`.repeat(4096), `base\nb\n`.repeat(4096)]).toContain(read(store, "sessions/shared.jsonl"))
      expect(read(store, "sessions/untouched.jsonl")).toBe("base\nfrom b\n")
      // A deletion never removes what another clone wrote after this clone's seed.
      const c = yield* openClone(w, { ...alice, agentId: "a-4" })
      const d = yield* openClone(w, { ...alice, agentId: "a-5" })
      write(d.clone.dir, "sessions/untouched.jsonl", "from d\n")
      yield* d.close
      NodeFs.rmSync(NodePath.join(c.clone.dir, "sessions/untouched.jsonl"))
      expect(yield* c.clone.saveSessions).toEqual({ saved: [], removed: [] })
      yield* c.close
      expect(read(store, "sessions/untouched.jsonl")).toBe("from d\n")
    })))

  it.live("the default store is a private per-user directory; a layout without sessions has no store", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const identity = `fake:default-store-test/${NodeCrypto.randomUUID()}`
      const withDefault = yield* Effect.scoped(Effect.gen(function*() {
        const clone = yield* Profile.clone(Profile.cloneFrom(w.source, w.root), w.layout, { agentId: "d-1", identity })
        write(clone.dir, "sessions/default.jsonl", "kept")
        return clone
      }))
      // Removed before the assertions, so a failing assertion leaves nothing behind either.
      const kept = NodeFs.readFileSync(NodePath.join(withDefault.sessions!, "profile/sessions/default.jsonl"), "utf8")
      NodeFs.rmSync(withDefault.sessions!, { recursive: true, force: true })
      expect(kept).toBe("kept")
      expect(NodePath.dirname(withDefault.sessions!)).toBe(Profile.defaultSessionsRoot())
      expect(Profile.defaultSessionsRoot()).toMatch(/\/tether\/sessions$/)
      const info = NodeFs.lstatSync(Profile.defaultSessionsRoot())
      expect(info.isDirectory() && !info.isSymbolicLink()).toBe(true)
      expect(info.mode & 0o077).toBe(0)
      const plain = yield* Effect.scoped(Profile.clone(selection(w), layoutAt(w.source), alice))
      expect(plain.sessions).toBeUndefined()
      expect(
        yield* Effect.scoped(Effect.flatMap(
          Profile.clone(selection(w), layoutAt(w.source), alice),
          (c) => c.saveSessions
        ))
      ).toEqual({ saved: [], removed: [] })
      expect(NodeFs.existsSync(w.store)).toBe(false)
    })))

  it("the default store is persistent per-user state, never the temp dir; tests keep it inside their run", () => {
    // The test run's own state directory (scripts/testTmpdir.ts): nothing reaches the user's.
    expect(Profile.defaultSessionsRoot()).toBe(`${process.env["XDG_STATE_HOME"]}/tether/sessions`)
    expect(Profile.defaultSessionsRoot().startsWith(`${NodeOs.tmpdir()}/`)).toBe(true)
    const saved = { state: process.env["XDG_STATE_HOME"], home: process.env["HOME"] }
    try {
      process.env["XDG_STATE_HOME"] = "/srv/state"
      expect(Profile.defaultSessionsRoot()).toBe("/srv/state/tether/sessions")
      // The XDG rule: a relative value is ignored.
      process.env["XDG_STATE_HOME"] = "relative/state"
      process.env["HOME"] = "/home/alice"
      expect(Profile.defaultSessionsRoot()).toBe("/home/alice/.local/state/tether/sessions")
      delete process.env["XDG_STATE_HOME"]
      expect(Profile.defaultSessionsRoot()).toBe("/home/alice/.local/state/tether/sessions")
    } finally {
      for (const [name, value] of [["XDG_STATE_HOME", saved.state], ["HOME", saved.home]] as const) {
        if (value === undefined) delete process.env[name]
        else process.env[name] = value
      }
    }
  })

  it.live("per session: saveSession keeps one session's entries and the shared ones; drop and prune remove them", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      // Transcripts `sessions/<id>.jsonl` belong to their session; `index.json` is shared.
      const layout: ProfileLayout.ProfileLayout = {
        ...w.layout,
        sessionOf: (path) => /^sessions\/([0-9a-f-]{36})\.jsonl$/.exec(path)?.[1]
      }
      const [a, b, c] = [NodeCrypto.randomUUID(), NodeCrypto.randomUUID(), NodeCrypto.randomUUID()]
      const scope = yield* Scope.make()
      const clone = yield* Profile.clone(selection(w), layout, { ...alice, saveSessionsOnClose: false }).pipe(
        Scope.extend(scope)
      )
      const store = NodePath.join(clone.sessions!, "profile")
      for (const id of [a, b, c]) write(clone.dir, `sessions/${id}.jsonl`, `${id}\n`)
      write(clone.dir, "index.json", "{}")
      expect(yield* clone.saveSession(a)).toEqual({ saved: ["index.json", `sessions/${a}.jsonl`], removed: [] })
      expect(yield* clone.saveSession(c)).toEqual({ saved: [`sessions/${c}.jsonl`], removed: [] })
      // Another session's transcript (a plain run's) was never persisted on their behalf.
      expect(exists(store, `sessions/${b}.jsonl`)).toBe(false)
      // Dropping a session removes its entries from the store and the clone, never shared ones.
      expect(yield* clone.dropSessions([a])).toEqual([`sessions/${a}.jsonl`])
      expect(exists(store, `sessions/${a}.jsonl`) || exists(clone.dir, `sessions/${a}.jsonl`)).toBe(false)
      expect(exists(store, "index.json")).toBe(true)
      // By age: only sessions not kept, last saved before the cut-off.
      expect(yield* clone.pruneSessions({ olderThan: "1 hour" })).toEqual([])
      yield* Effect.sleep("20 millis")
      expect(yield* clone.pruneSessions({ olderThan: "10 millis", keep: [c] })).toEqual([])
      expect(yield* clone.pruneSessions({ olderThan: "10 millis" })).toEqual([`sessions/${c}.jsonl`])
      expect(storeFiles(clone.sessions!)).toEqual(["index.json"])
      // The owner turned saving at close off: the rest of the clone is never persisted.
      yield* Scope.close(scope, Exit.void)
      expect(storeFiles(clone.sessions!)).toEqual(["index.json"])
      expect(yield* Effect.flip(clone.saveSession(a))).toMatchObject({ reason: "CloneClosed" })
    })))

  it.live("loadSession puts the store's copy of one session in the clone: never through a link, never shared entries", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const layout: ProfileLayout.ProfileLayout = {
        ...w.layout,
        sessionOf: (path) => /^sessions\/([0-9a-f-]{36})(\.jsonl|\/.*)$/.exec(path)?.[1]
      }
      const [a, b] = [NodeCrypto.randomUUID(), NodeCrypto.randomUUID()]
      const open = (agentId: string) =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          const clone = yield* Profile.clone(selection(w), layout, { ...alice, agentId, saveSessionsOnClose: false })
            .pipe(Scope.extend(scope))
          return { clone, close: Scope.close(scope, Exit.void) }
        })
      // Host one saves sessions a and b and the shared index; host two was made before.
      const two = yield* open("a-2")
      const one = yield* open("a-1")
      write(one.clone.dir, `sessions/${a}.jsonl`, "turn 1\n")
      write(one.clone.dir, `sessions/${a}/todo.json`, "[]")
      write(one.clone.dir, `sessions/${b}.jsonl`, "b 1\n")
      write(one.clone.dir, "index.json", "{\"one\":1}")
      yield* one.clone.saveSessions
      // Host two: a local copy of a past the store's (a failed turn), a file of a the store lacks
      // (a link out of the clone at the transcript's place), its own shared index and b untouched.
      write(two.clone.dir, "index.json", "{\"two\":2}")
      write(two.clone.dir, `sessions/${a}/extra.json`, "{}")
      const victim = NodePath.join(w.outside, "victim.txt")
      NodeFs.writeFileSync(victim, "outside")
      NodeFs.mkdirSync(NodePath.join(two.clone.dir, "sessions"), { recursive: true })
      NodeFs.symlinkSync(victim, NodePath.join(two.clone.dir, `sessions/${a}.jsonl`))
      expect(yield* two.clone.loadSession(a)).toEqual({
        loaded: [`sessions/${a}.jsonl`, `sessions/${a}/todo.json`],
        removed: [`sessions/${a}/extra.json`]
      })
      expect(NodeFs.lstatSync(NodePath.join(two.clone.dir, `sessions/${a}.jsonl`)).isFile()).toBe(true)
      expect(read(two.clone.dir, `sessions/${a}.jsonl`)).toBe("turn 1\n")
      expect(NodeFs.readFileSync(victim, "utf8")).toBe("outside")
      expect(read(two.clone.dir, "index.json")).toBe("{\"two\":2}")
      expect(exists(two.clone.dir, `sessions/${b}.jsonl`)).toBe(false)
      // Loaded again: nothing differs. A turn on it is saved as a change of the store's copy.
      expect(yield* two.clone.loadSession(a)).toEqual({ loaded: [], removed: [] })
      write(two.clone.dir, `sessions/${a}.jsonl`, "turn 1\nturn 2\n")
      expect((yield* two.clone.saveSession(a)).saved).toContain(`sessions/${a}.jsonl`)
      // A session the store has nothing of leaves the clone as it is.
      const c = NodeCrypto.randomUUID()
      write(two.clone.dir, `sessions/${c}.jsonl`, "local only\n")
      expect(yield* two.clone.loadSession(c)).toEqual({ loaded: [], removed: [] })
      expect(read(two.clone.dir, `sessions/${c}.jsonl`)).toBe("local only\n")
      yield* one.close
      yield* two.close
      expect(yield* Effect.flip(two.clone.loadSession(a))).toMatchObject({ reason: "CloneClosed" })
    })))

  it.live("two host processes saving one identity concurrently: every entry kept, the shared one always whole", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const rounds = 15
      const child = (name: string) =>
        Effect.async<number>((resume) => {
          const process_ = NodeChild.spawn(process.execPath, [
            "--import",
            "tsx",
            NodePath.join(import.meta.dirname, "fixtures", "sessionChild.ts"),
            w.source,
            w.root,
            w.store,
            name,
            String(rounds)
          ], { stdio: ["ignore", "ignore", "inherit"] })
          process_.on("exit", (code) => resume(Effect.succeed(code ?? -1)))
          return Effect.sync(() => process_.kill("SIGKILL"))
        })
      const seen = new Set<string>()
      let running = true
      const shared = () => {
        const dirs = NodeFs.existsSync(w.store) ? NodeFs.readdirSync(w.store) : []
        return dirs.length === 1 ? NodePath.join(w.store, dirs[0]!, "profile/sessions/shared.jsonl") : undefined
      }
      const versions = new Set(
        ["p", "q"].flatMap((name) => Array.from({ length: rounds }, (_, round) => sharedVersion(name, round)))
      )
      const reader = Effect.gen(function*() {
        while (running) {
          const file = shared()
          const content = file === undefined
            ? undefined
            : yield* Effect.promise(() => NodeFs.promises.readFile(file, "utf8").catch(() => undefined))
          if (content !== undefined) {
            expect(versions.has(content)).toBe(true)
            seen.add(content.slice(0, content.indexOf("\n")))
          }
          yield* Effect.sleep("2 millis")
        }
      })
      const codes = yield* Effect.all([
        Effect.all([child("p"), child("q")], { concurrency: "unbounded" }).pipe(
          Effect.ensuring(Effect.sync(() => (running = false)))
        ),
        reader
      ], { concurrency: "unbounded" }).pipe(Effect.map(([codes]) => codes))
      expect(codes).toEqual([0, 0])
      expect(seen.size).toBeGreaterThan(0)
      const dir = NodePath.dirname(NodePath.dirname(shared()!))
      for (const name of ["p", "q"]) {
        for (let round = 0; round < rounds; round++) {
          expect(read(dir, `sessions/${name}/${round}.jsonl`)).toBe(`${name}:${round}`)
        }
      }
      // The last save of either host wins.
      expect([sharedVersion("p", rounds - 1), sharedVersion("q", rounds - 1)]).toContain(
        read(dir, "sessions/shared.jsonl")
      )
      expect(NodeFs.readdirSync(NodePath.join(NodePath.dirname(dir), "tmp"))).toEqual([])
      expect(NodeFs.readdirSync(w.root)).toEqual([])
    })))
})
