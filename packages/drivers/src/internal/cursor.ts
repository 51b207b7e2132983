/** @internal */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Driver from "@tether/core/Driver"
import type { ProfileLayout } from "@tether/profile/ProfileLayout"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Jsonc from "jsonc-parser"
import type { Config } from "../Cursor.js"
import * as Binary from "./binary.js"
import * as parser from "./cursorParse.js"
import * as Env from "./env.js"

/** @internal */
export const mcpFile = "mcp.json"

/** The CLI's settings in its configuration directory, `permissions` among them. @internal */
export const cliConfigFile = "cli-config.json"

/** @internal */
export const capabilities: Driver.Capabilities = {
  resume: true,
  fork: false,
  mcpTransports: ["stdio", "http", "sse"],
  instructions: false,
  skillsProjection: false,
  sandbox: [],
  toolAllowList: false,
  streamingInput: false,
  structuredOutput: "instruction",
  persistentProcess: false
}

/** @internal */
export const layout: ProfileLayout = {
  provider: "cursor",
  selectorEnv: ["CURSOR_CONFIG_DIR", "CURSOR_DATA_DIR"],
  nativeDefault: (env) => env["CURSOR_CONFIG_DIR"] ?? `${env["HOME"] ?? ""}/.cursor`,
  classes: {
    settings: ["cli-config.json", "rules/**"],
    mcp: [mcpFile],
    skills: ["skills/**"],
    auth: ["auth.json"],
    sessions: ["chats/**"]
  },
  // `chats/<workspace hash>/<chat id>.json` or `chats/<workspace hash>/<chat id>/...`.
  sessionOf: (path) =>
    /^chats\/[^/]+\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:\.json$|\/)/.exec(path)?.[1],
  reserved: [],
  siblings: ["home", "tmp"]
}

const providerError = (detail: string) => new Driver.ProtocolError({ reason: "ProviderError", detail })

type Json = { readonly [key: string]: unknown }
const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

/** Cursor's reference syntax for an environment variable in `mcp.json`. */
const bearer = (variable: string) => `Bearer \${env:${variable}}`

const mcpEntry = (server: Driver.McpServer): Json => {
  if (server._tag === "stdio") return { command: server.command, args: server.args, env: server.env }
  const headers: { [name: string]: string } = { ...server.headers }
  if (server.bearerTokenEnv !== undefined) headers["Authorization"] = bearer(server.bearerTokenEnv)
  return { url: server.url, headers }
}

/** @internal */
export const hostedEntry = (request: Driver.InvocationRequest): Json => ({
  url: request.hosted.url,
  headers: { Authorization: bearer(request.hosted.tokenVariable) }
})

const sameJson = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b)

/**
 * An entry this driver rendered (this or an earlier agent on the same directory): exactly a
 * loopback URL and a bearer header referencing a variable. Anything else under the hosted key
 * is the user's.
 */
const isHostedRendering = (entry: unknown): boolean =>
  isRecord(entry) && sameJson(Object.keys(entry).sort(), ["headers", "url"]) &&
  typeof entry["url"] === "string" && /^http:\/\/127\.0\.0\.1:\d+\//.test(entry["url"]) &&
  isRecord(entry["headers"]) && sameJson(Object.keys(entry["headers"]), ["Authorization"]) &&
  typeof entry["headers"]["Authorization"] === "string" &&
  /^Bearer \$\{env:[A-Za-z_][A-Za-z0-9_]*\}$/.test(entry["headers"]["Authorization"])

/**
 * The clone's `mcp.json`: the user's copied servers plus the definition's sources and the hosted
 * tools. A user's entry under a key the run needs is refused (an earlier rendering of the hosted
 * entry, e.g. with an older endpoint, is replaced).
 * @internal
 */
export const renderMcp = (
  request: Driver.InvocationRequest,
  current: Json
): Effect.Effect<string, Driver.ProtocolError> =>
  Effect.gen(function*() {
    const servers: { [key: string]: unknown } = isRecord(current["mcpServers"]) ? { ...current["mcpServers"] } : {}
    for (const server of request.mcp) {
      const entry = mcpEntry(server)
      if (servers[server.key] !== undefined && !sameJson(servers[server.key], entry)) {
        return yield* Effect.fail(providerError(`the profile's mcp.json already declares MCP server "${server.key}"`))
      }
      servers[server.key] = entry
    }
    const hosted = hostedEntry(request)
    if (servers[request.hosted.key] !== undefined && !isHostedRendering(servers[request.hosted.key])) {
      return yield* Effect.fail(
        new Driver.ProtocolError({
          reason: "HostedToolsUnavailable",
          detail:
            `the profile's mcp.json already declares MCP server "${request.hosted.key}" (reserved for the hosted tools)`
        })
      )
    }
    servers[request.hosted.key] = hosted
    return JSON.stringify({ ...current, mcpServers: servers }, null, 2) + "\n"
  })

