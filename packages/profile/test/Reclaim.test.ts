import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as NodeChild from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Profile from "../src/Profile.js"
import { layoutAt, populate, snapshot, tempDir } from "./fixtures/tree.js"
import {
  capturedWarnings,
  handOver,
  readOnlyTree,
  runUnprivileged,
  scratchProfile,
  tooDeep
} from "./fixtures/unprivileged.js"

const run = <A, E>(effect: Effect.Effect<A, E, NodeContext.NodeContext | Scope.Scope>) =>
  effect.pipe(Effect.scoped, Effect.provide(NodeContext.layer))

const fixture = NodePath.join(import.meta.dirname, "fixtures", "cloneChild.ts")

/** Spawns a host process that holds a clone; killed with SIGKILL when the scope closes at the latest. */
const spawnHost = (source: string, root: string) =>
  Effect.acquireRelease(
    Effect.async<{ readonly child: NodeChild.ChildProcess; readonly clone: string }, Error>((resume) => {
      const child = NodeChild.spawn(process.execPath, ["--import", "tsx", fixture, source, root], {
        stdio: ["ignore", "pipe", "pipe"]
      })
      let out = ""
      let err = ""
      child.stderr.on("data", (chunk) => (err += chunk))
      child.stdout.on("data", (chunk) => {
        out += chunk
        if (out.includes("\n")) resume(Effect.succeed({ child, clone: out.trim() }))
      })
      child.on("exit", (code) => resume(Effect.fail(new Error(`host exited ${code}: ${err}`))))
    }),
    ({ child }) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
  )

const killAndWait = (child: NodeChild.ChildProcess) =>
  Effect.async<void>((resume) => {
    child.once("exit", () => resume(Effect.void))
    child.kill("SIGKILL")
  })

const fakeClone = (root: string, name: string, marker: object | undefined) => {
  const dir = NodePath.join(root, name)
  NodeFs.mkdirSync(NodePath.join(dir, "profile"), { recursive: true })
  if (marker !== undefined) NodeFs.writeFileSync(NodePath.join(dir, ".tether-clone.json"), JSON.stringify(marker))
  return dir
}

const marker = (pid: number, startTime: string | null) => ({
  version: 1,
  pid,
  startTime,
  agentId: "x",
  identity: "fake:/x",
  provider: "fake",
  source: "/x",
  createdAt: new Date().toISOString()
})

const ownStartTime = () => {
  const stat = NodeFs.readFileSync(`/proc/${process.pid}/stat`, "utf8")
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]!
}

