// The clone's own profile directory replaced by a link to the source profile (by a process
// of the run: the directory is the CLI's, `rm -rf $CLAUDE_CONFIG_DIR && ln -s ~/.claude ...`).
// Every write into the clone checks the entries under `profile/` for links, never `profile/`.
// Profile.ts `materialize`: "Fails with `ProfileCollision` ... a parent is a symlink
// (`ThroughLink`)"; `loadSession`: "never through a link"; `source`: "never written";
// SECURITY.md: "The source profile is byte-identical after any run ..., including through symlinks".
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Profile from "../src/Profile.js"
import { sessionLayout } from "./fixtures/sessions.js"
import { populate, snapshot, tempDir, write } from "./fixtures/tree.js"

const run = <A, E>(effect: Effect.Effect<A, E, NodeContext.NodeContext | Scope.Scope>) =>
  effect.pipe(Effect.scoped, Effect.provide(NodeContext.layer))

const world = Effect.gen(function*() {
  const base = yield* tempDir("tether-profile-dirlink-")
  const source = NodePath.join(base, "source")
  const outside = NodePath.join(base, "outside")
  NodeFs.mkdirSync(source)
  NodeFs.mkdirSync(outside)
  populate(source, outside)
  const selection = Profile.cloneFrom(source, NodePath.join(base, "clones"), { sessions: NodePath.join(base, "store") })
  return { source, selection, layout: sessionLayout(source) }
})

/** What a process of the run does to its profile directory. */
const relink = (clone: Profile.ExecutionProfile, source: string) => {
  NodeFs.renameSync(clone.dir, `${clone.dir}.old`)
  NodeFs.symlinkSync(source, clone.dir)
}

describe("the clone's profile directory replaced by a link", () => {
  it.live("materialize never writes into the source through a linked profile directory", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const before = snapshot(w.source)
      const outcome = yield* Effect.scoped(Effect.gen(function*() {
        const clone = yield* Profile.clone(w.selection, w.layout, { agentId: "l-1" })
        relink(clone, w.source)
        return yield* Effect.either(clone.materialize([{ path: "tether/mcp.json", content: "{\"hosted\":true}" }]))
      }))
      expect(NodeFs.existsSync(NodePath.join(w.source, "tether/mcp.json"))).toBe(false)
      expect(snapshot(w.source)).toEqual(before)
      expect(outcome._tag).toBe("Left")
    })))

  it.live("loadSession never writes into the source through a linked profile directory", () =>
    run(Effect.gen(function*() {
      const w = yield* world
      const owner = { agentId: "l-2", identity: "fake:dirlink" }
      // A session of this identity in the store.
      yield* Effect.scoped(Effect.gen(function*() {
        const first = yield* Profile.clone(w.selection, w.layout, owner)
        write(first.dir, "sessions/s-12345678.jsonl", "{\"turn\":1}\n")
      }))
      const before = snapshot(w.source)
      yield* Effect.scoped(Effect.gen(function*() {
        const clone = yield* Profile.clone(w.selection, { ...w.layout, sessionOf: (p) => p.match(/s-(\w{8})/)?.[1] }, {
          ...owner,
          saveSessionsOnClose: false
        })
        relink(clone, w.source)
        yield* Effect.either(clone.loadSession("12345678"))
      }))
      expect(snapshot(w.source)).toEqual(before)
    })))
})
