/**
 * Vitest global setup: every test run gets its own temporary directory as TMPDIR, removed
 * when the run ends. Library defaults that live under the temp dir (the session store, the
 * clone root) then stay inside the run instead of accumulating in the machine's /tmp.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

export default function setup(): () => void {
  const previous = process.env["TMPDIR"]
  // The machine's own temp dir, for servers whose OS user cannot enter the run's private one.
  process.env["TETHER_SYSTEM_TMPDIR"] ??= Os.tmpdir()
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-vitest-"))
  process.env["TMPDIR"] = dir
  return () => {
    if (previous === undefined) delete process.env["TMPDIR"]
    else process.env["TMPDIR"] = previous
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}
