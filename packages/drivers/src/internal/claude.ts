/** @internal */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Driver from "@tether/core/Driver"
import type { ProfileLayout } from "@tether/profile/ProfileLayout"
import * as Effect from "effect/Effect"
import type { Config } from "../Claude.js"
import * as Binary from "./binary.js"
import * as Live from "./claudeLive.js"
import * as parser from "./claudeParse.js"
import * as ClaudeSchema from "./claudeSchema.js"
import * as Env from "./env.js"
import * as Skills from "./skills.js"

/** @internal */
export const mcpConfigFile = ".tether-mcp.json"

/** @internal */
export const instructionsFile = ".tether-instructions.md"

/** @internal */
export const capabilities: Driver.Capabilities = {
  resume: true,
  fork: true,
  mcpTransports: ["stdio", "http", "sse"],
  instructions: true,
  skillsProjection: true,
  sandbox: [],
  toolAllowList: true,
  streamingInput: true,
  structuredOutput: "native",
  // Its stream-json input takes a JSON Schema per process (`--json-schema`, or `initialize`'s
  // `jsonSchema`), never per turn: a live thread's attempt runs one-shot.
  liveStructuredOutput: "oneShot",
  persistentProcess: true,
  builtinToolPolicy: ["allow", "deny"]
}

/** @internal */
export const layout: ProfileLayout = {
  provider: "claude",
  selectorEnv: ["CLAUDE_CONFIG_DIR"],
  nativeDefault: (env) => `${env["HOME"] ?? ""}/.claude`,
  classes: {
    settings: ["settings.json", "settings.local.json", "CLAUDE.md", "agents/**", "commands/**", "output-styles/**"],
    mcp: [".claude.json"],
    skills: ["skills/**"],
    auth: [".credentials.json"],
    sessions: ["projects/**"]
  },
  // `projects/<cwd slug>/<session>.jsonl` (and `projects/<cwd slug>/<session>/...`).
  sessionOf: (path) =>
    /^projects\/[^/]+\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:\.jsonl$|\/)/.exec(path)?.[1],
  reserved: [mcpConfigFile, instructionsFile],
  siblings: ["home", "tmp"],
  // Claude Code's log of each MCP server, one file per process (named by the time it started):
  // its cache directory (`$HOME/.cache/claude-cli-nodejs`) holds nothing but such logs. And each
  // process's entry in the registry of running ones (`sessions/<pid>.json`), which it removes when
  // it exits on its own and a killed one leaves.
  logs: { home: [".cache/claude-cli-nodejs/**"], profile: ["sessions/*.json"] }
}

/** Host variables always passed through when set. */

/** Variables the driver owns: configuration cannot override them. */
const fixedEnv = {
  // In print mode the CLI connects its --mcp-config servers in the background by default: a
  // turn's first model request can go out before the hosted tools are listed (and a
  // --permission-prompt-tool is then "not found"). "0" makes it wait for them, up to
  // MCP_CONNECT_TIMEOUT_MS, before the first request.
  MCP_CONNECTION_NONBLOCKING: "0",
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  DISABLE_AUTOUPDATER: "1",
  DISABLE_TELEMETRY: "1",
  DISABLE_ERROR_REPORTING: "1"
} as const

/** @internal */
export const promptLine = (prompt: string): string =>
  JSON.stringify({ type: "user", message: { role: "user", content: prompt } }) + "\n"

const protocolError = (detail: string) => new Driver.ProtocolError({ reason: "ProviderError", detail })

const mcpEntry = (server: Driver.McpServer): { readonly [key: string]: unknown } => {
  if (server._tag === "stdio") {
    return { type: "stdio", command: server.command, args: server.args, env: server.env }
  }
  const headers: { [name: string]: string } = { ...server.headers }
  if (server.bearerTokenEnv !== undefined) headers["Authorization"] = `Bearer \${${server.bearerTokenEnv}}`
  return { type: server._tag, url: server.url, headers }
}

/** @internal */
export const renderMcpConfig = (request: Driver.InvocationRequest): string => {
  const mcpServers: { [key: string]: unknown } = {}
  for (const server of request.mcp) mcpServers[server.key] = mcpEntry(server)
  mcpServers[request.hosted.key] = {
    type: "http",
    url: request.hosted.url,
    headers: { Authorization: `Bearer \${${request.hosted.tokenVariable}}` }
  }
  if (request.approvals !== undefined) {
    mcpServers[request.approvals.key] = {
      type: "http",
      url: request.approvals.url,
      headers: { Authorization: `Bearer \${${request.approvals.tokenVariable}}` }
    }
  }
  return JSON.stringify({ mcpServers }, null, 2) + "\n"
}

