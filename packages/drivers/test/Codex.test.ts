/**
 * `Codex.driver(config).prepare` without running Codex: argv, environment, the rendered
 * `config.toml` (merged with the user's copied settings) and binary resolution.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Codex } from "@tether/drivers"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Redacted from "effect/Redacted"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Toml from "smol-toml"

const tokenVariable = "TETHER_TOKEN_9C4E1A77D2B3F605"

/** A temp root with `profile`, `home`, `tmp`, `work`, removed after `body`. */
const withRoot = <A, E>(body: (root: string) => Effect.Effect<A, E, NodeContext.NodeContext>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-codex-prepare-"))
      for (const dir of ["profile", "home", "tmp", "work"]) Fs.mkdirSync(Path.join(root, dir))
      return root
    }),
    body,
    (root) => Effect.sync(() => Fs.rmSync(root, { recursive: true, force: true }))
  ).pipe(Effect.provide(NodeContext.layer))

const request = (root: string, overrides: Partial<Driver.InvocationRequest> = {}): Driver.InvocationRequest => ({
  runId: "run-1",
  prompt: "hello",
  model: undefined,
  profileDir: Path.join(root, "profile"),
  siblings: { home: Path.join(root, "home"), tmp: Path.join(root, "tmp") },
  workspace: Path.join(root, "work"),
  hosted: { key: "tether", url: "http://127.0.0.1:4555/mcp", tokenVariable, tools: ["close_issue", "lookup_issue"] },
  instructions: "",
  skills: [],
  mcp: [],
  session: { _tag: "New", id: "00000000-0000-4000-8000-000000000000" },
  sandbox: undefined,
  hostEnv: { PATH: "/usr/bin:/bin", LANG: "C.UTF-8", AWS_SECRET_ACCESS_KEY: "host-secret", [tokenVariable]: "tok" },
  ...overrides
})

const fileOf = (invocation: Driver.Invocation, path: string) => invocation.files.find((f) => f.path === path)
const configOf = (invocation: Driver.Invocation) => Toml.parse(fileOf(invocation, "config.toml")!.content)

/** Writes the materialized files as core would. */
const materialize = (root: string, invocation: Driver.Invocation) => {
  for (const file of invocation.files) Fs.writeFileSync(Path.join(root, "profile", file.path), file.content)
}

