/**
 * Module resolution hook for the benchmarks (see compiled.mjs): a module under
 * `packages/<name>/src/` resolves to its compiled twin under `packages/<name>/build/esm/`; a
 * source without one (a build missing or out of date) is an error, not a silent fallback.
 */
import * as Fs from "node:fs"
import { fileURLToPath, pathToFileURL } from "node:url"

const source = /^(.*\/packages\/[^/]+)\/src\/(.+)\.(?:ts|js)$/

export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context)
  const match = resolved.url.startsWith("file:") ? source.exec(fileURLToPath(resolved.url)) : null
  if (match === null) return resolved
  const compiled = `${match[1]}/build/esm/${match[2]}.js`
  if (!Fs.existsSync(compiled)) {
    throw new Error(`bench: ${fileURLToPath(resolved.url)} has no compiled build at ${compiled} (npm run build)`)
  }
  return { url: pathToFileURL(compiled).href, format: "module", shortCircuit: true }
}
