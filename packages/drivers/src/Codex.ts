/**
 * The Codex driver (`@openai/codex`, verified with 0.171.0).
 *
 * Each turn runs `codex exec --json --skip-git-repo-check [--model m] [--config sandbox_mode=…]
 * --config mcp_servers.<key>.enabled_tools=[…] -- -` (`exec resume … -- <thread> -` to resume,
 * `exec fork … -- <thread> -` to fork) with the prompt written to stdin and stdin then closed:
 * never in argv (readable by every local user through `/proc`, and limited to 128 KiB per
 * argument). The
 * execution clone is `CODEX_HOME`; `HOME` and `TMPDIR` are the layout's `home` and `tmp`
 * siblings (outside the clone, as Codex requires). The clone's `config.toml` is the user's
 * copied settings (less their `projects` trust and `hooks`, which would let the workspace's own
 * rules and hooks answer in the host's place, and their `[sandbox_workspace_write]`
 * `writable_roots` and `network_access`, which would widen the host's `workspaceWrite`) merged with the agent's declarations (written with
 * smol-toml), the same for
 * every run of the agent: the hosted tools as `[mcp_servers.<key>]` with `url`,
 * `bearer_token_env_var` (the variable's name, never the token),
 * `default_tools_approval_mode = "approve"` and `required = true` (a hosted-tools server that
 * fails to start fails the run); the turn's effective tools (`enabled_tools`) are given on the
 * run's own command line, so concurrent runs never share them through the file;
 * the agent's instructions as `developer_instructions`; the definition's MCP sources (stdio and
 * streamable HTTP, their tools approved as well, a bearer token only by variable name); the
 * configured model provider.
 *
 * Pointing it at another endpoint: `model` (the model name) and `modelProvider` (`baseUrl` of an
 * OpenAI Responses API and its `apiKey`), e.g.
 * `Codex.driver({ model: "my-model", modelProvider: { id: "mine", baseUrl: "http://127.0.0.1:8080/v1", apiKey: Redacted.make(key) }, settings: Codex.offlineSettings })`.
 * A model name Codex knows (e.g. `gpt-5.5`) makes it defer MCP tools (the hosted tools included)
 * behind its `tool_search` tool instead of listing them in each request, or, with some
 * endpoints, send none: a custom endpoint must answer `tool_search` or be given a model name
 * Codex does not know (it then warns "Model metadata … not found" once per turn, harmlessly,
 * and lists the tools). A dead endpoint fails the run after `maxReconnects` (default 2).
 *
 * @since 0.1.0
 */
import type * as Driver from "@tether/core/Driver"
import type { ProfileLayout } from "@tether/profile/ProfileLayout"
import * as EffectConfig from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import type * as Redacted from "effect/Redacted"
import * as internal from "./internal/codex.js"
import * as codexConfig from "./internal/codexConfig.js"
import * as liveParser from "./internal/codexLiveParse.js"
import * as parser from "./internal/codexParse.js"

/**
 * A TOML value as smol-toml reads and writes it.
 *
 * @since 0.1.0
 * @category models
 */
export type TomlValue =
  | string
  | number
  | bigint
  | boolean
  | Date
  | ReadonlyArray<TomlValue>
  | TomlTable

/**
 * A TOML table as Codex's `config.toml` holds it: the value of `Config.settings` and
 * `ModelProvider` entries, written into the clone's config file.
 *
 * @since 0.1.0
 * @category models
 */
export interface TomlTable {
  readonly [key: string]: TomlValue
}

/**
 * A model provider declared as `[model_providers.<id>]` and selected with `model_provider`:
 * the one place to point Codex at another endpoint (an OpenAI Responses API).
 *
 * @since 0.1.0
 * @category models
 */
export interface ModelProvider {
  readonly id: string
  readonly name?: string
  /** E.g. `http://127.0.0.1:<port>/v1` (Codex appends `/responses`). */
  readonly baseUrl: string
  /**
   * The key Codex sends as `Authorization: Bearer …`. The driver hands it to the CLI under a
   * variable of its own ({@link apiKeyVariable}) and names that variable in the provider's
   * `env_key`, so the two cannot disagree. Absent: no `Authorization` header is sent.
   *
   * @since 0.2.0
   */
  readonly apiKey?: Redacted.Redacted<string>
  /** `request_max_retries`: retries of a failed request (Codex's default: 4). */
  readonly requestMaxRetries?: number
  /** `stream_max_retries`: retries of a dropped response stream (Codex's default: 5). */
  readonly streamMaxRetries?: number
}

/**
 * Driver configuration. Everything is optional.
 *
 * @since 0.1.0
 * @category models
 */