describe("Profile.reclaim", () => {
  it.live("reclaims the clone of a SIGKILLed host at the next start, never a live host's clone", () =>
    run(Effect.gen(function*() {
      const base = yield* tempDir()
      const source = NodePath.join(base, "source")
      const outside = NodePath.join(base, "outside")
      const root = NodePath.join(base, "clones")
      NodeFs.mkdirSync(source)
      NodeFs.mkdirSync(outside)
      populate(source, outside)
      const before = snapshot(source)
      const { child, clone } = yield* spawnHost(source, root)
      expect(NodePath.dirname(clone)).toBe(root)
      expect(NodeFs.existsSync(NodePath.join(clone, "profile", "tether", "child.json"))).toBe(true)
      // The owner is alive: neither an explicit reclaim nor a new clone in the same root removes it.
      expect(yield* Profile.reclaim({ root })).toEqual([])
      const live = yield* Effect.scoped(
        Profile.clone(Profile.cloneFrom(source, root), layoutAt(source), { agentId: "next" }).pipe(
          Effect.map((c) => c.root)
        )
      )
      expect(live).not.toBe(clone)
      expect(NodeFs.existsSync(clone)).toBe(true)
      yield* killAndWait(child)
      // SIGKILL ran no finalizer: the clone is still there until someone reclaims it.
      expect(NodeFs.existsSync(clone)).toBe(true)
      expect(yield* Profile.reclaim({ root })).toEqual([clone])
      expect(NodeFs.existsSync(clone)).toBe(false)
      expect(NodeFs.readdirSync(root)).toEqual([])
      expect(snapshot(source)).toEqual(before)
    })))

  it.live("the first clone in a root reclaims what dead hosts left there", () =>
    run(Effect.gen(function*() {
      const base = yield* tempDir()
      const source = NodePath.join(base, "source")
      const outside = NodePath.join(base, "outside")
      const root = NodePath.join(base, "clones")
      NodeFs.mkdirSync(source)
      NodeFs.mkdirSync(outside)
      populate(source, outside)
      const { child, clone } = yield* spawnHost(source, root)
      yield* killAndWait(child)
      expect(NodeFs.existsSync(clone)).toBe(true)
      yield* Effect.scoped(Profile.clone(Profile.cloneFrom(source, root), layoutAt(source), { agentId: "next" }))
      expect(NodeFs.existsSync(clone)).toBe(false)
      expect(NodeFs.readdirSync(root)).toEqual([])
    })))

  it.live("uses pid and start time: a reused pid does not keep a clone; unmarked and foreign entries are spared", () =>
    run(Effect.gen(function*() {
      const root = yield* tempDir()
      const reused = fakeClone(root, "c-reuse1", marker(process.pid, "1"))
      const mine = fakeClone(root, "c-mine01", marker(process.pid, ownStartTime()))
      const gone = fakeClone(root, "c-gone01", marker(2 ** 22 + 17, null))
      const young = fakeClone(root, "c-young1", undefined)
      const foreign = fakeClone(root, "not-a-clone", marker(2 ** 22 + 17, null))
      NodeFs.writeFileSync(NodePath.join(root, "c-file01"), "a file, not a clone")
      expect([...(yield* Profile.reclaim({ root }))].sort()).toEqual([gone, reused])
      expect(NodeFs.existsSync(mine)).toBe(true)
      expect(NodeFs.existsSync(young)).toBe(true)
      expect(NodeFs.existsSync(foreign)).toBe(true)
      expect(yield* Profile.reclaim({ root, unmarkedGraceMillis: -1 })).toEqual([young])
      expect(NodeFs.readdirSync(root).sort()).toEqual(["c-file01", "c-mine01", "not-a-clone"])
    })))

  it.live("the default root is a private per-user directory in the temp dir", () =>
    run(Effect.gen(function*() {
      const base = yield* tempDir()
      const source = NodePath.join(base, "source")
      NodeFs.mkdirSync(source)
      populate(source, NodePath.join(base, "outside-missing"))
      const layout = layoutAt(source)
      const root = yield* Effect.scoped(Effect.gen(function*() {
        const clone = yield* Profile.clone(Profile.native(), layout, { agentId: "default-root" })
        expect(NodePath.dirname(clone.root)).toBe(Profile.defaultRoot())
        const info = NodeFs.lstatSync(Profile.defaultRoot())
        expect(info.isDirectory()).toBe(true)
        expect(info.mode & 0o077).toBe(0)
        return clone.root
      }))
      expect(NodeFs.existsSync(root)).toBe(false)
    })))

  it.live("a later host reclaims stale clones holding read-only directories, marked and unmarked, and gets its clone", () =>
    run(Effect.gen(function*() {
      const { dir, root, source } = yield* scratchProfile
      NodeFs.writeFileSync(NodePath.join(source, "settings.json"), "{}")
      const marked = fakeClone(root, "c-dead01", marker(2 ** 22 + 17, null))
      const unmarked = fakeClone(root, "c-unmrk1", undefined)
      for (const clone of [marked, unmarked]) {
        readOnlyTree(NodePath.join(clone, "home"))
        readOnlyTree(NodePath.join(clone, "profile"))
      }
      NodeFs.chmodSync(root, 0o700)
      handOver(dir)
      // Past the grace of a directory without a marker (a host killed before it wrote one).
      const old = new Date(Date.now() - 11 * 60_000)
      NodeFs.utimesSync(unmarked, old, old)
      const before = snapshot(source)
      const outcome = yield* runUnprivileged(dir, "clone", source, root)
      expect(outcome).toMatchObject({ ok: true })
      expect(NodeFs.readdirSync(root)).toEqual([])
      expect(snapshot(source)).toEqual(before)
    })))

  it.live("a stale clone that cannot be removed is a warning: it keeps its marker, the rest is reclaimed, the clone made", () =>
    run(Effect.gen(function*() {
      const { root, source } = yield* scratchProfile
      const stuck = fakeClone(root, "c-stuck1", marker(2 ** 22 + 17, null))
      NodeFs.writeFileSync(NodePath.join(stuck, "profile", "settings.json"), "{}")
      tooDeep(NodePath.join(stuck, "profile"))
      const gone = fakeClone(root, "c-gone01", marker(2 ** 22 + 17, null))
      const warnings = capturedWarnings()
      const made = yield* Effect.scoped(
        Profile.clone(Profile.cloneFrom(source, root), layoutAt(source), { agentId: "next" }).pipe(
          Effect.map((clone) => clone.root)
        )
      ).pipe(Effect.provide(warnings.layer))
      expect(NodePath.dirname(made)).toBe(root)
      expect(NodeFs.existsSync(gone)).toBe(false)
      expect(NodeFs.readdirSync(root)).toEqual(["c-stuck1"])
      // Still marked as a dead host's clone: reclaimed as such once it can be removed.
      expect(NodeFs.readdirSync(stuck).sort()).toEqual([".tether-clone.json", "profile"])
      expect(warnings.lines).toEqual(["WARN reclaiming a stale profile clone failed"])
      // An explicit reclaim reports what it removed and warns about the rest.
      expect(yield* Profile.reclaim({ root }).pipe(Effect.provide(warnings.layer))).toEqual([])
      expect(warnings.lines).toHaveLength(2)
      NodeChild.execFileSync("rm", ["-rf", NodePath.join(stuck, "profile")])
      expect(yield* Profile.reclaim({ root })).toEqual([stuck])
      expect(NodeFs.readdirSync(root)).toEqual([])
    })))
})
