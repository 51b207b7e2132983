/** @internal */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Driver from "@tether/core/Driver"
import type { ProfileLayout } from "@tether/profile/ProfileLayout"
import * as Effect from "effect/Effect"
import * as Jsonc from "jsonc-parser"
import { createHash } from "node:crypto"
import * as Toml from "smol-toml"
import type { Config } from "../Gemini.js"
import * as Binary from "./binary.js"
import * as Env from "./env.js"
import * as GeminiLive from "./geminiLive.js"
import * as parser from "./geminiParse.js"
import * as Skills from "./skills.js"

/** @internal */
export const settingsFile = ".gemini/settings.json"

/** @internal */
export const instructionsFile = ".gemini/tether-instructions.md"

const instructionsName = "tether-instructions.md"

/**
 * The policy file of one hosted tool set, `.gemini/tether-tools-<digest>.toml`: named by its
 * content, so it is never rewritten with other content. @internal
 */
export const toolPolicyPattern = ".gemini/tether-tools-*.toml"

/** Where the CLI reads the user's policies when no `policyPaths` setting names others. */
const userPoliciesDir = ".gemini/policies"

/** @internal */
export const capabilities: Driver.Capabilities = {
  resume: true,
  fork: false,
  mcpTransports: ["stdio", "http", "sse"],
  instructions: true,
  skillsProjection: true,
  sandbox: [],
  toolAllowList: true,
  streamingInput: false,
  structuredOutput: "instruction",
  liveStructuredOutput: "instruction",
  persistentProcess: true,
  builtinToolPolicy: ["deny"]
}

/** @internal */
export const layout: ProfileLayout = {
  provider: "gemini",
  selectorEnv: ["GEMINI_CLI_HOME"],
  // `GEMINI_CLI_HOME` replaces the home directory: the configuration lives in `<dir>/.gemini/`.
  nativeDefault: (env) => env["GEMINI_CLI_HOME"] ?? env["HOME"] ?? "",
  classes: {
    settings: [
      ".gemini/settings.json",
      ".gemini/GEMINI.md",
      ".gemini/commands/**",
      ".gemini/policies/**",
      ".gemini/trustedFolders.json"
    ],
    mcp: [],
    skills: [".gemini/skills/**"],
    auth: [
      ".gemini/oauth_creds.json",
      ".gemini/google_accounts.json",
      ".gemini/mcp-oauth-tokens.json",
      ".gemini/gemini-credentials.json"
    ],
    sessions: [".gemini/projects.json", ".gemini/tmp/*/.project_root", ".gemini/tmp/*/chats/**"]
  },
  // `.gemini/tmp/<project>/chats/session-<time>-<first 8 characters of the session id>.json(l)`;
  // the project map and `.project_root` are shared.
  sessionOf: (path) => /^\.gemini\/tmp\/[^/]+\/chats\/session-.*-([0-9a-f]{8})\.jsonl?$/.exec(path)?.[1],
  reserved: [instructionsFile, toolPolicyPattern],
  siblings: ["home", "tmp"]
}

/** @internal */
export const defaultMaxAttempts = 3

/** The key Gemini CLI 0.61 adds to every tool call. @internal */
export const injectedArguments: ReadonlyArray<string> = [parser.injectedArgument]

const providerError = (detail: string) => new Driver.ProtocolError({ reason: "ProviderError", detail })

type Json = { readonly [key: string]: unknown }
const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

/** Deep merge where `over` wins; arrays and scalars are replaced. */
const merge = (base: Json, over: Json): Json => {
  const out: { [key: string]: unknown } = { ...base }
  for (const [key, value] of Object.entries(over)) {
    const current = out[key]
    out[key] = isRecord(current) && isRecord(value) ? merge(current, value) : value
  }
  return out
}

const bearer = (variable: string) => `Bearer \${${variable}}`

const mcpEntry = (server: Driver.McpServer): Json => {
  if (server._tag === "stdio") return { command: server.command, args: server.args, env: server.env }
  const headers: { [name: string]: string } = { ...server.headers }
  if (server.bearerTokenEnv !== undefined) headers["Authorization"] = bearer(server.bearerTokenEnv)
  return server._tag === "http" ? { httpUrl: server.url, headers } : { url: server.url, headers }
}

