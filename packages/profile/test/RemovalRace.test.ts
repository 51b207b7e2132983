// A clone whose removal at close races with a process still writing into it.
// Profile.ts: "A clone whose removal fails is logged and keeps its marker (removed last), so a
// later host reclaims it once this one is gone." removeTree.ts: "Fails with the file system's
// error, `options.last` still in place."
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Logger from "effect/Logger"
import * as Scope from "effect/Scope"
import * as NodeChild from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Profile from "../src/Profile.js"
import { layoutAt, tempDir } from "./fixtures/tree.js"

const run = <A, E>(effect: Effect.Effect<A, E, NodeContext.NodeContext | Scope.Scope>) =>
  effect.pipe(Effect.scoped, Effect.provide(NodeContext.layer))

/** A process that keeps creating files directly in `dir` until killed; resolves once it wrote one. */
const writer = (dir: string) =>
  Effect.acquireRelease(
    Effect.async<NodeChild.ChildProcess>((resume) => {
      const child = NodeChild.spawn(process.execPath, [
        "-e",
        `const fs = require("node:fs"); const dir = process.argv[1]; let i = 0, told = false;
         for (;;) { try { fs.writeFileSync(dir + "/late-" + (i++ % 8), "x"); if (!told) { told = true; process.stdout.write("go\\n") } } catch {} }`,
        dir
      ], { stdio: ["ignore", "pipe", "inherit"] })
      child.stdout!.once("data", () => resume(Effect.succeed(child)))
    }),
    (child) =>
      Effect.async<void>((resume) => {
        if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
        child.once("exit", () => resume(Effect.void))
        child.kill("SIGKILL")
      })
  )

describe("clone removal racing with a writer", () => {
  it.live("a removal that fails because a process still writes into the clone keeps the clone's marker", () =>
    run(Effect.gen(function*() {
      const base = yield* tempDir("tether-profile-race-")
      yield* Effect.addFinalizer(() => Effect.sync(() => NodeChild.spawnSync("rm", ["-rf", base])))
      const source = NodePath.join(base, "source")
      const root = NodePath.join(base, "clones")
      NodeFs.mkdirSync(source)
      NodeFs.writeFileSync(NodePath.join(source, "settings.json"), "{}")
      const outcomes: Array<string> = []
      for (let attempt = 0; attempt < 20; attempt++) {
        const cloneRoot = yield* Effect.scoped(Effect.gen(function*() {
          // The writer outlives the clone's scope: released after it (outer scope of this attempt).
          const scope = yield* Scope.make()
          const clone = yield* Profile.clone(Profile.cloneFrom(source, root), layoutAt(source), { agentId: "race" })
            .pipe(Scope.extend(scope))
          yield* writer(clone.root)
          yield* Scope.close(scope, Exit.void)
          return clone.root
        })).pipe(Effect.provide(Logger.remove(Logger.defaultLogger)))
        if (!NodeFs.existsSync(cloneRoot)) {
          outcomes.push("removed")
          continue
        }
        const marker = NodeFs.existsSync(NodePath.join(cloneRoot, ".tether-clone.json"))
        outcomes.push(marker ? "kept, marked" : "kept, marker gone")
        if (!marker) break
      }
      expect(outcomes).not.toContain("kept, marker gone")
    })))
})