/**
 * `mcp__<server>__<tool>` for the hosted tools (as the CLI names them), `mcp__<server>` for each
 * external source.
 */
/** The hosted tools' `--allowedTools` rules (none when two clash: `prepare` refuses those). @internal */
export const hostedRules = (request: Driver.InvocationRequest): ReadonlyArray<string> => {
  const hosted = parser.hostedRules(request.hosted.key, request.hosted.tools)
  return "rules" in hosted ? hosted.rules : []
}

const allowedTools = (config: Config, request: Driver.InvocationRequest): ReadonlyArray<string> => [
  ...hostedRules(request),
  ...request.mcp.map((server) => `mcp__${server.key}`),
  ...(config.allowedTools ?? [])
]

/**
 * The CLI: the platform package's native binary (what the npm launcher `bin/claude.exe` is a copy
 * of once its postinstall ran; found even when install scripts were skipped), then the launcher.
 *
 * @internal
 */
export const binarySpec: Binary.Spec = {
  packageName: "@anthropic-ai/claude-code",
  pathName: "claude",
  candidates: (installed) => [
    ...Binary.platformPackages("@anthropic-ai/claude-code").flatMap((name) => {
      const dir = installed.resolvePackage(name)
      return dir === undefined
        ? []
        : [{ file: `${dir}/${process.platform === "win32" ? "claude.exe" : "claude"}`, script: false }]
    }),
    ...(installed.bin["claude"] === undefined
      ? []
      : [{ file: `${installed.dir}/${installed.bin["claude"]}`, script: false }])
  ]
}

/** @internal */
export const defaultMaxRetries = 3

const maxRetriesOf = (config: Config): string => {
  if (config.maxRetries !== undefined) return String(config.maxRetries)
  const given = config.env?.["CLAUDE_CODE_MAX_RETRIES"]
  return typeof given === "string" ? given : String(defaultMaxRetries)
}

// An infinite wait is the largest timer value: the CLI reads anything it cannot use (not a
// positive number) as its own 5 s.
const mcpTimeoutEnv = (config: Config): { readonly [name: string]: string } =>
  config.mcpTimeout === undefined
    ? {}
    : { MCP_CONNECT_TIMEOUT_MS: Env.timeoutMillis(config.mcpTimeout) ?? "2147483647" }

const buildEnv = (config: Config, request: Driver.InvocationRequest, home: string, tmp: string) =>
  Env.buildEnv(config, request, {
    ...mcpTimeoutEnv(config),
    ...fixedEnv,
    HOME: home,
    CLAUDE_CONFIG_DIR: request.profileDir,
    CLAUDE_CODE_TMPDIR: tmp,
    CLAUDE_CODE_MAX_RETRIES: maxRetriesOf(config)
  })

/** The session flags of Claude Code (and of CodeBuddy Code, its fork). @internal */
export const sessionArgs = (session: Driver.SessionRequest): ReadonlyArray<string> => {
  switch (session._tag) {
    case "New":
      return ["--session-id", session.id]
    case "Resume":
      return ["--resume", session.id]
    case "Fork":
      return ["--resume", session.from, "--fork-session", "--session-id", session.id]
  }
}

/** Claude Code's credentials and endpoint variables, in a copied profile's `settings.json`. */
const credentialEnv = ["ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_CUSTOM_HEADERS"]

/** Hook events whose command may answer a tool's permission (a `PreToolUse` "allow"). */
const deciding = ["PreToolUse", "PermissionRequest"]

/** Permission modes that run built-in tools without asking. */
const unaskedModes = new Set(["acceptEdits", "bypassPermissions", "dontAsk"])

/** What a copied settings file may not overrule (see `copiedSettings`). @internal */
export interface SettingsRules {
  /** Variables the host's configuration sets (the driver's `env`, its endpoint). */
  readonly configured: ReadonlyArray<string>
  /** The CLI's credential and endpoint variables. */
  readonly credentials: ReadonlyArray<string>
  /** The host gave an endpoint or a key: the user's own credentials must not reach it. */
  readonly endpointGiven: boolean
  /** The agent has approvals: the host decides each built-in call. */
  readonly approvals: boolean
}

