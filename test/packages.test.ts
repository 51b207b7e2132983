/**
 * What every published package promises before anyone installs it: real metadata, one version,
 * the license, a README, Effect's packages as peers (pinned exactly only at the root), every
 * import declared, nothing shipped missing, and no optional peer loaded by a package's root
 * entry. Packages are the root manifest's `workspaces`, so a new package is checked as it lands.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Fs from "node:fs"
import { builtinModules } from "node:module"
import * as Os from "node:os"
import * as Path from "node:path"
import ts from "typescript"
import { serverInfo } from "../packages/gateway/src/internal/mcp.js"

interface Manifest {
  readonly name: string
  readonly version: string
  readonly description?: string
  readonly license?: string
  readonly repository?: { readonly type: string; readonly url: string; readonly directory: string }
  readonly homepage?: string
  readonly keywords?: ReadonlyArray<string>
  readonly engines?: { readonly node?: string }
  readonly publishConfig?: { readonly access?: string }
  readonly files?: ReadonlyArray<string>
  readonly main?: string
  readonly types?: string
  readonly dependencies?: { readonly [name: string]: string }
  readonly peerDependencies?: { readonly [name: string]: string }
  readonly peerDependenciesMeta?: { readonly [name: string]: { readonly optional?: boolean } }
  readonly devDependencies?: { readonly [name: string]: string }
  readonly workspaces?: ReadonlyArray<string>
}

const root = Path.resolve(import.meta.dirname, "..")
const read = (file: string) => JSON.parse(Fs.readFileSync(file, "utf8")) as Manifest
const rootManifest = read(Path.join(root, "package.json"))
const workspaces = (rootManifest.workspaces ?? []).map((dir) => ({
  dir,
  manifest: read(Path.join(root, dir, "package.json"))
}))
const names = new Set(workspaces.map((workspace) => workspace.manifest.name))
const isEffect = (name: string) => name === "effect" || name.startsWith("@effect/")

/** `^a.b.c` admits `version`: same major (same minor when the major is 0), not lower. */
const caretAdmits = (range: string, version: string): boolean => {
  const r = /^\^(\d+)\.(\d+)\.(\d+)$/.exec(range)
  const v = /^(\d+)\.(\d+)\.(\d+)$/.exec(version)
  if (r === null || v === null) return false
  const [ra, rb, rc] = r.slice(1).map(Number) as [number, number, number]
  const [va, vb, vc] = v.slice(1).map(Number) as [number, number, number]
  if (va !== ra || (ra === 0 && vb !== rb)) return false
  return vb > rb || (vb === rb && vc >= rc)
}

const packageOf = (specifier: string): string | undefined => {
  if (specifier.startsWith(".") || specifier.startsWith("node:") || builtinModules.includes(specifier)) {
    return undefined
  }
  const parts = specifier.split("/")
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]
}

/** The module specifiers a file loads when it runs (`import type` / `export type` excluded). */
const runtimeImports = (file: string): Array<string> => {
  const source = ts.createSourceFile(file, Fs.readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true)
  const out: Array<string> = []
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause
      const typeOnly = clause !== undefined && (clause.isTypeOnly || (
        clause.name === undefined && clause.namedBindings !== undefined && ts.isNamedImports(clause.namedBindings) &&
        clause.namedBindings.elements.length > 0 && clause.namedBindings.elements.every((element) => element.isTypeOnly)
      ))
      if (!typeOnly) out.push(node.moduleSpecifier.text)
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier !== undefined) {
      if (!node.isTypeOnly && ts.isStringLiteral(node.moduleSpecifier)) out.push(node.moduleSpecifier.text)
    } else if (
      ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] !== undefined && ts.isStringLiteral(node.arguments[0])
    ) {
      out.push(node.arguments[0].text)
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return out
}

/** Every package a file loads at run time, following the package's own relative imports. */
const loadedPackages = (entry: string): Set<string> => {
  const seen = new Set<string>()
  const packages = new Set<string>()
  const pending = [entry]
  while (pending.length > 0) {
    const file = pending.pop()!
    if (seen.has(file)) continue
    seen.add(file)
    for (const specifier of runtimeImports(file)) {
      if (specifier.startsWith(".")) {
        pending.push(Path.resolve(Path.dirname(file), specifier.replace(/\.js$/, ".ts")))
      } else {
        const name = packageOf(specifier)
        if (name !== undefined) packages.add(name)
      }
    }
  }
  return packages
}

const walk = (dir: string, pattern: RegExp): Array<string> =>
  Fs.existsSync(dir)
    ? Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const full = Path.join(dir, entry.name)
      if (entry.isDirectory()) return walk(full, pattern)
      return pattern.test(entry.name) ? [full] : []
    })
    : []

