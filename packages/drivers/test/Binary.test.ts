/**
 * Where each driver's CLI comes from: the `binary` option; else the CLI package the app
 * installed, found by module resolution from `@tether/drivers` inside the app (never from the
 * working directory); else the CLI's name on the PATH. Decided once per driver, logged once,
 * and a spawn that fails says what was tried.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Claude, CodeBuddy, Codex, Cursor, Gemini } from "@tether/drivers"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Binary from "../src/internal/binary.js"
import { binarySpec as claudeSpec } from "../src/internal/claude.js"
import { binarySpec as codebuddySpec } from "../src/internal/codebuddy.js"
import { binarySpec as codexSpec } from "../src/internal/codex.js"
import { binarySpec as geminiSpec } from "../src/internal/gemini.js"

const repoModules = Path.resolve(import.meta.dirname, "../../../node_modules")

/** A throwaway app directory; `files` maps relative paths to [content, mode]. */
const app = (files: Record<string, readonly [string, number]>) => {
  const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-app-"))
  for (const [file, [content, mode]] of Object.entries(files)) {
    const full = Path.join(root, file)
    Fs.mkdirSync(Path.dirname(full), { recursive: true })
    Fs.writeFileSync(full, content, { mode })
  }
  return {
    root,
    // Where `@tether/drivers` sits in that app: resolution starts here.
    from: Path.join(root, "node_modules/@tether/drivers/build/esm/internal/binary.js"),
    [Symbol.dispose]: () => Fs.rmSync(root, { recursive: true, force: true })
  }
}

const manifest = (name: string, bin: Record<string, string>) =>
  [JSON.stringify({ name, version: "9.9.9", bin }), 0o644] as const
const executable = ["#!/bin/sh\nexit 0\n", 0o755] as const
const platform = `${process.platform}-${process.arch}`

const request = (root: string): Driver.InvocationRequest => ({
  runId: "run-1",
  prompt: "hello",
  model: undefined,
  profileDir: Path.join(root, "profile"),
  siblings: { home: Path.join(root, "home"), tmp: Path.join(root, "tmp") },
  workspace: root,
  hosted: { key: "tether", url: "http://127.0.0.1:1/mcp", tokenVariable: "TETHER_TOKEN_X", tools: [] },
  instructions: "",
  skills: [],
  mcp: [],
  session: { _tag: "New", id: "11111111-1111-4111-8111-111111111111" },
  sandbox: undefined,
  hostEnv: { PATH: "/usr/bin:/bin" }
})

