/**
 * Public-API extraction for the golden test: every package entry point and public subpath, read
 * from the emitted `.d.ts` (what a user's compiler sees) through the TypeScript checker. Each
 * export is a `name: kind` line; an entry point's own exports are followed by their emitted
 * declarations (comments removed, indented), so a changed signature changes the golden, not only
 * a renamed export. Members of `export * as Name` namespaces are listed by name only: their
 * declarations are pinned in the section of the module they come from.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import ts from "typescript"

export type ExportKind = "class" | "const" | "enum" | "function" | "namespace" | "type"

const resolveAlias = (checker: ts.TypeChecker, symbol: ts.Symbol): ts.Symbol =>
  symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol

const kindOf = (checker: ts.TypeChecker, symbol: ts.Symbol): ExportKind => {
  const target = resolveAlias(checker, symbol)
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

const printer = ts.createPrinter({ removeComments: true, newLine: ts.NewLineKind.LineFeed })

/** The name a type reference refers to (`Rpc.Rpc` in `Rpc.Rpc<"Run", ...>`). */
const referenceName = (node: ts.TypeNode): string | undefined =>
  ts.isTypeReferenceNode(node) ? node.typeName.getText() : undefined

/**
 * Sorts by their printed text the members of every intersection of object types and of every
 * union of one generic type's instances. tsc emits a Schema struct's type as one single-property
 * object per field, intersected in the order of their type ids, and a union inferred from a
 * tuple's elements (an entity's RPCs, `Rpc.Rpc<"Run", ...> | Rpc.Rpc<"Send", ...>`) in the same
 * order, which depends on what the compiler happened to create first: a clean build and an
 * incremental one, or two checkouts, order them differently. Either is the same type in any order.
 * Unions written in the source (members of different types) keep their order.
 */
const sortedMembers = (sourceFile: ts.SourceFile): ts.TransformerFactory<ts.Node> => (context) => {
  const sorted = (types: ts.NodeArray<ts.TypeNode>) => {
    const members = types.map((type) => ({ type, text: printer.printNode(ts.EmitHint.Unspecified, type, sourceFile) }))
    members.sort((a, b) => (a.text < b.text ? -1 : a.text > b.text ? 1 : 0))
    return context.factory.createNodeArray(members.map((member) => member.type))
  }
  const visit = (node: ts.Node): ts.Node => {
    const visited = ts.visitEachChild(node, visit, context)
    if (ts.isIntersectionTypeNode(visited) && visited.types.every(ts.isTypeLiteralNode)) {
      return context.factory.updateIntersectionTypeNode(visited, sorted(visited.types))
    }
    if (ts.isUnionTypeNode(visited) && visited.types.length > 1) {
      const name = referenceName(visited.types[0]!)
      if (name !== undefined && visited.types.every((type) => referenceName(type) === name)) {
        return context.factory.updateUnionTypeNode(visited, sorted(visited.types))
      }
    }
    return visited
  }
  return (node) => ts.visitNode(node, visit)!
}

const print = (node: ts.Node): Array<string> => {
  const sourceFile = node.getSourceFile()
  const result = ts.transform(node, [sortedMembers(sourceFile)])
  try {
    return printer.printNode(ts.EmitHint.Unspecified, result.transformed[0]!, sourceFile).split("\n")
  } finally {
    result.dispose()
  }
}

/**
 * The emitted declarations of a symbol. A class emitted as `extends X_base` (Schema classes,
 * `Context.Tag` classes) is preceded by the declaration of its unexported base, which carries
 * the fields and the identifier.
 */
const declarationsOf = (checker: ts.TypeChecker, symbol: ts.Symbol): Array<string> => {
  const lines: Array<string> = []
  for (const declaration of symbol.declarations ?? []) {
    if (ts.isVariableDeclaration(declaration)) {
      lines.push(...print(declaration.parent.parent))
      continue
    }
    if (ts.isClassDeclaration(declaration)) {
      for (const clause of declaration.heritageClauses ?? []) {
        for (const type of clause.types) {
          if (!ts.isIdentifier(type.expression)) continue
          const base = checker.getSymbolAtLocation(type.expression)
          const baseDeclaration = base?.valueDeclaration
          if (
            baseDeclaration !== undefined && ts.isVariableDeclaration(baseDeclaration) &&
            baseDeclaration.getSourceFile() === declaration.getSourceFile()
          ) lines.push(...print(baseDeclaration.parent.parent))
        }
      }
    }
    lines.push(...print(declaration))
  }
  return lines
}

interface Entry {
  readonly name: string
  readonly lines: ReadonlyArray<string>
}

