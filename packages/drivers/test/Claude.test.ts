import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Claude } from "@tether/drivers"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as Fs from "node:fs"

const request = (overrides: Partial<Driver.InvocationRequest> = {}): Driver.InvocationRequest => ({
  runId: "run-1",
  prompt: "Check whether ISSUE-42 is still open. \"quoted\"\nsecond line",
  model: undefined,
  profileDir: "/r/profile",
  siblings: { home: "/r/home", tmp: "/r/tmp" },
  workspace: "/srv/repo",
  hosted: {
    key: "tether",
    url: "http://127.0.0.1:4567/mcp",
    tokenVariable: "TETHER_TOKEN_A1B2C3D4E5F60708",
    tools: ["lookup_issue", "close_issue"]
  },
  instructions: "You triage issues.",
  skills: [],
  mcp: [],
  session: { _tag: "New", id: "11111111-1111-4111-8111-111111111111" },
  sandbox: undefined,
  hostEnv: { PATH: "/usr/bin:/bin", LANG: "C.UTF-8", HOME: "/root", AWS_SECRET_ACCESS_KEY: "host-secret", EXTRA: "x" },
  ...overrides
})

const prepare = (config: Claude.Config, req: Driver.InvocationRequest) =>
  Claude.driver(config).prepare(req).pipe(Effect.provide(NodeContext.layer))

const argAfter = (args: ReadonlyArray<string>, flag: string) => {
  const i = args.indexOf(flag)
  return i < 0 ? undefined : args[i + 1]
}