/**
 * The hosted-tools entry, the same for every run of the agent (`trust` only here); the turn's
 * allow-list is not in it (see `renderToolPolicy`). @internal
 */
export const hostedEntry = (request: Driver.InvocationRequest): Json => ({
  httpUrl: request.hosted.url,
  headers: { Authorization: bearer(request.hosted.tokenVariable) },
  trust: true
})

/**
 * The run's hosted tools Gemini CLI names otherwise than `mcp_<key>_<tool>` (a long name it
 * shortens): Gemini's name → the catalog's. Fails with `HostedToolsUnavailable` when two of the
 * run's tools would reach the model under one name (neither the CLI nor the parser could tell
 * them apart).
 *
 * @internal
 */
export const renamedTools = (
  hosted: Driver.InvocationRequest["hosted"]
): Effect.Effect<ReadonlyMap<string, string>, Driver.ProtocolError> =>
  Effect.suspend(() => {
    const renamed = parser.renaming(hosted)
    return renamed instanceof Driver.ProtocolError ? Effect.fail(renamed) : Effect.succeed(renamed)
  })

/** A policy file named by its content: a run never sees it change, concurrent runs never share a changing file. */
const policyFile = (rules: ReadonlyArray<{ readonly [key: string]: string | number | ReadonlyArray<string> }>) => {
  const content = Toml.stringify({ rule: rules }) + "\n"
  const digest = createHash("sha256").update(content).digest("hex").slice(0, 16)
  return { path: toolPolicyPattern.replace("*", digest), content, mode: 0o600 } satisfies Driver.MaterializedFile
}

/** Gemini CLI 0.61's renamed built-ins, legacy name → current (`TOOL_LEGACY_ALIASES`). */
const legacyAliases: { readonly [legacy: string]: string } = { search_file_content: "grep_search" }

/** A built-in's name with every other name the CLI knows it by. */
const aliasesOf = (name: string): ReadonlyArray<string> => {
  const current = Object.hasOwn(legacyAliases, name) ? legacyAliases[name]! : name
  return [name, current, ...Object.keys(legacyAliases).filter((legacy) => legacyAliases[legacy] === current)]
}

/**
 * The turn's hosted-tool allow-list as a policy file (given to the run with `--policy`): every
 * hosted tool is denied (a denied tool is not offered to the model) except the turn's tools.
 * The clone's `settings.json` is read by every run of the agent, so nothing of a turn goes
 * there; this file is named by its content, so a run never sees it change. The rules rank just
 * above the allow rule the CLI derives from the server's `trust` (user tier + 0.2): the user's
 * own exclusions (`tools.exclude`, `mcp.excluded`) and higher-priority policies still win (a
 * policy that allows a hosted tool the turn leaves out only gets it offered: the run's gateway
 * credential lists and calls the turn's tools only). A tool whose name Gemini shortens is allowed
 * under the name Gemini gives it (a rule's `mcpName` + `toolName` is matched as
 * `mcp_<mcpName>_<toolName>`, exactly); a key whose shortened names do not keep the
 * `mcp_<key>_` prefix is refused.
 *
 * @internal
 */