describe("driver binaries", () => {
  it("the binary option always wins and says so", () => {
    using dir = app({ "node_modules/@anthropic-ai/claude-code/package.json": manifest("x", {}) })
    expect(Binary.resolve(claudeSpec, "/opt/claude", dir.from)).toEqual({
      command: "/opt/claude",
      prefix: [],
      source: "the `binary` option"
    })
  })

  it("Claude: the app's installed package, resolved from the app and not from the working directory", () => {
    // The working directory (this repository) has its own @anthropic-ai/claude-code: the app's wins.
    using dir = app({
      "node_modules/@anthropic-ai/claude-code/package.json": manifest("@anthropic-ai/claude-code", {
        claude: "bin/claude.exe"
      }),
      "node_modules/@anthropic-ai/claude-code/bin/claude.exe": executable
    })
    const resolved = Binary.resolve(claudeSpec, undefined, dir.from)
    expect(resolved.command).toBe(Path.join(dir.root, "node_modules/@anthropic-ai/claude-code/bin/claude.exe"))
    expect(resolved.prefix).toEqual([])
    expect(resolved.source).toContain("@anthropic-ai/claude-code 9.9.9 installed at")
    expect(process.cwd().startsWith(dir.root)).toBe(false)
  })

  it("Claude: the platform package's native binary comes before the launcher", () => {
    using dir = app({
      "node_modules/@anthropic-ai/claude-code/package.json": manifest("@anthropic-ai/claude-code", {
        claude: "bin/claude.exe"
      }),
      "node_modules/@anthropic-ai/claude-code/bin/claude.exe": executable,
      [`node_modules/@anthropic-ai/claude-code-${platform}/package.json`]: manifest("p", {}),
      [`node_modules/@anthropic-ai/claude-code-${platform}/claude`]: executable
    })
    expect(Binary.resolve(claudeSpec, undefined, dir.from).command).toBe(
      Path.join(dir.root, `node_modules/@anthropic-ai/claude-code-${platform}/claude`)
    )
  })

  it("a launcher that is not executable is skipped, and the PATH fallback lists what was tried", () => {
    using dir = app({
      "node_modules/@anthropic-ai/claude-code/package.json": manifest("@anthropic-ai/claude-code", {
        claude: "bin/claude.exe"
      }),
      "node_modules/@anthropic-ai/claude-code/bin/claude.exe": ["stub", 0o644]
    })
    const resolved = Binary.resolve(claudeSpec, undefined, dir.from)
    expect(resolved.command).toBe("claude")
    expect(resolved.source).toContain("`claude` on the PATH given to the process, after trying:")
    expect(resolved.source).toContain("bin/claude.exe (missing or not executable)")
  })

  it("no package in the app: the name on the PATH, saying where it was looked for", () => {
    using dir = app({})
    for (
      const [spec, name] of [
        [claudeSpec, "claude"],
        [codexSpec, "codex"],
        [geminiSpec, "gemini"],
        [codebuddySpec, "codebuddy"]
      ] as const
    ) {
      const resolved = Binary.resolve(spec, undefined, dir.from)
      expect(resolved.command).toBe(name)
      expect(resolved.source).toContain(`${spec.packageName} is not installed where the app resolves packages`)
      expect(resolved.source).toContain(Path.dirname(dir.from))
    }
  })

  it("Codex: the platform package's native binary, else the vendored one, else the launcher with this Node", () => {
    const triple = process.arch === "x64" ? "x86_64-unknown-linux-musl" : "aarch64-unknown-linux-musl"
    using dir = app({
      "node_modules/@openai/codex/package.json": manifest("@openai/codex", { codex: "bin/codex.js" }),
      "node_modules/@openai/codex/bin/codex.js": ["", 0o644],
      [`node_modules/@openai/codex-${platform}/package.json`]: manifest("p", {}),
      [`node_modules/@openai/codex-${platform}/vendor/${triple}/bin/codex`]: executable
    })
    expect(Binary.resolve(codexSpec, undefined, dir.from).command).toBe(
      Path.join(dir.root, `node_modules/@openai/codex-${platform}/vendor/${triple}/bin/codex`)
    )
    Fs.rmSync(Path.join(dir.root, `node_modules/@openai/codex-${platform}`), { recursive: true })
    expect(Binary.resolve(codexSpec, undefined, dir.from)).toMatchObject({
      command: process.execPath,
      prefix: [Path.join(dir.root, "node_modules/@openai/codex/bin/codex.js")]
    })
  })

  it("Gemini: the package's bundle, run with this Node", () => {
    using dir = app({
      "node_modules/@google/gemini-cli/package.json": manifest("@google/gemini-cli", { gemini: "bundle/gemini.js" }),
      "node_modules/@google/gemini-cli/bundle/gemini.js": ["", 0o644]
    })
    expect(Binary.resolve(geminiSpec, undefined, dir.from)).toMatchObject({
      command: process.execPath,
      prefix: [Path.join(dir.root, "node_modules/@google/gemini-cli/bundle/gemini.js")]
    })
  })

  it("CodeBuddy: the CLI bundled in @tencent-ai/agent-sdk's cli/ folder, run with this Node", () => {
    using dir = app({
      // Its `exports` do not list `./package.json`: found on Node's lookup path all the same.
      "node_modules/@tencent-ai/agent-sdk/package.json": [
        JSON.stringify({ name: "@tencent-ai/agent-sdk", version: "9.9.9", exports: { ".": "./lib/index.js" } }),
        0o644
      ],
      "node_modules/@tencent-ai/agent-sdk/cli/bin/codebuddy": ["", 0o644]
    })
    expect(Binary.resolve(codebuddySpec, undefined, dir.from)).toMatchObject({
      command: process.execPath,
      prefix: [Path.join(dir.root, "node_modules/@tencent-ai/agent-sdk/cli/bin/codebuddy")]
    })
    Fs.rmSync(Path.join(dir.root, "node_modules/@tencent-ai/agent-sdk/cli"), { recursive: true })
    const fallback = Binary.resolve(codebuddySpec, undefined, dir.from)
    expect(fallback.command).toBe("codebuddy")
    expect(fallback.source).toContain("cli/bin/codebuddy (missing)")
  })

  it.effect("each driver puts the resolved CLI in its invocation, with where it came from", () =>
    Effect.gen(function*() {
      const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-binary-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(root, { recursive: true, force: true })))
      for (const dir of ["profile", "home", "tmp"]) Fs.mkdirSync(Path.join(root, dir))
      const claude = yield* Claude.driver().prepare(request(root))
      expect(claude.command).toBe(Path.join(repoModules, `@anthropic-ai/claude-code-${platform}/claude`))
      expect(claude.commandSource).toContain("@anthropic-ai/claude-code 2.1.197 installed at")
      const gemini = yield* Gemini.driver().prepare(request(root))
      expect([gemini.command, gemini.args[0]]).toEqual([
        process.execPath,
        Path.join(repoModules, "@google/gemini-cli/bundle/gemini.js")
      ])
      const codex = yield* Codex.driver({ binary: "/opt/codex" }).prepare(request(root))
      expect([codex.command, codex.commandSource]).toEqual(["/opt/codex", "the `binary` option"])
      const codebuddy = yield* CodeBuddy.driver().prepare(request(root))
      expect([codebuddy.command, codebuddy.args[0]]).toEqual([
        process.execPath,
        Path.join(repoModules, "@tencent-ai/agent-sdk/cli/bin/codebuddy")
      ])
      expect(codebuddy.commandSource).toContain("@tencent-ai/agent-sdk 0.3.201 installed at")
      const cursor = yield* Cursor.driver().prepare(request(root))
      expect(cursor.command).toBe("agent")
      expect(cursor.commandSource).toContain("on the PATH")
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))

  it.effect("the choice is logged once per driver, not once per turn", () =>
    Effect.gen(function*() {
      const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-binary-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(root, { recursive: true, force: true })))
      for (const dir of ["profile", "home", "tmp"]) Fs.mkdirSync(Path.join(root, dir))
      const lines: Array<string> = []
      const logger = Logger.make(({ message }) => lines.push(String(message)))
      const driver = Claude.driver({ binary: "/opt/claude" })
      for (let turn = 0; turn < 3; turn++) {
        yield* driver.prepare(request(root)).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
      }
      expect(lines).toEqual(["claude driver runs /opt/claude"])
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))
})
