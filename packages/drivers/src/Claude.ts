/**
 * The Claude Code driver (`@anthropic-ai/claude-code`, verified with 2.1.197).
 *
 * Each one-shot turn runs `claude -p --input-format stream-json --output-format stream-json
 * --verbose [--include-partial-messages]` with the prompt written to stdin as one stream-json
 * user message (never in argv) and stdin then closed; a live session keeps the same process and
 * its stdin open for every turn of a thread (`driver(config).live`). The execution clone is `CLAUDE_CONFIG_DIR`;
 * the hosted tools are declared in an MCP config file written into the clone whose
 * `Authorization` header references the token variable (`Bearer ${VAR}`), never the token.
 *
 * Pointing it at another endpoint (an Anthropic Messages API): `env.ANTHROPIC_BASE_URL` (no
 * `/v1` suffix), `env.ANTHROPIC_API_KEY` (as `Redacted`; sent as `x-api-key`) and `model`, e.g.
 * `Claude.driver({ model: "claude-sonnet-4-5", env: { ANTHROPIC_BASE_URL: "http://127.0.0.1:8080", ANTHROPIC_API_KEY: Redacted.make(key) } })`.
 * A dead endpoint fails the run after `maxRetries` (default 3) retries.
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
import * as internal from "./internal/claude.js"
import * as parser from "./internal/claudeParse.js"

/**
 * Driver configuration. Everything is optional.
 *
 * @since 0.1.0
 * @category models
 */
export interface Config {
  /**
   * The `claude` executable; always wins. When absent, the driver looks once, when it is built,
   * for the `@anthropic-ai/claude-code` package the app installed (Node's module resolution from
   * `@tether/drivers` in the app's `node_modules`, never from the working directory): the native
   * binary of its platform package, then its launcher; when the app has none, `claude` on the
   * `PATH` given to the process. The choice is logged once (Info); a `SpawnFailed` says what was tried.
   */
  readonly binary?: string
  /** Default model (`--model`); a turn's `model` wins. Absent: the CLI's own default. */
  readonly model?: string
  /**
   * Extra variables for the CLI, e.g. the model endpoint: `ANTHROPIC_BASE_URL`,
   * `ANTHROPIC_API_KEY` (as `Redacted`). They cannot override the variables the driver owns
   * (`HOME`, `CLAUDE_CONFIG_DIR`, `CLAUDE_CODE_TMPDIR`, the telemetry switches, the token
   * variable).
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
   * Also load the workspace's own Claude Code settings (`.claude/settings.json`,
   * `.claude/settings.local.json` in the workspace and above) and its `CLAUDE.md` (default
   * `false`: the CLI is run with `--setting-sources user`, so only the clone's settings, which the
   * driver rewrites, apply). A repository's settings would apply their `env` (another endpoint,
   * given the host's key), `apiKeyHelper`, hooks (a `PreToolUse` hook answers approvals) and
   * permission mode over the driver and the host: give it only for workspaces you trust.
   */
  readonly projectSettings?: boolean
  /** Built-in tools offered to the model (`--tools`); absent: the CLI's default set. `[]` disables them all. */
  readonly builtinTools?: ReadonlyArray<string>
  /**
   * Permission rules for built-in tools the CLI may run without asking, added to
   * `--allowedTools` (e.g. `"Bash"`, `"Bash(git status:*)"`, `"Read"`, `"Edit"`). In `-p` mode a
   * built-in tool that needs permission and is not allowed is refused; the hosted tools and the
   * definition's MCP sources are always allowed. Absent: none.
   */
  readonly allowedTools?: ReadonlyArray<string>
  /**
   * How many times the CLI retries a failed model request (`CLAUDE_CODE_MAX_RETRIES`; the CLI's
   * own default is 10, with back-off: more than 2 minutes against a dead endpoint). Default
   * {@link defaultMaxRetries} (a dead endpoint fails the run in about 6 s). A
   * `CLAUDE_CODE_MAX_RETRIES` given in `env` is used when this is absent.
   */
  readonly maxRetries?: number
  /**
   * How long the CLI waits, before a turn's first model request, for its MCP servers (the hosted
   * tools, the definition's MCP sources) to connect (`MCP_CONNECT_TIMEOUT_MS`; absent: the CLI's
   * own 5 s). The driver always makes it wait (in print mode it would otherwise connect them in
   * the background and the first request could go out without them). A hosted-tools server still
   * connecting when the wait ends fails the run with `HostedToolsUnavailable`; an external source
   * still connecting is left out of the turn (a `Notice`).
   */
  readonly mcpTimeout?: Duration.DurationInput
}

/**
 * What the driver can honour. Claude Code has no sandbox level the driver can map faithfully
 * (its permission modes are not a filesystem sandbox), so every sandbox request is refused.
 *
 * @since 0.1.0
 * @category constants
 */
export const capabilities: Driver.Capabilities = internal.capabilities

/**
 * Claude Code's configuration directory: `CLAUDE_CONFIG_DIR`, natively `$HOME/.claude`.
 * Settings (`settings.json`, `CLAUDE.md`, agents, commands, output styles), MCP declarations
 * (`.claude.json`, which also holds `mcpServers`), skills (`skills/`), authentication
 * (`.credentials.json`); the driver reserves `.tether-mcp.json` and `.tether-instructions.md`.
 * Siblings: `home` (the process's `HOME`; with an MCP server configured, 2.1.197 writes its MCP
 * logs under `home/.cache/claude-cli-nodejs/`) and `tmp` (`CLAUDE_CODE_TMPDIR`). Natively, without
 * `CLAUDE_CONFIG_DIR`, Claude Code keeps `.claude.json` in `$HOME` rather than in `$HOME/.claude`.
 * Session transcripts (`projects/`) are not a class: they live and die with the clone.
 *
 * @since 0.1.0
 * @category constants
 */
