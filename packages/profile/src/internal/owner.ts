/**
 * Clone ownership markers: who created a clone (pid + process start time + agent id), and
 * whether that owner is still alive. The start time makes the check survive pid reuse.
 *
 * @internal
 */
import * as Schema from "effect/Schema"
import * as NodeFs from "node:fs"

/** File name of the marker, at the top of each clone directory (outside the profile dir). @internal */
export const markerName = ".tether-clone.json"
/** File name of the ownership manifest of materialized entries. @internal */
export const manifestName = ".tether-manifest.json"

/** @internal */
export const Marker = Schema.Struct({
  version: Schema.Literal(1),
  pid: Schema.Int,
  /** Process start time in clock ticks since boot (`/proc/<pid>/stat` field 22), when known. */
  startTime: Schema.NullOr(Schema.String),
  agentId: Schema.String,
  identity: Schema.String,
  provider: Schema.String,
  source: Schema.String,
  createdAt: Schema.String,
  /**
   * The owner's PID namespace (`/proc/self/ns/pid`) and boot (`/proc/sys/kernel/random/boot_id`),
   * when known: a pid means nothing in another namespace, and nobody outlives a reboot.
   */
  pidNamespace: Schema.optional(Schema.String),
  bootId: Schema.optional(Schema.String),
  /** Set when close kept user-changed entries: such a clone is never reclaimed automatically. */
  retained: Schema.optional(Schema.Array(Schema.String))
})
/** @internal */
export type Marker = typeof Marker.Type

/** @internal */
export const decodeMarker = Schema.decodeUnknownOption(Schema.parseJson(Marker))

/** @internal */
export const ManifestEntry = Schema.Struct({
  path: Schema.String,
  sha256: Schema.String,
  mode: Schema.Int,
  owner: Schema.String
})
/** @internal */
export type ManifestEntry = typeof ManifestEntry.Type

/** @internal */
export const Manifest = Schema.Struct({ version: Schema.Literal(1), entries: Schema.Array(ManifestEntry) })
/** @internal */
export const decodeManifest = Schema.decodeUnknownOption(Schema.parseJson(Manifest))

/**
 * Start time of `pid` from `/proc/<pid>/stat` (field 22), or `null` where procfs is absent.
 * The command name (field 2) may contain spaces and parentheses, so fields are counted
 * after the last `)`.
 *
 * @internal
 */
export const processStartTime = (pid: number): string | null => procStat(pid)?.startTime ?? null

const procStat = (pid: number): { readonly state: string; readonly startTime: string } | undefined => {
  try {
    const stat = NodeFs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    // fields[0] is field 3 (state); field 22 is at index 19.
    const startTime = fields[19]
    return fields[0] !== undefined && startTime !== undefined ? { state: fields[0], startTime } : undefined
  } catch {
    return undefined
  }
}

const pidExists = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

type Self = Pick<Marker, "pid" | "startTime" | "pidNamespace" | "bootId">

/**
 * Whether the process a marker names is still the one that wrote it. A marker of another boot
 * names a dead owner; one of another PID namespace (a container sharing the clone root) cannot be
 * checked from here and counts as alive.
 *
 * @internal
 */
export const ownerAlive = (marker: Pick<Marker, "pid" | "startTime"> & Partial<Self>): boolean => {
  const here = self()
  if (marker.bootId !== undefined && here.bootId !== undefined && marker.bootId !== here.bootId) return false
  if (marker.pidNamespace !== undefined && marker.pidNamespace !== here.pidNamespace) return true
  if (!pidExists(marker.pid)) return false
  if (marker.startTime === null) return true
  const current = procStat(marker.pid)
  // A zombie (killed, not yet reaped) or a vanished /proc entry means the owner is gone.
  return current !== undefined && current.state !== "Z" && current.startTime === marker.startTime
}

let selfFields: Self | undefined

const readOr = (read: () => string): string | undefined => {
  try {
    return read().trim()
  } catch {
    return undefined
  }
}

/** The marker fields identifying this process (read once: they never change). @internal */
export const self = (): Self => {
  if (selfFields === undefined) {
    const pidNamespace = readOr(() => NodeFs.readlinkSync("/proc/self/ns/pid"))
    const bootId = readOr(() => NodeFs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8"))
    selfFields = {
      pid: process.pid,
      startTime: processStartTime(process.pid),
      ...(pidNamespace === undefined ? {} : { pidNamespace }),
      ...(bootId === undefined ? {} : { bootId })
    }
  }
  return selfFields
}
