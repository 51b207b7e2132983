/**
 * The host registry: every host process records, in a per-user state directory, the clone
 * roots its agents use, under its pid and start time. The first agent of a later host reclaims
 * the clones a dead host (SIGKILLed: no finalizer ran) left in each of its roots, whichever
 * roots they were, then forgets that host.
 *
 * @internal
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import * as Profile from "@tether/profile/Profile"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as NodeCrypto from "node:crypto"
import * as FsSync from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import * as Procfs from "./procfs.js"

/**
 * Tether's per-user state directory: `$XDG_STATE_HOME/tether` (when absolute), else
 * `~/.local/state/tether`.
 *
 * @internal
 */
export const stateDir = (env: { readonly [name: string]: string | undefined } = process.env): string => {
  const xdg = env["XDG_STATE_HOME"]
  const base = xdg !== undefined && NodePath.isAbsolute(xdg) ? xdg : NodePath.join(NodeOs.homedir(), ".local", "state")
  return NodePath.join(base, "tether")
}

/** @internal */
export const hostsDir = (): string => NodePath.join(stateDir(), "hosts")

const HostRecord = Schema.Struct({
  version: Schema.Literal(1),
  pid: Schema.Int,
  startTime: Schema.String,
  roots: Schema.Array(Schema.String)
})
const decodeRecord = Schema.decodeUnknownOption(Schema.parseJson(HostRecord))

const recorded = new Set<string>()

/**
 * Adds `root` (absolute) to this host's record, written atomically. A registry that cannot be
 * written is logged and skipped: it only serves the reclaiming of a later host.
 *
 * @internal
 */
export const recordRoot = (root: string): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (recorded.has(root)) return Effect.void
    const dir = hostsDir()
    const host = Procfs.self()
    const file = NodePath.join(dir, `${host.pid}-${host.startTime}.json`)
    return Effect.try(() => {
      FsSync.mkdirSync(dir, { recursive: true, mode: 0o700 })
      const roots = [...recorded, root].sort()
      // A fresh name, created exclusively: nothing planted at a predictable one is written through.
      const temporary = `${file}.${process.pid}-${NodeCrypto.randomBytes(6).toString("hex")}.tmp`
      FsSync.writeFileSync(temporary, JSON.stringify({ version: 1, ...host, roots }) + "\n", {
        mode: 0o600,
        flag: "wx"
      })
      FsSync.renameSync(temporary, file)
      recorded.add(root)
    }).pipe(
      Effect.catchAll((error) =>
        Effect.logWarning("recording the clone root in the host registry failed").pipe(
          Effect.annotateLogs({ registry: dir, root, error: String(error.error) })
        )
      )
    )
  })

/**
 * Reclaims the stale clones in every root of every dead host of the registry (its clones'
 * own markers decide what is stale), then removes that host's record. Returns the clone
 * directories removed. Never fails: what cannot be read is logged and left for a later host.
 *
 * @internal
 */
export const reclaimDeadHosts: Effect.Effect<ReadonlyArray<string>, never, FileSystem.FileSystem | Path.Path> = Effect
  .gen(function*() {
    const dir = hostsDir()
    let names: Array<string>
    try {
      names = FsSync.readdirSync(dir).filter((name) => name.endsWith(".json")).sort()
    } catch {
      return []
    }
    const removed: Array<string> = []
    for (const name of names) {
      const file = NodePath.join(dir, name)
      let text: string
      try {
        text = FsSync.readFileSync(file, "utf8")
      } catch {
        continue
      }
      const record = decodeRecord(text)
      if (record._tag === "Some" && Procfs.hostAlive(record.value)) continue
      for (const root of record._tag === "Some" ? record.value.roots : []) {
        const reclaimed = yield* Profile.reclaim({ root }).pipe(
          Effect.catchAll((error) =>
            Effect.as(
              Effect.logWarning("reclaiming a dead host's clones failed").pipe(
                Effect.annotateLogs({ root, error: error.message })
              ),
              []
            )
          )
        )
        removed.push(...reclaimed)
      }
      FsSync.rmSync(file, { force: true })
    }
    return removed
  })
