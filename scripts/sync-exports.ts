/**
 * Rewrites each package's `exports` map from its public modules (`src/<Name>.ts`).
 * Run with `npm run sync-exports` after adding or removing a public module.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { expectedExports } from "./api.js"
import { allowedImports } from "./boundaries.js"

const root = Path.resolve(import.meta.dirname, "..")
for (const pkg of Object.keys(allowedImports)) {
  const file = Path.join(root, "packages", pkg, "package.json")
  const manifest = JSON.parse(Fs.readFileSync(file, "utf8")) as Record<string, unknown>
  manifest["exports"] = expectedExports(Path.dirname(file))
  Fs.writeFileSync(file, JSON.stringify(manifest, null, 2) + "\n")
}