const describeModule = (
  checker: ts.TypeChecker,
  moduleSymbol: ts.Symbol,
  prefix: string,
  signatures: boolean,
  out: Array<Entry>
) => {
  for (const symbol of checker.getExportsOfModule(moduleSymbol)) {
    const name = prefix + symbol.getName()
    const kind = kindOf(checker, symbol)
    const target = resolveAlias(checker, symbol)
    const lines = [`${name}: ${kind}`]
    if (kind === "namespace") describeModule(checker, target, `${name}.`, false, out)
    else if (signatures) lines.push(...declarationsOf(checker, target).map((line) => `  ${line}`))
    out.push({ name, lines })
  }
}

/** Lists the exports of each file, sorted by name: `name: kind`, then their declarations. */
export const extractApi = (
  files: ReadonlyArray<string>,
  options: ts.CompilerOptions = {}
): Map<string, ReadonlyArray<string>> => {
  const program = ts.createProgram(files, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
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
    const entries: Array<Entry> = []
    if (moduleSymbol !== undefined) describeModule(checker, moduleSymbol, "", true, entries)
    const seen = new Set<string>()
    result.set(
      file,
      entries
        .filter((entry) => !seen.has(entry.name) && seen.add(entry.name) !== undefined)
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
        .flatMap((entry) => entry.lines)
    )
  }
  return result
}

/**
 * The public entry points of a package (its `exports`, but `./package.json`), each with the
 * emitted declaration file its `types` condition points at.
 */
export const entryPoints = (packageDir: string): Array<{ readonly subpath: string; readonly file: string }> => {
  const manifest = JSON.parse(Fs.readFileSync(Path.join(packageDir, "package.json"), "utf8")) as {
    readonly exports: Record<string, unknown>
  }
  const entries: Array<{ subpath: string; file: string }> = []
  for (const [subpath, target] of Object.entries(manifest.exports)) {
    if (subpath === "./package.json" || target === null || typeof target !== "object") continue
    const types = (target as Record<string, unknown>)["types"]
    if (typeof types === "string") entries.push({ subpath, file: Path.join(packageDir, types) })
  }
  return entries.sort((a, b) => a.subpath.localeCompare(b.subpath))
}

/**
 * Renders the golden text of each package from its emitted `.d.ts`: one section per entry point.
 * One program reads them all (the declarations of `effect` are loaded once).
 */
export const renderGoldens = (packageDirs: ReadonlyArray<string>): Map<string, string> => {
  const entries = new Map(packageDirs.map((dir) => [dir, entryPoints(dir)]))
  const files = [...entries.values()].flatMap((list) => list.map((entry) => entry.file))
  const missing = files.filter((file) => !Fs.existsSync(file))
  if (missing.length > 0) throw new Error(`not built: ${missing.join(", ")} (run \`npm run build\`)`)
  const api = extractApi(files)
  return new Map(
    [...entries].map(([dir, list]) => [
      dir,
      list.map((entry) => [`[${entry.subpath}]`, ...(api.get(entry.file) ?? [])].join("\n")).join("\n\n") + "\n"
    ])
  )
}

/** Renders one package's golden text (see `renderGoldens`). */
export const renderGolden = (packageDir: string): string => renderGoldens([packageDir]).get(packageDir)!

/**
 * A line diff (longest common subsequence) of two goldens: each changed line as `- ` / `+ `,
 * under the export it belongs to (`@ [subpath] name: kind`).
 */
export const diffLines = (expected: string, actual: string): string => {
  const a = expected.split("\n")
  const b = actual.split("\n")
  let start = 0
  while (start < a.length && start < b.length && a[start] === b[start]) start++
  let endA = a.length
  let endB = b.length
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--
    endB--
  }
  const n = endA - start
  const m = endB - start
  const table = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1))
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      table[i]![j] = a[start + i] === b[start + j]
        ? table[i + 1]![j + 1]! + 1
        : Math.max(table[i + 1]![j]!, table[i]![j + 1]!)
    }
  }
  const headerOf = (lines: ReadonlyArray<string>, index: number): string => {
    const signature = lines[index]!.startsWith(" ")
    let section = ""
    let entry = ""
    for (let k = index - 1; k >= 0; k--) {
      const line = lines[k]!
      if (line.startsWith("[")) {
        section = line
        break
      }
      if (signature && entry === "" && line !== "" && !line.startsWith(" ")) entry = line
    }
    return `@ ${section} ${entry}`.trimEnd()
  }
  const out: Array<string> = []
  let header = ""
  const emit = (sign: string, lines: ReadonlyArray<string>, index: number) => {
    if (lines[index] === "") return
    const at = headerOf(lines, index)
    if (at !== header && at !== "@") {
      out.push(at)
      header = at
    }
    out.push(`${sign} ${lines[index]}`)
  }
  let i = 0
  let j = 0
  while (i < n || j < m) {
    if (i < n && j < m && a[start + i] === b[start + j]) {
      i++
      j++
    } else if (i < n && (j === m || table[i + 1]![j]! >= table[i]![j + 1]!)) {
      emit("-", a, start + i)
      i++
    } else {
      emit("+", b, start + j)
      j++
    }
  }
  return out.join("\n")
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
