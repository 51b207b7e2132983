// What `Profile.inspect` reports about the clones of a source. It matches clones by the
// source path as spelled in the marker, not by the source itself: a clone of the same profile
// selected through another spelling (a symlink such as `~/.claude -> ~/dotfiles/claude`, which
// `clone` resolves for the identity) is not reported, while `inspect` reports the same identity.
// Profile.ts `Inspection.clones`: "Clones of this source found under the selection's root, as
// observed on disk."
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Profile from "../src/Profile.js"
import { layoutAt, tempDir } from "./fixtures/tree.js"

const run = <A, E>(effect: Effect.Effect<A, E, NodeContext.NodeContext | Scope.Scope>) =>
  effect.pipe(Effect.scoped, Effect.provide(NodeContext.layer))

describe("inspect", () => {
  it.live("reports a live clone of the source made through a symlinked spelling of it", () =>
    run(Effect.gen(function*() {
      const base = yield* tempDir("tether-profile-inspect-")
      const real = NodePath.join(base, "dotfiles-claude")
      const link = NodePath.join(base, "dot-claude")
      const root = NodePath.join(base, "clones")
      NodeFs.mkdirSync(real)
      NodeFs.writeFileSync(NodePath.join(real, "settings.json"), "{}")
      NodeFs.symlinkSync(real, link)
      const layout = layoutAt(link)
      const clone = yield* Profile.clone(Profile.cloneFrom(link, root), layout, { agentId: "i-1" })
      yield* clone.materialize([{ path: "tether/mcp.json", content: "{}" }])
      const viaLink = yield* Profile.inspect(Profile.cloneFrom(link, root), layout)
      const viaReal = yield* Profile.inspect(Profile.cloneFrom(real, root), layout)
      // The same profile, the same identity ...
      expect(viaReal.identity).toBe(viaLink.identity)
      expect(clone.identity).toBe(viaReal.identity)
      // ... and the same clones.
      expect(viaLink.clones.map((c) => c.root)).toEqual([clone.root])
      expect(viaReal.clones.map((c) => c.root)).toEqual([clone.root])
    })))
})
