/**
 * The documentation cannot rot: every public export of every package has a doc comment with its
 * contract and `@since`, the main entry points have an `@example`, every `@example` block and
 * every code block of the guides type-checks against the sources, and every include and relative
 * link of the guides resolves (scripts/docs/check.ts; the guides' code is included from
 * examples/, which examples.test.ts runs). The README's code is cut from examples/ (the quick
 * start whole, then the approvals and structured-output sections), its install lines are the getting-started guide's, and its links resolve.
 */
import { describe, expect, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "..")
/**
 * Runs scripts/docs/check.ts on a repository root in a child process (it compiles for tens of
 * seconds on a loaded machine; the test worker must stay responsive) and returns its problems.
 */
const check = (dir: string) =>
  new Promise<ReadonlyArray<string>>((resolve, reject) =>
    execFile(
      process.execPath,
      ["--import", "tsx", Path.join(root, "scripts", "docs", "check.ts"), dir],
      { cwd: root, timeout: 240_000, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const lines = stdout.split("\n").filter((line) => line.length > 0)
        const summary = lines.pop() ?? ""
        if (!/^\d+ documentation problem\(s\)/.test(summary)) reject(new Error(`${stdout}\n${stderr}\n${error}`))
        else resolve(lines)
      }
    )
  )

const read = (file: string) => Fs.readFileSync(Path.join(root, file), "utf8")

/** The `// #region <name>` … `// #endregion <name>` blocks of a file, dedented, by name. */
const regions = (text: string): ReadonlyMap<string, string> => {
  const found = new Map<string, string>()
  for (const match of text.matchAll(/^([ \t]*)\/\/ #region (\S+)\n([\s\S]*?)^[ \t]*\/\/ #endregion \2\n/gm)) {
    const indent = match[1]!.length
    found.set(match[2]!, match[3]!.split("\n").map((line) => line.slice(indent)).join("\n").trimEnd())
  }
  return found
}

const codeBlocks = (markdown: string, language: string) =>
  [...markdown.matchAll(new RegExp(`^\`\`\`${language}\\n([\\s\\S]*?)^\`\`\``, "gm"))].map((match) =>
    match[1]!.trimEnd()
  )

describe("documentation", () => {
  it("every public export is documented, the entry points have examples, and every example type-checks", async () => {
    const problems = await check(root)
    expect(problems, `\n${problems.join("\n")}\n`).toEqual([])
  }, 120_000)

  it("the README's code is cut from the examples: the quick start whole, then approvals and structured output", () => {
    const cut = (file: string, names: ReadonlyArray<string>) => {
      const found = regions(read(file))
      return names.map((name) => found.get(name) ?? `${file} has no region ${name}`)
    }
    const quickstart = [...regions(read("examples/quickstart.ts"))].filter(([name]) => name.startsWith("readme-"))
    expect(quickstart.map(([name]) => name)).toEqual(["readme-tools", "readme-agent"])
    expect(codeBlocks(read("README.md"), "ts")).toEqual([
      ...quickstart.map(([, code]) => code),
      ...cut("examples/approvals.ts", ["approvals"]),
      ...cut("examples/structured-output.ts", ["readme-schema", "readme-runas"])
    ])
  })

  it("the README installs what the getting-started guide installs, and its relative links resolve", () => {
    const installs = (markdown: string) =>
      codeBlocks(markdown, "sh").flatMap((block) => block.split("\n")).filter((line) => line.startsWith("npm install"))
    expect(installs(read("README.md")).length).toBeGreaterThan(0)
    expect(installs(read("docs/getting-started.md"))).toEqual(installs(read("README.md")))
    const links = [...read("README.md").matchAll(/\]\(([^)#\s:]+)(?:#[^)]*)?\)/g)].map((match) => match[1]!)
    expect(links.filter((link) => !Fs.existsSync(Path.join(root, link)))).toEqual([])
  })

  it("the check names an undocumented export, a missing example and an example that does not type-check", async () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-docs-check-"))
    try {
      Fs.mkdirSync(Path.join(dir, "packages", "tool", "src"), { recursive: true })
      Fs.copyFileSync(Path.join(root, "tsconfig.base.json"), Path.join(dir, "tsconfig.base.json"))
      Fs.writeFileSync(
        Path.join(dir, "packages", "tool", "src", "Tool.ts"),
        [
          "export const undocumented = 1",
          "/**",
          " * Documented, but its example is wrong.",
          " *",
          " * @example",
          " * ```ts",
          " * const n: number = \"one\"",
          " * ```",
          " *",
          " * @since 0.1.0",
          " */",
          "export const make = 2",
          ""
        ].join("\n")
      )
      const problems = await check(dir)
      expect(problems).toContainEqual(
        expect.stringMatching(/packages\/tool\/src\/Tool\.ts: export `undocumented` .* has no doc comment/)
      )
      expect(problems).toContainEqual(expect.stringMatching(/entry point `reject` has no @example/))
      expect(problems).toContainEqual(
        expect.stringMatching(/\(tool\/Tool\.make\): example line 1 does not type-check: Type 'string'/)
      )
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 120_000)
})
