/**
 * Module resolution hook for the benchmarks (see compiled.mjs): a module under this repository's
 * `packages/<name>/src/` resolves to its compiled twin under `packages/<name>/build/esm/`; a
 * source without one (a build missing or out of date) is an error, not a silent fallback. Other
 * modules (dependencies included) resolve as they would.
 */
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const packages = NodePath.resolve(fileURLToPath(new URL("..", import.meta.url)), "packages")
const source = /^([^/]+)\/src\/(.+)\.(?:ts|js)$/

export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context)
  if (!resolved.url.startsWith("file:")) return resolved
  const file = fileURLToPath(resolved.url)
  const relative = NodePath.relative(packages, file)
  const match = relative.startsWith("..") ? null : source.exec(relative.split(NodePath.sep).join("/"))
  if (match === null) return resolved
  const compiled = NodePath.join(packages, match[1], "build", "esm", `${match[2]}.js`)
  if (!Fs.existsSync(compiled)) {
    throw new Error(`bench: ${file} has no compiled build at ${compiled} (npm run build)`)
  }
  return { url: pathToFileURL(compiled).href, format: "module", shortCircuit: true }
}