export const renderToolPolicy = (
  request: Driver.InvocationRequest
): Effect.Effect<Driver.MaterializedFile, Driver.ProtocolError> =>
  Effect.gen(function*() {
    yield* renamedTools(request.hosted)
    const prefix = `mcp_${request.hosted.key}_`
    // Gemini CLI 0.61 also switches off an MCP tool whose name without its `mcp_<server>_` prefix
    // a denied built-in has: a built-in policy never governs the hosted tools, so such a turn is
    // refused before anything starts rather than run without the tool.
    // The CLI excludes a denied name's legacy aliases too (0.61: `search_file_content`, `grep_search`).
    const denied = new Set((request.builtinTools?.deny ?? []).flatMap((name) => aliasesOf(name)))
    const shadowed = request.hosted.tools.filter((tool) =>
      denied.has(tool) || denied.has(parser.geminiToolName(request.hosted.key, tool).slice(prefix.length))
    )
    if (shadowed.length > 0) {
      return yield* Effect.fail(
        new Driver.ProtocolError({
          reason: "HostedToolsUnavailable",
          detail: `Gemini CLI would remove the hosted tool${shadowed.length > 1 ? "s" : ""} ` +
            `${shadowed.map((tool) => JSON.stringify(tool)).join(", ")} with the denied built-in of the same ` +
            `name: rename the hosted tool, or do not deny that built-in`
        })
      )
    }
    const names: Array<string> = []
    for (const tool of request.hosted.tools) {
      const name = parser.geminiToolName(request.hosted.key, tool)
      if (!name.startsWith(prefix)) {
        return yield* Effect.fail(
          new Driver.ProtocolError({
            reason: "HostedToolsUnavailable",
            detail: `Gemini CLI names hosted tool "${tool}" "${name}", which no policy rule of server ` +
              `"${request.hosted.key}" can allow`
          })
        )
      }
      names.push(name.slice(prefix.length))
    }
    const rules: Array<{ readonly [key: string]: string | number | ReadonlyArray<string> }> = [
      { mcpName: request.hosted.key, toolName: "*", decision: "deny", priority: 210 }
    ]
    if (names.length > 0) {
      rules.push({ mcpName: request.hosted.key, toolName: names, decision: "allow", priority: 220 })
    }
    return policyFile(rules)
  })

/**
 * The turn's denied built-ins (`builtinTools.deny`, e.g. `run_shell_command`) as a policy file of
 * their own, `undefined` when there are none: not offered, refused if called, whatever the copied
 * profile allows.
 *
 * Gemini CLI 0.61 (`policy/config.js`, `policy/policy-engine.js` in its core) ranks a rule at
 * `tier + priority / 1000` (priority 0..999) and takes the first matching rule in descending rank
 * (a stable sort: at a tie, the rule loaded first). Tiers: default 1, extension 2 (never allow),
 * workspace 3 (workspace policies are off in 0.61), user 4, admin 5. Every `--policy` file is
 * user tier, and so are the profile's `settings.json` rules: `tools.allowed` (+0.3), `tools.core`
 * (+0.25), trusted servers (+0.2), saved "always allow" rules (+0.95), and the user's policy files
 * (+0..0.999). At priority 999, first of the `--policy` paths, the deny outranks all of them, and
 * wins a tie with a user rule at 999 (loaded after it). The admin tier outranks the user tier
 * whatever the priority: the machine's system policies directory (an administrator's, left alone)
 * and `adminPolicyPaths`, which a user's copied `settings.json` may set. So the same file is also
 * given as the run's first `--admin-policy` (before the user's `adminPolicyPaths` again, which the
 * flag replaces): at admin tier 5.999 only the system directory's own rules, loaded first, could
 * tie it. When the system directory holds policies, the CLI ignores every admin policy path (the
 * user's too) and the file's user-tier copy still holds. The clone's `settings.json` is shared by
 * every run of the agent, so a turn's denial cannot go into its `tools.exclude`.
 *
 * @internal
 */
export const renderBuiltinPolicy = (request: Driver.InvocationRequest): Driver.MaterializedFile | undefined => {
  const denied = request.builtinTools?.deny ?? []
  return denied.length === 0 ? undefined : policyFile([{ toolName: [...denied], decision: "deny", priority: 999 }])
}

/**
 * The built-ins Gemini CLI 0.61 asks about in its default mode (`ask_user` in its bundled
 * `policies/write.toml`): commands, file writes and edits, web fetches, skill activation.
 */
const askedBuiltins = ["run_shell_command", "write_file", "replace", "web_fetch", "activate_skill"] as const

/**
 * With approvals, the host decides each built-in call the CLI would ask about, whatever the
 * user's copied profile says: its `tools.allowed`, a policy file of its own that allows one (user
 * tier or its `adminPolicyPaths`), or `general.defaultApprovalMode: "auto_edit"` (`processSetup`
 * also passes `--approval-mode default`) would each run them unasked. An `ask_user` rule at 999,
 * given at both tiers like the turn's denial (after it: a denial still wins the tie). Not when the
 * host chose an approval mode itself (`Config.approvalMode`): that one stands.
 *
 * @internal
 */
