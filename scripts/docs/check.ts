/**
 * The documentation check run by `npm test` (test/docs.test.ts) and by hand
 * (`node --import tsx scripts/docs/check.ts`). It reads the public modules with the TypeScript
 * compiler (one program, no emit) and reports, each as one line saying what to add where:
 *
 * - a public export (every export of `packages/<pkg>/src/<Module>.ts`) without a doc comment that
 *   says its contract (some text) and its `@since`;
 * - an entry point of `entryPoints` without an `@example`;
 * - an `@example` block, or a `ts` block of a guide in `docs/`, that does not type-check as a
 *   module of the repository (imports resolve as a user's do, to the packages' sources);
 * - a guide's `<<< @/../<file>` include or relative link whose target is missing (an included
 *   example is type-checked and run by `npm test` already: it is the one copy of that code).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import ts from "typescript"

/**
 * The entry points that must carry an `@example`: `Module.export` or `Module.export.member`
 * (a member of an exported interface or class), per package.
 */
export const entryPoints: ReadonlyArray<string> = [
  "tool/Tool.make",
  "tool/Tool.reject",
  "tool/Toolkit.make",
  "tool/Toolkit.Toolkit.toLayer",
  "core/Agent.make",
  "core/Agent.layer",
  "core/Agent.Agent.run",
  "core/Agent.Agent.stream",
  "core/Agent.Agent.thread",
  "core/ThreadStore.layerMemory",
  "core/SqlThreadStore.layer",
  "gateway/Gateway.layer",
  "profile/Profile.native",
  "profile/Profile.dedicated",
  "profile/Profile.cloneNative",
  "profile/Profile.cloneFrom",
  "drivers/Claude.driver",
  "drivers/Codex.driver",
  "drivers/Gemini.driver",
  "drivers/CodeBuddy.driver",
  "drivers/Cursor.driver",
  "testing/Harness.layer",
  "testing/Conformance.clauses"
]

/** One public module: `packages/<pkg>/src/<Module>.ts`, imported as `@tether/<pkg>/<Module>`. */
export interface PublicModule {
  readonly pkg: string
  readonly name: string
  readonly file: string
}

/** Every public module of every package (what `npm run sync-exports` exports). */
export const publicModules = (root: string): ReadonlyArray<PublicModule> =>
  Fs.readdirSync(Path.join(root, "packages")).sort().flatMap((pkg) => {
    const src = Path.join(root, "packages", pkg, "src")
    if (!Fs.existsSync(src)) return []
    return Fs.readdirSync(src).filter((file) => /^[A-Z]\w*\.ts$/.test(file)).sort().map((file) => ({
      pkg,
      name: file.slice(0, -3),
      file: Path.join(src, file)
    }))
  })

const compilerOptions = (root: string): ts.CompilerOptions => {
  const config = ts.readConfigFile(Path.join(root, "tsconfig.base.json"), ts.sys.readFile)
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root)
  return {
    ...parsed.options,
    noEmit: true,
    declaration: false,
    declarationMap: false,
    sourceMap: false,
    // An example shows a call; the names it binds need not all be read.
    noUnusedLocals: false,
    noUnusedParameters: false
  }
}

/**
 * The `@example` blocks of a JSDoc node: the code inside their fences, read from the comment's
 * own text (the compiler's tag parser drops indentation and takes `@scope` in a package name for
 * a tag).
 */
const exampleBlocks = (doc: ts.JSDoc): ReadonlyArray<string> => examplesOf(doc.getText())

/** The fenced code of every `@example` of a comment's text. */
const examplesOf = (comment: string): ReadonlyArray<string> => {
  const text = comment.replace(/^\/\*\*/, "").replace(/\*\/$/, "").replace(/^[ \t]*\* ?/gm, "")
  return text.split(/^@example\b/m).slice(1).flatMap((part) => {
    const fenced = /^\s*```(?:ts|typescript)?\n([\s\S]*?)^```/m.exec(part)
    return fenced === null ? [] : [fenced[1]!]
  })
}

const jsDocsOf = (node: ts.Node): ReadonlyArray<ts.JSDoc> =>
  ts.getJSDocCommentsAndTags(node).filter((doc): doc is ts.JSDoc => ts.isJSDoc(doc))

