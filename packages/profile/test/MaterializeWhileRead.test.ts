// A CLI of the agent reads the clone's files while another turn of the agent materializes them
// again (Codex reads its `config.toml` at start while a concurrent first turn renders it): the
// file was unlinked, then created and written, so a reader in another process could find it
// missing or empty. Each file is written beside it and renamed over it: a reader finds the old
// content or the new, whole.
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Scope from "effect/Scope"
import * as NodeChild from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import * as Profile from "../src/Profile.js"
import { layoutAt, tempDir } from "./fixtures/tree.js"

const run = <A, E>(effect: Effect.Effect<A, E, NodeContext.NodeContext | Scope.Scope>) =>
  effect.pipe(Effect.scoped, Effect.provide(NodeContext.layer))

// Reads the file as fast as it can until `stop` exists; prints how many reads found it missing,
// and how many found content that is neither version.
const reader = `
const fs = require("node:fs")
const [file, stop, a, b] = process.argv.slice(1)
let reads = 0, missing = 0, torn = 0
while (!fs.existsSync(stop)) {
  reads++
  try {
    const text = fs.readFileSync(file, "utf8")
    if (text !== a && text !== b) torn++
  } catch (error) {
    if (error.code === "ENOENT") missing++
    else throw error
  }
}
console.log(JSON.stringify({ reads, missing, torn }))
`

describe("materialize while a CLI of the agent reads", () => {
  it.live(
    "a reader in another process finds the file whole, old or new, never missing or torn",
    () =>
      run(Effect.gen(function*() {
        const base = yield* tempDir("tether-profile-reread-")
        const source = NodePath.join(base, "source")
        NodeFs.mkdirSync(source)
        NodeFs.writeFileSync(NodePath.join(source, "settings.json"), "{}\n")
        const clone = yield* Profile.clone(
          Profile.cloneFrom(source, NodePath.join(base, "clones")),
          layoutAt(source),
          { agentId: "m-1" }
        )
        const a = "a = 1\n".repeat(20_000)
        const b = "b = 2\n".repeat(20_000)
        yield* clone.materialize([{ path: "conf/agent.toml", content: a }])
        const file = NodePath.join(clone.dir, "conf", "agent.toml")
        expect(NodeFs.readFileSync(file, "utf8")).toBe(a)
        const stop = NodePath.join(base, "stop")
        const child = NodeChild.spawn(process.execPath, ["-e", reader, file, stop, a, b], {
          stdio: ["ignore", "pipe", "inherit"]
        })
        let output = ""
        child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
        const exited = new Promise<void>((resolve) => child.on("close", () => resolve()))
        yield* Effect.addFinalizer(() =>
          Effect.promise(() => {
            NodeFs.writeFileSync(stop, "")
            return exited
          })
        )
        // The reader is reading; the agent's turns write the file again and again.
        yield* Effect.sleep("200 millis")
        for (let i = 0; i < 400; i++) {
          yield* clone.materialize([{ path: "conf/agent.toml", content: i % 2 === 0 ? b : a }], {
            replaceChanged: true
          })
          if (i % 20 === 0) yield* Effect.sleep("1 millis")
        }
        NodeFs.writeFileSync(stop, "")
        yield* Effect.promise(() => exited)
        const counts = JSON.parse(output) as { readonly reads: number; readonly missing: number; readonly torn: number }
        expect(counts.reads).toBeGreaterThan(100)
        expect({ missing: counts.missing, torn: counts.torn }).toEqual({ missing: 0, torn: 0 })
        // Nothing is left beside it.
        expect(NodeFs.readdirSync(NodePath.dirname(file))).toEqual(["agent.toml"])
      })),
    60_000
  )
})
