/**
 * Vitest global setup of the repository tests: builds every package (`tsc -b`, incremental: a
 * no-op in `npm test`, which has just type-checked and emitted them), so the API goldens and the
 * packaging test read the emitted `build/` of the current sources, never a stale one.
 */
import { execFileSync } from "node:child_process"
import { createRequire } from "node:module"
import * as Path from "node:path"

export default function setup(): void {
  const root = Path.resolve(import.meta.dirname, "..")
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
  execFileSync(process.execPath, [tsc, "-b", Path.join(root, "tsconfig.build.json")], { cwd: root, stdio: "inherit" })
}