describe("Codex.driver prepare", () => {
  it.effect("a new turn: exec --json, `-` after --, the prompt on stdin (never in argv), cwd the workspace", () =>
    withRoot((root) =>
      Effect.gen(function*() {
        const invocation = yield* Codex.driver({ binary: "/opt/codex" }).prepare(
          request(root, { prompt: "--help me; $(rm -rf /)" })
        )
        expect(invocation.command).toBe("/opt/codex")
        expect(invocation.args).toEqual([
          "exec",
          "--json",
          "--skip-git-repo-check",
          "--config",
          `mcp_servers.tether.enabled_tools=["close_issue","lookup_issue"]`,
          "--",
          "-"
        ])
        expect(invocation.stdin).toBe("--help me; $(rm -rf /)")
        expect(invocation.cwd).toBe(Path.join(root, "work"))
      })
    ))

  it.effect("model and sandbox levels are flags; resume and fork name the thread after --", () =>
    withRoot((root) =>
      Effect.gen(function*() {
        const driver = Codex.driver({ binary: "codex", model: "gpt-default" })
        const levels = [["readOnly", "read-only"], ["workspaceWrite", "workspace-write"], [
          "unrestricted",
          "danger-full-access"
        ]] as const
        for (const [level, mode] of levels) {
          const invocation = yield* driver.prepare(request(root, { sandbox: level, model: "gpt-turn" }))
          expect(invocation.args).toEqual([
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--model",
            "gpt-turn",
            "--config",
            `sandbox_mode="${mode}"`,
            "--config",
            `mcp_servers.tether.enabled_tools=["close_issue","lookup_issue"]`,
            "--",
            "-"
          ])
        }
        const resumed = yield* driver.prepare(request(root, { session: { _tag: "Resume", id: "thread-1" } }))
        expect(resumed.args).toEqual([
          "exec",
          "resume",
          "--json",
          "--skip-git-repo-check",
          "--model",
          "gpt-default",
          "--config",
          `mcp_servers.tether.enabled_tools=["close_issue","lookup_issue"]`,
          "--",
          "thread-1",
          "-"
        ])
        const forked = yield* driver.prepare(request(root, { session: { _tag: "Fork", from: "thread-1", id: "x" } }))
        expect(forked.args.slice(0, 2)).toEqual(["exec", "fork"])
        expect(forked.args.slice(-3)).toEqual(["--", "thread-1", "-"])
        expect(forked.stdin).toBe("hello")
      })
    ))

  it.effect("the prompt `-` (Codex's read-stdin marker) is fed on stdin, so it still arrives verbatim", () =>
    withRoot((root) =>
      Effect.gen(function*() {
        const invocation = yield* Codex.driver({ binary: "codex" }).prepare(request(root, { prompt: "-" }))
        expect(invocation.args.slice(-2)).toEqual(["--", "-"])
        expect(invocation.stdin).toBe("-")
      })
    ))

  it.effect("the environment is built from nothing: allow-list, configured env, CODEX_HOME/HOME/TMPDIR, no token", () =>
    withRoot((root) =>
      Effect.gen(function*() {
        const invocation = yield* Codex.driver({
          binary: "codex",
          passEnv: ["LC_CUSTOM"],
          env: { FAKE_OPENAI_KEY: Redacted.make("sk-fake"), [tokenVariable]: "shadow", HOME: "/root" }
        }).prepare(request(root, { hostEnv: { ...request(root).hostEnv, LC_CUSTOM: "x" } }))
        expect(invocation.env).toEqual({
          PATH: "/usr/bin:/bin",
          LANG: "C.UTF-8",
          LC_CUSTOM: "x",
          FAKE_OPENAI_KEY: "sk-fake",
          HOME: Path.join(root, "home"),
          CODEX_HOME: Path.join(root, "profile"),
          TMPDIR: Path.join(root, "tmp")
        })
      })
    ))

  it.effect("config.toml declares the hosted tools by variable name, approval, required; never a turn's tools", () =>
    withRoot((root) =>
      Effect.gen(function*() {
        const invocation = yield* Codex.driver({
          binary: "codex",
          modelProvider: {
            id: "fake",
            baseUrl: "http://127.0.0.1:9/v1",
            apiKey: Redacted.make("sk-provider"),
            requestMaxRetries: 0
          },
          settings: Codex.offlineSettings
        }).prepare(request(root, { instructions: "You triage issues." }))
        // The key is one option: the driver names its own variable in env_key and sets it.
        expect(invocation.env[Codex.apiKeyVariable]).toBe("sk-provider")
        expect(JSON.stringify(invocation.files)).not.toContain("sk-provider")
        const config = configOf(invocation)
        expect(config).toEqual({
          check_for_update_on_startup: false,
          features: { plugins: false, apps: false },
          analytics: { enabled: false },
          feedback: { enabled: false },
          model_provider: "fake",
          model_providers: {
            fake: {
              name: "fake",
              base_url: "http://127.0.0.1:9/v1",
              wire_api: "responses",
              env_key: Codex.apiKeyVariable,
              request_max_retries: 0
            }
          },
          developer_instructions: "You triage issues.",
          mcp_servers: {
            tether: {
              url: "http://127.0.0.1:4555/mcp",
              bearer_token_env_var: tokenVariable,
              default_tools_approval_mode: "approve",
              required: true
            }
          }
        })
        // The turn's allow-list is an argument of this run only.
        expect(invocation.args).toContain(`mcp_servers.tether.enabled_tools=["close_issue","lookup_issue"]`)
        expect(fileOf(invocation, "config.toml")!.mode).toBe(0o600)
        for (const file of invocation.files) expect(file.content).not.toContain("tok\n")
      })
    ))

  it.effect("the user's settings are kept and merged; later turns merge into the saved original", () =>
    withRoot((root) =>
      Effect.gen(function*() {
        const user = [
          "model = \"o4-user\"",
          "developer_instructions = \"Be terse.\"",
          "[features]",
          "web_search = true",
          "[mcp_servers.docs]",
          "command = \"docs-mcp\"",
          "[mcp_servers.tether]",
          "url = \"http://evil.example/mcp\"",
          ""
        ].join("\n")
        Fs.writeFileSync(Path.join(root, "profile", "config.toml"), user)
        const driver = Codex.driver({ binary: "codex", settings: { features: { plugins: false } } })
        const mcp: ReadonlyArray<Driver.McpServer> = [
          {
            _tag: "http",
            key: "search",
            url: "http://127.0.0.1:7/mcp",
            headers: { "X-A": "1" },
            bearerTokenEnv: "S_TOKEN"
          },
          { _tag: "stdio", key: "fs", command: "fs-mcp", args: ["--root", "."], env: { A: "b" } }
        ]
        const first = yield* driver.prepare(request(root, { instructions: "You triage issues.", mcp }))
        expect(fileOf(first, Codex.userConfigFile)?.content).toBe(user)
        const config = configOf(first)
        expect(config["model"]).toBe("o4-user")
        expect(config["developer_instructions"]).toBe("Be terse.\n\nYou triage issues.")
        expect(config["features"]).toEqual({ web_search: true, plugins: false })
        expect(config["mcp_servers"]).toEqual({
          docs: { command: "docs-mcp" },
          search: {
            url: "http://127.0.0.1:7/mcp",
            http_headers: { "X-A": "1" },
            bearer_token_env_var: "S_TOKEN",
            default_tools_approval_mode: "approve"
          },
          fs: { command: "fs-mcp", args: ["--root", "."], env: { A: "b" }, default_tools_approval_mode: "approve" },
          tether: expect.objectContaining({ url: "http://127.0.0.1:4555/mcp", required: true })
        })
        materialize(root, first)
        const second = yield* driver.prepare(
          request(root, {
            instructions: "You triage issues.",
            hosted: { ...request(root).hosted, url: "http://127.0.0.1:4777/mcp", tools: ["lookup_issue"] }
          })
        )
        expect(fileOf(second, Codex.userConfigFile)).toBeUndefined()
        const again = configOf(second)
        expect(again["developer_instructions"]).toBe("Be terse.\n\nYou triage issues.")
        expect(again["mcp_servers"]).toEqual({
          docs: { command: "docs-mcp" },
          tether: expect.objectContaining({ url: "http://127.0.0.1:4777/mcp" })
        })
        expect(second.args).toContain(`mcp_servers.tether.enabled_tools=["lookup_issue"]`)
      })
    ))

  it.effect.prop(
    "every key of the user's settings survives the merge, except the reserved hosted-tools server",
    [FastCheck.dictionary(
      FastCheck.stringMatching(/^[a-z][a-z0-9_]{0,8}$/),
      FastCheck.oneof(
        FastCheck.string({ maxLength: 12 }),
        FastCheck.integer(),
        FastCheck.boolean(),
        FastCheck.dictionary(FastCheck.stringMatching(/^[a-z][a-z0-9_]{0,8}$/), FastCheck.string({ maxLength: 8 }), {
          maxKeys: 3
        })
      ),
      { maxKeys: 6 }
    )],
    ([user]) =>
      withRoot((root) =>
        Effect.gen(function*() {
          delete user["mcp_servers"]
          delete user["developer_instructions"]
          Fs.writeFileSync(Path.join(root, "profile", "config.toml"), Toml.stringify(user))
          const invocation = yield* Codex.driver({ binary: "codex" }).prepare(request(root))
          const { mcp_servers, ...rest } = configOf(invocation)
          expect(rest).toEqual(user)
          expect(Object.keys(mcp_servers as object)).toEqual(["tether"])
        })
      ),
    { fastCheck: { numRuns: 30 } }
  )

  it.effect("invalid user TOML, an SSE source or a source on the reserved key fail with ProtocolError", () =>
    withRoot((root) =>
      Effect.gen(function*() {
        const driver = Codex.driver({ binary: "codex" })
        const sse = yield* Effect.either(driver.prepare(request(root, {
          mcp: [{ _tag: "sse", key: "old", url: "http://127.0.0.1:7/sse", headers: {}, bearerTokenEnv: undefined }]
        })))
        expect(Either.isLeft(sse) && sse.left.detail).toContain("SSE")
        const reserved = yield* Effect.either(driver.prepare(request(root, {
          mcp: [{ _tag: "stdio", key: "tether", command: "x", args: [], env: {} }]
        })))
        expect(Either.isLeft(reserved) && reserved.left.detail).toContain("reserved")
        const noSiblings = yield* Effect.either(driver.prepare(request(root, { siblings: {} })))
        expect(Either.isLeft(noSiblings) && noSiblings.left.detail).toContain("siblings")
        Fs.writeFileSync(Path.join(root, "profile", "config.toml"), "model = = broken")
        const broken = yield* Effect.either(driver.prepare(request(root)))
        expect(Either.isLeft(broken) && broken.left._tag).toBe("ProtocolError")
        expect(Either.isLeft(broken) && broken.left.detail).toContain("not valid TOML")
      })
    ))

  it.effect("binary: an explicit path wins; else the platform package's native binary is found first", () =>
    withRoot((root) =>
      Effect.gen(function*() {
        const found = (yield* Codex.driver().prepare(request(root))).command
        const triple = process.arch === "x64" ? "x86_64-unknown-linux-musl" : "aarch64-unknown-linux-musl"
        const native = Path.resolve(
          import.meta.dirname,
          `../../../node_modules/@openai/codex-${process.platform}-${process.arch}/vendor/${triple}/bin/codex`
        )
        expect(Fs.existsSync(native)).toBe(true)
        expect(found).toBe(native)
        expect((yield* Codex.driver({ binary: "/custom/codex" }).prepare(request(root))).command).toBe("/custom/codex")
      })
    ))

  it("layout: CODEX_HOME, native ~/.codex, home and tmp siblings, the saved user config and the output schema file reserved", () => {
    expect(Codex.layout.selectorEnv).toEqual(["CODEX_HOME"])
    expect(Codex.layout.nativeDefault({ HOME: "/home/u" })).toBe("/home/u/.codex")
    expect(Codex.layout.siblings).toEqual(["home", "tmp"])
    expect(Codex.layout.classes.settings).toContain("config.toml")
    expect(Codex.layout.classes.auth).toEqual(["auth.json"])
    expect(Codex.layout.reserved).toEqual([Codex.userConfigFile, ".tether-output-schema-*.json"])
    const driver = Codex.driver()
    expect(driver.name).toBe("codex")
    expect(driver.capabilities.sandbox).toEqual(["readOnly", "workspaceWrite", "unrestricted"])
  })
})