/** A rule this driver writes for the hosted tools (this turn's or an earlier one's). */
const isHostedRule = (key: string, rule: unknown): boolean =>
  typeof rule === "string" && (rule === `Mcp(${key})` || rule.startsWith(`Mcp(${key}:`))

/**
 * The clone's `cli-config.json`: the user's copied settings, with an allow rule for each of the
 * turn's hosted tools and each of the definition's MCP sources. Headless, the CLI rejects every
 * MCP tool call that neither `--force` nor an `Mcp(server:tool)` allow rule covers, even from a
 * server `--approve-mcps` approved. An earlier turn's hosted rules are replaced (a narrower
 * policy leaves the tools it drops unallowed); the user's other rules, deny rules included, stay.
 * @internal
 */
export const renderCliConfig = (request: Driver.InvocationRequest, current: Json): string => {
  const permissions = isRecord(current["permissions"]) ? current["permissions"] : {}
  const allow: Array<unknown> = Array.isArray(permissions["allow"])
    ? permissions["allow"].filter((rule) => !isHostedRule(request.hosted.key, rule))
    : []
  const ours = [
    ...request.hosted.tools.map((tool) => `Mcp(${request.hosted.key}:${tool})`),
    ...request.mcp.map((server) => `Mcp(${server.key}:*)`)
  ]
  for (const rule of ours) if (!allow.includes(rule)) allow.push(rule)
  return JSON.stringify({ version: 1, ...current, permissions: { deny: [], ...permissions, allow } }, null, 2) + "\n"
}

/** A JSON object file of the clone (`{}` when absent or blank). */
const readJson = (request: Driver.InvocationRequest, name: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const file = path.join(request.profileDir, name)
    if (!(yield* fs.exists(file).pipe(Effect.orElseSucceed(() => false)))) return {}
    const text = yield* fs.readFileString(file).pipe(
      Effect.mapError(() => providerError(`cannot read ${name} in the execution clone`))
    )
    const parsed = yield* Effect.try({
      try: () => (text.trim().length === 0 ? {} : JSON.parse(text)) as unknown,
      catch: () => providerError(`${name} in the profile is not valid JSON`)
    })
    if (!isRecord(parsed)) return yield* Effect.fail(providerError(`${name} in the profile is not a JSON object`))
    return parsed
  })

/**
 * A project's MCP configuration that would replace a server the run declares: the CLI also reads
 * `.cursor/mcp.json` in the workspace and each directory above it, a project's entry wins over
 * the configuration directory's under the same name, and `--approve-mcps` approves it. The first
 * such file and the key, or `undefined`. Read as the editor's configuration is (comments allowed;
 * what cannot be read declares nothing).
 */
const projectCollision = (request: Driver.InvocationRequest) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const keys = [request.hosted.key, ...request.mcp.map((server) => server.key)]
    for (let dir = request.workspace;;) {
      const file = path.join(dir, ".cursor", mcpFile)
      const text = yield* Effect.option(fs.readFileString(file))
      if (Option.isSome(text)) {
        const parsed: unknown = Jsonc.parse(text.value, [], { allowTrailingComma: true })
        const servers = isRecord(parsed) && isRecord(parsed["mcpServers"]) ? parsed["mcpServers"] : {}
        const key = keys.find((k) => Object.hasOwn(servers, k))
        if (key !== undefined) return { file, key }
      }
      const parent = path.dirname(dir)
      if (parent === dir) return undefined
      dir = parent
    }
  })

const buildEnv = (config: Config, request: Driver.InvocationRequest, home: string, tmp: string) =>
  Env.buildEnv(config, request, {
    HOME: home,
    TMPDIR: tmp,
    CURSOR_CONFIG_DIR: request.profileDir,
    CURSOR_DATA_DIR: config.dataDir ?? request.profileDir
  })

