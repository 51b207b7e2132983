/**
 * The per-process logs a provider writes into an agent's clone (`ProfileLayout.logs`), removed
 * once no process of the agent runs. A log's name does not say which process writes it (Claude
 * Code names its MCP log by the time its process started), so one is removed only when no process
 * can still be appending to it: the last process of the agent to go removes every log found since
 * the agent was last idle.
 *
 * @internal
 */
import * as ProfileLayout from "@tether/profile/ProfileLayout"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"

/** @internal */
export interface RunLogs {
  /** A process of the agent started: no log is removed until it is gone. */
  readonly spawned: () => void
  /**
   * Called with every file a gone process wrote (after it was scrubbed); keeps the logs among
   * them for removal. `undefined` when the layout names no logs.
   */
  readonly found: ((file: string) => void) | undefined
  /** A process that `spawned` counted is gone and its files were scrubbed. */
  readonly exited: () => void
}

/** Nothing to keep: a layout without logs. */
const none: RunLogs = { spawned: () => {}, found: undefined, exited: () => {} }

/**
 * The clone's log directories: `profile` is the profile directory, any other name a sibling's.
 *
 * @internal
 */
export const make = (
  layout: ProfileLayout.ProfileLayout,
  clone: { readonly dir: string; readonly siblings: { readonly [name: string]: string } }
): RunLogs => {
  const roots: Array<{ readonly prefix: string; readonly globs: ProfileLayout.Globs }> = []
  for (const [name, globs] of Object.entries(layout.logs ?? {})) {
    const dir = name === "profile" ? clone.dir : Object.hasOwn(clone.siblings, name) ? clone.siblings[name] : undefined
    if (dir !== undefined && globs.length > 0) roots.push({ prefix: dir + NodePath.sep, globs })
  }
  if (roots.length === 0) return none
  let running = 0
  const pending = new Set<string>()
  const isLog = (file: string): boolean =>
    roots.some(({ globs, prefix }) =>
      file.startsWith(prefix) &&
      ProfileLayout.matches(globs, file.slice(prefix.length).split(NodePath.sep).join("/"))
    )
  return {
    spawned: () => {
      running++
    },
    found: (file) => {
      if (isLog(file)) pending.add(file)
    },
    exited: () => {
      running = Math.max(0, running - 1)
      if (running > 0 || pending.size === 0) return
      // Synchronous, in one step: no process of the agent can be spawned between the count and
      // the last removal. Only files go; the directories stay for the next process.
      for (const file of pending) {
        try {
          NodeFs.unlinkSync(file)
        } catch {
          // Gone already, or not ours to remove: nothing else to do.
        }
      }
      pending.clear()
    }
  }
}
