import { NodeContext } from "@effect/platform-node"
import * as FileSystem from "@effect/platform/FileSystem"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Gemini } from "@tether/drivers"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as Path from "node:path"
import * as Toml from "smol-toml"

const tokenVariable = "TETHER_TOKEN_A1B2C3D4E5F60708"

const request = (profileDir: string, overrides: Partial<Driver.InvocationRequest> = {}): Driver.InvocationRequest => ({
  runId: "run-1",
  prompt: "--help me\nCheck whether ISSUE-42 is still open. $(rm -rf /) `x`",
  model: undefined,
  profileDir,
  siblings: { home: "/r/home", tmp: "/r/tmp" },
  workspace: "/srv/repo",
  hosted: { key: "tether", url: "http://127.0.0.1:4567/mcp", tokenVariable, tools: ["close_issue", "lookup_issue"] },
  instructions: "You triage issues.",
  skills: [],
  mcp: [],
  session: { _tag: "New", id: "11111111-1111-4111-8111-111111111111" },
  sandbox: undefined,
  hostEnv: {
    PATH: "/usr/bin:/bin",
    LANG: "C.UTF-8",
    HOME: "/root",
    AWS_SECRET_ACCESS_KEY: "host-secret",
    GEMINI_API_KEY: "host-gemini-key",
    GEMINI_CLI_TRUST_WORKSPACE: "true"
  },
  ...overrides
})

/** A clone directory with an optional user `settings.json` already copied into it. */
const clone = (settings?: unknown) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = yield* fs.makeTempDirectoryScoped({ prefix: "tether-gemini-prepare-" })
    yield* fs.makeDirectory(Path.join(dir, ".gemini"))
    if (settings !== undefined) {
      yield* fs.writeFileString(
        Path.join(dir, Gemini.settingsFile),
        typeof settings === "string" ? settings : JSON.stringify(settings)
      )
    }
    return dir
  })

const prepare = (config: Gemini.Config, req: Driver.InvocationRequest) => Gemini.driver(config).prepare(req)

const settingsOf = (inv: Driver.Invocation) =>
  JSON.parse(inv.files.find((f) => f.path === Gemini.settingsFile)!.content) as {
    readonly [key: string]: any
  }

/** The run's policy file: the allow-list of its hosted tool set. */
const policyFile = (inv: Driver.Invocation) =>
  inv.files.find((f) => /^\.gemini\/tether-tools-[0-9a-f]{16}\.toml$/.test(f.path))!

const policyOf = (inv: Driver.Invocation) => Toml.parse(policyFile(inv).content)

const denyHosted = { mcpName: "tether", toolName: "*", decision: "deny", priority: 210 }
const allowHosted = (tools: ReadonlyArray<string>) => ({
  mcpName: "tether",
  toolName: tools,
  decision: "allow",
  priority: 220
})

const hosted = {
  httpUrl: "http://127.0.0.1:4567/mcp",
  headers: { Authorization: `Bearer \${${tokenVariable}}` },
  trust: true
}

const run = <A, E>(effect: Effect.Effect<A, E, any>) =>
  effect.pipe(Effect.scoped, Effect.provide(NodeContext.layer)) as Effect.Effect<A, E>

