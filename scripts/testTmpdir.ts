/**
 * Vitest global setup: every test run gets its own temporary directory as TMPDIR, removed
 * when the run ends, and a per-user state directory inside it as XDG_STATE_HOME. Library
 * defaults (the clone root under the temp dir, the session store under the state directory)
 * then stay inside the run: no test writes into the machine's /tmp or the user's state.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

export default function setup(): () => void {
  const previous = process.env["TMPDIR"]
  const previousState = process.env["XDG_STATE_HOME"]
  // The machine's own temp dir, for servers whose OS user cannot enter the run's private one. The
  // run's directory is made there too, not in the TMPDIR an earlier project's setup set: nested
  // once per project, paths outgrow what a unix socket allows (Chromium's singleton socket).
  const system = (process.env["TETHER_SYSTEM_TMPDIR"] ??= Os.tmpdir())
  const dir = Fs.mkdtempSync(Path.join(system, "tether-vitest-"))
  const state = Path.join(dir, "state")
  Fs.mkdirSync(state, { mode: 0o700 })
  process.env["TMPDIR"] = dir
  process.env["XDG_STATE_HOME"] = state
  return () => {
    if (previous === undefined) delete process.env["TMPDIR"]
    else process.env["TMPDIR"] = previous
    if (previousState === undefined) delete process.env["XDG_STATE_HOME"]
    else process.env["XDG_STATE_HOME"] = previousState
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}
