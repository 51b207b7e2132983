/**
 * The documentation cannot rot: every public export of every package has a doc comment with its
 * contract and `@since`, the main entry points have an `@example`, every `@example` block and
 * every code block of the guides type-checks against the sources, and every include and relative
 * link of the guides resolves (scripts/docs/check.ts; the guides' code is included from
 * examples/, which examples.test.ts runs). The README's quick start is the one in
 * examples/quickstart.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Docs from "../scripts/docs/check.js"

const root = Path.resolve(import.meta.dirname, "..")

describe("documentation", () => {
  it("every public export is documented, the entry points have examples, and every example type-checks", () => {
    const problems = Docs.check(root)
    expect(problems, `\n${problems.join("\n")}\n`).toEqual([])
  }, 120_000)

  it("the check names an undocumented export, a missing example and an example that does not type-check", () => {
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
      const problems = Docs.check(dir)
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
