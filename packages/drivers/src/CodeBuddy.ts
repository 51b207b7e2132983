/**
 * The CodeBuddy Code driver (`@tencent-ai/codebuddy-code` 2.117.0, the CLI bundled in
 * `@tencent-ai/agent-sdk` 0.3.201 under `cli/`).
 *
 * Each turn runs `codebuddy -p --output-format stream-json --verbose [--include-partial-messages]`
 * with the prompt written to stdin as plain text (never in argv) and stdin then closed. The
 * stream-json protocol is Claude Code's (the Claude parser's record mapping is shared) plus
 * `file-history-snapshot` and `system/status` records. The execution clone is
 * `CODEBUDDY_CONFIG_DIR`; the hosted tools are declared in an MCP config file written into the
 * clone (`--mcp-config`, with `--strict-mcp-config`) whose `Authorization` header references the
 * token variable (`Bearer ${VAR}`, which the CLI expands), never the token; each turn's
 * effective tools are allowed with `--allowedTools mcp__<key>__<tool>`.
 * `CODEBUDDY_DEFER_TOOL_LOADING=false` makes the CLI offer the hosted tools directly (otherwise
 * it hides MCP tools behind its `ToolSearch` tool).
 *
 * Pointing it at a model: `endpoint.baseUrl` (an OpenAI Chat Completions API; the CLI posts to
 * `<baseUrl>/chat/completions`, set as `CODEBUDDY_BASE_URL`), `endpoint.apiKey` (as `Redacted`;
 * `CODEBUDDY_API_KEY`, sent as `Authorization: Bearer` and `x-api-key`) and `model` (sent as the
 * request's `model`; absent, the CLI sends `default-model`), e.g.
 * `CodeBuddy.driver({ model: "my-model", endpoint: { baseUrl: "http://127.0.0.1:8080/v1", apiKey: Redacted.make(key) } })`.
 *
 * Retries: CodeBuddy Code has no setting that bounds them. It does not retry a model request
 * that got an HTTP error (the run fails at once); a request that fails below HTTP (connection
 * refused or reset, DNS, TLS) is tried once more, and when that fails too 2.117.0 stops without
 * a `result` record and without exiting: the driver ends the turn at that second failure, so a
 * dead endpoint fails the run in about the time of a plain turn (≈ 3 s here) instead of hanging
 * it; the CLI, which does not exit, is killed after the agent's `processes.exitGrace`.
 *
 * What the CLI writes outside its configuration directory stays in the clone's siblings: `HOME`
 * is the `home` sibling (the CLI writes `$HOME/.codebuddy/code-ratio/` when the workspace is a
 * git repository, and `gsettings`, which it runs, writes `$HOME/.cache/dconf/`) and `TMPDIR` the
 * `tmp` sibling, so the user's home is never written. The driver sets
 * `CODEBUDDY_SKIP_BUILTIN_MARKETPLACE=1` (otherwise every run `git clone`s a plugin marketplace
 * from cnb.cool into the profile; offline that fails after a DNS look-up), `DISABLE_AUTOUPDATER=1`
 * and `DISABLE_TELEMETRY=1`.
 *
 * @since 0.1.0
 */
import type * as Driver from "@tether/core/Driver"
import type { ProfileLayout } from "@tether/profile/ProfileLayout"
import * as EffectConfig from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Redacted from "effect/Redacted"
import * as internal from "./internal/codebuddy.js"
import * as parser from "./internal/codebuddyParse.js"

/**
 * The model endpoint: an OpenAI Chat Completions API.
 *
 * @since 0.1.0
 * @category models
 */
export interface Endpoint {
  /** Base URL, e.g. `http://127.0.0.1:8080/v1` (the CLI appends `/chat/completions`): `CODEBUDDY_BASE_URL`. */
  readonly baseUrl: string
  /** The API key (`CODEBUDDY_API_KEY`), sent as `Authorization: Bearer …` and `x-api-key`. */
  readonly apiKey?: Redacted.Redacted<string>
}

/**
 * Driver configuration. Everything is optional.
 *
 * @since 0.1.0
 * @category models
 */
