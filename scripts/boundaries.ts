/**
 * The import-boundary rules of DESIGN.md §1, checked over source text.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import ts from "typescript"

/** Which packages each package may import (DESIGN.md §1). `testing` may import any. */
export const allowedImports: Readonly<Record<string, ReadonlyArray<string>>> = {
  tool: [],
  gateway: ["tool"],
  profile: [],
  core: ["tool", "gateway", "profile"],
  drivers: ["core", "profile"],
  http: ["core"],
  testing: ["tool", "gateway", "profile", "core", "drivers"],
  cluster: ["tool", "profile", "core"],
  ai: ["tool", "core"]
}

export interface SourceFile {
  readonly pkg: string
  /** Path relative to the package directory, e.g. `src/Agent.ts`. */
  readonly path: string
  readonly text: string
}

export interface Violation {
  readonly file: string
  readonly specifier: string
  readonly rule: string
}

const importsOf = (text: string): Array<string> => {
  const info = ts.preProcessFile(text, true, true)
  return info.importedFiles.map((file) => file.fileName)
}

/** Checks files against the boundary rules; returns every violation found. */
export const checkBoundaries = (files: ReadonlyArray<SourceFile>): Array<Violation> => {
  const violations: Array<Violation> = []
  for (const file of files) {
    const inSrc = file.path.startsWith("src/")
    for (const specifier of importsOf(file.text)) {
      const at = `${file.pkg}/${file.path}`
      const scoped = /^@tether\/([^/]+)(\/(.*))?$/.exec(specifier)
      if (scoped !== null) {
        const target = scoped[1]!
        const subpath = scoped[3]
        if (subpath !== undefined && !/^[A-Z][A-Za-z0-9]*$/.test(subpath)) {
          violations.push({ file: at, specifier, rule: "import another package only through its public entry points" })
        }
        if (inSrc && target === "testing" && file.pkg !== "testing") {
          violations.push({ file: at, specifier, rule: "src never imports @tether/testing" })
        } else if (inSrc && target !== file.pkg && !(allowedImports[file.pkg] ?? []).includes(target)) {
          violations.push({ file: at, specifier, rule: `${file.pkg} may not import ${target} (DESIGN.md §1)` })
        }
        continue
      }
      if (specifier.startsWith(".")) {
        const resolved = Path.posix.normalize(Path.posix.join(Path.posix.dirname(file.path), specifier))
        if (resolved.startsWith("..")) {
          violations.push({ file: at, specifier, rule: "relative imports stay inside their package" })
        } else if (inSrc && !resolved.startsWith("src/")) {
          violations.push({ file: at, specifier, rule: "src never imports test code" })
        }
      }
    }
  }
  return violations
}

const walk = (dir: string): Array<string> =>
  Fs.existsSync(dir)
    ? Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const full = Path.join(dir, entry.name)
      if (entry.isDirectory()) return entry.name === "fixtures" || entry.name === "node_modules" ? [] : walk(full)
      return /\.(ts|mts|tsx)$/.test(entry.name) ? [full] : []
    })
    : []

/** Reads every TypeScript file under `packages/<pkg>/{src,test}`. */
export const readWorkspace = (root: string): Array<SourceFile> =>
  Object.keys(allowedImports).flatMap((pkg) => {
    const dir = Path.join(root, "packages", pkg)
    return [...walk(Path.join(dir, "src")), ...walk(Path.join(dir, "test"))].map((full) => ({
      pkg,
      path: Path.relative(dir, full).split(Path.sep).join("/"),
      text: Fs.readFileSync(full, "utf8")
    }))
  })
