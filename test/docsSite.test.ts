/**
 * `npm run docs` works: TypeDoc writes the API reference of every public module (a link TypeDoc
 * cannot resolve is an error, typedoc.json), then VitePress builds the guides and the reference
 * into a static site, failing on any dead internal link (its default). Here the site goes to a
 * temporary folder, removed after.
 */
import { describe, expect, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Docs from "../scripts/docs/check.js"

const root = Path.resolve(import.meta.dirname, "..")
const bin = (name: string) => Path.join(root, "node_modules", ".bin", name)

/** Runs a command without blocking the test worker; resolves with its exit status and output. */
const run = (command: string, args: ReadonlyArray<string>) =>
  new Promise<{ readonly status: number | null; readonly output: string }>((resolve) =>
    execFile(
      command,
      args,
      { cwd: root, timeout: 300_000, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) =>
        resolve({
          status: error === null ? 0 : typeof error.code === "number" ? error.code : null,
          output: `${stdout}\n${stderr}`
        })
    )
  )

describe("the documentation site", () => {
  it("builds with every public module in the reference and no dead internal link", async () => {
    const out = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-docs-site-"))
    try {
      const typedoc = await run(bin("typedoc"), [])
      expect(typedoc.status, typedoc.output).toBe(0)
      const site = await run(bin("vitepress"), ["build", "docs", "--outDir", out])
      expect(site.status, site.output).toBe(0)
      for (const module of Docs.publicModules(root)) {
        expect(Fs.existsSync(Path.join(out, "api", "@tether", module.pkg, `${module.name}.html`)), module.file).toBe(
          true
        )
      }
      for (const guide of Fs.readdirSync(Path.join(root, "docs")).filter((name) => name.endsWith(".md"))) {
        expect(Fs.existsSync(Path.join(out, guide.replace(/\.md$/, ".html"))), guide).toBe(true)
      }
    } finally {
      Fs.rmSync(out, { recursive: true, force: true })
    }
  }, 600_000)
})