export interface Config {
  /**
   * The Codex executable; always wins. When absent, the driver looks once, when it is built, for
   * the `@openai/codex` package the app installed (Node's module resolution from `@tether/drivers`
   * in the app's `node_modules`, never from the working directory): the native binary of its
   * platform package (`@openai/codex-linux-x64/vendor/<triple>/bin/codex`, about 80 ms per turn
   * faster), the one vendored in the package, then the npm launcher run with this Node; when the
   * app has none, `codex` on the `PATH` given to the process. The choice is logged once (Info); a
   * `SpawnFailed` says what was tried.
   */
  readonly binary?: string
  /** Default model (`--model`); a turn's `model` wins. Absent: the profile's own setting. */
  readonly model?: string
  /** The model provider to declare and select (else the profile's settings decide). */
  readonly modelProvider?: ModelProvider
  /**
   * Settings merged over the user's copied `config.toml` (tables merge key by key), e.g.
   * {@link offlineSettings}. The hosted-tools server key is reserved and always the driver's. The
   * user's `projects` and `hooks` tables and `sandbox_workspace_write`'s `writable_roots` and
   * `network_access` are not copied; given here, they apply.
   */
  readonly settings?: TomlTable
  /**
   * Extra variables for the CLI (e.g. the model provider's key, as `Redacted`). They cannot
   * override the variables the driver owns (`HOME`, `CODEX_HOME`, `TMPDIR`, the token variable).
   */
  readonly env?: { readonly [name: string]: string | Redacted.Redacted<string> }
  /** Names of host variables passed through unchanged when set (besides `PATH`, `LANG`, `LC_ALL`, `TZ`). */
  readonly passEnv?: ReadonlyArray<string>
  /**
   * When the model endpoint cannot be reached, Codex 0.171.0 keeps reporting
   * `Reconnecting... waiting for network` (after about 4 s, 12 s, 25 s, …) and never ends the
   * turn, whatever its retry settings. The run fails with `ProtocolError("ProviderError")` once
   * Codex reported more attempts than this (`0`: at the first). Default `2` (a dead endpoint
   * fails after about 25 s); `Infinity` lets Codex wait forever.
   */
  readonly maxReconnects?: number
}

/**
 * What the driver can honour: resume and fork, stdio and streamable-HTTP MCP sources,
 * instructions, the three sandbox levels (`read-only`, `workspace-write`,
 * `danger-full-access`), a per-turn tool allow-list (`enabled_tools`, per run), and the live
 * protocol (`codex app-server`: one warm process per thread, input during a turn with `turn/steer`).
 *
 * @since 0.1.0
 * @category constants
 */
export const capabilities: Driver.Capabilities = internal.capabilities

/**
 * Codex's configuration directory: `CODEX_HOME`, natively `$HOME/.codex`. Settings
 * (`config.toml`, which also holds the MCP declarations, `*.config.toml` profiles,
 * `AGENTS.md`, prompts; not the user's execpolicy `rules/`, whose `allow` rules would run commands
 * unasked and outside a turn's sandbox), skills (`skills/`), authentication (`auth.json`); the driver
 * reserves `.tether-user-config.toml` (the user's settings as copied, kept for later turns).
 * Siblings: `home` (`HOME`) and `tmp` (`TMPDIR`).
 *
 * @since 0.1.0
 * @category constants
 */
export const layout: ProfileLayout = internal.layout

/**
 * Settings that keep Codex from reaching anything but the configured endpoints: no plugin
 * sync (`features.plugins`: a git clone and GitHub/ChatGPT calls otherwise), no ChatGPT apps
 * connector (`features.apps`: with an `auth.json` in the profile Codex otherwise connects to
 * `https://chatgpt.com/backend-api/ps/mcp` at start-up, ≈ 1.4 s per turn offline), no
 * analytics, no feedback upload, no update check.
 *
 * @since 0.1.0
 * @category constants
 */
export const offlineSettings: TomlTable = internal.offlineSettings

/**
 * The variable that carries `ModelProvider.apiKey` into the CLI (named in the provider's
 * `env_key`).
 *
 * @since 0.2.0
 * @category constants
 */
export const apiKeyVariable: string = codexConfig.apiKeyVariable

/**
 * The reconnection bound used when `Config.maxReconnects` is absent.
 *
 * @since 0.2.0
 * @category constants
 */
export const defaultMaxReconnects: number = internal.defaultMaxReconnects

/**
 * The file, relative to the clone, where the user's copied `config.toml` is kept.
 *
 * @since 0.1.0
 * @category constants
 */
export const userConfigFile: string = codexConfig.userConfigFile

