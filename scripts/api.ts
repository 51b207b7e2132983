/**
 * Public-API extraction for the golden test: every package entry point and public subpath,
 * as a sorted list of `name: kind` lines, read through the TypeScript checker.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import ts from "typescript"

export type ExportKind = "class" | "const" | "enum" | "function" | "namespace" | "type"

const kindOf = (checker: ts.TypeChecker, symbol: ts.Symbol): ExportKind => {
  const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol
  const flags = target.flags
  if (flags & ts.SymbolFlags.Class) return "class"
  if (flags & ts.SymbolFlags.Enum) return "enum"
  if (flags & ts.SymbolFlags.Function) return "function"
  if (flags & ts.SymbolFlags.Variable) {
    const declaration = target.valueDeclaration
    if (declaration !== undefined) {
      const type = checker.getTypeOfSymbolAtLocation(target, declaration)
      if (type.getCallSignatures().length > 0 && type.getProperties().length === 0) return "function"
    }
    return "const"
  }
  if (flags & (ts.SymbolFlags.ValueModule | ts.SymbolFlags.NamespaceModule)) return "namespace"
  return "type"
}

const describeModule = (checker: ts.TypeChecker, moduleSymbol: ts.Symbol, prefix: string, out: Array<string>) => {
  for (const symbol of checker.getExportsOfModule(moduleSymbol)) {
    const name = prefix + symbol.getName()
    const kind = kindOf(checker, symbol)
    out.push(`${name}: ${kind}`)
    if (kind === "namespace") {
      const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol
      describeModule(checker, target, `${name}.`, out)
    }
  }
}

/** Lists the exports of each file as sorted `name: kind` lines. */
export const extractApi = (
  files: ReadonlyArray<string>,
  options: ts.CompilerOptions = {}
): Map<string, ReadonlyArray<string>> => {
  const program = ts.createProgram(files, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    customConditions: ["@tether/source"],
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    types: ["node"],
    ...options
  })
  const checker = program.getTypeChecker()
  const result = new Map<string, ReadonlyArray<string>>()
  for (const file of files) {
    const source = program.getSourceFile(file)
    const moduleSymbol = source === undefined ? undefined : checker.getSymbolAtLocation(source)
    const lines: Array<string> = []
    if (moduleSymbol !== undefined) describeModule(checker, moduleSymbol, "", lines)
    result.set(file, [...new Set(lines)].sort())
  }
  return result
}

/** The public entry points of a package: `.` and one subpath per `src/<Name>.ts`. */
export const entryPoints = (packageDir: string): Array<{ readonly subpath: string; readonly file: string }> => {
  const manifest = JSON.parse(Fs.readFileSync(Path.join(packageDir, "package.json"), "utf8")) as {
    readonly exports: Record<string, unknown>
  }
  const entries: Array<{ subpath: string; file: string }> = []
  for (const [subpath, target] of Object.entries(manifest.exports)) {
    if (subpath === "./package.json" || target === null || typeof target !== "object") continue
    const source = (target as Record<string, unknown>)["@tether/source"]
    if (typeof source === "string") entries.push({ subpath, file: Path.join(packageDir, source) })
  }
  return entries.sort((a, b) => a.subpath.localeCompare(b.subpath))
}

/** Renders a package's golden text: one section per entry point. */
export const renderGolden = (packageDir: string): string => {
  const entries = entryPoints(packageDir)
  const api = extractApi(entries.map((entry) => entry.file))
  return entries.map((entry) => [`[${entry.subpath}]`, ...(api.get(entry.file) ?? [])].join("\n")).join("\n\n") +
    "\n"
}

/** A unified-style line diff, enough to show what moved. */
export const diffLines = (expected: string, actual: string): string => {
  const before = new Set(expected.split("\n"))
  const after = new Set(actual.split("\n"))
  const removed = [...before].filter((line) => line !== "" && !after.has(line)).map((line) => `- ${line}`)
  const added = [...after].filter((line) => line !== "" && !before.has(line)).map((line) => `+ ${line}`)
  return [...removed, ...added].join("\n")
}

/** The exports map a package must have: the root plus one subpath per public module. */
export const expectedExports = (packageDir: string): Record<string, unknown> => {
  const modules = Fs.readdirSync(Path.join(packageDir, "src"))
    .filter((file) => /^[A-Z][A-Za-z0-9]*\.ts$/.test(file))
    .map((file) => file.slice(0, -3))
    .sort()
  const entry = (name: string) => ({
    "@tether/source": `./src/${name}.ts`,
    types: `./build/dts/${name}.d.ts`,
    default: `./build/esm/${name}.js`
  })
  const exports: Record<string, unknown> = { "./package.json": "./package.json", ".": entry("index") }
  for (const name of modules) exports[`./${name}`] = entry(name)
  return exports
}
