/**
 * What the runner reads from Linux `/proc`: live members of a process group, and the processes
 * carrying an agent's marker (its own, or a dead host's). Elsewhere nothing is found.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as FsSync from "node:fs"
import * as NodeProcess from "node:process"

/** @internal */
export const markerVariable = "TETHER_AGENT_MARKER"

/** @internal */
export const signalGroup = (pid: number, signal: NodeJS.Signals | 0): boolean => {
  try {
    NodeProcess.kill(-pid, signal)
    return true
  } catch {
    return false
  }
}

/**
 * Whether the process group still has a live (non-zombie) member. Zombies are skipped: when
 * the leader is gone its exited children are reparented to a reaper that may be slow (or, in a
 * container, absent).
 *
 * @internal
 */
export const groupAlive = (pgid: number): boolean => {
  if (!signalGroup(pgid, 0)) return false
  let names: Array<string>
  try {
    names = FsSync.readdirSync("/proc")
  } catch {
    return true
  }
  for (const name of names) {
    if (name.charCodeAt(0) < 48 || name.charCodeAt(0) > 57) continue
    let stat: string
    try {
      stat = FsSync.readFileSync(`/proc/${name}/stat`, "latin1")
    } catch {
      continue
    }
    const close = stat.lastIndexOf(")")
    const fields = stat.slice(close + 2).split(" ")
    // fields[0] = state, fields[2] = pgrp
    if (Number(fields[2]) === pgid && fields[0] !== "Z" && fields[0] !== "X") return true
  }
  return false
}

/**
 * The pids of every live process whose environment carries `marker` (grandchildren included,
 * also those that left the group with `setsid`). Linux `/proc` only; elsewhere none are found.
 *
 * @internal
 */
export const findMarked = (marker: string): Effect.Effect<ReadonlyArray<number>> =>
  Effect.sync(() => {
    // Synchronous on purpose: a few milliseconds for a few hundred processes, several times
    // faster than as many concurrent asynchronous reads.
    const needle = Buffer.from(`${markerVariable}=${marker}\0`)
    let entries: Array<string>
    try {
      entries = FsSync.readdirSync("/proc")
    } catch {
      return []
    }
    const found: Array<number> = []
    for (const entry of entries) {
      if (entry.charCodeAt(0) < 48 || entry.charCodeAt(0) > 57) continue
      const pid = Number(entry)
      if (pid === NodeProcess.pid) continue
      try {
        const environ = FsSync.readFileSync(`/proc/${entry}/environ`)
        const index = environ.indexOf(needle)
        if (index === 0 || (index > 0 && environ[index - 1] === 0)) found.push(pid)
      } catch {
        // gone, or not ours to read
      }
    }
    return found
  })

/**
 * SIGKILLs every live process carrying `marker` (the second sweep of the ordered close).
 * Returns the pids that were signalled.
 *
 * @internal
 */
export const reapMarked = (marker: string): Effect.Effect<ReadonlyArray<number>> =>
  Effect.map(findMarked(marker), (pids) =>
    pids.filter((pid) => {
      try {
        NodeProcess.kill(pid, "SIGKILL")
        return true
      } catch {
        return false
      }
    }))

const markerValues = (): Array<{ readonly pid: number; readonly value: string }> => {
  const prefix = Buffer.from(`${markerVariable}=`)
  const found: Array<{ readonly pid: number; readonly value: string }> = []
  let entries: Array<string>
  try {
    entries = FsSync.readdirSync("/proc")
  } catch {
    return found
  }
  for (const entry of entries) {
    if (entry.charCodeAt(0) < 48 || entry.charCodeAt(0) > 57) continue
    try {
      const environ = FsSync.readFileSync(`/proc/${entry}/environ`)
      let index = environ.indexOf(prefix)
      while (index > 0 && environ[index - 1] !== 0) index = environ.indexOf(prefix, index + 1)
      if (index < 0) continue
      const end = environ.indexOf(0, index)
      found.push({
        pid: Number(entry),
        value: environ.subarray(index + prefix.length, end < 0 ? environ.length : end).toString("latin1")
      })
    } catch {
      // gone, or not ours to read
    }
  }
  return found
}

const alive = (pid: number): boolean => {
  try {
    NodeProcess.kill(pid, 0)
    return true
  } catch (error) {
    return (error as { readonly code?: string }).code === "EPERM"
  }
}

/**
 * A marker value: `<host pid>-<agent id>`, so leftovers of a dead host can be told apart.
 *
 * @internal
 */
export const makeMarker = (agentId: string): string => `${NodeProcess.pid}-${agentId}`

/**
 * SIGKILLs the marked processes whose host (the pid in their marker) is no longer alive:
 * what a SIGKILLed host left behind. Returns the pids that were signalled.
 *
 * @internal
 */
export const reapOrphans: Effect.Effect<ReadonlyArray<number>> = Effect.sync(() =>
  markerValues().flatMap(({ pid, value }) => {
    const host = Number(value.slice(0, value.indexOf("-")))
    if (!Number.isInteger(host) || host <= 0 || host === NodeProcess.pid || alive(host)) return []
    try {
      NodeProcess.kill(pid, "SIGKILL")
      return [pid]
    } catch {
      return []
    }
  })
)
