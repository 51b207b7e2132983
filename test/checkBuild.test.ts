/**
 * `scripts/checkBuild.mjs`, every package's `prepack`: `npm pack` (and so `npm publish`) refuses
 * a `build/` that does not match `src/`, such as a stale module `tsc -b` left behind.
 */
import { afterEach, describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "..")
const script = Path.join(root, "scripts", "checkBuild.mjs")
const command = "node ../../scripts/checkBuild.mjs"

const dirs: Array<string> = []
afterEach(() => {
  for (const dir of dirs.splice(0)) Fs.rmSync(dir, { recursive: true, force: true })
})

/** A package directory with `files` (path → text), and the check's outcome run from it. */
const check = (files: ReadonlyArray<string>) => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-check-build-"))
  dirs.push(dir)
  for (const file of files) {
    Fs.mkdirSync(Path.dirname(Path.join(dir, file)), { recursive: true })
    Fs.writeFileSync(Path.join(dir, file), "")
  }
  const result = spawnSync(process.execPath, [script], { cwd: dir, encoding: "utf8" })
  return { status: result.status, stderr: result.stderr }
}

/** A source's four outputs. */
const built = (name: string) => [
  `build/esm/${name}.js`,
  `build/esm/${name}.js.map`,
  `build/dts/${name}.d.ts`,
  `build/dts/${name}.d.ts.map`
]

describe("prepack: build/ matches src/", () => {
  it("passes a build with an output set for every source, nested ones included", () => {
    expect(check(["src/index.ts", "src/internal/run.ts", ...built("index"), ...built("internal/run")]))
      .toEqual({ status: 0, stderr: "" })
  })

  it("refuses a stale output whose source is gone, naming it", () => {
    const { status, stderr } = check([
      "src/index.ts",
      ...built("index"),
      "build/esm/internal/leaseRenewal.js",
      "build/dts/internal/leaseRenewal.d.ts"
    ])
    expect(status).toBe(1)
    expect(stderr).toContain("build/esm/internal/leaseRenewal.js has no source in src/")
    expect(stderr).toContain("build/dts/internal/leaseRenewal.d.ts has no source in src/")
    expect(stderr).toContain("refusing to pack")
  })

  it("refuses a source that was not built", () => {
    const { status, stderr } = check(["src/index.ts", "src/Agent.ts", ...built("index")])
    expect(status).toBe(1)
    expect(stderr).toContain("src/Agent.ts has no build/esm/Agent.js")
    expect(stderr).toContain("src/Agent.ts has no build/dts/Agent.d.ts.map")
  })

  it("is every workspace package's prepack, and passes on the repository's build", () => {
    const workspaces = (JSON.parse(Fs.readFileSync(Path.join(root, "package.json"), "utf8")) as {
      readonly workspaces: ReadonlyArray<string>
    }).workspaces
    expect(workspaces.length).toBeGreaterThan(0)
    for (const workspace of workspaces) {
      const dir = Path.join(root, workspace)
      const manifest = JSON.parse(Fs.readFileSync(Path.join(dir, "package.json"), "utf8")) as {
        readonly scripts?: { readonly prepack?: string }
      }
      expect({ workspace, prepack: manifest.scripts?.prepack }).toEqual({ workspace, prepack: command })
      // The repository tests' global setup has just built every package.
      expect(spawnSync(process.execPath, [script], { cwd: dir, encoding: "utf8" }).status).toBe(0)
    }
  })
})
