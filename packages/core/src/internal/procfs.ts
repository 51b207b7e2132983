/**
 * What the runner reads from Linux `/proc`: live members of a process group, process start
 * times, and the processes carrying an agent's marker (its own, or a dead host's). Without
 * `/proc` (macOS, BSD, or switched off) a group's liveness is `kill(-pgid, 0)` and no marked
 * process can be found.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as FsSync from "node:fs"
import * as NodeProcess from "node:process"

/** @internal */
export const markerVariable = "TETHER_AGENT_MARKER"

let procfsEnabled = true

/**
 * Switches the use of `/proc` off (or back on), so the code path of a system without procfs
 * runs, and is tested, on Linux too.
 *
 * @internal
 */
export const setProcfs = (enabled: boolean): void => {
  procfsEnabled = enabled
}

/** The numeric entries of `/proc`, or `undefined` when procfs is off or absent. */
const procEntries = (): Array<string> | undefined => {
  if (!procfsEnabled) return undefined
  try {
    return FsSync.readdirSync("/proc").filter((name) => name.charCodeAt(0) >= 48 && name.charCodeAt(0) <= 57)
  } catch {
    return undefined
  }
}

/** Fields 3 onward of `/proc/<pid>/stat` (the command name may hold spaces and parentheses). */
const statFields = (pid: number | string): Array<string> | undefined => {
  if (!procfsEnabled) return undefined
  try {
    const stat = FsSync.readFileSync(`/proc/${pid}/stat`, "latin1")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  } catch {
    return undefined
  }
}

/**
 * Signals the process group; `false` when it has no process left. A gone group is the usual
 * answer (every run's end asks), and Node reports it by throwing: the error is built without a
 * stack trace, which from inside a fiber cost ~0.4 ms a call.
 *
 * @internal
 */
export const signalGroup = (pid: number, signal: NodeJS.Signals | 0): boolean => {
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    NodeProcess.kill(-pid, signal)
    return true
  } catch {
    return false
  } finally {
    Error.stackTraceLimit = limit
  }
}

/**
 * Whether the process group still has a live (non-zombie) member. Zombies are skipped: when
 * the leader is gone its exited children are reparented to a reaper that may be slow (or, in a
 * container, absent). Without procfs a zombie member counts as alive.
 *
 * @internal
 */
export const groupAlive = (pgid: number): boolean => {
  if (!signalGroup(pgid, 0)) return false
  const names = procEntries()
  if (names === undefined) return true
  for (const name of names) {
    const fields = statFields(name)
    // fields[0] = state, fields[2] = pgrp
    if (fields !== undefined && Number(fields[2]) === pgid && fields[0] !== "Z" && fields[0] !== "X") return true
  }
  return false
}

/**
 * The start time of `pid` (clock ticks since boot, `/proc/<pid>/stat` field 22), `undefined`
 * when unknown (no procfs, or no such process).
 *
 * @internal
 */
export const startTime = (pid: number): string | undefined => statFields(pid)?.[19]

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
    const found: Array<number> = []
    for (const entry of procEntries() ?? []) {
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

/** Whether `pid` is gone or a zombie (a killed process is not gone the moment `kill` returns). */
const dead = (pid: number): boolean => {
  const fields = statFields(pid)
  return fields === undefined || fields[0] === "Z" || fields[0] === "X"
}

/**
 * SIGKILLs every live process carrying `marker` (the second sweep of the ordered close), then
 * waits (bounded: 2 s) until each is gone, so that nothing marked is still running once the
 * sweep is over, however loaded the machine. Returns the pids that were signalled.
 *
 * @internal
 */
export const reapMarked = (marker: string): Effect.Effect<ReadonlyArray<number>> =>
  Effect.gen(function*() {
    const signalled = (yield* findMarked(marker)).filter((pid) => {
      try {
        NodeProcess.kill(pid, "SIGKILL")
        return true
      } catch {
        return false
      }
    })
    for (let waited = 0; waited < 2_000 && !signalled.every(dead); waited += 10) {
      yield* Effect.sleep("10 millis")
    }
    return signalled
  })

const markerValues = (): Array<{ readonly pid: number; readonly value: string }> => {
  const prefix = Buffer.from(`${markerVariable}=`)
  const found: Array<{ readonly pid: number; readonly value: string }> = []
  for (const entry of procEntries() ?? []) {
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

const pidExists = (pid: number): boolean => {
  try {
    NodeProcess.kill(pid, 0)
    return true
  } catch (error) {
    return (error as { readonly code?: string }).code === "EPERM"
  }
}

/** The start time written into markers when it cannot be read. */
const unknownStart = "x"

/**
 * Who owns a process: a host pid and that process's start time (`x` when unknown), so a pid
 * reused by another process is told apart from the host that wrote it.
 *
 * @internal
 */
export interface HostId {
  readonly pid: number
  readonly startTime: string
}

let selfId: HostId | undefined

/** This process (read once: neither its pid nor its start time ever changes). @internal */
export const self = (): HostId =>
  selfId ??= { pid: NodeProcess.pid, startTime: startTime(NodeProcess.pid) ?? unknownStart }

/**
 * Whether the process `host` names is still the one that was recorded: the pid exists, is not
 * a zombie and, when both are known, started at the recorded time.
 *
 * @internal
 */
export const hostAlive = (host: HostId): boolean => {
  if (!pidExists(host.pid)) return false
  const fields = statFields(host.pid)
  if (fields === undefined) return true
  if (fields[0] === "Z" || fields[0] === "X") return false
  return host.startTime === unknownStart || fields[19] === host.startTime
}

/**
 * A marker value: `<host pid>-<host start time>-<agent id>`, so leftovers of a dead host can
 * be told apart from those of a live one, even when the host's pid was reused.
 *
 * @internal
 */
export const makeMarker = (agentId: string): string => {
  const host = self()
  return `${host.pid}-${host.startTime}-${agentId}`
}

const markerPattern = /^([1-9][0-9]*)-([0-9]+|x)-./

/** The host a marker names, `undefined` for a value that is not a marker of this format. @internal */
export const markerHost = (value: string): HostId | undefined => {
  const match = markerPattern.exec(value)
  return match === null ? undefined : { pid: Number(match[1]), startTime: match[2]! }
}

/**
 * SIGKILLs the marked processes whose host (pid and start time in their marker) is no longer
 * alive: what a SIGKILLed host left behind. Returns the pids that were signalled.
 *
 * @internal
 */
export const reapOrphans: Effect.Effect<ReadonlyArray<number>> = Effect.sync(() =>
  markerValues().flatMap(({ pid, value }) => {
    const host = markerHost(value)
    if (host === undefined || hostAlive(host)) return []
    try {
      NodeProcess.kill(pid, "SIGKILL")
      return [pid]
    } catch {
      return []
    }
  })
)