export const renderAskPolicy = (
  config: Config,
  request: Driver.InvocationRequest
): Driver.MaterializedFile | undefined =>
  request.liveApprovals !== true || (config.approvalMode !== undefined && config.approvalMode !== "default")
    ? undefined
    : policyFile([{ toolName: [...askedBuiltins], decision: "ask_user", priority: 999 }])

/**
 * An entry this driver rendered (this or an earlier agent on the same directory): a loopback
 * `httpUrl`, a bearer header referencing a variable, `trust` (and, from earlier versions,
 * `includeTools`), nothing else. Anything else under the hosted key is the user's.
 */
const isHostedRendering = (entry: unknown): boolean => {
  if (!isRecord(entry)) return false
  const keys = JSON.stringify(Object.keys(entry).sort())
  return (keys === JSON.stringify(["headers", "httpUrl", "trust"]) ||
    (keys === JSON.stringify(["headers", "httpUrl", "includeTools", "trust"]) &&
      Array.isArray(entry["includeTools"]))) &&
    typeof entry["httpUrl"] === "string" && /^http:\/\/127\.0\.0\.1:\d+\//.test(entry["httpUrl"]) &&
    entry["trust"] === true && isRecord(entry["headers"]) &&
    JSON.stringify(Object.keys(entry["headers"])) === JSON.stringify(["Authorization"]) &&
    typeof entry["headers"]["Authorization"] === "string" &&
    /^Bearer \$\{[A-Za-z_][A-Za-z0-9_]*\}$/.test(entry["headers"]["Authorization"])
}

const contextNames = (current: unknown): Array<string> => {
  const names = typeof current === "string"
    ? [current]
    : Array.isArray(current)
    ? current.filter((n): n is string => typeof n === "string")
    : ["GEMINI.md"]
  return names.includes(instructionsName) ? names : [...names, instructionsName]
}

/**
 * The clone's settings: the copied user settings with the driver's keys merged over them, the
 * same for every run of the agent. Fails when the user's settings declare an MCP server under a
 * key the run needs.
 * @internal
 */
export const renderSettings = (
  config: Config,
  request: Driver.InvocationRequest,
  current: Json
): Effect.Effect<string, Driver.ProtocolError> =>
  Effect.gen(function*() {
    const servers: { [key: string]: unknown } = isRecord(current["mcpServers"]) ? { ...current["mcpServers"] } : {}
    for (const server of request.mcp) {
      // Headless Gemini leaves out the tools of an untrusted server; a declared source is trusted.
      const entry = { ...mcpEntry(server), trust: true }
      const existing = servers[server.key]
      if (existing !== undefined && JSON.stringify(existing) !== JSON.stringify(entry)) {
        return yield* Effect.fail(providerError(`the profile's settings already declare MCP server "${server.key}"`))
      }
      servers[server.key] = entry
    }
    const existingHosted = servers[request.hosted.key]
    if (existingHosted !== undefined && !isHostedRendering(existingHosted)) {
      return yield* Effect.fail(
        new Driver.ProtocolError({
          reason: "HostedToolsUnavailable",
          detail:
            `the profile's settings already declare MCP server "${request.hosted.key}" (reserved for the hosted tools)`
        })
      )
    }
    // Every hosted tool the run's credential lists; the run's policy file narrows it to the turn.
    servers[request.hosted.key] = hostedEntry(request)
    const currentAuth = isRecord(current["security"]) && isRecord(current["security"]["auth"])
      ? current["security"]["auth"]["selectedType"]
      : undefined
    const context = isRecord(current["context"]) ? current["context"] : {}
    const currentAttempts = isRecord(current["general"]) ? current["general"]["maxAttempts"] : undefined
    const maxAttempts = config.maxAttempts ??
      (typeof currentAttempts === "number" ? currentAttempts : defaultMaxAttempts)
    // Gemini CLI skips, without a word, every MCP server missing from a non-empty `mcp.allowed`
    // (a user's list of their own servers): the run's servers join it. (`mcp.excluded` stays the
    // user's: excluding the hosted key is deliberate.)
    const currentMcp = isRecord(current["mcp"]) ? current["mcp"] : {}
    const allowed = Array.isArray(currentMcp["allowed"]) && currentMcp["allowed"].length > 0
      ? [...new Set([...currentMcp["allowed"], request.hosted.key, ...request.mcp.map((server) => server.key)])]
      : undefined
    const ours: Json = {
      security: { auth: { selectedType: config.authType ?? currentAuth ?? "gemini-api-key" } },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
      // The CLI's startup sweep deletes every file of a session that also has a file without
      // conversation, which `session/load` leaves behind: the session store keeps sessions instead.
      // The workspace's `.env` files (and its parents') are the user's project's, not this run's.
      advanced: { ...(isRecord(current["advanced"]) ? current["advanced"] : {}), ignoreLocalEnv: true },
      general: {
        enableAutoUpdate: false,
        enableAutoUpdateNotification: false,
        maxAttempts,
        sessionRetention: { enabled: false }
      },
      mcpServers: servers,
      ...(allowed === undefined ? {} : { mcp: { ...currentMcp, allowed } }),
      ...(request.instructions.length > 0 ? { context: { fileName: contextNames(context["fileName"]) } } : {})
    }
    const merged = merge(current, ours)
    // `merge` replaces nested records key by key: the server map must be exactly ours.
    return JSON.stringify({ ...merged, mcpServers: servers }, null, 2) + "\n"
  })

