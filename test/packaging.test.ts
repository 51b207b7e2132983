/**
 * Tether as a dependency of someone else's app, end to end: every workspace package is packed
 * (`npm pack`, as `npm publish` would) and installed into a fresh app whose `effect` is pinned to
 * another 3.22 patch than the repository's, with the README's own install command, from a
 * loopback registry that serves only the packed tarballs and what the lock file put in the npm
 * cache (offline); the packages that command leaves out (the optional ones) are installed beside it
 * with their peers. The app then type-checks a README-style program under `nodenext` and
 * `bundler`, has one copy of `effect` and nothing native built, and runs an offline Claude Code
 * turn with plain `node` from `/`.
 *
 * Packages are the root manifest's `workspaces`: a package added there is packed and installed
 * here without touching this file.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { execFile, execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Registry from "../scripts/registry.js"

const root = Path.resolve(import.meta.dirname, "..")
const rootManifest = JSON.parse(Fs.readFileSync(Path.join(root, "package.json"), "utf8")) as {
  readonly workspaces: ReadonlyArray<string>
  readonly devDependencies: { readonly [name: string]: string }
}
const workspaces = rootManifest.workspaces.map((dir) => ({
  dir: Path.join(root, dir),
  manifest: JSON.parse(Fs.readFileSync(Path.join(root, dir, "package.json"), "utf8")) as {
    readonly name: string
    readonly version: string
    readonly [field: string]: unknown
  }
}))
/** The repository's effect is the root pin; the app pins another patch of the same minor. */
const appEffect = "3.22.3"
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
const esbuild = Path.join(root, "node_modules", ".bin", "esbuild")

