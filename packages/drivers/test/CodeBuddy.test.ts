import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { CodeBuddy } from "@tether/drivers"
import * as ProfileLayout from "@tether/profile/ProfileLayout"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"

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
  hostEnv: {
    PATH: "/usr/bin:/bin",
    LANG: "C.UTF-8",
    HOME: "/root",
    TMPDIR: "/tmp",
    AWS_SECRET_ACCESS_KEY: "host-secret",
    CODEBUDDY_API_KEY: "host-codebuddy-key"
  },
  ...overrides
})

const prepare = (config: CodeBuddy.Config, req: Driver.InvocationRequest) =>
  CodeBuddy.driver(config).prepare(req).pipe(Effect.provide(NodeContext.layer))

const argAfter = (args: ReadonlyArray<string>, flag: string) => {
  const i = args.indexOf(flag)
  return i < 0 ? undefined : args[i + 1]
}

describe("CodeBuddy.driver prepare", () => {
  it.effect("runs codebuddy -p in stream-json mode with the prompt as text on stdin only", () =>
    Effect.gen(function*() {
      const inv = yield* prepare({ binary: "/opt/codebuddy" }, request())
      expect(inv.command).toBe("/opt/codebuddy")
      expect(inv.args.slice(0, 5)).toEqual([
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages"
      ])
      // Plain text input: with `--input-format stream-json` a permission prompt waits forever.
      expect(inv.args).not.toContain("--input-format")
      expect(inv.cwd).toBe("/srv/repo")
      expect(inv.stdin).toBe(request().prompt)
      expect(inv.args.some((a) => a.includes("ISSUE-42"))).toBe(false)
      const noPartial = yield* prepare({ binary: "/opt/codebuddy", partialMessages: false }, request())
      expect(noPartial.args).not.toContain("--include-partial-messages")
    }))

  it.effect("declares the hosted tools in an MCP file in the clone that references the token variable", () =>
    Effect.gen(function*() {
      const inv = yield* prepare({ binary: "codebuddy" }, request())
      expect(argAfter(inv.args, "--mcp-config")).toBe(`/r/profile/${CodeBuddy.mcpConfigFile}`)
      expect(inv.args).toContain("--strict-mcp-config")
      expect(inv.files.map((f) => f.path)).toEqual([CodeBuddy.mcpConfigFile])
      const file = inv.files[0]!
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
      const narrowed = yield* prepare({}, request({ hosted: { ...request().hosted, tools: ["close_issue"] } }))
      expect(argAfter(narrowed.args, "--allowedTools")).toBe("mcp__tether__close_issue")
      const loose = yield* prepare({ binary: "codebuddy", profileMcpServers: true }, request())
      expect(loose.args).not.toContain("--strict-mcp-config")
      // Only the clone's settings, unless the host trusts the workspace's own.
      expect(inv.args.slice(inv.args.indexOf("--setting-sources"), inv.args.indexOf("--setting-sources") + 2))
        .toEqual(["--setting-sources", "user"])
      const trusted = yield* prepare({ binary: "codebuddy", projectSettings: true }, request())
      expect(trusted.args).not.toContain("--setting-sources")
      const none = yield* prepare({ binary: "codebuddy" }, request({ hosted: { ...request().hosted, tools: [] } }))
      expect(none.args).not.toContain("--allowedTools")
      // Permission rules for built-in tools follow the MCP ones.
      const builtins = yield* prepare({ allowedTools: ["Read", "Bash(git status:*)"] }, request())
      expect(argAfter(builtins.args, "--allowedTools")).toBe(
        "mcp__tether__lookup_issue,mcp__tether__close_issue,Read,Bash(git status:*)"
      )
    }))

  it.effect("external MCP sources are declared beside the hosted tools and allowed by server", () =>
    Effect.gen(function*() {
      const inv = yield* prepare(
        { binary: "codebuddy" },
        request({
          mcp: [
            {
              _tag: "stdio",
              key: "files",
              command: "/bin/fs-mcp",
              args: ["--root", "/srv"],
              env: { K: "${FS_SECRET}" }
            },
            {
              _tag: "sse",
              key: "issues",
              url: "http://127.0.0.1:9/sse",
              headers: { "X-Team": "t" },
              bearerTokenEnv: "ISSUES_TOKEN"
            }
          ],
          hostEnv: { ...request().hostEnv, ISSUES_TOKEN: "issues-secret", FS_SECRET: "fs-secret" }
        })
      )
      const servers = JSON.parse(inv.files[0]!.content).mcpServers
      expect(servers["files"]).toEqual({
        type: "stdio",
        command: "/bin/fs-mcp",
        args: ["--root", "/srv"],
        env: { K: "${FS_SECRET}" }
      })
      expect(servers["issues"]).toEqual({
        type: "sse",
        url: "http://127.0.0.1:9/sse",
        headers: { "X-Team": "t", Authorization: "Bearer ${ISSUES_TOKEN}" }
      })
      expect(argAfter(inv.args, "--allowedTools")).toBe(
        "mcp__tether__lookup_issue,mcp__tether__close_issue,mcp__files,mcp__issues"
      )
      // The variables the sources reference reach the CLI (it expands them); nothing else of the host's.
      expect(inv.env["ISSUES_TOKEN"]).toBe("issues-secret")
      expect(inv.env["FS_SECRET"]).toBe("fs-secret")
    }))

  it.effect("the environment is built from nothing: siblings for HOME and TMPDIR, the clone, fixed switches", () =>
    Effect.gen(function*() {
      const inv = yield* prepare({ binary: "codebuddy", passEnv: ["HOME", "TMPDIR"] }, request())
      expect(inv.env).toEqual({
        PATH: "/usr/bin:/bin",
        LANG: "C.UTF-8",
        HOME: "/r/home",
        TMPDIR: "/r/tmp",
        CODEBUDDY_CONFIG_DIR: "/r/profile",
        CODEBUDDY_DEFER_TOOL_LOADING: "false",
        CODEBUDDY_SKIP_BUILTIN_MARKETPLACE: "1",
        DISABLE_AUTOUPDATER: "1",
        DISABLE_TELEMETRY: "1"
      })
      // Nothing of the host's secrets, and never the token variable (core sets it).
      expect(JSON.stringify(inv.env)).not.toContain("host-")
      expect(Object.keys(inv.env)).not.toContain(request().hosted.tokenVariable)
      const fixed = yield* prepare({
        env: { HOME: "/elsewhere", CODEBUDDY_DEFER_TOOL_LOADING: "true", [request().hosted.tokenVariable]: "x" }
      }, request())
      expect(fixed.env["HOME"]).toBe("/r/home")
      expect(fixed.env["CODEBUDDY_DEFER_TOOL_LOADING"]).toBe("false")
      expect(Object.keys(fixed.env)).not.toContain(request().hosted.tokenVariable)
    }))

  it.effect("the endpoint is one option: base URL and Redacted key become the CLI's variables, model --model", () =>
    Effect.gen(function*() {
      const endpoint = { baseUrl: "http://127.0.0.1:8080/v1", apiKey: Redacted.make("sk-endpoint") }
      const config: CodeBuddy.Config = {
        model: "my-model",
        endpoint,
        env: { CODEBUDDY_BASE_URL: "http://ignored", CODEBUDDY_API_KEY: Redacted.make("ignored"), OTHER: "1" }
      }
      const inv = yield* prepare(config, request())
      expect(inv.env["CODEBUDDY_BASE_URL"]).toBe("http://127.0.0.1:8080/v1")
      expect(inv.env["CODEBUDDY_API_KEY"]).toBe("sk-endpoint")
      expect(inv.env["OTHER"]).toBe("1")
      expect(argAfter(inv.args, "--model")).toBe("my-model")
      const turnModel = yield* prepare(config, request({ model: "turn-model" }))
      expect(argAfter(turnModel.args, "--model")).toBe("turn-model")
      // Without `endpoint`, env may carry the same variables.
      const viaEnv = yield* prepare({
        env: { CODEBUDDY_BASE_URL: "http://e/v1", CODEBUDDY_API_KEY: Redacted.make("k") }
      }, request())
      expect([viaEnv.env["CODEBUDDY_BASE_URL"], viaEnv.env["CODEBUDDY_API_KEY"]]).toEqual(["http://e/v1", "k"])
      expect(viaEnv.args).not.toContain("--model")
      // The key never reaches anything but the child's environment.
      const driver = CodeBuddy.driver(config)
      expect(JSON.stringify(driver.sessionConfig)).not.toContain("sk-endpoint")
      expect(JSON.stringify(driver.sessionConfig)).not.toContain("8080")
      expect(String(endpoint.apiKey)).not.toContain("sk-endpoint")
    }))

  it.effect("mcpTimeout bounds the CLI's MCP connection wait (MCP_TIMEOUT, in milliseconds)", () =>
    Effect.gen(function*() {
      expect((yield* prepare({}, request())).env["MCP_TIMEOUT"]).toBeUndefined()
      expect((yield* prepare({ mcpTimeout: "5 seconds" }, request())).env["MCP_TIMEOUT"]).toBe("5000")
      expect((yield* prepare({ mcpTimeout: 0 }, request())).env["MCP_TIMEOUT"]).toBe("1")
      // Owned by the driver when set: env cannot contradict it.
      expect((yield* prepare({ mcpTimeout: 1500, env: { MCP_TIMEOUT: "9" } }, request())).env["MCP_TIMEOUT"]).toBe(
        "1500"
      )
    }))

  it.effect("instructions are appended to the system prompt; too large or with NUL they fail before spawn", () =>
    Effect.gen(function*() {
      const inv = yield* prepare({}, request())
      expect(argAfter(inv.args, "--append-system-prompt")).toBe("You triage issues.")
      const none = yield* prepare({}, request({ instructions: "" }))
      expect(none.args).not.toContain("--append-system-prompt")
      const fits = yield* prepare({}, request({ instructions: "é".repeat(CodeBuddy.maxInstructionsBytes / 2) }))
      expect(argAfter(fits.args, "--append-system-prompt")?.length).toBe(CodeBuddy.maxInstructionsBytes / 2)
      const tooLarge = yield* Effect.either(
        prepare({}, request({ instructions: "é".repeat(CodeBuddy.maxInstructionsBytes / 2 + 1) }))
      )
      expect(Either.isLeft(tooLarge) && tooLarge.left.detail).toContain(`${CodeBuddy.maxInstructionsBytes} bytes`)
      const nul = yield* Effect.either(prepare({}, request({ instructions: "a\u0000b" })))
      expect(Either.isLeft(nul) && nul.left.detail).toContain("NUL")
    }))

  it.effect("skills are projected natively into the clone's skills/ folder, SKILL.md with its front matter", () =>
    Effect.gen(function*() {
      const skill: Driver.SkillFiles = {
        name: "triage",
        description: "Label new issues by area.",
        dir: "/r/profile/.tether-skills/triage",
        files: [{ path: "SKILL.md", content: "# Triage\nLabel by area." }, {
          path: "notes/areas.md",
          content: "ui, api"
        }]
      }
      const inv = yield* prepare({}, request({ skills: [skill] }))
      expect(inv.files.slice(1)).toEqual([
        {
          path: "skills/triage/SKILL.md",
          content: "---\nname: \"triage\"\ndescription: \"Label new issues by area.\"\n---\n\n# Triage\nLabel by area.",
          mode: 0o600
        },
        { path: "skills/triage/notes/areas.md", content: "ui, api", mode: 0o600 }
      ])
    }))

  it.effect("sessions: --session-id for a new one, --resume, --fork-session with the new id", () =>
    Effect.gen(function*() {
      const tail = (session: Driver.SessionRequest) =>
        prepare({}, request({ session })).pipe(Effect.map((inv) => inv.args.slice(-5).join(" ")))
      expect(yield* tail({ _tag: "New", id: "a" })).toMatch(/--session-id a$/)
      expect(yield* tail({ _tag: "Resume", id: "a" })).toMatch(/--resume a$/)
      expect(yield* tail({ _tag: "Fork", from: "a", id: "b" })).toBe("--resume a --fork-session --session-id b")
    }))

  it.effect("built-in tools: --tools only when configured; [] disables them all", () =>
    Effect.gen(function*() {
      expect((yield* prepare({}, request())).args).not.toContain("--tools")
      expect(argAfter((yield* prepare({ builtinTools: ["Read", "Grep"] }, request())).args, "--tools")).toBe(
        "Read,Grep"
      )
      expect(argAfter((yield* prepare({ builtinTools: [] }, request())).args, "--tools")).toBe("")
    }))

  it.effect("a sandbox level or missing siblings fail before spawn", () =>
    Effect.gen(function*() {
      for (const level of ["readOnly", "workspaceWrite", "unrestricted"] as const) {
        const error = yield* Effect.flip(prepare({}, request({ sandbox: level })))
        expect(error.detail).toContain(level)
      }
      const error = yield* Effect.flip(prepare({}, request({ siblings: { home: "/r/home" } })))
      expect(error.detail).toContain("siblings")
    }))

  it.effect("without a binary the CLI bundled in the installed @tencent-ai/agent-sdk runs with this Node", () =>
    Effect.gen(function*() {
      const inv = yield* prepare({}, request())
      expect(inv.command).toBe(process.execPath)
      expect(inv.args[0]).toMatch(/node_modules\/@tencent-ai\/agent-sdk\/cli\/bin\/codebuddy$/)
      expect(inv.args[1]).toBe("-p")
      expect(CodeBuddy.driver().install).toContain("npm install @tencent-ai/agent-sdk")
    }))
})