/**
 * A copied profile's settings without what would overrule the driver: Claude Code (and CodeBuddy
 * Code, its fork) applies a settings file's `env` over its process environment, so an `env` entry
 * naming a variable the driver or the host sets goes (the endpoint and key given, the driver's
 * switches); with an endpoint or key given, so do the user's own credentials (the `env`
 * credentials and `apiKeyHelper`), which the CLI would send to that endpoint. With approvals, the
 * user's `permissions.allow` rules, a mode that runs tools unasked and the hooks that may answer a
 * permission (`PreToolUse`, `PermissionRequest`) go too: the host decides each built-in call (the
 * driver's `allowedTools` is how a host skips asking). `undefined` when nothing is to change.
 */
const withoutOverrides = (
  settings: { readonly [key: string]: unknown },
  owned: ReadonlySet<string>,
  rules: SettingsRules
): { readonly [key: string]: unknown } | undefined => {
  const out: { [key: string]: unknown } = { ...settings }
  let changed = false
  const env = settings["env"]
  if (isRecord(env)) {
    const kept = Object.fromEntries(
      Object.entries(env).filter(([name]) =>
        !owned.has(name) && !(rules.endpointGiven && rules.credentials.includes(name))
      )
    )
    if (Object.keys(kept).length !== Object.keys(env).length) {
      out["env"] = kept
      changed = true
    }
  }
  if (rules.endpointGiven && "apiKeyHelper" in out) {
    delete out["apiKeyHelper"]
    changed = true
  }
  const hooks = settings["hooks"]
  if (rules.approvals && isRecord(hooks) && deciding.some((event) => event in hooks)) {
    out["hooks"] = Object.fromEntries(Object.entries(hooks).filter(([event]) => !deciding.includes(event)))
    changed = true
  }
  const permissions = settings["permissions"]
  if (rules.approvals && isRecord(permissions)) {
    const { allow, defaultMode, ...rest } = permissions
    const unasked = typeof defaultMode === "string" && unaskedModes.has(defaultMode)
    if (allow !== undefined || unasked) {
      out["permissions"] = unasked || defaultMode === undefined ? rest : { ...rest, defaultMode }
      changed = true
    }
  }
  return changed ? out : undefined
}

/**
 * The clone's copied `settings.json` and `settings.local.json` rewritten by `withoutOverrides`,
 * those that change (never the source's: they are the clone's own copies). `env` is the process
 * environment the driver built: a variable it sets to another value than the host's is the
 * driver's.
 *
 * @internal
 */
export const copiedSettings = (
  request: Driver.InvocationRequest,
  env: { readonly [name: string]: string },
  rules: SettingsRules
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const owned = new Set([
      ...Object.keys(env).filter((name) => request.hostEnv[name] !== env[name]),
      ...rules.configured
    ])
    const files: Array<Driver.MaterializedFile> = []
    for (const name of ["settings.json", "settings.local.json"]) {
      const text = yield* fs.readFileString(path.join(request.profileDir, name)).pipe(
        Effect.orElseSucceed(() => undefined)
      )
      if (text === undefined) continue
      let parsed: unknown
      try {
        parsed = JSON.parse(text)
      } catch {
        // The CLI reports a settings file it cannot read itself; nothing of it applies.
        continue
      }
      if (!isRecord(parsed)) continue
      const rewritten = withoutOverrides(parsed, owned, rules)
      if (rewritten !== undefined) {
        files.push({ path: name, content: JSON.stringify(rewritten, null, 2) + "\n", mode: 0o600 })
      }
    }
    return files
  })