const readJsonObject = (file: string, label: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const exists = yield* fs.exists(file).pipe(Effect.orElseSucceed(() => false))
    if (!exists) return {}
    const text = yield* fs.readFileString(file).pipe(Effect.mapError(() => providerError(`cannot read ${label}`)))
    // The CLI reads its settings as JSON with comments (and trailing commas): so does the driver.
    const errors: Array<Jsonc.ParseError> = []
    const parsed: unknown = text.trim().length === 0
      ? {}
      : Jsonc.parse(text, errors, { allowTrailingComma: true, disallowComments: false })
    if (errors.length > 0) {
      const first = errors[0]!
      return yield* Effect.fail(
        providerError(
          `${label} is not valid JSON with comments: ${
            Jsonc.printParseErrorCode(first.error)
          } at offset ${first.offset}`
        )
      )
    }
    if (!isRecord(parsed)) return yield* Effect.fail(providerError(`${label} is not a JSON object`))
    return parsed
  })

const readSettings = (request: Driver.InvocationRequest) =>
  Effect.flatMap(
    Path.Path,
    (path) => readJsonObject(path.join(request.profileDir, settingsFile), `${settingsFile} in the execution clone`)
  )

/**
 * The admin policy paths the copied settings name (`--admin-policy` replaces them, so they are
 * passed again after the run's own).
 */
const userAdminPolicyPaths = (settings: Json): ReadonlyArray<string> => {
  const configured = settings["adminPolicyPaths"]
  return Array.isArray(configured) ? configured.filter((p): p is string => typeof p === "string") : []
}

/**
 * The policy paths the CLI would read for the user (`--policy` replaces them, so they are passed
 * again): the `policyPaths` setting, else the user's policies directory when it exists.
 */
const userPolicyPaths = (request: Driver.InvocationRequest, settings: Json) =>
  Effect.gen(function*() {
    const configured = settings["policyPaths"]
    if (Array.isArray(configured) && configured.length > 0) {
      return configured.filter((p): p is string => typeof p === "string")
    }
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const dir = path.join(request.profileDir, userPoliciesDir)
    return (yield* fs.exists(dir).pipe(Effect.orElseSucceed(() => false))) ? [dir] : []
  })

/**
 * The CLI: `@google/gemini-cli`'s bundle (its `bin`), run with this Node.
 *
 * @internal
 */
export const binarySpec: Binary.Spec = {
  packageName: "@google/gemini-cli",
  pathName: "gemini",
  candidates: (installed) =>
    installed.bin["gemini"] === undefined ? [] : [{ file: `${installed.dir}/${installed.bin["gemini"]}`, script: true }]
}

