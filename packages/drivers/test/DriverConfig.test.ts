/**
 * `driverConfig`: each driver's endpoint, key, model and binary read from `Config` (here a map
 * standing for the environment); a missing value is the `ConfigError`.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Claude, CodeBuddy, Codex, Cursor, Gemini } from "@tether/drivers"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const environment = new Map([
  ["AGENT_BINARY", "/opt/cli"],
  ["AGENT_MODEL", "model-from-env"],
  ["AGENT_BASE_URL", "http://127.0.0.1:9/v1"],
  ["AGENT_API_KEY", "key-from-env"]
])

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
  hostEnv: {}
})

const prepared = (make: Effect.Effect<Driver.Driver, unknown>) =>
  Effect.gen(function*() {
    const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-driver-config-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(root, { recursive: true, force: true })))
    for (const dir of ["profile", "home", "tmp"]) Fs.mkdirSync(Path.join(root, dir))
    const driver = yield* make.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(environment)))
    const invocation = yield* driver.prepare(request(root))
    return { invocation, files: invocation.files.map((file) => file.content).join("\n") }
  }).pipe(Effect.scoped, Effect.provide(NodeContext.layer))

const key = Config.redacted("AGENT_API_KEY")

describe("driverConfig reads endpoint, key, model and binary from Config", () => {
  it.effect("Claude", () =>
    Effect.gen(function*() {
      const { invocation } = yield* prepared(Claude.driverConfig({
        binary: Config.string("AGENT_BINARY"),
        model: Config.string("AGENT_MODEL"),
        env: Config.all({ ANTHROPIC_BASE_URL: Config.string("AGENT_BASE_URL"), ANTHROPIC_API_KEY: key })
      }))
      expect(invocation.command).toBe("/opt/cli")
      expect(invocation.args).toContain("model-from-env")
      expect(invocation.env).toMatchObject({
        ANTHROPIC_BASE_URL: "http://127.0.0.1:9/v1",
        ANTHROPIC_API_KEY: "key-from-env"
      })
    }))

  it.effect("Codex", () =>
    Effect.gen(function*() {
      const { invocation, files } = yield* prepared(Codex.driverConfig({
        binary: Config.string("AGENT_BINARY"),
        model: Config.string("AGENT_MODEL"),
        modelProvider: {
          id: Config.succeed("fromenv"),
          baseUrl: Config.string("AGENT_BASE_URL"),
          apiKey: key
        }
      }))
      expect(invocation.command).toBe("/opt/cli")
      expect(invocation.args).toContain("model-from-env")
      expect(files).toContain("http://127.0.0.1:9/v1")
      expect(invocation.env[Codex.apiKeyVariable]).toBe("key-from-env")
    }))

  it.effect("Gemini", () =>
    Effect.gen(function*() {
      const { invocation } = yield* prepared(Gemini.driverConfig({
        binary: Config.string("AGENT_BINARY"),
        model: Config.string("AGENT_MODEL"),
        env: Config.all({ GOOGLE_GEMINI_BASE_URL: Config.string("AGENT_BASE_URL"), GEMINI_API_KEY: key })
      }))
      expect(invocation.command).toBe("/opt/cli")
      expect(invocation.args).toContain("model-from-env")
      expect(invocation.env).toMatchObject({
        GOOGLE_GEMINI_BASE_URL: "http://127.0.0.1:9/v1",
        GEMINI_API_KEY: "key-from-env"
      })
    }))

  it.effect("CodeBuddy", () =>
    Effect.gen(function*() {
      const { invocation } = yield* prepared(CodeBuddy.driverConfig({
        binary: Config.string("AGENT_BINARY"),
        model: Config.string("AGENT_MODEL"),
        endpoint: { baseUrl: Config.string("AGENT_BASE_URL"), apiKey: key }
      }))
      expect(invocation.command).toBe("/opt/cli")
      expect(invocation.args).toContain("model-from-env")
      expect(invocation.env).toMatchObject({
        CODEBUDDY_BASE_URL: "http://127.0.0.1:9/v1",
        CODEBUDDY_API_KEY: "key-from-env"
      })
    }))

  it.effect("Cursor", () =>
    Effect.gen(function*() {
      const { invocation } = yield* prepared(Cursor.driverConfig({
        binary: Config.string("AGENT_BINARY"),
        model: Config.string("AGENT_MODEL"),
        env: Config.all({ CURSOR_API_KEY: key })
      }))
      expect(invocation.command).toBe("/opt/cli")
      expect(invocation.args).toContain("model-from-env")
      expect(invocation.env["CURSOR_API_KEY"]).toBe("key-from-env")
    }))

  it.effect("a missing value is a ConfigError naming it", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(
        Claude.driverConfig({ model: Config.string("NOT_SET_ANYWHERE") }).pipe(
          Effect.withConfigProvider(ConfigProvider.fromMap(environment))
        )
      )
      expect(Exit.isFailure(exit) && String(exit.cause)).toContain("NOT_SET_ANYWHERE")
    }))
})