describe("Claude.driver prepare", () => {
  it.effect("runs claude -p in stream-json mode with the prompt on stdin only", () =>
    Effect.gen(function*() {
      const inv = yield* prepare({ binary: "/opt/claude" }, request())
      expect(inv.command).toBe("/opt/claude")
      expect(inv.args.slice(0, 7)).toEqual([
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages"
      ])
      expect(inv.cwd).toBe("/srv/repo")
      expect(inv.stdin).toBe(Claude.promptLine(request().prompt))
      expect(JSON.parse(inv.stdin!)).toEqual({ type: "user", message: { role: "user", content: request().prompt } })
      expect(inv.stdin!.endsWith("\n")).toBe(true)
      expect(inv.stdin!.slice(0, -1)).not.toContain("\n")
      expect(inv.args.some((a) => a.includes("ISSUE-42"))).toBe(false)
      const noPartial = yield* prepare({ binary: "/opt/claude", partialMessages: false }, request())
      expect(noPartial.args).not.toContain("--include-partial-messages")
    }))

  it.effect("declares the hosted tools in an MCP file in the clone that references the token variable", () =>
    Effect.gen(function*() {
      const inv = yield* prepare({ binary: "claude" }, request())
      expect(argAfter(inv.args, "--mcp-config")).toBe(`/r/profile/${Claude.mcpConfigFile}`)
      expect(inv.args).toContain("--strict-mcp-config")
      const file = inv.files.find((f) => f.path === Claude.mcpConfigFile)!
      expect(JSON.parse(file.content)).toEqual({
        mcpServers: {
          tether: {
            type: "http",
            url: "http://127.0.0.1:4567/mcp",
            headers: { Authorization: "Bearer ${TETHER_TOKEN_A1B2C3D4E5F60708}" }
          }
        }
      })
      expect(file.mode).toBe(0o600)
      expect(argAfter(inv.args, "--allowedTools")).toBe("mcp__tether__lookup_issue,mcp__tether__close_issue")
      const loose = yield* prepare({ binary: "claude", profileMcpServers: true }, request())
      expect(loose.args).not.toContain("--strict-mcp-config")
      // Only the clone's settings, unless the host trusts the workspace's own.
      expect(argAfter(inv.args, "--setting-sources")).toBe("user")
      const trusted = yield* prepare({ binary: "claude", projectSettings: true }, request())
      expect(trusted.args).not.toContain("--setting-sources")
      const none = yield* prepare({ binary: "claude" }, request({ hosted: { ...request().hosted, tools: [] } }))
      expect(none.args).not.toContain("--allowedTools")
    }))

  it.effect("declares external MCP sources beside the hosted tools", () =>
    Effect.gen(function*() {
      const inv = yield* prepare(
        { binary: "claude" },
        request({
          mcp: [
            {
              _tag: "stdio",
              key: "files",
              command: "/bin/fs-mcp",
              args: ["--root", "/srv"],
              env: { A: "1", FS_KEY: "${FS_SECRET}" }
            },
            {
              _tag: "http",
              key: "issues",
              url: "http://127.0.0.1:9/mcp",
              headers: { "X-Team": "t" },
              bearerTokenEnv: "ISSUES_TOKEN"
            }
          ],
          hostEnv: { ...request().hostEnv, ISSUES_TOKEN: "issues-secret", FS_SECRET: "fs-secret" }
        })
      )
      const config = JSON.parse(inv.files.find((f) => f.path === Claude.mcpConfigFile)!.content) as {
        mcpServers: Record<string, unknown>
      }
      expect(config.mcpServers["files"]).toEqual({
        type: "stdio",
        command: "/bin/fs-mcp",
        args: ["--root", "/srv"],
        env: { A: "1", FS_KEY: "${FS_SECRET}" }
      })
      expect(config.mcpServers["issues"]).toEqual({
        type: "http",
        url: "http://127.0.0.1:9/mcp",
        headers: { "X-Team": "t", Authorization: "Bearer ${ISSUES_TOKEN}" }
      })
      expect(inv.env["ISSUES_TOKEN"]).toBe("issues-secret")
      expect(inv.env["FS_SECRET"]).toBe("fs-secret")
      expect(inv.env["AWS_SECRET_ACCESS_KEY"]).toBeUndefined()
      expect(argAfter(inv.args, "--allowedTools")).toBe(
        "mcp__tether__lookup_issue,mcp__tether__close_issue,mcp__files,mcp__issues"
      )
      expect(inv.files.some((f) => f.content.includes("issues-secret") || f.content.includes("fs-secret"))).toBe(false)
    }))

  it.effect("writes the instructions into the clone and appends them with --append-system-prompt-file", () =>
    Effect.gen(function*() {
      const inv = yield* prepare({ binary: "claude" }, request())
      expect(argAfter(inv.args, "--append-system-prompt-file")).toBe(`/r/profile/${Claude.instructionsFile}`)
      expect(inv.files.find((f) => f.path === Claude.instructionsFile)?.content).toBe("You triage issues.")
      const none = yield* prepare({ binary: "claude" }, request({ instructions: "" }))
      expect(none.args).not.toContain("--append-system-prompt-file")
      expect(none.files.map((f) => f.path)).toEqual([Claude.mcpConfigFile])
      for (const f of inv.files) expect(Claude.layout.reserved).toContain(f.path)
    }))

  it.effect("maps sessions to --session-id, --resume and --fork-session", () =>
    Effect.gen(function*() {
      const a = "11111111-1111-4111-8111-111111111111"
      const b = "22222222-2222-4222-8222-222222222222"
      const tail = (session: Driver.SessionRequest) =>
        prepare({ binary: "claude" }, request({ session })).pipe(Effect.map((inv) => inv.args.slice(-5)))
      expect((yield* tail({ _tag: "New", id: a })).slice(-2)).toEqual(["--session-id", a])
      expect((yield* tail({ _tag: "Resume", id: a })).slice(-2)).toEqual(["--resume", a])
      expect(yield* tail({ _tag: "Fork", from: a, id: b })).toEqual([
        "--resume",
        a,
        "--fork-session",
        "--session-id",
        b
      ])
    }))

  it.effect("the turn's model wins over the configured one; no model leaves the CLI default", () =>
    Effect.gen(function*() {
      expect(argAfter((yield* prepare({ binary: "c", model: "m-config" }, request())).args, "--model")).toBe("m-config")
      expect(
        argAfter((yield* prepare({ binary: "c", model: "m-config" }, request({ model: "m-turn" }))).args, "--model")
      )
        .toBe("m-turn")
      expect((yield* prepare({ binary: "c" }, request())).args).not.toContain("--model")
      expect(argAfter((yield* prepare({ binary: "c", builtinTools: [] }, request())).args, "--tools")).toBe("")
    }))

  it.effect("builds the environment from nothing plus the allow-list; the driver's variables win", () =>
    Effect.gen(function*() {
      const inv = yield* prepare({
        binary: "claude",
        passEnv: ["EXTRA", "UNSET"],
        env: {
          ANTHROPIC_BASE_URL: "http://127.0.0.1:7800",
          ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
          CLAUDE_CONFIG_DIR: "/elsewhere",
          HOME: "/elsewhere",
          DISABLE_TELEMETRY: "0",
          TETHER_TOKEN_A1B2C3D4E5F60708: "forged"
        }
      }, request())
      expect(inv.env).toEqual({
        PATH: "/usr/bin:/bin",
        LANG: "C.UTF-8",
        EXTRA: "x",
        ANTHROPIC_BASE_URL: "http://127.0.0.1:7800",
        ANTHROPIC_API_KEY: "sk-ant-fake",
        MCP_CONNECTION_NONBLOCKING: "0",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        DISABLE_AUTOUPDATER: "1",
        DISABLE_TELEMETRY: "1",
        DISABLE_ERROR_REPORTING: "1",
        HOME: "/r/home",
        CLAUDE_CONFIG_DIR: "/r/profile",
        CLAUDE_CODE_TMPDIR: "/r/tmp",
        CLAUDE_CODE_MAX_RETRIES: String(Claude.defaultMaxRetries)
      })
    }))

  it.effect("bounds the CLI's retries: maxRetries, else CLAUDE_CODE_MAX_RETRIES from env, else the default", () =>
    Effect.gen(function*() {
      const retries = (config: Claude.Config) =>
        prepare({ binary: "c", ...config }, request()).pipe(Effect.map((inv) => inv.env["CLAUDE_CODE_MAX_RETRIES"]))
      expect(Claude.defaultMaxRetries).toBe(3)
      expect(yield* retries({})).toBe("3")
      expect(yield* retries({ maxRetries: 0 })).toBe("0")
      expect(yield* retries({ env: { CLAUDE_CODE_MAX_RETRIES: "5" } })).toBe("5")
      expect(yield* retries({ maxRetries: 1, env: { CLAUDE_CODE_MAX_RETRIES: "5" } })).toBe("1")
    }))

  it.effect("always waits for the MCP servers before the first request; mcpTimeout bounds the wait", () =>
    Effect.gen(function*() {
      const env = (config: Claude.Config) =>
        prepare({ binary: "c", ...config }, request()).pipe(Effect.map((inv) => inv.env))
      const plain = yield* env({ env: { MCP_CONNECTION_NONBLOCKING: "1" } })
      expect(plain["MCP_CONNECTION_NONBLOCKING"]).toBe("0")
      expect(plain["MCP_CONNECT_TIMEOUT_MS"]).toBeUndefined()
      expect((yield* env({ mcpTimeout: "20 seconds" }))["MCP_CONNECT_TIMEOUT_MS"]).toBe("20000")
      expect((yield* env({ mcpTimeout: "0.4 millis" }))["MCP_CONNECT_TIMEOUT_MS"]).toBe("1")
      expect((yield* env({ mcpTimeout: Duration.infinity }))["MCP_CONNECT_TIMEOUT_MS"]).toBe("2147483647")
    }))

  it.effect("allowedTools adds permission rules for built-in tools after the hosted tools", () =>
    Effect.gen(function*() {
      const inv = yield* prepare({ binary: "c", allowedTools: ["Bash", "Read"] }, request())
      expect(argAfter(inv.args, "--allowedTools")?.split(",").slice(-2)).toEqual(["Bash", "Read"])
      expect(argAfter(inv.args, "--allowedTools")?.startsWith("mcp__tether__")).toBe(true)
    }))

  it.effect("refuses every sandbox level and a clone without its siblings", () =>
    Effect.gen(function*() {
      expect(Claude.capabilities.sandbox).toEqual([])
      for (const sandbox of ["readOnly", "workspaceWrite", "unrestricted"] as const) {
        const result = yield* Effect.either(prepare({ binary: "claude" }, request({ sandbox })))
        expect(Either.isLeft(result) && result.left.detail).toContain(sandbox)
      }
      const result = yield* Effect.either(prepare({ binary: "claude" }, request({ siblings: {} })))
      expect(Either.isLeft(result)).toBe(true)
    }))

  it.effect("without a configured binary it runs the native binary of the installed @anthropic-ai/claude-code", () =>
    Effect.gen(function*() {
      const inv = yield* prepare({}, request())
      expect(inv.command.endsWith(`/node_modules/@anthropic-ai/claude-code-${process.platform}-${process.arch}/claude`))
        .toBe(true)
      expect(Fs.existsSync(inv.command)).toBe(true)
    }))

  it("declares its layout and capabilities", () => {
    const driver = Claude.driver()
    expect(driver.name).toBe("claude")
    expect(driver.layout).toBe(Claude.layout)
    expect(Claude.layout.selectorEnv).toEqual(["CLAUDE_CONFIG_DIR"])
    expect(Claude.layout.siblings).toEqual(["home", "tmp"])
    expect(Claude.layout.nativeDefault({ HOME: "/home/u" })).toBe("/home/u/.claude")
    expect(Claude.layout.classes.auth).toEqual([".credentials.json"])
    // Per-process files, removed once the agent is idle: the MCP logs, the running-process registry.
    expect(Claude.layout.logs).toEqual({ home: [".cache/claude-cli-nodejs/**"], profile: ["sessions/*.json"] })
    expect(driver.capabilities).toMatchObject({ resume: true, fork: true, instructions: true, toolAllowList: true })
    expect(driver.sessionConfig).toEqual({ profileMcpServers: false })
    const configured = Claude.driver({
      model: "m",
      builtinTools: ["Read"],
      binary: "/x/claude",
      env: { ANTHROPIC_API_KEY: Redacted.make("sk-secret") }
    })
    expect(configured.sessionConfig).toEqual({ model: "m", builtinTools: ["Read"], profileMcpServers: false })
    expect(JSON.stringify(configured.sessionConfig)).not.toContain("sk-secret")
  })
})
