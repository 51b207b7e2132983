/**
 * Vitest global setup: every test run gets its own temporary directory as TMPDIR, removed
 * when the run ends. Library defaults that live under the temp dir (the session store, the
 * clone root) then stay inside the run instead of accumulating in the machine's /tmp, and the
 * per-user state directory (`XDG_STATE_HOME`: the host registry) is a directory of it too, so
 * no test writes into the real user's state.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

export default function setup(): () => void {
  const previous = process.env["TMPDIR"]
  const previousState = process.env["XDG_STATE_HOME"]
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-vitest-"))
  process.env["TMPDIR"] = dir
  process.env["XDG_STATE_HOME"] = Path.join(dir, "state")
  return () => {
    if (previous === undefined) delete process.env["TMPDIR"]
    else process.env["TMPDIR"] = previous
    if (previousState === undefined) delete process.env["XDG_STATE_HOME"]
    else process.env["XDG_STATE_HOME"] = previousState
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}