export interface Config {
  /**
   * The `codebuddy` executable; always wins. When absent, the driver looks once, when it is
   * built, for the `@tencent-ai/agent-sdk` package the app installed (Node's module resolution
   * from `@tether/drivers` in the app's `node_modules`, never from the working directory) and runs
   * its `cli/bin/codebuddy` with this process's Node; when the app has none, `codebuddy` on the
   * `PATH` given to the process. The choice is logged once (Info); a `SpawnFailed` says what was
   * tried.
   */
  readonly binary?: string
  /** Default model (`--model`); a turn's `model` wins. Absent: the CLI's `default-model`. */
  readonly model?: string
  /**
   * The model endpoint. Absent: whatever `env` says (`CODEBUDDY_BASE_URL`, `CODEBUDDY_API_KEY`),
   * else the CLI's own service, which needs a login this driver cannot reach (see `layout`).
   */
  readonly endpoint?: Endpoint
  /**
   * Extra variables for the CLI. They cannot override the variables the driver owns (`HOME`,
   * `TMPDIR`, `CODEBUDDY_CONFIG_DIR`, `CODEBUDDY_DEFER_TOOL_LOADING`,
   * `CODEBUDDY_SKIP_BUILTIN_MARKETPLACE`, the update and telemetry switches, the token variable,
   * and the endpoint's variables when `endpoint` is given).
   */
  readonly env?: { readonly [name: string]: string | Redacted.Redacted<string> }
  /** Names of host variables passed through unchanged when set (besides `PATH`, `LANG`, `LC_ALL`, `TZ`). */
  readonly passEnv?: ReadonlyArray<string>
  /** Emit `TextDelta` / `ReasoningDelta` from `--include-partial-messages` (default `true`). */
  readonly partialMessages?: boolean
  /**
   * Also load the MCP servers configured in the profile itself (default `false`: the CLI is run
   * with `--strict-mcp-config`, so only the hosted tools and the definition's MCP sources exist).
   */
  readonly profileMcpServers?: boolean
  /**
   * Also load the workspace's own CodeBuddy Code settings (`.codebuddy/settings.json`,
   * `.codebuddy/settings.local.json`) and its memory files (default `false`: the CLI is run with
   * `--setting-sources user`, so only the clone's settings, which the driver rewrites, apply). A
   * repository's settings would apply their `env` (another endpoint, given the host's key), hooks
   * and permissions over the driver: give it only for workspaces you trust.
   */
  readonly projectSettings?: boolean
  /** Built-in tools offered to the model (`--tools`); absent: the CLI's default set. `[]` disables them all. */
  readonly builtinTools?: ReadonlyArray<string>
  /**
   * Permission rules for built-in tools the CLI may run without asking, added to
   * `--allowedTools` (e.g. `"Bash(git status:*)"`, `"Read"`, `"Edit"`). In `-p` mode a built-in
   * tool that needs permission and is not allowed is refused (the model is told so); the hosted
   * tools and the definition's MCP sources are always allowed. Absent: none.
   */
  readonly allowedTools?: ReadonlyArray<string>
  /**
   * How long the CLI waits for its MCP servers to connect before it starts the turn without the
   * ones still connecting (`MCP_TIMEOUT`; absent: the CLI's own 30 s). It is also how long
   * 2.117.0 stalls at start-up when a stdio MCP source is declared and the profile holds no
   * cached product configuration yet (every fresh clone): the CLI starts stdio servers only
   * after that wait. A hosted-tools server still connecting when it expires fails the run with
   * `HostedToolsUnavailable`; an external source still connecting is left out of the turn.
   */
  readonly mcpTimeout?: Duration.DurationInput
}

/**
 * What the driver can honour. Instructions are appended to the system prompt with
 * `--append-system-prompt` (the CLI has no file form, so they are limited to
 * {@link maxInstructionsBytes} and visible in the process's argv); resume and fork use the
 * CLI's `--resume` / `--fork-session`. No sandbox level maps faithfully onto CodeBuddy Code's
 * permission modes, so every sandbox request is refused. Skills are also projected natively into
 * the clone's `skills/<name>/` (the CLI lists them in its Skill tool), beside `read_skill`, but
 * for a skill whose SKILL.md (or one in a sub-folder) holds "!`command`" or `$ARGUMENTS`: the CLI
 * runs those commands through its shell when the model loads the skill, asking no permission, and
 * puts the model's `args` in place of `$ARGUMENTS` first (commands and `@path` reads of the
 * model's choosing); `read_skill` serves it.
 *
 * @since 0.1.0
 * @category constants
 */
