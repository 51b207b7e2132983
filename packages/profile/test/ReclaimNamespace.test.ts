// Reclaim decides that a clone's owner is dead from the marker's pid and start time, read
// in the reclaiming process's own PID namespace. A host in another PID namespace (a container, a
// pod's sidecar) sharing the clone root (a shared /tmp or volume, same uid) writes pids that mean
// nothing here. Profile.ts `reclaim`: "Retained clones and clones of live owners are left
// alone"; SECURITY.md: "After a host SIGKILL, the next start finds and reaps the leftovers
// (processes and clones) by their markers" (only leftovers).
//
// Needs `unshare --pid` (root or user namespaces), which CI has: the test fails without it.
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as NodeChild from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Profile from "../src/Profile.js"
import { tempDir } from "./fixtures/tree.js"

const run = <A, E>(effect: Effect.Effect<A, E, NodeContext.NodeContext | Scope.Scope>) =>
  effect.pipe(Effect.scoped, Effect.provide(NodeContext.layer))

/** Makes a clone of `source` under `root` and holds it until its stdin closes. */
const childProgram = `
import * as Profile from "../src/Profile.ts"
import { layoutAt } from "./fixtures/tree.ts"
import { NodeContext } from "@effect/platform-node"
import * as Effect from "effect/Effect"
const [source, root] = process.argv.slice(1)
await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  const clone = yield* Profile.clone(Profile.cloneFrom(source, root), layoutAt(source), { agentId: "contained" })
  process.stdout.write(JSON.stringify({ pid: process.pid, root: clone.root }) + "\\n")
  yield* Effect.async((resume) => { process.stdin.on("end", () => resume(Effect.void)); process.stdin.resume() })
})).pipe(Effect.provide(NodeContext.layer)))
`

/** A live host in its own PID namespace holding one clone; closed (stdin EOF) with the scope. */
const containedHost = (source: string, root: string) =>
  Effect.acquireRelease(
    Effect.async<{ readonly child: NodeChild.ChildProcess; readonly pid: number; readonly root: string }, Error>(
      (resume) => {
        const child = NodeChild.spawn("unshare", [
          "--pid",
          "--fork",
          "--mount-proc",
          "--kill-child",
          process.execPath,
          "--import",
          "tsx",
          "--input-type=module",
          "-e",
          childProgram,
          source,
          root
        ], { cwd: import.meta.dirname, stdio: ["pipe", "pipe", "inherit"] })
        let out = ""
        child.stdout!.on("data", (chunk: Buffer) => {
          out += chunk.toString()
          if (out.includes("\n")) resume(Effect.succeed({ child, ...JSON.parse(out.split("\n")[0]!) }))
        })
        child.once("exit", (code) => resume(Effect.fail(new Error(`contained host exited ${code}: ${out}`))))
      }
    ),
    ({ child }) =>
      Effect.async<void>((resume) => {
        if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
        const timer = setTimeout(() => child.kill("SIGKILL"), 10_000)
        child.once("exit", () => {
          clearTimeout(timer)
          resume(Effect.void)
        })
        child.stdin!.end()
      })
  )

describe("reclaim across PID namespaces", () => {
  it.live(
    "never removes the clone of a live host that runs in another PID namespace",
    () =>
      run(Effect.gen(function*() {
        const base = yield* tempDir("tether-profile-ns-")
        yield* Effect.addFinalizer(() => Effect.sync(() => NodeChild.spawnSync("rm", ["-rf", base])))
        const source = NodePath.join(base, "source")
        const root = NodePath.join(base, "clones")
        NodeFs.mkdirSync(source)
        NodeFs.writeFileSync(NodePath.join(source, "settings.json"), "{}")
        const host = yield* containedHost(source, root)
        expect(host.pid).not.toBe(process.pid)
        expect(NodeFs.existsSync(host.root)).toBe(true)
        // The contained host is alive and holds its clone; this host reclaims the shared root.
        const removed = yield* Profile.reclaim({ root })
        expect(host.child.exitCode).toBe(null)
        expect(removed).toEqual([])
        expect(NodeFs.existsSync(host.root)).toBe(true)
      })),
    60_000
  )
})