describe("Gemini.driver prepare", () => {
  it.effect("runs headless stream-json with the prompt on stdin only and the session flag", () =>
    run(Effect.gen(function*() {
      const dir = yield* clone()
      const inv = yield* prepare({ binary: "/opt/gemini", model: "gemini-2.5-flash" }, request(dir))
      expect(inv.command).toBe("/opt/gemini")
      expect(inv.args).toEqual([
        "-p",
        "",
        "--output-format",
        "stream-json",
        "--raw-output",
        "--accept-raw-output-risk",
        "-m",
        "gemini-2.5-flash",
        "--session-id",
        "11111111-1111-4111-8111-111111111111",
        "--skip-trust",
        "--policy",
        Path.join(dir, policyFile(inv).path)
      ])
      expect(inv.stdin).toBe(request(dir).prompt)
      expect(inv.cwd).toBe("/srv/repo")
      const resumed = yield* prepare(
        { binary: "/opt/gemini", trustWorkspace: false, approvalMode: "yolo" },
        request(dir, { session: { _tag: "Resume", id: "22222222-1111-4111-8111-111111111111" }, model: "turn-model" })
      )
      expect(resumed.args).toEqual([
        "-p",
        "",
        "--output-format",
        "stream-json",
        "--raw-output",
        "--accept-raw-output-risk",
        "-m",
        "turn-model",
        "--resume",
        "22222222-1111-4111-8111-111111111111",
        "--approval-mode",
        "yolo",
        "--policy",
        Path.join(dir, policyFile(resumed).path)
      ])
    })))

  it.effect("without a configured binary runs the installed @google/gemini-cli bundle with this Node", () =>
    run(Effect.gen(function*() {
      const dir = yield* clone()
      const inv = yield* prepare({}, request(dir))
      expect(inv.command).toBe(process.execPath)
      expect(inv.args[0]).toMatch(/@google\/gemini-cli\/bundle\/gemini\.js$/)
      expect(inv.args.slice(1, 3)).toEqual(["-p", ""])
    })))

  it.effect("builds the environment from nothing: allow-list, configuration, the clone and its siblings", () =>
    run(Effect.gen(function*() {
      const dir = yield* clone()
      const inv = yield* prepare({
        binary: "gemini",
        passEnv: ["GEMINI_API_KEY"],
        env: {
          GOOGLE_GEMINI_BASE_URL: "http://127.0.0.1:9",
          GEMINI_API_KEY: Redacted.make("configured-key"),
          HOME: "/elsewhere",
          [tokenVariable]: "forged"
        }
      }, request(dir))
      expect(Object.fromEntries(Object.entries(inv.env).filter(([, value]) => value !== ""))).toEqual({
        PATH: "/usr/bin:/bin",
        LANG: "C.UTF-8",
        GEMINI_API_KEY: "configured-key",
        GOOGLE_GEMINI_BASE_URL: "http://127.0.0.1:9",
        HOME: "/r/home",
        TMPDIR: "/r/tmp",
        GEMINI_CLI_HOME: dir,
        GEMINI_CLI_NO_RELAUNCH: "true"
      })
      // What a `.env` around the workspace could otherwise choose is set, empty (docs/drivers.md).
      for (const name of ["GEMINI_MODEL", "GOOGLE_API_KEY", "HTTPS_PROXY", "GEMINI_SYSTEM_MD"]) {
        expect(inv.env[name], name).toBe("")
      }
      expect(settingsOf(inv)["advanced"]).toMatchObject({ ignoreLocalEnv: true })
    })))

  it.effect("merges its keys over the user's copied settings; trust only for the hosted server", () =>
    run(Effect.gen(function*() {
      const dir = yield* clone({
        ui: { theme: "Dracula" },
        security: { auth: { selectedType: "oauth-personal" }, folderTrust: { enabled: true } },
        telemetry: { enabled: true, target: "gcp" },
        context: { fileName: "AGENTS.md" },
        mcpServers: { mine: { command: "/bin/my-mcp", trust: false } }
      })
      const inv = yield* prepare({ binary: "gemini" }, request(dir))
      const settings = settingsOf(inv)
      expect(settings["ui"]).toEqual({ theme: "Dracula" })
      expect(settings["security"]).toEqual({ auth: { selectedType: "oauth-personal" }, folderTrust: { enabled: true } })
      expect(settings["telemetry"]).toEqual({ enabled: false, target: "gcp" })
      expect(settings["privacy"]).toEqual({ usageStatisticsEnabled: false })
      expect(settings["general"]).toEqual({
        enableAutoUpdate: false,
        enableAutoUpdateNotification: false,
        maxAttempts: Gemini.defaultMaxAttempts,
        sessionRetention: { enabled: false }
      })
      expect(settings["context"]).toEqual({ fileName: ["AGENTS.md", "tether-instructions.md"] })
      expect(settings["mcpServers"]).toEqual({ mine: { command: "/bin/my-mcp", trust: false }, tether: hosted })
      // The turn's allow-list is the run's policy file: every hosted tool denied but the turn's.
      expect(policyOf(inv)).toEqual({ rule: [denyHosted, allowHosted(["close_issue", "lookup_issue"])] })
      expect(policyFile(inv).mode).toBe(0o600)
      const forced = settingsOf(yield* prepare({ binary: "gemini", authType: "gemini-api-key" }, request(dir)))
      expect(forced["security"]["auth"]).toEqual({ selectedType: "gemini-api-key" })
    })))

  it.effect("without user settings: api-key auth and the default context file plus the instructions file", () =>
    run(Effect.gen(function*() {
      const dir = yield* clone()
      const inv = yield* prepare({ binary: "gemini" }, request(dir))
      const settings = settingsOf(inv)
      expect(settings["security"]).toEqual({ auth: { selectedType: "gemini-api-key" } })
      expect(settings["context"]).toEqual({ fileName: ["GEMINI.md", "tether-instructions.md"] })
      expect(inv.files.map((f) => [f.path, f.mode])).toEqual([
        [Gemini.settingsFile, 0o600],
        [policyFile(inv).path, 0o600],
        [Gemini.instructionsFile, 0o600]
      ])
      expect(inv.files.find((f) => f.path === Gemini.instructionsFile)?.content).toBe("You triage issues.")
      const bare = yield* prepare({ binary: "gemini" }, request(dir, { instructions: "" }))
      expect(bare.files.map((f) => f.path)).toEqual([Gemini.settingsFile, policyFile(bare).path])
      expect(settingsOf(bare)["context"]).toBeUndefined()
    })))

  it.effect("never writes the token: files and argv reference the variable only", () =>
    run(Effect.gen(function*() {
      const dir = yield* clone()
      const inv = yield* prepare({ binary: "gemini" }, request(dir))
      const everything = JSON.stringify([inv.args, inv.files, inv.env])
      expect(everything).toContain(`\${${tokenVariable}}`)
      expect(Object.keys(inv.env)).not.toContain(tokenVariable)
      expect(everything).not.toContain("host-secret")
      expect(everything).not.toContain("host-gemini-key")
    })))

  it.effect("declares external sources as trusted (headless Gemini drops untrusted tools) with their bearer variables", () =>
    run(Effect.gen(function*() {
      const dir = yield* clone()
      const inv = yield* prepare(
        { binary: "gemini" },
        request(dir, {
          mcp: [
            { _tag: "stdio", key: "files", command: "/bin/fs-mcp", args: ["--root", "/srv"], env: { A: "1" } },
            { _tag: "http", key: "issues", url: "http://127.0.0.1:9/mcp", headers: {}, bearerTokenEnv: "ISSUES_TOKEN" },
            {
              _tag: "sse",
              key: "legacy",
              url: "http://127.0.0.1:8/sse",
              headers: { "X-A": "b" },
              bearerTokenEnv: undefined
            }
          ],
          hostEnv: { PATH: "/bin", ISSUES_TOKEN: "issues-secret" }
        })
      )
      const servers = settingsOf(inv)["mcpServers"]
      expect(servers["files"]).toEqual({
        command: "/bin/fs-mcp",
        args: ["--root", "/srv"],
        env: { A: "1" },
        trust: true
      })
      expect(servers["issues"]).toEqual({
        httpUrl: "http://127.0.0.1:9/mcp",
        headers: { Authorization: "Bearer ${ISSUES_TOKEN}" },
        trust: true
      })
      expect(servers["legacy"]).toEqual({ url: "http://127.0.0.1:8/sse", headers: { "X-A": "b" }, trust: true })
      expect(inv.env["ISSUES_TOKEN"]).toBe("issues-secret")
    })))

  it.effect("with no tool allowed every hosted tool is denied", () =>
    run(Effect.gen(function*() {
      const dir = yield* clone()
      const inv = yield* prepare({ binary: "gemini" }, request(dir, { hosted: { ...request(dir).hosted, tools: [] } }))
      expect(settingsOf(inv)["mcpServers"]).toEqual({ tether: hosted })
      expect(policyOf(inv)).toEqual({ rule: [denyHosted] })
    })))

  it.effect("turns share settings.json unchanged; each tool set has its own policy file; a user's hosted key is refused", () =>
    run(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* clone()
      const first = yield* prepare({ binary: "gemini" }, request(dir))
      const written = first.files.find((f) => f.path === Gemini.settingsFile)!
      yield* fs.writeFileString(Path.join(dir, written.path), written.content)
      const second = yield* prepare(
        { binary: "gemini" },
        request(dir, { hosted: { ...request(dir).hosted, tools: ["lookup_issue"] } })
      )
      // Nothing of a turn is in the file every run of the agent reads.
      expect(second.files.find((f) => f.path === Gemini.settingsFile)).toEqual(written)
      expect(policyOf(second)).toEqual({ rule: [denyHosted, allowHosted(["lookup_issue"])] })
      expect(policyFile(second).path).not.toBe(policyFile(first).path)
      expect(second.args.slice(-2)).toEqual(["--policy", Path.join(dir, policyFile(second).path)])
      // The same tool set again: the same file, the same content.
      const third = yield* prepare({ binary: "gemini" }, request(dir))
      expect(policyFile(third)).toEqual(policyFile(first))

      const stale = yield* clone({
        mcpServers: {
          tether: {
            httpUrl: "http://127.0.0.1:9999/mcp",
            headers: { Authorization: "Bearer ${OLD_VAR}" },
            trust: true,
            includeTools: ["x"]
          }
        }
      })
      const replaced = yield* prepare({ binary: "gemini" }, request(stale))
      expect(settingsOf(replaced)["mcpServers"]).toEqual({ tether: hosted })

      const taken = yield* clone({ mcpServers: { tether: { httpUrl: "http://example.invalid/mcp" } } })
      const refused = yield* Effect.either(prepare({ binary: "gemini" }, request(taken)))
      expect(Either.isLeft(refused) && refused.left.reason).toBe("HostedToolsUnavailable")
      const source = yield* clone({ mcpServers: { issues: { httpUrl: "http://other/mcp" } } })
      const clash = yield* Effect.either(prepare(
        { binary: "gemini" },
        request(source, {
          mcp: [{ _tag: "http", key: "issues", url: "http://127.0.0.1:9/mcp", headers: {}, bearerTokenEnv: undefined }]
        })
      ))
      expect(Either.isLeft(clash) && clash.left.detail).toContain(`"issues"`)
    })))

  it.effect("--policy replaces the user's policy paths, so they are passed again", () =>
    run(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* clone()
      const own = (inv: Driver.Invocation) =>
        inv.args.slice(inv.args.indexOf("--policy")).filter((a) => a !== "--policy")
      const none = yield* prepare({ binary: "gemini" }, request(dir))
      expect(own(none)).toEqual([Path.join(dir, policyFile(none).path)])
      yield* fs.makeDirectory(Path.join(dir, ".gemini", "policies"))
      const withDir = yield* prepare({ binary: "gemini" }, request(dir))
      expect(own(withDir)).toEqual([Path.join(dir, policyFile(withDir).path), Path.join(dir, ".gemini", "policies")])
      const configured = yield* clone({ policyPaths: ["/etc/team-policies", "~/more.toml"] })
      const named = yield* prepare({ binary: "gemini" }, request(configured))
      expect(own(named)).toEqual([Path.join(configured, policyFile(named).path), "/etc/team-policies", "~/more.toml"])
    })))

  it.effect("a turn's denied built-ins: a policy file of their own at priority 999, first --policy and first --admin-policy", () =>
    run(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* clone({ adminPolicyPaths: ["/etc/team-admin"], policyPaths: ["/etc/team-policies"] })
      yield* fs.makeDirectory(Path.join(dir, ".gemini", "policies"))
      const inv = yield* prepare(
        { binary: "gemini" },
        request(dir, { builtinTools: { deny: ["run_shell_command", "read_file"] } })
      )
      const policies = inv.files.filter((f) => /^\.gemini\/tether-tools-[0-9a-f]{16}\.toml$/.test(f.path))
      const denial = policies.find((f) => f.content.includes("run_shell_command"))!
      const hostedFile = policies.find((f) => f !== denial)!
      expect(Toml.parse(denial.content)).toEqual({
        rule: [{ toolName: ["run_shell_command", "read_file"], decision: "deny", priority: 999 }]
      })
      expect(denial.mode).toBe(0o600)
      expect(Toml.parse(hostedFile.content)).toEqual({
        rule: [denyHosted, allowHosted(["close_issue", "lookup_issue"])]
      })
      const flags = (flag: string) => inv.args.flatMap((a, i) => inv.args[i - 1] === flag ? [a] : [])
      expect(flags("--policy")).toEqual([
        Path.join(dir, denial.path),
        Path.join(dir, hostedFile.path),
        "/etc/team-policies"
      ])
      expect(flags("--admin-policy")).toEqual([Path.join(dir, denial.path), "/etc/team-admin"])
      // Without denied built-ins: one policy file, no admin policy (the user's own stay the CLI's to read).
      const plain = yield* prepare({ binary: "gemini" }, request(dir, { builtinTools: { deny: [] } }))
      expect(plain.args).not.toContain("--admin-policy")
      expect(plain.files.filter((f) => f.path.startsWith(".gemini/tether-tools-"))).toHaveLength(1)
    })))

  it.effect("a denied built-in named like a hosted tool fails before spawn: Gemini would remove the hosted one too", () =>
    run(Effect.gen(function*() {
      const dir = yield* clone()
      // Gemini CLI 0.61 checks an MCP tool's name without `mcp_<server>_` against the denied names.
      const prepared = yield* Effect.either(prepare(
        { binary: "gemini" },
        request(dir, { builtinTools: { deny: ["run_shell_command", "lookup_issue"] } })
      ))
      expect(prepared._tag).toBe("Left")
      const refused = Either.isLeft(prepared) ? prepared.left : undefined
      expect({ tag: refused?._tag, reason: refused?.reason }).toEqual({
        tag: "ProtocolError",
        reason: "HostedToolsUnavailable"
      })
      expect(refused?.detail).toContain("\"lookup_issue\"")
      expect(refused?.detail).not.toContain("close_issue")
      // The CLI also excludes a denied built-in's legacy name: a hosted `search_file_content` goes
      // with a denied `grep_search`.
      const legacy = yield* Effect.either(prepare(
        { binary: "gemini" },
        request(dir, {
          hosted: { ...request(dir).hosted, tools: ["search_file_content"] },
          builtinTools: { deny: ["grep_search"] }
        })
      ))
      expect(Either.isLeft(legacy) && legacy.left.detail).toContain("\"search_file_content\"")
    })))

  it.effect("a hosted tool name Gemini shortens (from 53 characters) is allowed under Gemini's name", () =>
    run(Effect.gen(function*() {
      const dir = yield* clone()
      const at52 = "a".repeat(26) + "b".repeat(26)
      const at53 = "c".repeat(27) + "d".repeat(26)
      const inv = yield* prepare(
        { binary: "gemini" },
        request(dir, { hosted: { ...request(dir).hosted, tools: [at52, at53] } })
      )
      // mcp_tether_ + 53 characters is 64: the first 30 and the last 30 around "...".
      const shortened = `mcp_tether_${at53}`.slice(0, 30) + "..." + `mcp_tether_${at53}`.slice(-30)
      expect(policyOf(inv)).toEqual({
        rule: [denyHosted, allowHosted([at52, shortened.slice("mcp_tether_".length)])]
      })
    })))

  it.effect("reads the user's settings as the CLI does: JSON with comments and trailing commas", () =>
    run(Effect.gen(function*() {
      const dir = yield* clone([
        "// My Gemini settings",
        "{",
        "  /* the theme I like */",
        "  \"ui\": { \"theme\": \"Dracula\", }, // trailing comma",
        "  \"general\": { \"vimMode\": true },",
        "}"
      ].join("\n"))
      const settings = settingsOf(yield* prepare({ binary: "gemini" }, request(dir)))
      expect(settings["ui"]).toEqual({ theme: "Dracula" })
      expect(settings["general"]).toEqual({
        vimMode: true,
        enableAutoUpdate: false,
        enableAutoUpdateNotification: false,
        maxAttempts: Gemini.defaultMaxAttempts,
        sessionRetention: { enabled: false }
      })
      const own = yield* clone("{ \"general\": { \"maxAttempts\": 5 } // mine\n}")
      expect(settingsOf(yield* prepare({ binary: "gemini" }, request(own)))["general"]["maxAttempts"]).toBe(5)
      const bounded = settingsOf(yield* prepare({ binary: "gemini", maxAttempts: 1 }, request(own)))
      expect(bounded["general"]["maxAttempts"]).toBe(1)
      const broken = yield* Effect.either(prepare({ binary: "gemini" }, request(yield* clone("{ \"ui\": /* open"))))
      expect(Either.isLeft(broken) && broken.left.detail).toContain("not valid JSON with comments")
    })))

  it.effect("refuses fork, sandbox levels, invalid settings and a clone without siblings", () =>
    run(Effect.gen(function*() {
      const dir = yield* clone()
      const fork = yield* Effect.either(
        prepare({ binary: "gemini" }, request(dir, { session: { _tag: "Fork", from: "a", id: "b" } }))
      )
      expect(Either.isLeft(fork)).toBe(true)
      const sandbox = yield* Effect.either(prepare({ binary: "gemini" }, request(dir, { sandbox: "readOnly" })))
      expect(Either.isLeft(sandbox)).toBe(true)
      const siblings = yield* Effect.either(prepare({ binary: "gemini" }, request(dir, { siblings: {} })))
      expect(Either.isLeft(siblings)).toBe(true)
      for (const bad of ["{not json", "[1]"]) {
        const broken = yield* clone(bad)
        const result = yield* Effect.either(prepare({ binary: "gemini" }, request(broken)))
        expect(Either.isLeft(result) && result.left.reason).toBe("ProviderError")
      }
      expect(Gemini.capabilities).toMatchObject({ fork: false, resume: true, instructions: true, sandbox: [] })
    })))
})