const hasTag = (docs: ReadonlyArray<ts.JSDoc>, name: string) =>
  docs.some((doc) => (doc.tags ?? []).some((tag) => tag.tagName.text === name))

const hasText = (docs: ReadonlyArray<ts.JSDoc>) =>
  docs.some((doc) => (ts.getTextOfJSDocComment(doc.comment) ?? "").trim().length > 0)

/** A code snippet to type-check: where it is written and what it is. */
interface Snippet {
  readonly origin: string
  readonly code: string
}

const lineOf = (node: ts.Node) => {
  const source = node.getSourceFile()
  return `${Path.relative(process.cwd(), source.fileName)}:${
    source.getLineAndCharacterOfPosition(node.getStart()).line + 1
  }`
}

/** The guides' ```ts blocks (an include `<<<` is checked where it is defined: examples/). */
const guideSnippets = (root: string, problems: Array<string>): ReadonlyArray<Snippet> => {
  const docs = Path.join(root, "docs")
  if (!Fs.existsSync(docs)) return []
  const snippets: Array<Snippet> = []
  for (const file of Fs.readdirSync(docs).filter((name) => name.endsWith(".md")).sort()) {
    const path = Path.join(docs, file)
    const text = Fs.readFileSync(path, "utf8")
    const lines = text.split("\n")
    lines.forEach((line, index) => {
      const include = /^<<<\s+@\/([^\s#{]+)(?:#(\S+))?/.exec(line)
      if (include !== null) {
        const target = Path.resolve(docs, include[1]!)
        if (!Fs.existsSync(target)) {
          problems.push(`docs/${file}:${index + 1}: includes ${include[1]}, which does not exist`)
        } else if (include[2] !== undefined && !Fs.readFileSync(target, "utf8").includes(`#region ${include[2]}`)) {
          problems.push(
            `docs/${file}:${index + 1}: includes region ${include[2]} of ${include[1]}, which has no \`// #region ${
              include[2]
            }\``
          )
        }
      }
      for (const link of line.matchAll(/\]\((\.{1,2}\/[^)#\s]+)(?:#[^)]*)?\)/g)) {
        const target = Path.resolve(docs, link[1]!)
        if (!Fs.existsSync(target) && !target.startsWith(Path.join(docs, "api") + Path.sep)) {
          problems.push(`docs/${file}:${index + 1}: links to ${link[1]}, which does not exist`)
        }
      }
    })
    for (const match of text.matchAll(/^```ts\n([\s\S]*?)^```/gm)) {
      const line = text.slice(0, match.index).split("\n").length
      snippets.push({ origin: `docs/${file}:${line}`, code: match[1]! })
    }
  }
  return snippets
}

/** Every problem found, one line each; empty when the documentation is complete. */
export const check = (root: string): ReadonlyArray<string> => {
  const modules = publicModules(root)
  const options = compilerOptions(root)
  const program = ts.createProgram(modules.map((module) => module.file), options)
  const checker = program.getTypeChecker()
  const problems: Array<string> = []
  const snippets: Array<Snippet> = []
  const examples = new Set<string>()

  for (const module of modules) {
    const source = program.getSourceFile(module.file)!
    const moduleSymbol = checker.getSymbolAtLocation(source)
    if (moduleSymbol === undefined) continue
    const id = `${module.pkg}/${module.name}`
    const where = `packages/${module.pkg}/src/${module.name}.ts`
    // The module's own doc comment (the file's first comment) may carry examples too.
    const header = /^\/\*\*[\s\S]*?\*\//.exec(source.text)?.[0] ?? ""
    for (const code of examplesOf(header)) snippets.push({ origin: `${where}:1 (module ${id})`, code })
    for (const symbol of checker.getExportsOfModule(moduleSymbol)) {
      const name = symbol.getName()
      const declarations = (symbol.declarations ?? []).filter((declaration) => declaration.getSourceFile() === source)
      // A re-export (`export { X } from "./Other.js"`) carries the doc comment of what it names.
      const docs = [
        ...declarations.flatMap(jsDocsOf),
        ...((symbol.flags & ts.SymbolFlags.Alias) !== 0
          ? (checker.getAliasedSymbol(symbol).declarations ?? []).flatMap(jsDocsOf)
          : [])
      ]
      if (!hasText(docs)) {
        problems.push(
          `${where}: export \`${name}\` (@tether/${id}) has no doc comment saying its contract: add /** what it is, what it guarantees, how it fails. @since <version> @category <group> */ above it`
        )
      } else if (!hasTag(docs, "since")) {
        problems.push(
          `${where}: export \`${name}\` (@tether/${id}): its doc comment has no @since: add @since <version>`
        )
      }
      for (const doc of docs) {
        if (exampleBlocks(doc).length > 0) examples.add(`${id}.${name}`)
        for (const code of exampleBlocks(doc)) snippets.push({ origin: `${lineOf(doc)} (${id}.${name})`, code })
      }
      // Members of an exported interface or class: their examples count for `Module.export.member`.
      for (const declaration of declarations) {
        if (!ts.isInterfaceDeclaration(declaration) && !ts.isClassDeclaration(declaration)) continue
        for (const member of declaration.members) {
          const memberName = member.name !== undefined && ts.isIdentifier(member.name) ? member.name.text : undefined
          if (memberName === undefined) continue
          for (const doc of jsDocsOf(member)) {
            const blocks = exampleBlocks(doc)
            if (blocks.length > 0) examples.add(`${id}.${name}.${memberName}`)
            for (const code of blocks) {
              snippets.push({ origin: `${lineOf(doc)} (${id}.${name}.${memberName})`, code })
            }
          }
        }
      }
    }
  }

  for (const entry of entryPoints) {
    if (!examples.has(entry)) {
      const [pkg, rest] = entry.split("/") as [string, string]
      const [module, ...path] = rest.split(".")
      problems.push(
        `packages/${pkg}/src/${module}.ts: entry point \`${
          path.join(".")
        }\` has no @example: add an @example with a \`\`\`ts block that type-checks (imports from "@tether/${pkg}" etc.)`
      )
    }
  }

  snippets.push(...guideSnippets(root, problems))
  problems.push(...typeCheck(root, options, program, snippets))
  return problems
}

/**
 * Type-checks each snippet as its own module in `<root>/.docs-examples/` (virtual files), in a
 * program that reuses the first one's parsed files.
 */
const typeCheck = (
  root: string,
  options: ts.CompilerOptions,
  oldProgram: ts.Program,
  snippets: ReadonlyArray<Snippet>
): ReadonlyArray<string> => {
  if (snippets.length === 0) return []
  const dir = Path.join(root, ".docs-examples")
  const files = new Map(snippets.map((snippet, index) => [Path.join(dir, `example${index}.ts`), snippet]))
  const host = ts.createCompilerHost(options)
  const getSourceFile = host.getSourceFile.bind(host)
  const fileExists = host.fileExists.bind(host)
  const readFile = host.readFile.bind(host)
  host.fileExists = (file) => files.has(file) || fileExists(file)
  host.readFile = (file) => files.get(file)?.code ?? readFile(file)
  host.getSourceFile = (file, language, onError, create) => {
    const snippet = files.get(file)
    if (snippet !== undefined) return ts.createSourceFile(file, snippet.code, language, true, ts.ScriptKind.TS)
    return oldProgram.getSourceFile(file) ?? getSourceFile(file, language, onError, create)
  }
  const program = ts.createProgram([...files.keys()], options, host)
  const problems: Array<string> = []
  const hint =
    " (an example is a whole module: import what it uses from \"@tether/<pkg>\" and \"effect\", `declare const x: T` what it assumes)"
  for (const [file, snippet] of files) {
    const source = program.getSourceFile(file)!
    for (const diagnostic of [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]) {
      const line = diagnostic.start === undefined ? 0 : source.getLineAndCharacterOfPosition(diagnostic.start).line
      problems.push(
        `${snippet.origin}: example line ${line + 1} does not type-check: ${
          ts.flattenDiagnosticMessageText(diagnostic.messageText, " ")
        }${hint}`
      )
    }
  }
  return problems
}

/** `node --import tsx scripts/docs/check.ts [root]`: one problem per line, then a count; exits 1 on any. */
if (import.meta.url === `file://${process.argv[1]}`) {
  const started = Date.now()
  const problems = check(Path.resolve(process.argv[2] ?? Path.join(import.meta.dirname, "../..")))
  for (const problem of problems) console.log(problem)
  console.log(`${problems.length} documentation problem(s), ${Date.now() - started} ms`)
  process.exitCode = problems.length === 0 ? 0 : 1
}
