/**
 * A package's `prepack` (`npm pack`, `npm publish`): refuses to pack a `build/` that does not
 * match `src/`. `tsc -b` never deletes what a removed or renamed source once emitted, and the
 * packed `files` take `build/esm` and `build/dts` whole: a stale module would ship (a renamed
 * internal, a scratch file once built). Every output must have its source, and every source its
 * four outputs (`.js`, `.js.map`, `.d.ts`, `.d.ts.map`).
 *
 * Run from a package's directory: node ../../scripts/checkBuild.mjs
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

const outputs = [
  ["esm", ".js"],
  ["esm", ".js.map"],
  ["dts", ".d.ts"],
  ["dts", ".d.ts.map"]
]

/** Every file under `dir`, relative to it (none when it is missing). */
const filesUnder = (dir) =>
  Fs.existsSync(dir)
    ? Fs.readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => Path.relative(dir, Path.join(entry.parentPath ?? entry.path, entry.name)))
    : []

const packageDir = process.cwd()
const sources = new Set(
  filesUnder(Path.join(packageDir, "src")).filter((file) => file.endsWith(".ts")).map((file) => file.slice(0, -3))
)
const problems = []
for (const folder of ["esm", "dts"]) {
  for (const file of filesUnder(Path.join(packageDir, "build", folder))) {
    const suffix = outputs.find(([where, ending]) => where === folder && file.endsWith(ending))?.[1]
    if (suffix === undefined || !sources.has(file.slice(0, -suffix.length))) {
      problems.push(`build/${folder}/${file} has no source in src/`)
    }
  }
}
for (const source of sources) {
  for (const [folder, ending] of outputs) {
    if (!Fs.existsSync(Path.join(packageDir, "build", folder, `${source}${ending}`))) {
      problems.push(`src/${source}.ts has no build/${folder}/${source}${ending}`)
    }
  }
}
if (problems.length > 0) {
  process.stderr.write(
    `${Path.basename(packageDir)}: build/ does not match src/, refusing to pack:\n${
      problems.map((problem) => `  ${problem}\n`).join("")
    }Rebuild from scratch: rm -rf packages/*/build && npm run build\n`
  )
  process.exitCode = 1
}
