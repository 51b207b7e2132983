// Agents of one identity share its session store: one thread's deletion (or a prune) removes the
// project directory it empties, while another agent saves a new thread into that same directory.
// The save makes the directory again and lands; its temporary file never stays behind.
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Profile from "../src/Profile.js"
import type * as ProfileLayout from "../src/ProfileLayout.js"
import { layoutAt, tempDir, write } from "./fixtures/tree.js"

const run = <A, E>(effect: Effect.Effect<A, E, NodeContext.NodeContext | Scope.Scope>) =>
  effect.pipe(Effect.scoped, Effect.provide(NodeContext.layer))

/** Claude-like: `sessions/<project>/<session id>.jsonl`, one file per session. */
const layoutOf = (source: string): ProfileLayout.ProfileLayout => {
  const base = layoutAt(source)
  return {
    ...base,
    classes: { ...base.classes, sessions: ["sessions/**"] },
    sessionOf: (path) => /^sessions\/[^/]+\/([0-9a-z-]{8,})\.jsonl$/.exec(path)?.[1]
  }
}

describe("session store under concurrent agents of one identity", () => {
  it.live("a thread's save is not lost to another thread's deletion in the same project directory", () =>
    run(Effect.gen(function*() {
      const base = yield* tempDir()
      const source = NodePath.join(base, "source")
      NodeFs.mkdirSync(source)
      const layout = layoutOf(source)
      const selection = Profile.cloneFrom(source, NodePath.join(base, "clones"), {
        sessions: NodePath.join(base, "sessions")
      })
      const a = yield* Profile.clone(selection, layout, { agentId: "a", saveSessionsOnClose: false })
      const b = yield* Profile.clone(selection, layout, { agentId: "b", saveSessionsOnClose: false })
      const failures: Array<string> = []
      for (let i = 0; i < 60; i++) {
        const doomed = `dddddddd-${i}`
        const fresh = `ffffffff-${i}`
        // Agent a's thread in project p<i> was saved; it is now deleted, while agent b commits the
        // first turn of another thread in the same project (workspace).
        write(a.dir, `sessions/p${i}/${doomed}.jsonl`, "old\n")
        yield* a.saveSession(doomed)
        write(b.dir, `sessions/p${i}/${fresh}.jsonl`, "x".repeat(64 * 1024))
        const [, saved] = yield* Effect.all([
          a.dropSessions([doomed]),
          Effect.either(b.saveSession(fresh))
        ], { concurrency: "unbounded" })
        if (saved._tag === "Left") failures.push(saved.left.message)
      }
      expect({ failed: failures.length, first: failures[0]?.replace(/ -> .*/, "") }).toEqual({
        failed: 0,
        first: undefined
      })
      // Every save renamed its temporary file into place.
      expect(NodeFs.readdirSync(NodePath.join(b.sessions!, "tmp"))).toEqual([])
    })))
})
