/** @internal */
import * as Path from "@effect/platform/Path"
import * as Driver from "@tether/core/Driver"
import type { ProfileLayout } from "@tether/profile/ProfileLayout"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type { Config } from "../CodeBuddy.js"
import * as Binary from "./binary.js"
import * as claude from "./claude.js"
import * as claudeParse from "./claudeParse.js"
import * as parser from "./codebuddyParse.js"
import * as Env from "./env.js"
import * as Skills from "./skills.js"

/** @internal */
export const mcpConfigFile = ".tether-mcp.json"

/**
 * The largest instructions the driver passes: CodeBuddy Code takes them only as the value of
 * `--append-system-prompt`, and Linux refuses a single argument over 128 KiB.
 *
 * @internal
 */
export const maxInstructionsBytes = 120 * 1024

/** @internal */
export const capabilities: Driver.Capabilities = {
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
}

/** @internal */
export const layout: ProfileLayout = {
  provider: "codebuddy",
  selectorEnv: ["CODEBUDDY_CONFIG_DIR"],
  nativeDefault: (env) => `${env["HOME"] ?? ""}/.codebuddy`,
  classes: {
    settings: [
      "settings.json",
      "settings.local.json",
      "CODEBUDDY.md",
      "models.json",
      "keybindings.json",
      "agents/**",
      "commands/**",
      "rules/**",
      "hooks/**",
      "output-styles/**",
      "workflows/**"
    ],
    mcp: [".mcp.json"],
    skills: ["skills/**"],
    // A `codebuddy login` session lives in `$HOME/.local/share/CodeBuddyExtension`, outside the
    // configuration directory: nothing of the profile is authentication.
    auth: [],
    sessions: ["projects/**"]
  },
  // `projects/<cwd slug>/<session>.jsonl`, `<session>.meta.json` (a fork's origin) and
  // `<session>/...`; the slug's auto memory (`projects/<slug>/memory/`) is shared.
  sessionOf: (path) =>
    /^projects\/[^/]+\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:\.jsonl$|\.meta\.json$|\/)/
      .exec(path)?.[1],
  reserved: [mcpConfigFile],
  siblings: ["home", "tmp"],
  // What a process writes for itself alone, which nothing of a later run reads: its registry
  // entry (`sessions/<pid>.json`), its shell snapshot (`shell-snapshots/snapshot-<shell>-<time>-<random>.sh`),
  // its traces (`traces/<pid>/`) and the day's log (`logs/<date>/workspace__<hash>.log`, appended
  // by each process). The CLI removes the first two when it exits on its own; one killed (by the
  // exit grace, a cancel, a close) leaves them.
  logs: { profile: ["sessions/*.json", "shell-snapshots/**", "traces/**", "logs/**"] }
}

/** Variables the driver owns: configuration cannot override them. */
const fixedEnv = {
  CODEBUDDY_DEFER_TOOL_LOADING: "false",
  CODEBUDDY_SKIP_BUILTIN_MARKETPLACE: "1",
  DISABLE_AUTOUPDATER: "1",
  DISABLE_TELEMETRY: "1"
} as const

const protocolError = (detail: string) => new Driver.ProtocolError({ reason: "ProviderError", detail })

/**
 * `mcp__<server>__<tool>` for the hosted tools, `mcp__<server>` for each external source, then the
 * configured permission rules for built-in tools.
 */
const allowedTools = (config: Config, request: Driver.InvocationRequest): ReadonlyArray<string> => [
  ...claude.hostedRules(request),
  ...request.mcp.map((server) => `mcp__${server.key}`),
  ...(config.allowedTools ?? [])
]

/**
 * The CLI is the `cli/` folder of `@tencent-ai/agent-sdk` (`@tencent-ai/codebuddy-code` itself is
 * not on the public registry): its launcher script, run with this process's Node.
 *
 * @internal
 */
export const binarySpec: Binary.Spec = {
  packageName: "@tencent-ai/agent-sdk",
  pathName: "codebuddy",
  candidates: (installed) => [{ file: `${installed.dir}/cli/bin/codebuddy`, script: true }]
}

/** CodeBuddy Code's credentials and endpoint variables (its own, and the Claude Code ones it reads). */
const credentialEnv = [
  "CODEBUDDY_BASE_URL",
  "CODEBUDDY_API_KEY",
  "CODEBUDDY_AUTH_TOKEN",
  "ANTHROPIC_BASE_URL",
  "ANTHROPIC_API_KEY",
  "ANTHROPIC_AUTH_TOKEN"
]

const endpointEnv = (config: Config): { readonly [name: string]: string } => {
  const endpoint = config.endpoint
  if (endpoint === undefined) return {}
  const out: { [name: string]: string } = { CODEBUDDY_BASE_URL: endpoint.baseUrl }
  // Unwrapped only here, at the boundary of the child's environment.
  if (endpoint.apiKey !== undefined) out["CODEBUDDY_API_KEY"] = Redacted.value(endpoint.apiKey)
  return out
}