const sessionArgs = (session: Driver.SessionRequest) =>
  Effect.gen(function*() {
    switch (session._tag) {
      case "New":
        return ["--session-id", session.id]
      case "Resume":
        return ["--resume", session.id]
      case "Fork":
        return yield* Effect.fail(providerError("Gemini CLI cannot fork a session"))
    }
  })

/**
 * What Gemini CLI reads from the environment that decides where a request goes, with what
 * credential, through which proxy, under which system prompt. At start-up the CLI loads a `.env`
 * file found walking up from the workspace (a trusted workspace's `<dir>/.gemini/.env` too, which
 * `advanced.ignoreLocalEnv` does not skip) into every variable that is not set: each of these the
 * driver does not set is set empty, so no file outside the clone can choose them.
 */
const pinnedAgainstDotenv = [
  "GEMINI_API_KEY",
  "GOOGLE_API_KEY",
  "GOOGLE_GEMINI_BASE_URL",
  "GOOGLE_VERTEX_BASE_URL",
  "GEMINI_MODEL",
  "GOOGLE_GENAI_USE_VERTEXAI",
  "GOOGLE_GENAI_USE_GCA",
  "GOOGLE_CLOUD_PROJECT",
  "GOOGLE_CLOUD_LOCATION",
  "GOOGLE_APPLICATION_CREDENTIALS",
  "CLOUD_SHELL",
  "HTTPS_PROXY",
  "https_proxy",
  "HTTP_PROXY",
  "http_proxy",
  "ALL_PROXY",
  "all_proxy",
  "NO_PROXY",
  "no_proxy",
  "NODE_TLS_REJECT_UNAUTHORIZED",
  "GEMINI_SYSTEM_MD",
  "GEMINI_WRITE_SYSTEM_MD",
  "GEMINI_SANDBOX",
  "SEATBELT_PROFILE",
  "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
  "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"
] as const

const buildEnv = (config: Config, request: Driver.InvocationRequest, home: string, tmp: string) => {
  const env = Env.buildEnv(config, request, {
    HOME: home,
    TMPDIR: tmp,
    GEMINI_CLI_HOME: request.profileDir,
    // One process instead of a launcher that re-spawns the CLI (and ignores SIGTERM itself).
    GEMINI_CLI_NO_RELAUNCH: "true"
  }, ["GEMINI_CLI_TRUST_WORKSPACE"])
  for (const name of pinnedAgainstDotenv) env[name] ??= ""
  return env
}

/**
 * What every Gemini CLI process of a request shares, one-shot or live: the files, the
 * environment, the model flag and the options after it (trust, approval mode, policies).
 *
 * @internal
 */
export const processSetup = (config: Config, request: Driver.InvocationRequest) =>
  Effect.gen(function*() {
    if (request.sandbox !== undefined) {
      return yield* Effect.fail(providerError(`Gemini CLI cannot honour sandbox level "${request.sandbox}"`))
    }
    const home = request.siblings["home"]
    const tmp = request.siblings["tmp"]
    if (home === undefined || tmp === undefined) {
      return yield* Effect.fail(providerError("the execution clone has no `home` and `tmp` siblings"))
    }
    const current = yield* readSettings(request)
    const settings = yield* renderSettings(config, request, current)
    const path = yield* Path.Path
    const policy = yield* renderToolPolicy(request)
    const denial = renderBuiltinPolicy(request)
    const ask = renderAskPolicy(config, request)
    const ranked = [denial, ask].flatMap((file) => file === undefined ? [] : [path.join(request.profileDir, file.path)])
    // The denial first: at a tie of rank, the rule loaded first wins (see `renderBuiltinPolicy`).
    const policies = [
      ...ranked,
      path.join(request.profileDir, policy.path),
      ...(yield* userPolicyPaths(request, current))
    ]
    const adminPolicies = ranked.length === 0 ? [] : [...ranked, ...userAdminPolicyPaths(current)]
    const files: Array<Driver.MaterializedFile> = [{ path: settingsFile, content: settings, mode: 0o600 }, policy]
    if (denial !== undefined) files.push(denial)
    if (ask !== undefined) files.push(ask)
    if (request.instructions.length > 0) {
      files.push({ path: instructionsFile, content: request.instructions, mode: 0o600 })
    }
    files.push(...Skills.project(request.skills, ".gemini/skills"))
    const model = request.model ?? config.model
    const options: Array<string> = []
    if (config.trustWorkspace !== false) options.push("--skip-trust")
    // With approvals and no mode of the host's, never the profile's `general.defaultApprovalMode`.
    const approvalMode = config.approvalMode ?? (ask === undefined ? undefined : "default")
    if (approvalMode !== undefined) options.push("--approval-mode", approvalMode)
    for (const file of policies) options.push("--policy", file)
    for (const file of adminPolicies) options.push("--admin-policy", file)
    return {
      files,
      env: buildEnv(config, request, home, tmp),
      model: model === undefined ? [] : ["-m", model],
      options
    }
  })