/**
 * The Codex driver.
 *
 * `prepare` fails with `ProtocolError` when the layout's siblings are missing, the profile's
 * `config.toml` is not TOML, an MCP source uses SSE or takes the reserved key. `parse` maps
 * `thread.started` → `SessionStarted` (the thread id is the checkpoint; a resume that comes
 * back with another thread fails with `ResumeRejected`), `item.*` of `agent_message` →
 * `Message`, `reasoning` → `ReasoningDelta`, `mcp_tool_call` / `command_execution` /
 * `file_change` / `web_search` → `ToolCall` start and end (hosted tools have source `host`),
 * `todo_list` and `error` items → `Notice`, `turn.completed` → `Usage` + `Terminal`,
 * `turn.failed` → a failed `Terminal`, `error` records → `Notice`. Unknown records, unknown item
 * kinds and lines that are not JSON become `Notice`s. `classifyExit` maps "no rollout found for
 * thread id" to `ResumeRejected` and "required MCP servers failed to initialize" to
 * `HostedToolsUnavailable`.
 *
 * `live` runs one `codex app-server` (stdio JSON-RPC) per thread. `live.open` materializes the
 * same clone files and environment as `prepare`; the model, the sandbox level and the hosted-tool
 * allow-list are `-c` overrides of the process (core reuses a warm process only while they hold). `live.attach` initializes, then starts (`thread/start`), resumes (`thread/resume`) or
 * forks (`thread/fork`) the thread with `approvalPolicy: "never"` (`"untrusted"` for an agent with
 * approvals); a thread Codex does not know
 * fails with `ResumeRejected`, a hosted-tools server that cannot start with
 * `HostedToolsUnavailable`. Each `turn` is a `turn/start` whose notifications map to the same
 * outputs as `parse` (plus `TextDelta`s of the agent's message), ending with the `Terminal` of
 * `turn/completed` (`ok` only for status `completed`); the first turn starts with
 * `SessionStarted`. `steer` is `turn/steer` (`Injected`: the model sees the input in the same
 * turn), `interrupt` is `turn/interrupt` (the turn ends with `ok: false`, the process stays),
 * `shutdown` closes stdin (the app-server exits). A turn whose stream is dropped before its
 * terminal is interrupted. For an agent with approvals (`approvals.live`: asked on live threads
 * only; a one-shot `codex exec` run of such an agent fails before spawn),
 * `item/commandExecution/requestApproval` and `item/fileChange/requestApproval` (with the paths and
 * diff of the preceding `item/started` fileChange item) are asked of the host and answered
 * `accept`, `acceptForSession` (file changes; commands are offered none, so `accept`) or `decline`.
 * Codex tells the model only that the call was rejected, so the deny message is first steered
 * into the same turn (`turn/steer`): the model reads it right after the rejection. The thread
 * runs at the request's sandbox level (`sandbox` of `thread/start|resume|fork`: a resumed thread
 * would keep the level it last ran with). The server's other requests (and every one without approvals)
 * are declined at once and reported as `Notice`s. A process that exits during a turn fails it with
 * `ProtocolError("ProviderError")` after the outputs read so far; JSON-RPC error answers fail
 * with the server's message.
 *
 * @example
 * ```ts
 * import { Codex } from "@tether/drivers"
 * import { Redacted } from "effect"
 *
 * declare const apiKey: string
 *
 * const driver = Codex.driver({ model: "gpt-5-codex" })
 * // Another endpoint that speaks the OpenAI Responses API: declared as Codex's model provider.
 * const proxied = Codex.driver({
 *   model: "gpt-5-codex",
 *   modelProvider: { id: "proxy", baseUrl: "https://llm-proxy.internal/v1", apiKey: Redacted.make(apiKey) }
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const driver: (config?: Config) => Driver.Driver = internal.driver

/**
 * The driver with its configuration read from `Config` (e.g. the environment): every field of
 * `Config` may be a `Config` (the model provider's `baseUrl` and `apiKey` each one); an omitted
 * field stays unset. Fails with the `ConfigError` when a value is missing or invalid; the binary is
 * resolved as `driver` does, when this effect runs.
 *
 * @example
 * ```ts
 * import { Codex } from "@tether/drivers"
 * import { Config, Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const driver = yield* Codex.driverConfig({
 *     binary: Config.string("CODEX_BINARY"),
 *     model: Config.string("CODEX_MODEL"),
 *     modelProvider: {
 *       id: Config.succeed("gateway"),
 *       baseUrl: Config.string("OPENAI_BASE_URL"),
 *       apiKey: Config.redacted("OPENAI_API_KEY")
 *     }
 *   })
 *   return driver
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const driverConfig = (
  config: EffectConfig.Config.Wrap<Config>
): Effect.Effect<Driver.Driver, ConfigError.ConfigError> => Effect.map(EffectConfig.unwrap(config), driver)

/**
 * The parser alone (what `driver(config).parse` is, without a `maxReconnects` limit).
 *
 * @since 0.1.0
 * @category parsing
 */
export const parse: Driver.Driver["parse"] = parser.parse

/**
 * The live protocol's mapping alone, over the recorded stdout of one app-server session: the
 * thread answer yields `SessionStarted`, each turn's notifications the outputs `driver(config).live`
 * yields for it (without a `maxReconnects` limit).
 *
 * @since 0.2.0
 * @category parsing
 */
export const parseLive: Driver.Driver["parse"] = (lines, context) => liveParser.parse(lines, context)

/**
 * The exit classifier alone (what `driver(config).classifyExit` is).
 *
 * @since 0.1.0
 * @category parsing
 */
export const classifyExit: (info: Driver.ExitInfo) => Driver.ProtocolError | undefined = parser.classifyExit
