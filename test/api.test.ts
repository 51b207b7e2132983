import { describe, expect, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { diffLines, expectedExports, extractApi, renderGolden } from "../scripts/api.js"
import { allowedImports } from "../scripts/boundaries.js"

const root = Path.resolve(import.meta.dirname, "..")
const update = process.env["UPDATE_API_GOLDEN"] === "1"

describe("public API golden", () => {
  for (const pkg of Object.keys(allowedImports)) {
    const dir = Path.join(root, "packages", pkg)
    it(`@tether/${pkg} exports map lists the root and one subpath per public module`, () => {
      const manifest = JSON.parse(Fs.readFileSync(Path.join(dir, "package.json"), "utf8"))
      expect(manifest.exports, "run `npm run sync-exports`").toEqual(expectedExports(dir))
    })
    it(`@tether/${pkg} matches api.golden.txt`, () => {
      const golden = Path.join(dir, "api.golden.txt")
      const actual = renderGolden(dir)
      if (update) Fs.writeFileSync(golden, actual)
      const expected = Fs.existsSync(golden) ? Fs.readFileSync(golden, "utf8") : ""
      if (expected !== actual) {
        expect.fail(
          `public API of @tether/${pkg} changed (UPDATE_API_GOLDEN=1 npm test to accept):\n${
            diffLines(expected, actual)
          }`
        )
      }
    })
  }
})

describe("the golden checker itself", () => {
  const fixture = Path.join(root, "test/fixtures/api/sample.ts")
  it("lists every export with its kind, namespace members included", () => {
    expect(extractApi([fixture]).get(fixture)).toEqual([
      "Alias: type",
      "Box: class",
      "Inner.Id: type",
      "Inner.make: function",
      "Inner: namespace",
      "Shape: type",
      "answer: const",
      "greet: function"
    ])
  })
  it("reports a renamed export as a removal plus an addition", () => {
    const before = extractApi([fixture]).get(fixture)!.join("\n")
    const after = before.replace("greet: function", "greeting: function")
    expect(diffLines(before, after)).toBe("- greet: function\n+ greeting: function")
  })
})
