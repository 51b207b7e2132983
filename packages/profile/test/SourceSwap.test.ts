// A source entry that changes kind between the walk and the copy. The walk skips special
// files ("dangling links, sockets and other special files are skipped", seed.ts `walk`), but the
// copy then opens the entry again by name with a blocking, synchronous `open`: a FIFO that took
// the file's place (an editor or a secret tool swapping it, `mkfifo` + rename) blocks that call
// until some process opens the FIFO for writing, which may be never. The host's event loop is
// held for as long: no timeout, interruption or finalizer of the host can run.
// DESIGN.md §6: "Finalizer steps are `interruptible` + `timeout`, so no step can hang the scope";
// SECURITY.md: "Inputs that must never crash or hang the host".
//
// The clones run in a child process (a hung event loop cannot be interrupted from inside it); a
// swapper process keeps replacing `settings.json` (rename, atomic) by a regular file or a FIFO.
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as NodeChild from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { tempDir } from "./fixtures/tree.js"

const swapper = `
import os, sys
d = sys.argv[1]
sys.stdout.write("go\\n"); sys.stdout.flush()
while True:
    try:
        with open(d + "/f.tmp", "w") as f: f.write("{}")
        os.rename(d + "/f.tmp", d + "/settings.json")
        os.mkfifo(d + "/p.tmp"); os.rename(d + "/p.tmp", d + "/settings.json")
    except OSError:
        pass
`

/** Clones `source` `count` times, each closed at once; prints `done <count>` at the end. */
const cloner = `
import * as Profile from "../src/Profile.ts"
import { layoutAt } from "./fixtures/tree.ts"
import { NodeContext } from "@effect/platform-node"
import * as Effect from "effect/Effect"
const [source, root, count] = process.argv.slice(1)
let done = 0
for (let i = 0; i < Number(count); i++) {
  await Effect.runPromise(Effect.scoped(Profile.clone(Profile.cloneFrom(source, root), layoutAt(source), { agentId: "swap" }))
    .pipe(Effect.provide(NodeContext.layer), Effect.ignore))
  done++
}
process.stdout.write("done " + done + "\\n")
`

const spawnScoped = (command: string, args: ReadonlyArray<string>, cwd?: string) =>
  Effect.acquireRelease(
    Effect.sync(() => NodeChild.spawn(command, args, { cwd, stdio: ["ignore", "pipe", "inherit"] })),
    (child) =>
      Effect.async<void>((resume) => {
        if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
        child.once("exit", () => resume(Effect.void))
        child.kill("SIGKILL")
      })
  )

const firstLine = (child: NodeChild.ChildProcess, millis: number) =>
  Effect.async<string>((resume) => {
    let out = ""
    // On Linux, where the main thread waits says why it did not answer (`wait_for_partner`: the
    // open of a FIFO that no writer opens).
    const wchan = () => {
      try {
        return NodeFs.readFileSync(`/proc/${child.pid}/wchan`, "utf8")
      } catch {
        return "?"
      }
    }
    const timer = setTimeout(
      () => resume(Effect.succeed(`no answer after ${millis} ms (${out.trim()}), main thread in ${wchan()}`)),
      millis
    )
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      if (out.includes("\n")) {
        clearTimeout(timer)
        resume(Effect.succeed(out.split("\n")[0]!))
      }
    })
    child.once("exit", (code, signal) => {
      clearTimeout(timer)
      resume(Effect.succeed(`exited ${code ?? signal} (${out.trim()})`))
    })
  })

describe("a source file swapped for a FIFO while it is cloned", () => {
  it.live(
    "cloning never blocks the host on a FIFO that replaced a source file",
    () =>
      Effect.scoped(Effect.gen(function*() {
        const base = yield* tempDir("tether-profile-swap-")
        const source = NodePath.join(base, "source")
        NodeFs.mkdirSync(source)
        NodeFs.writeFileSync(NodePath.join(source, "settings.json"), "{}")
        const swap = yield* spawnScoped("python3", ["-c", swapper, source])
        expect(yield* firstLine(swap, 10_000)).toBe("go")
        const clones = yield* spawnScoped(
          process.execPath,
          ["--import", "tsx", "--input-type=module", "-e", cloner, source, NodePath.join(base, "clones"), "100"],
          import.meta.dirname
        )
        // 100 clones take about 4 s on this machine when nothing blocks (300 took 11 s alone).
        expect(yield* firstLine(clones, 60_000)).toBe("done 100")
      })),
    90_000
  )
})