/** The `npm install` lines of the README's first section (the install instructions). */
const readmeInstall = (): ReadonlyArray<string> => {
  const readme = Fs.readFileSync(Path.join(root, "README.md"), "utf8")
  const section = readme.split(/^## /m)[1] ?? ""
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? ""
  return block.split("\n").flatMap((line) => {
    const command = line.replace(/#.*$/, "").trim().split(/\s+/)
    return command[0] === "npm" && command[1] === "install" ? command.slice(2) : []
  })
}

/** PATH without any `node_modules/.bin` (`npm test` puts the repository's there). */
const cleanPath = (process.env["PATH"] ?? "")
  .split(Path.delimiter)
  .filter((dir) => dir !== "" && !dir.split(Path.sep).includes("node_modules"))
  .join(Path.delimiter)

const run = (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env: NodeJS.ProcessEnv }
): Promise<{ readonly code: number; readonly stdout: string; readonly stderr: string }> =>
  new Promise((resolve) => {
    // Asynchronous: the registry answering npm lives in this process.
    execFile(command, args, { ...options, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : 1
      resolve({ code, stdout, stderr })
    })
  })

const checked = async (...args: Parameters<typeof run>) => {
  const result = await run(...args)
  if (result.code !== 0) {
    throw new Error(`${args[0]} ${args[1].join(" ")} exited ${result.code}\n${result.stdout}\n${result.stderr}`)
  }
  return result
}

const work = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-packaging-"))
const app = Path.join(work, "app")
const home = Path.join(work, "home")
const npmEnv: NodeJS.ProcessEnv = { PATH: cleanPath, HOME: home, TMPDIR: Os.tmpdir(), LANG: "C.UTF-8" }
const npmFlags = (registry: string) => [
  `--registry=${registry}`,
  `--cache=${Path.join(work, "npm-cache")}`,
  `--userconfig=${Path.join(work, "npmrc")}`,
  "--no-audit",
  "--no-fund",
  "--no-update-notifier",
  "--loglevel=warn"
]
let registry: Registry.Registry | undefined
let installArgs: ReadonlyArray<string> = []

describe("Tether installed into someone else's app", () => {
  beforeAll(async () => {
    for (const dir of [app, home, Path.join(work, "packs"), Path.join(work, "elsewhere")]) {
      Fs.mkdirSync(dir, { recursive: true })
    }
    Fs.writeFileSync(Path.join(work, "npmrc"), "")
    // The global setup has just built every package (`tsc -b`); pack them as `npm publish` would.
    const packed = JSON.parse(
      execFileSync("npm", ["pack", "--workspaces", "--json", "--pack-destination", Path.join(work, "packs")], {
        cwd: root,
        encoding: "utf8",
        env: { ...npmEnv, HOME: process.env["HOME"] ?? home }
      })
    ) as ReadonlyArray<{ readonly name: string; readonly filename: string }>
    registry = await Registry.start({
      lockFile: Path.join(root, "package-lock.json"),
      cache: execFileSync("npm", ["config", "get", "cache"], { encoding: "utf8" }).trim(),
      tarballs: packed.map((pack) => ({
        file: Path.join(work, "packs", pack.filename.replace(/^@/, "").replace(/\//, "-")),
        manifest: workspaces.find((workspace) => workspace.manifest.name === pack.name)!.manifest
      }))
    })
    // The app pins its own effect patch, then runs the README's install command (with that pin)
    // plus what the test program uses from outside it.
    Fs.writeFileSync(
      Path.join(app, "package.json"),
      JSON.stringify({ name: "someone-elses-app", private: true, type: "module", dependencies: { effect: appEffect } })
    )
    const readme = readmeInstall().map((spec) => (/^effect@/.test(spec) ? `effect@${appEffect}` : spec))
    // The packages the README's first command leaves out (the optional ones, @tether/testing),
    // with the peers they require at their declared ranges, as their own READMEs install them.
    const named = new Set(readme.map((spec) => spec.replace(/(.)@.*$/, "$1")))
    const others = workspaces.filter(({ manifest }) => !named.has(manifest.name))
    const peers = new Map<string, string>()
    for (const { manifest } of others) {
      const meta = (manifest["peerDependenciesMeta"] ?? {}) as {
        readonly [name: string]: { readonly optional?: boolean }
      }
      for (const [name, range] of Object.entries((manifest["peerDependencies"] ?? {}) as Record<string, string>)) {
        if (!named.has(name) && meta[name]?.optional !== true) peers.set(name, range)
      }
    }
    installArgs = [
      ...readme,
      ...others.map(({ manifest }) => manifest.name),
      ...Array.from(peers, ([name, range]) => `${name}@${range}`),
      `@types/node@${rootManifest.devDependencies["@types/node"]}`
    ]
    await checked("npm", ["install", ...npmFlags(registry.url), ...installArgs], { cwd: app, env: npmEnv })
  }, 240_000)

  afterAll(async () => {
    await registry?.close()
    Fs.rmSync(work, { recursive: true, force: true })
  }, 60_000)

  it("the README's install command names the four packages, the Effect 3 ranges and the CLIs", () => {
    const names = installArgs.map((spec) => spec.replace(/(.)@.*$/, "$1"))
    expect(names).toEqual(expect.arrayContaining([
      "@tether/core",
      "@tether/tool",
      "@tether/gateway",
      "@tether/drivers",
      "effect",
      "@effect/platform",
      "@effect/platform-node",
      "@anthropic-ai/claude-code"
    ]))
    // Every Effect package is given a range: a bare name would install Effect 4.
    for (const spec of readmeInstall().filter((spec) => /^(effect|@effect\/)/.test(spec))) {
      expect(spec).toMatch(/@\^0?\.?\d/)
    }
    // Offline: every request was answered from the tarballs and the cache (only optional peers
    // nobody installs are unknown to the registry; @modelcontextprotocol/server is the ACP SDK's).
    expect(
      registry!.missing.filter((path) =>
        !/^\/(ioredis|lmdb|bufferutil|utf-8-validate|@cfworker\/json-schema|@modelcontextprotocol\/server)$/.test(path)
      )
    )
      .toEqual([])
  })

  it("every workspace package was installed from its packed tarball, at the workspace's version", () => {
    for (const { manifest } of workspaces) {
      const installed = JSON.parse(
        Fs.readFileSync(Path.join(app, "node_modules", manifest.name, "package.json"), "utf8")
      ) as { readonly version: string }
      expect(installed.version, manifest.name).toBe(manifest.version)
    }
  })

  it("the app has exactly one effect, its own pin, and every dependency and peer is satisfied", async () => {
    const ls = await checked("npm", ["ls", "effect", "--all", "--parseable", "--long", ...npmFlags(registry!.url)], {
      cwd: app,
      env: npmEnv
    })
    const copies = [...new Set(ls.stdout.split("\n").filter((line) => line !== ""))]
    expect(copies).toEqual([`${Path.join(app, "node_modules", "effect")}:effect@${appEffect}`])
    // `npm ls --all` exits non-zero on any missing, invalid or extraneous package or peer.
    await checked("npm", ["ls", "--all", ...npmFlags(registry!.url)], { cwd: app, env: npmEnv })
  })

  it("no native module was built and no SQLite driver was installed", () => {
    const built: Array<string> = []
    const walk = (dir: string, depth: number) => {
      for (const entry of Fs.readdirSync(dir, { withFileTypes: true })) {
        if (!entry.isDirectory()) continue
        const full = Path.join(dir, entry.name)
        if (entry.name === "build" && ["Release", "Debug"].some((kind) => Fs.existsSync(Path.join(full, kind)))) {
          built.push(full)
        } else if (depth < 6) walk(full, depth + 1)
      }
    }
    walk(Path.join(app, "node_modules"), 0)
    expect(built).toEqual([])
    expect(Fs.existsSync(Path.join(app, "node_modules", "better-sqlite3"))).toBe(false)
    expect(Fs.existsSync(Path.join(app, "node_modules", "@effect", "sql-sqlite-node"))).toBe(false)
  })

  it("a README-style program type-checks under nodenext and under bundler resolution", async () => {
    Fs.mkdirSync(Path.join(app, "src"), { recursive: true })
    for (const file of ["main.ts", "testing.ts", "acp.ts"]) {
      Fs.copyFileSync(Path.join(root, "test/fixtures/package-app", file), Path.join(app, "src", file))
    }
    const common = { target: "ES2022", strict: true, skipLibCheck: true, types: ["node"], lib: ["ES2022"] }
    Fs.writeFileSync(
      Path.join(app, "tsconfig.nodenext.json"),
      JSON.stringify({
        compilerOptions: {
          ...common,
          module: "nodenext",
          moduleResolution: "nodenext",
          rootDir: "src",
          outDir: "dist"
        },
        include: ["src"]
      })
    )
    Fs.writeFileSync(
      Path.join(app, "tsconfig.bundler.json"),
      JSON.stringify({
        compilerOptions: { ...common, module: "preserve", moduleResolution: "bundler", noEmit: true },
        include: ["src"]
      })
    )
    const [nodenext, bundler] = await Promise.all(
      ["tsconfig.nodenext.json", "tsconfig.bundler.json"].map((config) =>
        run(process.execPath, [tsc, "-p", config], { cwd: app, env: npmEnv })
      )
    )
    expect(nodenext!.stdout + nodenext!.stderr).toBe("")
    expect(nodenext!.code).toBe(0)
    expect(bundler!.stdout + bundler!.stderr).toBe("")
    expect(bundler!.code).toBe(0)
    expect(Fs.existsSync(Path.join(app, "dist", "main.js"))).toBe(true)
  })

  const runApp = async (program: string, dir = "dist") => {
    const { stdout, stderr, code } = await run(process.execPath, [Path.join(app, dir, program)], {
      cwd: "/",
      env: { PATH: cleanPath, HOME: home, TMPDIR: Os.tmpdir(), LANG: "C.UTF-8" }
    })
    expect(stderr).toBe("")
    expect(code).toBe(0)
    const lines = stdout.split("\n").filter((line) => line !== "")
    return { lines, outcome: JSON.parse(lines[lines.length - 1]!).outcome as { readonly [key: string]: unknown } }
  }

  it("plain node runs an offline Claude turn from `/`, with the Claude Code the app installed", async () => {
    const { lines, outcome } = await runApp("main.js")
    expect(String(outcome["command"]).startsWith(Path.join(app, "node_modules", "@anthropic-ai") + Path.sep)).toBe(true)
    // A host tool through the gateway, and a tool of the stdio MCP server shipped in @tether/testing.
    expect(outcome["tools"]).toEqual(["lookup_issue:host", "stamp:mcp"])
    expect(outcome["text"]).toBe(`The tools said STAMP:{"title":"Title of ISSUE-42","state":"open"}:none`)
    // The driver logged where its CLI came from, once.
    expect(lines.filter((line) => line.includes("claude driver runs"))).toHaveLength(1)
  }, 120_000)

  it("@tether/testing's fake CLIs run from the installed package", async () => {
    const { outcome } = await runApp("testing.js")
    expect(outcome).toEqual({ cursor: "turn 1; echo -> {\"echoed\":\"host\"}", fake: "done" })
  }, 120_000)

  it("an ACP turn runs from the compiled app and from an esbuild bundle of it (the turn runner is found)", async () => {
    Fs.copyFileSync(
      Path.join(root, "packages/drivers/test/fixtures/acp-agent/agent.mjs"),
      Path.join(app, "acp-agent.mjs")
    )
    const expected = Array.from({ length: 200 }, (_, i) => `${i},`).join("")
    expect((await runApp("acp.js")).outcome).toEqual({ text: expected })
    // Bundled into one file: `import.meta.url` is the bundle's; @tether/drivers stays installed.
    await checked(esbuild, [
      Path.join(app, "dist", "acp.js"),
      "--bundle",
      "--platform=node",
      "--format=esm",
      "--main-fields=module,main",
      "--banner:js=import { createRequire as bannerRequire } from 'node:module'; const require = bannerRequire(import.meta.url);",
      `--outfile=${Path.join(app, "bundle", "acp.mjs")}`,
      "--log-level=error"
    ], { cwd: app, env: npmEnv })
    expect((await runApp("acp.mjs", "bundle")).outcome).toEqual({ text: expected })
  }, 120_000)
})
