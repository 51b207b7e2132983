/**
 * Rendering `$CODEX_HOME/config.toml` for an agent: the user's copied settings, merged with
 * what the driver must declare, written with smol-toml (never by string concatenation). What
 * differs between turns is never in it (the file is shared by the agent's concurrent runs).
 *
 * @internal
 */
import * as Driver from "@tether/core/Driver"
import * as Effect from "effect/Effect"
import * as Toml from "smol-toml"
import type { Config, ModelProvider, TomlTable, TomlValue } from "../Codex.js"

/** @internal */
export const configFile = "config.toml"

/** The variable the driver sets to `ModelProvider.apiKey` and names in `env_key`. @internal */
export const apiKeyVariable = "TETHER_MODEL_PROVIDER_KEY"

/**
 * The user's own `config.toml`, saved by the first turn of a clone so every later turn merges
 * into the user's settings, never into the previous turn's rendering.
 *
 * @internal
 */
export const userConfigFile = ".tether-user-config.toml"

const isTable = (u: unknown): u is TomlTable =>
  typeof u === "object" && u !== null && !Array.isArray(u) && !(u instanceof Date)

/** Deep merge: tables merge key by key, any other value of `over` replaces the one of `base`. */
export const deepMerge = (base: TomlTable, over: TomlTable): TomlTable => {
  const out: { [key: string]: TomlValue } = { ...base }
  for (const [key, value] of Object.entries(over)) {
    const previous = out[key]
    out[key] = isTable(previous) && isTable(value) ? deepMerge(previous, value) : value
  }
  return out
}

/** @internal */
export const parseUserConfig = (text: string): Effect.Effect<TomlTable, Driver.ProtocolError> =>
  Effect.try({
    try: () => Toml.parse(text) as TomlTable,
    catch: (error) =>
      new Driver.ProtocolError({
        reason: "ProviderError",
        detail: `the profile's config.toml is not valid TOML: ${error instanceof Error ? error.message : String(error)}`
      })
  })

/**
 * The host declared the source for this agent, so its tools are approved: `codex exec` never
 * asks, and a tool needing approval fails ("approval policy is never").
 */
const approved = { default_tools_approval_mode: "approve" } as const

const mcpEntry = (server: Driver.McpServer): Effect.Effect<TomlTable, Driver.ProtocolError> => {
  if (server._tag === "stdio") {
    return Effect.succeed({ command: server.command, args: [...server.args], env: { ...server.env }, ...approved })
  }
  if (server._tag === "sse") {
    return Effect.fail(
      new Driver.ProtocolError({
        reason: "ProviderError",
        detail:
          `Codex cannot connect to the SSE MCP server "${server.key}": only stdio and streamable HTTP are supported`
      })
    )
  }
  const entry: { [key: string]: TomlValue } = { url: server.url }
  if (Object.keys(server.headers).length > 0) entry["http_headers"] = { ...server.headers }
  if (server.bearerTokenEnv !== undefined) entry["bearer_token_env_var"] = server.bearerTokenEnv
  return Effect.succeed({ ...entry, ...approved })
}

const providerEntry = (provider: ModelProvider): TomlTable => {
  const entry: { [key: string]: TomlValue } = {
    name: provider.name ?? provider.id,
    base_url: provider.baseUrl,
    wire_api: "responses"
  }
  if (provider.apiKey !== undefined) entry["env_key"] = apiKeyVariable
  if (provider.requestMaxRetries !== undefined) entry["request_max_retries"] = provider.requestMaxRetries
  if (provider.streamMaxRetries !== undefined) entry["stream_max_retries"] = provider.streamMaxRetries
  return entry
}

/**
 * The turn's hosted-tool allow-list as a `--config` override (`key=<TOML value>`): per run, so
 * concurrent runs of one agent never share it through `config.toml`. A JSON array of strings
 * is a valid TOML array.
 *
 * @internal
 */
export const enabledToolsOverride = (request: Driver.InvocationRequest): string =>
  `mcp_servers.${request.hosted.key}.enabled_tools=${JSON.stringify(request.hosted.tools)}`

/** The user's `[sandbox_workspace_write]` less what widens the sandbox level. */
const withoutWidening = ({ network_access: _network, writable_roots: _roots, ...rest }: TomlTable): TomlTable => rest

/**
 * The merged configuration. Precedence, lowest first: the user's copied settings, the host's
 * `config.settings`, then what this turn requires (model provider, instructions, MCP sources,
 * and the reserved hosted-tools server, which always replaces an entry of the same key).
 *
 * Two tables of the user's are left out. `projects` (the repositories the user trusted): a
 * trusted workspace's own `.codex/` layer is loaded, whose execpolicy `rules/` run commands
 * without asking the host and outside the turn's sandbox. `hooks` (the hooks the user declared
 * and trusted, `hooks.state` keyed by the hook's path): a trusted `PermissionRequest` hook of the
 * workspace (its path is the same in the clone) answers approvals in the host's place. Nor the
 * user's `[sandbox_workspace_write]` `writable_roots` and `network_access`: they would widen the
 * host's `workspaceWrite` level (a command wrote outside the workspace). The host's
 * `config.settings` may set any of them.
 *
 * @internal
 */
export const render = (
  config: Config,
  request: Driver.InvocationRequest,
  user: TomlTable
): Effect.Effect<string, Driver.ProtocolError> =>
  Effect.gen(function*() {
    const { hooks: _hooks, projects: _projects, ...copied } = user
    const workspaceWrite = copied["sandbox_workspace_write"]
    const own: TomlTable = isTable(workspaceWrite)
      ? { ...copied, sandbox_workspace_write: withoutWidening(workspaceWrite) }
      : copied
    let merged = deepMerge(own, config.settings ?? {})
    const provider = config.modelProvider
    if (provider !== undefined) {
      merged = deepMerge(merged, {
        model_provider: provider.id,
        model_providers: { [provider.id]: providerEntry(provider) }
      })
    }
    if (request.instructions.length > 0) {
      // The user's own developer instructions are kept, the agent's follow them.
      const own = typeof user["developer_instructions"] === "string" ? user["developer_instructions"] : undefined
      merged = {
        ...merged,
        developer_instructions: own === undefined || own.length === 0
          ? request.instructions
          : `${own}\n\n${request.instructions}`
      }
    }
    const servers: { [key: string]: TomlValue } = isTable(merged["mcp_servers"]) ? { ...merged["mcp_servers"] } : {}
    for (const server of request.mcp) {
      if (server.key === request.hosted.key) {
        return yield* Effect.fail(
          new Driver.ProtocolError({
            reason: "ProviderError",
            detail: `the MCP source key "${server.key}" is reserved for the hosted tools`
          })
        )
      }
      servers[server.key] = yield* mcpEntry(server)
    }
    // The turn's allow-list (`enabled_tools`) is not here: this file is shared by the agent's
    // concurrent runs, so it is given to each run on its command line (`enabledToolsOverride`).
    servers[request.hosted.key] = {
      url: request.hosted.url,
      bearer_token_env_var: request.hosted.tokenVariable,
      ...approved,
      required: true
    }
    merged = { ...merged, mcp_servers: servers }
    return yield* Effect.try({
      try: () => Toml.stringify(merged) + "\n",
      catch: (error) =>
        new Driver.ProtocolError({
          reason: "ProviderError",
          detail: `the Codex configuration cannot be written as TOML: ${
            error instanceof Error ? error.message : String(error)
          }`
        })
    })
  })