export const capabilities: Driver.Capabilities = internal.capabilities

/**
 * CodeBuddy Code's configuration directory: `CODEBUDDY_CONFIG_DIR`, natively `$HOME/.codebuddy`.
 * Settings (`settings.json`, `settings.local.json`, `CODEBUDDY.md`, `models.json`,
 * `keybindings.json`, agents, commands, rules, hooks, output styles, workflows), MCP declarations
 * (`.mcp.json`), skills (`skills/`) and sessions (`projects/<workspace slug>/<session>.jsonl`,
 * with the CLI's auto memory beside them), which the session store keeps between clones. No
 * entry is authentication: a `codebuddy login` session is kept in
 * `$HOME/.local/share/CodeBuddyExtension`, outside the directory, and the clone's `HOME` is its
 * `home` sibling, so use `Config.endpoint`. The driver reserves `.tether-mcp.json`. Siblings:
 * `home` (`HOME`) and `tmp` (`TMPDIR`).
 *
 * @since 0.1.0
 * @category constants
 */
export const layout: ProfileLayout = internal.layout

/**
 * The file, relative to the clone, holding the MCP declarations of a run.
 *
 * @since 0.1.0
 * @category constants
 */
export const mcpConfigFile: string = internal.mcpConfigFile

/**
 * The largest instructions (UTF-8 bytes) the driver accepts: they travel as one command-line
 * argument, which Linux limits to 128 KiB.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxInstructionsBytes: number = internal.maxInstructionsBytes

/**
 * The CodeBuddy Code driver.
 *
 * `prepare` fails with `ProtocolError` when a sandbox level is requested, the layout's siblings
 * are missing, or the instructions exceed {@link maxInstructionsBytes} or contain a NUL. `parse`
 * maps the Claude-shaped records as the Claude driver does (`system/init` → `SessionStarted`,
 * failing with `HostedToolsUnavailable` when the hosted tools server is `failed` or `needs-auth`
 * and with `ResumeRejected` when a resumed session comes back under another id; partial
 * `stream_event` deltas → `TextDelta` / `ReasoningDelta`; `assistant` text → `Message`;
 * `tool_use` / `tool_result` → `ToolCall` start / end, the output being the text of the MCP
 * result's content; `result` → `Usage` + `Terminal`), and CodeBuddy's own: `file-history-snapshot`
 * and an empty `system/status` are dropped; a failed model request, which the CLI reports as
 * assistant text (a 401 as the bare `401 Unauthorized`), is a `Notice` (`api_error`), and a
 * second one in a row ends the turn with a
 * failed `Terminal` (see the module's note on retries); an `error` record is a failed `Terminal`,
 * or `ResumeRejected` when it says the resumed session does not exist. Its `sessionConfig` is
 * `model`, `builtinTools` and `profileMcpServers`; never `env`, `endpoint` or `binary`.
 *
 * @example
 * ```ts
 * import { CodeBuddy } from "@tether/drivers"
 * import { Redacted } from "effect"
 *
 * declare const apiKey: string
 *
 * // CodeBuddy Code (bundled in @tencent-ai/agent-sdk) against an OpenAI Chat Completions endpoint:
 * const driver = CodeBuddy.driver({
 *   model: "deepseek-v3",
 *   endpoint: { baseUrl: "https://llm-proxy.internal/v1", apiKey: Redacted.make(apiKey) }
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const driver: (config?: Config) => Driver.Driver = internal.driver

/**
 * The driver with its configuration read from `Config` (e.g. the environment): every field of
 * `Config` may be a `Config` (the endpoint's `baseUrl` and `apiKey` each one); an omitted field
 * stays unset. Fails with the `ConfigError` when a value is missing or invalid; the binary is
 * resolved as `driver` does, when this effect runs.
 *
 * @example
 * ```ts
 * import { CodeBuddy } from "@tether/drivers"
 * import { Config, Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const driver = yield* CodeBuddy.driverConfig({
 *     model: Config.string("CODEBUDDY_MODEL"),
 *     endpoint: {
 *       baseUrl: Config.string("CODEBUDDY_BASE_URL"),
 *       apiKey: Config.redacted("CODEBUDDY_API_KEY")
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
 * The parser alone (what `driver(config).parse` is).
 *
 * @since 0.1.0
 * @category parsing
 */
export const parse: Driver.Driver["parse"] = parser.parse