/** @internal */
export const prepare = (config: Config, binary: Binary.Binary) => (request: Driver.InvocationRequest) =>
  Effect.gen(function*() {
    if (request.sandbox !== undefined) {
      return yield* Effect.fail(
        protocolError(`Claude Code cannot honour sandbox level "${request.sandbox}": no faithful mapping exists`)
      )
    }
    const home = request.siblings["home"]
    const tmp = request.siblings["tmp"]
    if (home === undefined || tmp === undefined) {
      return yield* Effect.fail(protocolError("the execution clone has no `home` and `tmp` siblings"))
    }
    const clash = parser.clashOf("Claude Code", request.hosted.key, request.hosted.tools)
    if (clash !== undefined) return yield* Effect.fail(protocolError(clash))
    const path = yield* Path.Path
    const files: Array<Driver.MaterializedFile> = [{
      path: mcpConfigFile,
      content: renderMcpConfig(request),
      mode: 0o600
    }]
    const args: Array<string> = [
      "-p",
      "--input-format",
      "stream-json",
      "--output-format",
      "stream-json",
      "--verbose"
    ]
    if (config.partialMessages !== false) args.push("--include-partial-messages")
    args.push("--mcp-config", path.join(request.profileDir, mcpConfigFile))
    if (config.profileMcpServers !== true) args.push("--strict-mcp-config")
    // Only the clone's settings (rewritten by the driver): a workspace's `.claude/settings*.json`
    // would apply its `env` (the endpoint, the key), `apiKeyHelper`, hooks and permission mode
    // over the driver and the host's approvals.
    if (config.projectSettings !== true) args.push("--setting-sources", "user")
    const allowed = allowedTools(config, request)
    if (allowed.length > 0) args.push("--allowedTools", allowed.join(","))
    // The turn's built-in policy narrows the configured set: `--tools` lists what is offered,
    // `--disallowedTools` removes (and refuses) the denied ones.
    const policy = request.builtinTools
    const offered = policy?.allow === undefined
      ? config.builtinTools
      : config.builtinTools === undefined
      ? policy.allow
      : config.builtinTools.filter((tool) => policy.allow!.includes(tool))
    if (offered !== undefined) args.push("--tools", offered.join(","))
    if (policy?.deny !== undefined && policy.deny.length > 0) args.push("--disallowedTools", policy.deny.join(","))
    if (request.approvals !== undefined) {
      // Every built-in call not allowed outright is asked of the approver tool on the gateway.
      args.push("--permission-prompt-tool", `mcp__${request.approvals.key}__${request.approvals.tool}`)
    }
    const model = request.model ?? config.model
    if (model !== undefined) args.push("--model", model)
    if (request.instructions.length > 0) {
      files.push({ path: instructionsFile, content: request.instructions, mode: 0o600 })
      args.push("--append-system-prompt-file", path.join(request.profileDir, instructionsFile))
    }
    files.push(...Skills.project(request.skills, "skills"))
    // Claude Code offers the model a `StructuredOutput` tool with this input schema, validates
    // its calls and reports the value in `result.structured_output`. Not a secret: argv is fine.
    if (request.outputSchema !== undefined) {
      args.push("--json-schema", JSON.stringify(ClaudeSchema.forClaude(request.outputSchema)))
    }
    args.push(...sessionArgs(request.session))
    const env = buildEnv(config, request, home, tmp)
    files.push(
      ...yield* copiedSettings(request, env, {
        configured: Object.keys(config.env ?? {}),
        credentials: credentialEnv,
        endpointGiven: credentialEnv.some((name) => config.env?.[name] !== undefined),
        approvals: request.approvals !== undefined || request.liveApprovals === true
      })
    )
    return {
      command: binary.command,
      args: [...binary.prefix, ...args],
      commandSource: binary.source,
      env,
      cwd: request.workspace,
      stdin: promptLine(request.prompt),
      files
    } satisfies Driver.Invocation
  })

const missingSession = /No conversation found with session ID/

/** @internal */
export const classifyExit = (info: Driver.ExitInfo): Driver.ProtocolError | undefined => {
  if (info.session._tag === "New") return undefined
  const said = `${info.stderr}\n${info.terminal?.error ?? ""}`
  return missingSession.test(said)
    ? new Driver.ProtocolError({
      reason: "ResumeRejected",
      detail: `no Claude Code session ${sessionOf(info.session)}`
    })
    : undefined
}

const sessionOf = (session: Driver.SessionRequest): string => session._tag === "Fork" ? session.from : session.id

/** @internal */
export const sessionConfig = (config: Config): { readonly [key: string]: unknown } => {
  // Only what changes the conversation a session continues; never `env` (it may hold secrets)
  // nor the binary path (an install detail).
  const out: { [key: string]: unknown } = {}
  if (config.model !== undefined) out["model"] = config.model
  if (config.builtinTools !== undefined) out["builtinTools"] = [...config.builtinTools]
  out["profileMcpServers"] = config.profileMcpServers === true
  // Only when given: the agents made before this option keep their threads' fingerprint.
  if (config.projectSettings === true) out["projectSettings"] = true
  return out
}

const fileTools: { readonly [name: string]: string } = {
  Write: "file_path",
  Edit: "file_path",
  MultiEdit: "file_path",
  NotebookEdit: "notebook_path"
}

const isRecord = (value: unknown): value is { readonly [key: string]: unknown } =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * The approver tool Claude Code calls through `--permission-prompt-tool mcp__<server>__<tool>`:
 * input `{tool_name, input, tool_use_id}`, answer a text block `{"behavior":"allow","updatedInput":…}`
 * or `{"behavior":"deny","message":…}` (LIVE.md, verified with 2.1.197). `allowForSession` also
 * answers `updatedPermissions`: the CLI's own `permission_suggestions` for the call (what its
 * "always allow" would add: a Bash command-prefix rule, the `acceptEdits` mode for file writes),
 * each kept to the running session (`destination: "session"`), so nothing is written to a settings
 * file. A live `can_use_tool` request carries suggestions; the one-shot approver tool's input does
 * not, so there it allows this call (the process lives for one turn anyway).
 *
 * @internal
 */
