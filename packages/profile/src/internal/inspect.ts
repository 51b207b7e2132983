/**
 * `Profile.inspect`: the declared entries of a source and the clones of it, as observed on disk.
 *
 * @internal
 */
import * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { CloneReport, Inspection, MaterializedEntry, Selection } from "../Profile.js"
import type { ProfileLayout } from "../ProfileLayout.js"
import { entryState } from "./clone.js"
import * as owner from "./owner.js"
import { listClones, readText } from "./reclaim.js"
import { walk } from "./seed.js"
import { canonical, resolveSource, rootOf } from "./source.js"
import { withSpan } from "./span.js"

/** @internal */
export const inspect = (selection: Selection, layout: ProfileLayout) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const source = yield* resolveSource(selection, layout)
    const entries = source.exists ? yield* walk(source.path, layout) : []
    // As `clone` takes it: a missing native source is where it would be created, through its
    // symlinked ancestors (the real path it has once created).
    const sourceReal = source.exists ? source.canonical : yield* canonical(source.path)
    const clones: Array<CloneReport> = []
    // A clone made through another spelling of the source (a link to it) is a clone of it too.
    const sameSource = (spelled: string) =>
      spelled === source.path
        ? Effect.succeed(true)
        : canonical(spelled).pipe(Effect.map((real) => real === sourceReal), Effect.orElseSucceed(() => false))
    for (const found of yield* listClones(path.resolve(rootOf(selection).root))) {
      const marker = found.marker
      if (marker === undefined || marker.provider !== layout.provider || !(yield* sameSource(marker.source))) continue
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
      identity: `${layout.provider}:${sourceReal}`,
      declared: entries.map((entry) => ({
        path: entry.path,
        class: entry.class,
        kind: entry.kind,
        reserved: entry.reserved
      })),
      clones
    } satisfies Inspection
  }).pipe(withSpan("Profile.inspect"))
