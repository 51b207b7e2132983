// Special files where the clone code expects its own regular files. Reclaim (run by the
// first clone in a root) and inspect read every `c-XXXXXX/.tether-clone.json` with a plain
// `readFile`, which on a FIFO waits for a writer that never comes: the clone (or the inspection)
// never completes. A FIFO there is what a process of an earlier run (its clone root was writable
// to it) or a stray `mkfifo` leaves. Profile.ts `clone`: "Clones left by dead owners under the
// same root are reclaimed first (...; one that cannot be removed is a logged warning, not a
// failure)"; `reclaim`: "Fails only when the root cannot be read."
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as NodeChild from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Profile from "../src/Profile.js"
import { layoutAt, tempDir } from "./fixtures/tree.js"

const run = <A, E>(effect: Effect.Effect<A, E, NodeContext.NodeContext | Scope.Scope>) =>
  effect.pipe(Effect.scoped, Effect.provide(NodeContext.layer))

/** A FIFO at `path`; at scope close a writer opens it once, so a reader still blocked on it is let go. */
const fifo = (path: string) =>
  Effect.acquireRelease(
    Effect.sync(() => NodeChild.execFileSync("mkfifo", [path])),
    () =>
      Effect.sync(() => {
        try {
          NodeFs.closeSync(NodeFs.openSync(path, NodeFs.constants.O_WRONLY | NodeFs.constants.O_NONBLOCK))
        } catch {
          // No reader waits (ENXIO): nothing to let go.
        }
      })
  )

const world = Effect.gen(function*() {
  const base = yield* tempDir("tether-profile-special-")
  const source = NodePath.join(base, "source")
  const root = NodePath.join(base, "clones")
  NodeFs.mkdirSync(source)
  NodeFs.writeFileSync(NodePath.join(source, "settings.json"), "{}")
  // A stale clone directory whose marker is a FIFO.
  NodeFs.mkdirSync(NodePath.join(root, "c-abc123", "profile"), { recursive: true, mode: 0o700 })
  yield* fifo(NodePath.join(root, "c-abc123", ".tether-clone.json"))
  return { source, root }
})

const within = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.timeoutTo({ duration: Duration.seconds(10), onSuccess: () => "completed", onTimeout: () => "hung" })
  )

describe("special files in a clone root", () => {
  it.live("a new clone completes in a root where a stale clone's marker is a FIFO", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const outcome = yield* within(Effect.scoped(
        Profile.clone(Profile.cloneFrom(w.source, w.root), layoutAt(w.source), { agentId: "fifo" })
      ))
      expect(outcome).toBe("completed")
    })), 30_000)

  it.live("inspect completes in a root where a stale clone's marker is a FIFO", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      expect(yield* within(Profile.inspect(Profile.cloneFrom(w.source, w.root), layoutAt(w.source)))).toBe("completed")
    })), 30_000)
})
