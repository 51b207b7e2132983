import { describe, expect, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { diffLines, expectedExports, extractApi, renderGoldens } from "../scripts/api.js"
import { allowedImports } from "../scripts/boundaries.js"

const root = Path.resolve(import.meta.dirname, "..")
const update = process.env["UPDATE_API_GOLDEN"] === "1"

describe("public API golden", () => {
  const packages = Object.keys(allowedImports)
  // From build/dts, which `npm test` (and the repo project's global setup) has just emitted.
  let rendered: Map<string, string> | undefined
  const goldenOf = (dir: string) => {
    rendered ??= renderGoldens(packages.map((pkg) => Path.join(root, "packages", pkg)))
    return rendered.get(dir)!
  }
  for (const pkg of packages) {
    const dir = Path.join(root, "packages", pkg)
    it(`@tether/${pkg} exports map lists the root and one subpath per public module`, () => {
      const manifest = JSON.parse(Fs.readFileSync(Path.join(dir, "package.json"), "utf8"))
      expect(manifest.exports, "run `npm run sync-exports`").toEqual(expectedExports(dir))
    })
    it(`@tether/${pkg} matches api.golden.txt`, () => {
      const golden = Path.join(dir, "api.golden.txt")
      const actual = goldenOf(dir)
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
  const fixture = Path.join(root, "test/fixtures/api/sample.d.ts")
  const golden = () => extractApi([fixture]).get(fixture)!.join("\n")

  it("lists every export with its kind and its emitted declaration; namespace members by name", () => {
    expect(golden()).toBe([
      "Alias: type",
      "  export type Alias = string;",
      "Box: class",
      "  declare const Box_base: new (value: number) => {",
      "      readonly value: number;",
      "  };",
      "  export declare class Box extends Box_base {",
      "      get doubled(): number;",
      "  }",
      "Fields: type",
      "  export type Fields = {",
      "      readonly a?: string | undefined;",
      "  } & {",
      "      readonly b: number;",
      "  };",
      "Inner: namespace",
      "Inner.Id: type",
      "Inner.make: function",
      "Shape: type",
      "  export interface Shape {",
      "      readonly sides: number;",
      "  }",
      "answer: const",
      "  export declare const answer = 42;",
      "greet: function",
      "  export declare function greet(name: string): string;"
    ].join("\n"))
  })

  it("lists the members of an intersection of object types in one order, whatever order tsc emitted", () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-api-"))
    try {
      const write = (name: string, first: string, second: string) => {
        const file = Path.join(dir, `${name}.d.ts`)
        Fs.writeFileSync(file, `export type T = {\n    ${first};\n} & {\n    ${second};\n};\nexport {};\n`)
        return file
      }
      const ab = write("ab", "readonly a: string", "readonly b?: number | undefined")
      const ba = write("ba", "readonly b?: number | undefined", "readonly a: string")
      const rendered = extractApi([ab, ba])
      expect(rendered.get(ba)).toEqual(rendered.get(ab))
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("lists the members of a union of one generic type's instances in one order, whatever order tsc emitted", () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-api-"))
    try {
      const write = (name: string, first: string, second: string) => {
        const file = Path.join(dir, `${name}.d.ts`)
        Fs.writeFileSync(
          file,
          `type Box<A> = { readonly a: A };\nexport type T = Box<${first}> | Box<${second}>;\nexport type U = ${first} | ${second};\nexport {};\n`
        )
        return file
      }
      const ab = write("ab", "\"a\"", "\"b\"")
      const ba = write("ba", "\"b\"", "\"a\"")
      const rendered = extractApi([ab, ba])
      expect(rendered.get(ba)!.filter((line) => line.includes("type T"))).toEqual(
        rendered.get(ab)!.filter((line) => line.includes("type T"))
      )
      // A union of different types is printed as written.
      expect(rendered.get(ba)!.filter((line) => line.includes("type U"))).not.toEqual(
        rendered.get(ab)!.filter((line) => line.includes("type U"))
      )
    } finally {
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("reports a renamed export as a removal plus an addition", () => {
    const before = golden()
    const after = before.replace("greet: function", "greeting: function")
    expect(diffLines(before, after)).toBe("- greet: function\n+ greeting: function")
  })

  it("reports a changed signature under the export it belongs to", () => {
    const before = `[.]\n${golden()}`
    const after = before.replace("greet(name: string): string", "greet(name: string, loud: boolean): string")
    expect(after).not.toBe(before)
    expect(diffLines(before, after)).toBe(
      "@ [.] greet: function\n" +
        "-   export declare function greet(name: string): string;\n" +
        "+   export declare function greet(name: string, loud: boolean): string;"
    )
  })
})
