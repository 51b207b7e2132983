// The ownership manifest is written through a temporary file with a predictable name
// (`<clone>/.tether-manifest.json.<pid>.tmp`) opened without O_EXCL, so a link planted there by a
// process of the run (the CLI, a shell the model ran: the clone root is theirs to write) is
// followed. Profile.ts: "Every selection yields an execution clone: the configured source profile
// is only ever read"; `ExecutionProfile.source`: "Absolute source profile path (never written)";
// SECURITY.md: "The source profile is byte-identical after any run (content, mode, file list),
// including through symlinks".
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Profile from "../src/Profile.js"
import { layoutAt, populate, snapshot, tempDir } from "./fixtures/tree.js"

const run = <A, E>(effect: Effect.Effect<A, E, NodeContext.NodeContext | Scope.Scope>) =>
  effect.pipe(Effect.scoped, Effect.provide(NodeContext.layer))

describe("writes beside the profile never go through a link", () => {
  it.live("materialize leaves the source byte-identical when a link sits at the manifest's temporary name", () =>
    run(Effect.gen(function*() {
      const base = yield* tempDir("tether-profile-manifest-")
      const source = NodePath.join(base, "source")
      const outside = NodePath.join(base, "outside")
      NodeFs.mkdirSync(source)
      NodeFs.mkdirSync(outside)
      populate(source, outside)
      const before = snapshot(source)
      yield* Effect.scoped(Effect.gen(function*() {
        const clone = yield* Profile.clone(
          Profile.cloneFrom(source, NodePath.join(base, "clones")),
          layoutAt(source),
          { agentId: "m-1" }
        )
        // A process of the run leaves a link in its clone's directory.
        NodeFs.symlinkSync(
          NodePath.join(source, "settings.json"),
          NodePath.join(clone.root, `.tether-manifest.json.${process.pid}.tmp`)
        )
        yield* clone.materialize([{ path: "tether/mcp.json", content: "{}" }])
      }))
      expect(NodeFs.readFileSync(NodePath.join(source, "settings.json"), "utf8")).toBe(`{"theme":"dark"}`)
      expect(snapshot(source)).toEqual(before)
    })))
})