export const approverTool: Driver.ApproverTool = {
  name: "approve",
  description: "Answers Claude Code's permission prompt for a built-in tool call (Tether approvals).",
  inputSchema: {
    type: "object",
    properties: {
      tool_name: { type: "string" },
      input: { type: "object" },
      tool_use_id: { type: "string" }
    },
    required: ["tool_name", "input"]
  },
  ask: (raw) => {
    if (!isRecord(raw) || typeof raw["tool_name"] !== "string" || !isRecord(raw["input"])) {
      return "expected {tool_name, input, tool_use_id}"
    }
    const toolName = raw["tool_name"]
    const input = raw["input"]
    const callId = typeof raw["tool_use_id"] === "string" ? { callId: raw["tool_use_id"] } : {}
    if (toolName === "Bash") {
      return {
        toolName,
        kind: "command",
        input,
        ...callId,
        ...(typeof input["command"] === "string" ? { command: input["command"] } : {})
      }
    }
    const pathKey = fileTools[toolName]
    if (pathKey !== undefined) {
      const path = input[pathKey]
      return { toolName, kind: "fileChange", input, ...callId, ...(typeof path === "string" ? { paths: [path] } : {}) }
    }
    return { toolName, kind: toolName.startsWith("mcp__") ? "tool" : "other", input, ...callId }
  },
  answer: (decision, raw) =>
    decision._tag === "Deny"
      ? { behavior: "deny", message: decision.message }
      : {
        behavior: "allow",
        updatedInput: isRecord(raw) && isRecord(raw["input"]) ? raw["input"] : {},
        ...(decision._tag === "AllowForSession" ? sessionPermissions(raw) : {})
      }
}

/**
 * The tools whose session grant Claude Code writes as a path rule or a directory: a file write's
 * suggestion is its `acceptEdits` mode (which also runs `rm`, `mv`, `cp`, `sed`, `touch`, `mkdir` and
 * `rmdir` unasked) and, outside the workspace, `addDirectories` (the directory becomes a working
 * one: Read, Grep, Glob and read-only commands such as `cat` run there unasked); a Read's is a rule
 * for its whole parent tree (`Read(//dir/**)`), which read-only commands also pass (Claude Code
 * 2.1). Allowed for the session, they are allowed this once.
 */
const thisCallOnly = new Set(["Read", "Grep", "Glob", ...Object.keys(fileTools)])

/**
 * The CLI's suggestions of a permission request kept to the running session, and only the allow
 * rules for the asked tool itself (a Bash command prefix, an MCP tool, a fetched domain): never a
 * mode, a working directory or another tool's rule, which would let calls the host decided nothing
 * about run unasked. None for the tools of `thisCallOnly`.
 */
const sessionPermissions = (raw: unknown) => {
  const toolName = isRecord(raw) ? raw["tool_name"] : undefined
  const suggestions = isRecord(raw) && Array.isArray(raw["permission_suggestions"]) &&
      typeof toolName === "string" && !thisCallOnly.has(toolName)
    ? raw["permission_suggestions"].filter((suggestion) =>
      isRecord(suggestion) && suggestion["type"] === "addRules" && suggestion["behavior"] === "allow" &&
      Array.isArray(suggestion["rules"]) && suggestion["rules"].length > 0 &&
      suggestion["rules"].every((rule) => isRecord(rule) && rule["toolName"] === toolName)
    )
    : []
  return suggestions.length === 0
    ? {}
    : { updatedPermissions: suggestions.map((suggestion) => ({ ...suggestion, destination: "session" })) }
}

/** @internal */
export const driver = (config: Config = {}): Driver.Driver => {
  const binary = Binary.resolve(binarySpec, config.binary)
  const announce = Binary.announce("claude", binary)
  const prepareTurn = prepare(config, binary)
  return {
    name: "claude",
    capabilities,
    sessionConfig: sessionConfig(config),
    layout,
    prepare: (request) => Effect.zipRight(announce, prepareTurn(request)),
    parse: parser.parse,
    classifyExit,
    outputSchemaRefusal: ClaudeSchema.refusal,
    approvals: { tool: approverTool, live: true },
    install: "install it with `npm install @anthropic-ai/claude-code` (its install script must run: it puts the " +
      "native binary in place)",
    live: Live.make((request) => Effect.zipRight(announce, prepareTurn(request)), approverTool)
  }
}