/** @internal */
export const prepare = (config: Config, binary: Binary.Binary) => (request: Driver.InvocationRequest) =>
  Effect.gen(function*() {
    // Defence in depth: core refuses these before spawn from `capabilities`.
    if (request.instructions.length > 0) {
      return yield* Effect.fail(providerError("Cursor CLI cannot append instructions to its system prompt"))
    }
    if (request.sandbox !== undefined) {
      return yield* Effect.fail(providerError(`Cursor CLI cannot honour sandbox level "${request.sandbox}"`))
    }
    if (request.session._tag === "Fork") return yield* Effect.fail(providerError("Cursor CLI cannot fork a session"))
    const home = request.siblings["home"]
    const tmp = request.siblings["tmp"]
    if (home === undefined || tmp === undefined) {
      return yield* Effect.fail(providerError("the execution clone has no `home` and `tmp` siblings"))
    }
    const mcp = yield* renderMcp(request, yield* readJson(request, mcpFile))
    const cliConfig = renderCliConfig(request, yield* readJson(request, cliConfigFile))
    const collision = yield* projectCollision(request)
    if (collision !== undefined) {
      return yield* Effect.fail(
        new Driver.ProtocolError({
          reason: collision.key === request.hosted.key ? "HostedToolsUnavailable" : "ProviderError",
          detail: `${collision.file} declares MCP server "${collision.key}", which Cursor's CLI would run instead of ${
            collision.key === request.hosted.key ? "the hosted tools" : "the definition's source"
          }`
        })
      )
    }
    const args: Array<string> = [
      "-p",
      "--output-format",
      "stream-json",
      "--workspace",
      request.workspace,
      "--trust",
      "--approve-mcps"
    ]
    if (config.force === true) args.push("--force")
    const model = request.model ?? config.model
    if (model !== undefined) args.push("--model", model)
    // A new session gets its id from the CLI (`result.session_id` is the checkpoint).
    if (request.session._tag === "Resume") args.push("--resume", request.session.id)
    return {
      command: binary.command,
      args: [...binary.prefix, ...args],
      commandSource: binary.source,
      env: buildEnv(config, request, home, tmp),
      cwd: request.workspace,
      stdin: request.prompt,
      files: [
        { path: mcpFile, content: mcp, mode: 0o600 },
        { path: cliConfigFile, content: cliConfig, mode: 0o600 }
      ]
    } satisfies Driver.Invocation
  })

const missingSession = /session \S+ not found|no (previous )?(chat|session|conversation) found/i

/** @internal */
export const classifyExit = (info: Driver.ExitInfo): Driver.ProtocolError | undefined =>
  info.session._tag === "Resume" && missingSession.test(info.stderr)
    ? new Driver.ProtocolError({ reason: "ResumeRejected", detail: `no Cursor session ${info.session.id}` })
    : undefined

/**
 * What enters threads' compatibility fingerprint (DESIGN §10): the model and `force` (what the
 * CLI runs without asking). Never `env`, the binary or the data directory (where chats are kept,
 * not what they are). Absent when none is set, so those agents' threads still resume.
 *
 * @internal
 */
export const sessionConfig = (config: Config): { readonly [key: string]: unknown } | undefined => {
  const out: { [key: string]: unknown } = {}
  if (config.model !== undefined) out["model"] = config.model
  if (config.force === true) out["force"] = true
  return Object.keys(out).length === 0 ? undefined : out
}

/** @internal */
export const driver = (config: Config = {}): Driver.Driver => {
  // Cursor's CLI is not published on npm: the `binary` option, else `agent` on the PATH.
  const binary: Binary.Binary = config.binary === undefined
    ? {
      command: "agent",
      prefix: config.binaryArgs ?? [],
      source: "`agent` on the PATH given to the process (Cursor's CLI is not on npm)"
    }
    : { command: config.binary, prefix: config.binaryArgs ?? [], source: "the `binary` option" }
  const announce = Binary.announce("cursor", binary)
  const prepareTurn = prepare(config, binary)
  const session = sessionConfig(config)
  return {
    name: "cursor",
    capabilities,
    ...(session === undefined ? {} : { sessionConfig: session }),
    layout,
    prepare: (request) => Effect.zipRight(announce, prepareTurn(request)),
    parse: parser.parse,
    classifyExit,
    install: "install Cursor's CLI (`curl https://cursor.com/install -fsS | bash`, it is not published on npm)"
  }
}