/** The lowest Node version an `engines.node` range of the form `>= a[.b[.c]]` admits. */
const nodeFloor = (range: string): [number, number, number] => {
  const m = /^>=\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(range.trim())
  if (m === null) throw new Error(`an engines range this check cannot read: ${range}`)
  return [Number(m[1]), Number(m[2] ?? 0), Number(m[3] ?? 0)]
}
const below = (a: [number, number, number], b: [number, number, number]) =>
  a[0] !== b[0] ? a[0] < b[0] : a[1] !== b[1] ? a[1] < b[1] : a[2] < b[2]

/** The installed package `name` as seen from `from` (Node's lookup through `node_modules`). */
const installed = (name: string, from: string): string | undefined => {
  for (let dir = from;; dir = Path.dirname(dir)) {
    const candidate = Path.join(dir, "node_modules", name)
    if (Fs.existsSync(Path.join(candidate, "package.json"))) return Fs.realpathSync(candidate)
    if (dir === Path.dirname(dir)) return undefined
  }
}

describe("package manifests", () => {
  it("the workspaces are the packages, all at one version", () => {
    expect(workspaces.length).toBeGreaterThan(0)
    expect(new Set(workspaces.map((workspace) => workspace.manifest.version)).size).toBe(1)
  })

  it("engines.node admits no Node version that a runtime dependency refuses", () => {
    // Every package's dependencies and peers, transitively, as installed.
    const floors: Array<{ readonly name: string; readonly range: string }> = []
    const seen = new Set<string>()
    const visit = (dir: string) => {
      if (seen.has(dir)) return
      seen.add(dir)
      const manifest = read(Path.join(dir, "package.json"))
      if (manifest.engines?.node !== undefined) floors.push({ name: manifest.name, range: manifest.engines.node })
      for (const name of Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies })) {
        const found = installed(name, dir)
        if (found !== undefined) visit(found)
      }
    }
    for (const { dir } of workspaces) visit(Path.join(root, dir))
    const ours = nodeFloor(workspaces[0]!.manifest.engines?.node ?? "")
    expect(floors.filter((floor) => below(ours, nodeFloor(floor.range)))).toEqual([])
    expect(floors.some((floor) => floor.name === "undici")).toBe(true)
  })

  for (const { dir, manifest } of workspaces) {
    const pkgDir = Path.join(root, dir)

    it(`${manifest.name}: metadata, LICENSE and README for the registry`, () => {
      expect(manifest.version).toMatch(/^\d+\.\d+\.\d+$/)
      expect(manifest.description?.length ?? 0).toBeGreaterThan(40)
      expect(manifest.license).toBe("MIT")
      expect(manifest.repository).toEqual({ type: "git", url: workspaces[0]!.manifest.repository!.url, directory: dir })
      expect(manifest.homepage).toContain(dir)
      expect(manifest.keywords).toEqual(expect.arrayContaining(["tether", "effect"]))
      expect(manifest.engines).toEqual({ node: ">=20.18.1" })
      expect(manifest.publishConfig?.access).toBe("public")
      // For resolvers that read no `exports` (TypeScript's node10, older bundlers).
      expect({ main: manifest.main, types: manifest.types }).toEqual({
        main: "./build/esm/index.js",
        types: "./build/dts/index.d.ts"
      })
      expect(Fs.readFileSync(Path.join(pkgDir, "LICENSE"), "utf8")).toBe(
        Fs.readFileSync(Path.join(root, "LICENSE"), "utf8")
      )
      const readme = Fs.readFileSync(Path.join(pkgDir, "README.md"), "utf8")
      expect(readme.startsWith(`# ${manifest.name}\n`)).toBe(true)
      expect(readme).toMatch(new RegExp(`npm install (-D )?${manifest.name.replace("/", "\\/")} `))
      expect(readme).toContain("```ts")
    })

    it(`${manifest.name}: Effect's packages are peers with caret ranges, pinned exactly at the root`, () => {
      expect(Object.keys(manifest.dependencies ?? {}).filter(isEffect)).toEqual([])
      const peers = Object.entries(manifest.peerDependencies ?? {}).filter(([name]) => isEffect(name))
      expect(peers.map(([name]) => name)).toContain("effect")
      for (const [name, range] of peers) {
        const pin = rootManifest.devDependencies?.[name]
        expect(pin, `${name} is pinned in the root's devDependencies`).toMatch(/^\d+\.\d+\.\d+$/)
        expect(caretAdmits(range, pin!), `${name} ${range} admits the root's ${pin}`).toBe(true)
      }
      // Tether's own packages move together.
      for (const [name, range] of Object.entries(manifest.dependencies ?? {})) {
        if (names.has(name)) expect(range).toBe(`^${manifest.version}`)
      }
    })

    it(`${manifest.name}: every package its code imports is declared`, () => {
      const declared = new Set([
        manifest.name,
        ...Object.keys(manifest.dependencies ?? {}),
        ...Object.keys(manifest.peerDependencies ?? {})
      ])
      const files = [...walk(Path.join(pkgDir, "src"), /\.ts$/), ...walk(Path.join(pkgDir, "bin"), /\.[cm]?js$/)]
      const undeclared = new Set<string>()
      for (const file of files) {
        for (const specifier of runtimeImports(file)) {
          const name = packageOf(specifier)
          if (name !== undefined && !declared.has(name)) undeclared.add(`${name} (${Path.relative(pkgDir, file)})`)
        }
      }
      expect([...undeclared]).toEqual([])
    })

    it(`${manifest.name}: its root entry never loads an optional peer (only the subpath that needs it)`, () => {
      const optional = Object.entries(manifest.peerDependenciesMeta ?? {})
        .filter(([, meta]) => meta.optional === true)
        .map(([name]) => name)
      const loaded = loadedPackages(Path.join(pkgDir, "src", "index.ts"))
      expect(optional.filter((name) => loaded.has(name))).toEqual([])
    })

    it(`${manifest.name}: its errors carry an identifier and are defined in public modules`, () => {
      const found: Array<string> = []
      for (const file of walk(Path.join(pkgDir, "src"), /\.ts$/)) {
        const at = Path.relative(pkgDir, file)
        for (
          const [, name, identifier] of Fs.readFileSync(file, "utf8").matchAll(/Schema\.TaggedError<(\w+)>\(([^)]*)\)/g)
        ) {
          found.push(name!)
          expect(identifier, `${name} in ${at}`).toBe(`"${manifest.name}/${name}"`)
          expect(at.startsWith("src/internal/"), `${name} is defined in ${at}`).toBe(false)
        }
      }
      if (manifest.name === "@tether/core") expect(found).toEqual(expect.arrayContaining(["AgentClosed", "ThreadBusy"]))
    })

    it(`${manifest.name}: ships every top-level directory it has, besides tests and build state`, () => {
      const shipped = new Set((manifest.files ?? []).map((file) => file.split("/")[0]))
      const directories = Fs.readdirSync(pkgDir, { withFileTypes: true })
        .filter((entry) => entry.isDirectory() && !["test", "build", "node_modules"].includes(entry.name))
        .map((entry) => entry.name)
      expect(directories.filter((name) => !shipped.has(name))).toEqual([])
      expect(manifest.files).toEqual(expect.arrayContaining(["build/esm", "build/dts"]))
    })
  }

  it("the gateway tells MCP clients its package's version", () => {
    const gateway = workspaces.find((workspace) => workspace.manifest.name === "@tether/gateway")!
    expect(serverInfo.version).toBe(gateway.manifest.version)
  })

  it("SECURITY.md cites only tests that exist, and the README points at it", () => {
    const security = Fs.readFileSync(Path.join(root, "SECURITY.md"), "utf8")
    const cited = [...security.matchAll(/`([^`\s]+\.ts)` › "([^"]+)"/g)].map(([, file, name]) => ({
      file: file!,
      name: name!
    }))
    expect(cited.length).toBeGreaterThan(50)
    const missing = cited.filter(({ file, name }) =>
      !Fs.existsSync(Path.join(root, file)) || !Fs.readFileSync(Path.join(root, file), "utf8").includes(name)
    )
    expect(missing).toEqual([])
    expect(Fs.readFileSync(Path.join(root, "README.md"), "utf8")).toContain("](SECURITY.md)")
  })

  it("the optional-peer check sees through re-exports and skips type-only imports", () => {
    const fixture = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-imports-"))
    try {
      Fs.writeFileSync(
        Path.join(fixture, "index.ts"),
        `export * as A from "./a.js"\nimport type { T } from "typed-only"\n`
      )
      Fs.writeFileSync(Path.join(fixture, "a.ts"), `export { b } from "./b.js"\nimport { type U } from "typed-too"\n`)
      Fs.writeFileSync(
        Path.join(fixture, "b.ts"),
        `import * as Sql from "@effect/sql/SqlClient"\nexport const b = Sql\n`
      )
      expect([...loadedPackages(Path.join(fixture, "index.ts"))]).toEqual(["@effect/sql"])
    } finally {
      Fs.rmSync(fixture, { recursive: true, force: true })
    }
  })
})