export const layout: ProfileLayout = internal.layout

/**
 * The retry bound used when `Config.maxRetries` is absent.
 *
 * @since 0.2.0
 * @category constants
 */
export const defaultMaxRetries: number = internal.defaultMaxRetries

/**
 * The file, relative to the clone, holding the MCP declarations of a run.
 *
 * @since 0.1.0
 * @category constants
 */
export const mcpConfigFile: string = internal.mcpConfigFile

/**
 * The file, relative to the clone, holding the instructions appended to the system prompt.
 *
 * @since 0.1.0
 * @category constants
 */
export const instructionsFile: string = internal.instructionsFile

/**
 * The Claude Code driver.
 *
 * `prepare` fails with `ProtocolError` when a sandbox level is requested or the layout's
 * siblings are missing. `parse` maps every record kind of the stream-json protocol:
 * `system/init` → `SessionStarted` (a hosted-tools server reported `failed` or `needs-auth`
 * fails the stream with `ProtocolError("HostedToolsUnavailable")`; a resumed session that
 * comes back with another id fails with `ResumeRejected`), `system/api_retry` and other
 * system records → `Notice`, partial `stream_event` deltas → `TextDelta` / `ReasoningDelta`,
 * `assistant` text → `Message`, `tool_use` → `ToolCall` start, `user` `tool_result` →
 * `ToolCall` end, `result` → `Usage` + `Terminal` (`ok` is `false` when `is_error`).
 * Unknown records and lines that are not JSON become `Notice`s. Its `sessionConfig` (what
 * enters threads' compatibility fingerprint) is `model`, `builtinTools` and
 * `profileMcpServers`; never `env` or `binary`.
 *
 * `live` (DESIGN §12): `open` is `prepare`'s invocation (same flags, files, environment and
 * session flags) plus `--replay-user-messages`, with stdin kept open; each turn is one user line
 * and yields what `parse` yields for it (the process's running `total_cost_usd` is turned into
 * the turn's own cost). `steer` writes a user line during the turn and resolves once the CLI
 * shows where it went: `Injected` when the CLI took it at a tool boundary of the running turn,
 * `Queued` when the running reply ended first (the turn then goes on with the CLI's answer to
 * it, after a `Notice` of kind `queued_input`, and ends with that answer's terminal). `interrupt`
 * is a `control_request` `interrupt` (the turn ends with `ok: false`, the CLI's queued input of
 * the turn is aborted too). `shutdown` closes stdin (the CLI exits 0 after a successful turn).
 * For an agent with approvals, `open` adds `--permission-prompt-tool stdio` and each
 * `can_use_tool` control request is asked of the host (`LiveContext.approve`) on behalf of the
 * running turn and answered with a `control_response` `{behavior: "allow", updatedInput}` or
 * `{behavior: "deny", message}` (the model gets that message as the tool's error result);
 * `allowForSession` adds `updatedPermissions`: the request's `permission_suggestions` kept to the
 * session (`destination: "session"`), so the CLI asks no more for what they cover. The process
 * stays warm. Other control requests (and every one without approvals) are answered at
 * once with an error and reported as a `Notice` of kind `control_request`. A
 * process that ends mid-turn fails the turn with `ProtocolError("ProviderError")`.
 *
 * @example
 * ```ts
 * import { Claude } from "@tether/drivers"
 * import { Redacted } from "effect"
 *
 * declare const apiKey: string
 *
 * // The Claude Code CLI the app installed (or `claude` on the PATH), logged in through the profile:
 * const driver = Claude.driver({ model: "claude-sonnet-4-5" })
 * // The same CLI against another endpoint that speaks the Anthropic Messages API:
 * const proxied = Claude.driver({
 *   model: "claude-sonnet-4-5",
 *   env: { ANTHROPIC_BASE_URL: "https://llm-proxy.internal", ANTHROPIC_API_KEY: Redacted.make(apiKey) },
 *   allowedTools: ["Read", "Bash(git status:*)"] // built-in tools it may run without asking
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const driver: (config?: Config) => Driver.Driver = internal.driver

/**
 * The driver with its configuration read from `Config` (e.g. the environment): every field of
 * `Config` may be a `Config` (the endpoint and the key are variables of `env`, read with
 * `Config.all`); an omitted field
 * stays unset. Fails with the `ConfigError` when a value is missing or invalid; the binary is
 * resolved as `driver` does, when this effect runs.
 *
 * @example
 * ```ts
 * import { Claude } from "@tether/drivers"
 * import { Config, Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const driver = yield* Claude.driverConfig({
 *     model: Config.string("CLAUDE_MODEL"),
 *     env: Config.all({
 *       ANTHROPIC_BASE_URL: Config.string("ANTHROPIC_BASE_URL"),
 *       ANTHROPIC_API_KEY: Config.redacted("ANTHROPIC_API_KEY")
 *     })
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

/**
 * The stdin line that carries a prompt in `--input-format stream-json`.
 *
 * @since 0.1.0
 * @category parsing
 */
export const promptLine: (prompt: string) => string = internal.promptLine