describe("Gemini.driver classifyExit and layout", () => {
  it("an unknown resumed session is ResumeRejected; other exits keep core's default", () => {
    const classify = Gemini.driver().classifyExit!
    // stderr of the real CLI (0.61.0, exit 42) for `--resume <unknown uuid>`.
    const stderr = "Error resuming session: No previous sessions found for this project.\n"
    const resume = { _tag: "Resume", id: "99999999-2222-4333-8444-555555555555" } as const
    expect(classify({ exitCode: 42, stderr, terminal: undefined, session: resume })?.reason).toBe("ResumeRejected")
    expect(classify({ exitCode: 42, stderr, terminal: undefined, session: { _tag: "New", id: "x" } })).toBeUndefined()
    expect(classify({ exitCode: 144, stderr: "other", terminal: undefined, session: resume })).toBeUndefined()
  })

  it("the layout selects GEMINI_CLI_HOME, reserves its own files and wants home and tmp", () => {
    expect(Gemini.layout.selectorEnv).toEqual(["GEMINI_CLI_HOME"])
    expect(Gemini.layout.nativeDefault({ HOME: "/home/u" })).toBe("/home/u")
    expect(Gemini.layout.nativeDefault({ HOME: "/home/u", GEMINI_CLI_HOME: "/g" })).toBe("/g")
    expect(Gemini.layout.reserved).toEqual([Gemini.instructionsFile, ".gemini/tether-tools-*.toml"])
    expect(Gemini.layout.classes.settings).toContain(Gemini.settingsFile)
    expect(Gemini.layout.siblings).toEqual(["home", "tmp"])
  })
})