const mcpTimeoutEnv = (config: Config): { readonly [name: string]: string } => {
  // An infinite wait is the CLI's own default.
  const millis = config.mcpTimeout === undefined ? undefined : Env.timeoutMillis(config.mcpTimeout)
  return millis === undefined ? {} : { MCP_TIMEOUT: millis }
}

/** @internal */
export const prepare = (config: Config, binary: Binary.Binary) => (request: Driver.InvocationRequest) =>
  Effect.gen(function*() {
    if (request.sandbox !== undefined) {
      return yield* Effect.fail(
        protocolError(`CodeBuddy Code cannot honour sandbox level "${request.sandbox}": no faithful mapping exists`)
      )
    }
    const home = request.siblings["home"]
    const tmp = request.siblings["tmp"]
    if (home === undefined || tmp === undefined) {
      return yield* Effect.fail(protocolError("the execution clone has no `home` and `tmp` siblings"))
    }
    if (request.instructions.includes("\0")) {
      return yield* Effect.fail(protocolError("CodeBuddy Code cannot take instructions that contain a NUL character"))
    }
    if (Buffer.byteLength(request.instructions, "utf8") > maxInstructionsBytes) {
      return yield* Effect.fail(
        protocolError(
          `CodeBuddy Code takes instructions only on its command line: keep them under ${maxInstructionsBytes} bytes`
        )
      )
    }
    const clash = claudeParse.clashOf("CodeBuddy Code", request.hosted.key, request.hosted.tools)
    if (clash !== undefined) return yield* Effect.fail(protocolError(clash))
    const path = yield* Path.Path
    // The prompt goes to stdin as plain text. With `--input-format stream-json` a tool call the
    // CLI needs permission for waits for an answer on stdin forever, even after EOF.
    const args: Array<string> = ["-p", "--output-format", "stream-json", "--verbose"]
    if (config.partialMessages !== false) args.push("--include-partial-messages")
    args.push("--mcp-config", path.join(request.profileDir, mcpConfigFile))
    if (config.profileMcpServers !== true) args.push("--strict-mcp-config")
    // Only the clone's settings (rewritten by the driver): a workspace's `.codebuddy/settings*.json`
    // would apply its `env` (the endpoint, the key), hooks and permissions over the driver.
    if (config.projectSettings !== true) args.push("--setting-sources", "user")
    const allowed = allowedTools(config, request)
    if (allowed.length > 0) args.push("--allowedTools", allowed.join(","))
    if (config.builtinTools !== undefined) args.push("--tools", config.builtinTools.join(","))
    const model = request.model ?? config.model
    if (model !== undefined) args.push("--model", model)
    if (request.instructions.length > 0) args.push("--append-system-prompt", request.instructions)
    args.push(...claude.sessionArgs(request.session))
    const env = Env.buildEnv(config, request, {
      ...endpointEnv(config),
      ...mcpTimeoutEnv(config),
      ...fixedEnv,
      HOME: home,
      TMPDIR: tmp,
      CODEBUDDY_CONFIG_DIR: request.profileDir
    })
    return {
      command: binary.command,
      args: [...binary.prefix, ...args],
      commandSource: binary.source,
      env,
      cwd: request.workspace,
      stdin: request.prompt,
      files: [
        { path: mcpConfigFile, content: claude.renderMcpConfig(request), mode: 0o600 },
        // The CLI lists `skills/<name>/SKILL.md` of its configuration directory in its Skill tool.
        ...Skills.project(request.skills, "skills", { runsInlineShell: true }),
        // Like Claude Code, the CLI applies a settings file's `env` over its environment.
        ...yield* claude.copiedSettings(request, env, {
          configured: [...Object.keys(config.env ?? {}), ...Object.keys(endpointEnv(config))],
          credentials: credentialEnv,
          endpointGiven: config.endpoint !== undefined,
          approvals: false
        })
      ]
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
      detail: `no CodeBuddy Code session ${info.session._tag === "Fork" ? info.session.from : info.session.id}`
    })
    : undefined
}

/** @internal */
export const sessionConfig = (config: Config): { readonly [key: string]: unknown } => {
  // Only what changes the conversation a session continues; never `env` or the endpoint's key
  // (secrets), nor the binary path (an install detail).
  const out: { [key: string]: unknown } = {}
  if (config.model !== undefined) out["model"] = config.model
  if (config.builtinTools !== undefined) out["builtinTools"] = [...config.builtinTools]
  out["profileMcpServers"] = config.profileMcpServers === true
  // Only when given: the agents made before this option keep their threads' fingerprint.
  if (config.projectSettings === true) out["projectSettings"] = true
  return out
}

/** @internal */
export const driver = (config: Config = {}): Driver.Driver => {
  const binary = Binary.resolve(binarySpec, config.binary)
  const announce = Binary.announce("codebuddy", binary)
  const prepareTurn = prepare(config, binary)
  return {
    name: "codebuddy",
    capabilities,
    sessionConfig: sessionConfig(config),
    layout,
    prepare: (request) => Effect.zipRight(announce, prepareTurn(request)),
    parse: parser.parse,
    classifyExit,
    install: "install it with `npm install @tencent-ai/agent-sdk` (its `cli/` folder is the CodeBuddy Code CLI)"
  }
}