/** @internal */
export const prepare = (config: Config, binary: Binary.Binary) => (request: Driver.InvocationRequest) =>
  Effect.gen(function*() {
    const setup = yield* processSetup(config, request)
    // The prompt goes on stdin (never argv: no option parsing, no `ps` exposure, no size limit
    // below the CLI's 8 MiB); `-p ""` selects the headless mode, which appends stdin to it.
    const args: Array<string> = [
      ...binary.prefix,
      "-p",
      "",
      "--output-format",
      "stream-json",
      // The model's text as it said it: the CLI strips escape sequences from each streamed chunk
      // otherwise (also leaving debris of one split across chunks); its ACP mode does not. The
      // risk flag only silences a warning for text output.
      "--raw-output",
      "--accept-raw-output-risk",
      ...setup.model,
      ...(yield* sessionArgs(request.session)),
      ...setup.options
    ]
    return {
      command: binary.command,
      args,
      commandSource: binary.source,
      env: setup.env,
      cwd: request.workspace,
      stdin: request.prompt,
      files: setup.files
    } satisfies Driver.Invocation
  })

/** @internal */
export const classifyExit = (info: Driver.ExitInfo): Driver.ProtocolError | undefined => {
  if (info.session._tag !== "Resume") return undefined
  return /Error resuming session/.test(info.stderr)
    ? new Driver.ProtocolError({ reason: "ResumeRejected", detail: `no Gemini CLI session ${info.session.id}` })
    : undefined
}

/**
 * What enters threads' compatibility fingerprint (DESIGN §10): what decides the conversation a
 * resumed session continues. The model (a session resumed on another model is another
 * conversation), the authentication type (which backend holds and serves it: Gemini API, Vertex
 * AI, a Google account) and the approval mode (what the CLI runs without asking: `plan` is read
 * only). Never `env` (it may hold secrets: the key, a base URL with credentials in it; a proxy or
 * a relocated endpoint serving the same model is not another conversation), nor the binary path,
 * the trust flag, the retry bound or the live timeouts (how a process runs, not what it continues).
 *
 * @internal
 */
export const sessionConfig = (config: Config): { readonly [key: string]: unknown } | undefined => {
  const out: { [key: string]: unknown } = {}
  if (config.model !== undefined) out["model"] = config.model
  if (config.authType !== undefined) out["authType"] = config.authType
  if (config.approvalMode !== undefined) out["approvalMode"] = config.approvalMode
  // None of them set: absent, as before the driver had one, so those agents' threads still resume.
  return Object.keys(out).length === 0 ? undefined : out
}

/** @internal */
export const driver = (config: Config = {}): Driver.Driver => {
  const binary = Binary.resolve(binarySpec, config.binary)
  const announce = Binary.announce("gemini", binary)
  const prepareTurn = prepare(config, binary)
  const session = sessionConfig(config)
  return {
    name: "gemini",
    capabilities,
    ...(session === undefined ? {} : { sessionConfig: session }),
    layout,
    prepare: (request) => Effect.zipRight(announce, prepareTurn(request)),
    parse: parser.parse,
    classifyExit,
    injectedArguments,
    // Asked on live threads only (ACP `session/request_permission`); headless `-p` has no prompt to route.
    approvals: { live: true },
    live: GeminiLive.live(config, binary, announce, processSetup, (request) => parser.renamedOf(request.hosted)),
    install: "install it with `npm install @google/gemini-cli`"
  }
}