describe("CodeBuddy layout, capabilities and session config", () => {
  it("the layout: CODEBUDDY_CONFIG_DIR, classes, sessions under projects/, siblings home and tmp", () => {
    const layout = CodeBuddy.layout
    expect(layout.selectorEnv).toEqual(["CODEBUDDY_CONFIG_DIR"])
    expect(layout.nativeDefault({ HOME: "/home/u" })).toBe("/home/u/.codebuddy")
    expect(layout.siblings).toEqual(["home", "tmp"])
    expect(ProfileLayout.classify(layout, "settings.json")).toBe("settings")
    expect(ProfileLayout.classify(layout, "CODEBUDDY.md")).toBe("settings")
    expect(ProfileLayout.classify(layout, "agents/reviewer.md")).toBe("settings")
    expect(ProfileLayout.classify(layout, ".mcp.json")).toBe("mcp")
    expect(ProfileLayout.classify(layout, "skills/triage/SKILL.md")).toBe("skills")
    // Caches, logs, the CLI's per-process registry: never brought into a clone.
    for (const entry of ["local_storage/entry_1.info", "logs/2026-12-01/x.log", "sessions/123.json", "plugins"]) {
      expect(ProfileLayout.classify(layout, entry)).toBeUndefined()
      expect(ProfileLayout.isSession(layout, entry)).toBe(false)
    }
    expect(ProfileLayout.isSession(layout, "projects/srv-repo/11111111-1111-4111-8111-111111111111.jsonl")).toBe(true)
    expect(ProfileLayout.isReserved(layout, CodeBuddy.mcpConfigFile)).toBe(true)
    // A session's own entries, and the entries its sessions share (the slug's auto memory).
    const id = "11111111-1111-4111-8111-111111111111"
    for (const entry of [`projects/srv-repo/${id}.jsonl`, `projects/srv-repo/${id}.meta.json`, `projects/x/${id}/a`]) {
      expect(ProfileLayout.sessionOwner(layout, entry)).toBe(id)
    }
    expect(ProfileLayout.sessionOwner(layout, "projects/srv-repo/memory/MEMORY.md")).toBeUndefined()
    // What one process writes for itself alone leaves the clone once the agent is idle; settings,
    // sessions and the key-value store stay.
    const logs = layout.logs?.["profile"] ?? []
    for (
      const entry of [
        "sessions/15298.json",
        "shell-snapshots/snapshot-sh-1796393325622-wq1y64.sh",
        "traces/10137/trace_6f40a9d931474c079aee28d3831d6fcd.json.tmp.10137",
        "logs/2026-12-04/workspace__0b1167ea6e6a9c624fd6eaa9be8793ed.log"
      ]
    ) expect(ProfileLayout.matches(logs, entry)).toBe(true)
    for (
      const entry of [
        "settings.json",
        `projects/srv-repo/${id}.jsonl`,
        "local_storage/entry_1.info",
        "plugins/known_marketplaces.json",
        "user-state.json"
      ]
    ) expect(ProfileLayout.matches(logs, entry)).toBe(false)
  })

  it("capabilities say what the CLI honours", () => {
    expect(CodeBuddy.capabilities).toEqual({
      resume: true,
      fork: true,
      mcpTransports: ["stdio", "http", "sse"],
      instructions: true,
      skillsProjection: true,
      sandbox: [],
      toolAllowList: true,
      streamingInput: false,
      structuredOutput: "instruction",
      persistentProcess: false
    })
    expect(CodeBuddy.driver().name).toBe("codebuddy")
  })

  it("sessionConfig holds what changes a conversation, never env, endpoint or binary", () => {
    expect(CodeBuddy.driver().sessionConfig).toEqual({ profileMcpServers: false })
    expect(
      CodeBuddy.driver({
        binary: "/opt/x",
        model: "m",
        builtinTools: ["Read"],
        profileMcpServers: true,
        env: { A: "secret" },
        endpoint: { baseUrl: "http://127.0.0.1:1/v1", apiKey: Redacted.make("k") }
      }).sessionConfig
    ).toEqual({ model: "m", builtinTools: ["Read"], profileMcpServers: true })
  })
})
