/**
 * `Profile.inspect`: the declared entries of a source and the clones of it, as observed on disk.
 *
 * @internal
 */
import * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as NodeFs from "node:fs"
import type { CloneReport, Inspection, MaterializedEntry, Selection } from "../Profile.js"
import type { ProfileLayout } from "../ProfileLayout.js"
import { entryState } from "./clone.js"
import * as owner from "./owner.js"
import { listClones, readText } from "./reclaim.js"
import { walk } from "./seed.js"
import { resolveSource, rootOf } from "./source.js"

/** @internal */
export const inspect = (selection: Selection, layout: ProfileLayout) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const source = yield* resolveSource(selection, layout)
    const entries = source.exists ? yield* walk(source.path, layout) : []
    const clones: Array<CloneReport> = []
    // A clone made through another spelling of the source (a link to it) is a clone of it too.
    const sameSource = (spelled: string) => {
      if (spelled === source.path) return true
      try {
        return NodeFs.realpathSync.native(spelled) === source.canonical
      } catch {
        return false
      }
    }
    for (const found of yield* listClones(path.resolve(rootOf(selection).root))) {
      const marker = found.marker
      if (marker === undefined || marker.provider !== layout.provider || !sameSource(marker.source)) continue
      const text = yield* readText(path.join(found.dir, owner.manifestName))
      const manifest = text === undefined ? undefined : Option.getOrUndefined(owner.decodeManifest(text))
      const materialized: Array<MaterializedEntry> = []
      for (const entry of manifest?.entries ?? []) {
        const absolute = path.join(found.dir, "profile", ...entry.path.split("/"))
        materialized.push({
          path: entry.path,
          owner: entry.owner,
          sha256: entry.sha256,
          state: yield* entryState(absolute, entry)
        })
      }
      clones.push({
        root: found.dir,
        agentId: marker.agentId,
        pid: marker.pid,
        alive: owner.ownerAlive(marker),
        retained: marker.retained !== undefined,
        materialized
      })
    }
    return {
      source: source.path,
      exists: source.exists,
      identity: `${layout.provider}:${source.canonical}`,
      declared: entries.map((entry) => ({
        path: entry.path,
        class: entry.class,
        kind: entry.kind,
        reserved: entry.reserved
      })),
      clones
    } satisfies Inspection
  }).pipe(Effect.withSpan("Profile.inspect", { captureStackTrace: false }))
