import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Profile from "../src/Profile.js"
import * as ProfileLayout from "../src/ProfileLayout.js"
import { snapshot, tempDir } from "./fixtures/tree.js"

// Names that hit every declared class, the reserved names, and odd spellings.
const name = FastCheck.constantFrom(
  "settings.json",
  "mcp.json",
  "auth.json",
  "hosted-mcp.json",
  "conf",
  "credentials",
  "skills",
  "tether",
  "sessions",
  "a b",
  "ünï",
  "-dash",
  ".hidden",
  "*",
  "[x]",
  "q?",
  "new\nline",
  "x.json"
)
const segments = FastCheck.array(name, { minLength: 1, maxLength: 3 })

type Spec =
  | { readonly kind: "file"; readonly path: ReadonlyArray<string>; readonly content: string; readonly mode: number }
  | { readonly kind: "dir"; readonly path: ReadonlyArray<string>; readonly mode: number }
  | { readonly kind: "link"; readonly path: ReadonlyArray<string>; readonly target: string }

const spec: FastCheck.Arbitrary<Spec> = FastCheck.oneof(
  FastCheck.record({
    kind: FastCheck.constant("file" as const),
    path: segments,
    content: FastCheck.string({ maxLength: 40 }),
    mode: FastCheck.constantFrom(0o600, 0o644, 0o400, 0o755, 0o640, 0o444)
  }),
  FastCheck.record({
    kind: FastCheck.constant("dir" as const),
    path: segments,
    mode: FastCheck.constantFrom(0o700, 0o755, 0o750, 0o711)
  }),
  FastCheck.record({
    kind: FastCheck.constant("link" as const),
    path: segments,
    // Relative links inside the tree (possibly cyclic or dangling) and absolute links outside it.
    target: FastCheck.constantFrom(".", "..", "settings.json", "../skills", "missing", "@outside/file", "@outside/dir")
  })
)

const layout = ProfileLayout.make({
  provider: "prop",
  selectorEnv: ["PROP_HOME"],
  nativeDefault: () => "/nonexistent",
  classes: {
    settings: ["*.json", "conf/**"],
    mcp: ["mcp.json"],
    skills: ["skills"],
    auth: ["auth.json", "credentials/*"]
  },
  reserved: ["tether/**", "hosted-mcp.json"],
  siblings: ["home", "tmp"]
})

const build = (source: string, outside: string, specs: ReadonlyArray<Spec>) => {
  NodeFs.writeFileSync(NodePath.join(outside, "file"), "outside")
  NodeFs.mkdirSync(NodePath.join(outside, "dir"))
  NodeFs.writeFileSync(NodePath.join(outside, "dir", "settings.json"), "{}")
  const dirModes: Array<[string, number]> = []
  for (const entry of specs) {
    const absolute = NodePath.join(source, ...entry.path)
    try {
      NodeFs.mkdirSync(NodePath.dirname(absolute), { recursive: true })
      if (NodeFs.existsSync(absolute) || isLink(absolute)) continue
      if (entry.kind === "file") {
        NodeFs.writeFileSync(absolute, entry.content)
        NodeFs.chmodSync(absolute, entry.mode)
      } else if (entry.kind === "dir") {
        NodeFs.mkdirSync(absolute)
        dirModes.push([absolute, entry.mode])
      } else {
        NodeFs.symlinkSync(entry.target.replace("@outside", outside), absolute)
      }
    } catch {
      // A parent is a file or a link in the generated tree: that entry cannot exist.
    }
  }
  for (const [dir, mode] of dirModes) NodeFs.chmodSync(dir, mode)
}

const isLink = (path: string) => {
  try {
    return NodeFs.lstatSync(path).isSymbolicLink()
  } catch {
    return false
  }
}

const options = FastCheck.record({
  settings: FastCheck.boolean(),
  mcp: FastCheck.boolean(),
  skills: FastCheck.boolean(),
  auth: FastCheck.constantFrom("link" as const, "copy" as const, "none" as const)
})

const files = FastCheck.array(
  FastCheck.record({ path: segments.map((s) => s.join("/")), content: FastCheck.string({ maxLength: 20 }) }),
  { maxLength: 4 }
)

describe("property: generated source trees", () => {
  it.live.prop(
    "clone → materialize → close leaves the source identical and no clone behind",
    { tree: FastCheck.array(spec, { maxLength: 14 }), options, files },
    ({ files, options, tree }) =>
      Effect.gen(function*() {
        const base = yield* tempDir()
        const source = NodePath.join(base, "source")
        const outside = NodePath.join(base, "outside")
        const root = NodePath.join(base, "clones")
        NodeFs.mkdirSync(source)
        NodeFs.mkdirSync(outside)
        build(source, outside, tree)
        const before = snapshot(source)
        const outsideBefore = snapshot(outside)
        const exit = yield* Effect.exit(Effect.scoped(Effect.gen(function*() {
          const clone = yield* Profile.clone(Profile.cloneFrom(source, root, options), layout, { agentId: "p" })
          // Collisions with what the clone brought in are expected outcomes; anything else fails.
          yield* clone.materialize(files).pipe(
            Effect.catchTags({
              ProfileCollision: () => Effect.void,
              ProfileError: (e) => e.reason === "InvalidPath" ? Effect.void : e
            })
          )
          expect(snapshot(source)).toEqual(before)
        })))
        if (Exit.isFailure(exit)) {
          // The only failure of clone itself on these trees: a reserved source entry.
          expect(exit.cause).toMatchObject({ _tag: "Fail", error: { _tag: "ProfileCollision", reason: "Reserved" } })
        }
        expect(snapshot(source)).toEqual(before)
        expect(snapshot(outside)).toEqual(outsideBefore)
        expect(NodeFs.readdirSync(root)).toEqual([])
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    { fastCheck: { numRuns: 40 } }
  )
})
