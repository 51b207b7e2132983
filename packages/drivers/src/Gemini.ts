/**
 * The Gemini CLI driver (`@google/gemini-cli`, verified with 0.61.0).
 *
 * Each turn runs `gemini -p "" --output-format stream-json [-m <model>] --session-id <uuid> |
 * --resume <uuid> --skip-trust` with the prompt written to stdin (never in argv) and stdin then
 * closed; the headless mode appends stdin to the empty `-p` prompt. `GEMINI_CLI_HOME` is the
 * execution clone: the driver rewrites `<clone>/.gemini/settings.json` as the user's copied
 * settings with its own keys merged over them (`security.auth.selectedType`, telemetry and
 * update checks off, the CLI's session retention off: Tether's session store keeps and prunes
 * sessions, the MCP servers), the same for every run of the agent: it declares the hosted
 * tools as an `httpUrl` server whose `Authorization` header references the token variable
 * (`Bearer ${VAR}`, never the token), with `trust: true` (only this server). The turn's allow-list
 * is per run: a policy file named by its content (`<clone>/.gemini/tether-tools-<digest>.toml`,
 * every hosted tool denied but the turn's) passed with `--policy` (with the user's own policy
 * paths again, which `--policy` replaces), so concurrent runs with other tool sets never read each
 * other's allow-list. A hosted tool whose `mcp_<key>_<tool>` is over 63 characters is offered by the
 * CLI under a shortened name (its first 30 and last 30 characters around `...`): the policy allows
 * it under that name and the driver reports it under the catalog's. A turn's `builtinTools.deny` is
 * a policy file of its own, whose rules rank above anything the copied profile can allow (priority
 * 999, given both as the first `--policy` and as the first `--admin-policy`, before the user's
 * `adminPolicyPaths` again): a denied built-in is neither offered nor run, whatever the profile's
 * `tools.allowed`, policy files or `adminPolicyPaths` say. Instructions are
 * written to `<clone>/.gemini/tether-instructions.md`, which `context.fileName` names, so the CLI
 * loads it as global context into the request's `systemInstruction`. The user's `settings.json`
 * is read as the CLI reads it: JSON with comments.
 *
 * Pointing it at another endpoint (a Gemini API): `env.GOOGLE_GEMINI_BASE_URL` (no `/v1beta`
 * suffix), `env.GEMINI_API_KEY` (as `Redacted`; sent as `x-goog-api-key`) and `model` (with the
 * CLI's default `auto`, a routing request precedes each turn), e.g.
 * `Gemini.driver({ model: "gemini-2.5-flash", env: { GOOGLE_GEMINI_BASE_URL: "http://127.0.0.1:8080", GEMINI_API_KEY: Redacted.make(key) } })`.
 * A dead endpoint fails the run after `maxAttempts` (default 3) attempts.
 *
 * Gemini CLI 0.61 adds a `wait_for_previous` boolean to every tool schema it offers the model
 * and forwards it in MCP calls: the driver declares it (`injectedArguments`), so the process's
 * gateway credential removes it before the host tool's input is decoded.
 *
 * Live sessions (`driver.live`) run `gemini --acp` with the same files, environment and flags as a
 * one-shot turn (no `-p`, no session flag) and drive it over the Agent Client Protocol: the
 * session is created with `session/new` (resumed with `session/load`), which declares the hosted
 * tools as an HTTP MCP server with the process's bearer token; each turn is a `session/prompt`,
 * an interrupt is `session/cancel` and keeps the process warm. ACP cannot steer (a second prompt
 * cancels the first): there is no `steer` and `streamingInput` is `false`. For an agent with
 * approvals (`approvals.live`: asked on live threads only; a one-shot `-p` run of such an agent
 * fails before spawn), each `session/request_permission` is asked of the host and answered with
 * the offered option of the decision's kind (`allow` → `allow_once`, `allowForSession` →
 * `allow_always`, which for a command or a file change reaches this call only: docs/approvals.md;
 * `deny` → `reject_once`; the model is told only that the call was canceled: ACP's reject carries
 * no message, and Gemini CLI takes no input during a turn, so the deny message does not reach it). Without
 * approvals the CLI's permission requests are denied (its reject option; the tool call fails).
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
import * as internal from "./internal/gemini.js"
import * as parser from "./internal/geminiParse.js"

/**
 * Driver configuration. Everything is optional.
 *
 * @since 0.1.0
 * @category models
 */
export interface Config {
  /**
   * The `gemini` executable; always wins. When absent, the driver looks once, when it is built,
   * for the `@google/gemini-cli` package the app installed (Node's module resolution from
   * `@tether/drivers` in the app's `node_modules`, never from the working directory) and runs its
   * `bundle/gemini.js` with this Node; when the app has none, `gemini` on the `PATH` given to the
   * process. The choice is logged once (Info); a `SpawnFailed` says what was tried.
   */
  readonly binary?: string
  /**
   * Default model (`-m`); a turn's `model` wins. Absent: the CLI's own default (`auto`, which adds a
   * router request). Part of threads' compatibility fingerprint (`sessionConfig`).
   */
  readonly model?: string
  /**
   * Extra variables for the CLI, e.g. `GOOGLE_GEMINI_BASE_URL` or `GEMINI_API_KEY` (as
   * `Redacted`). They cannot override the variables the driver owns (`HOME`, `TMPDIR`,
   * `GEMINI_CLI_HOME`, `GEMINI_CLI_NO_RELAUNCH`, the token variable); `GEMINI_CLI_TRUST_WORKSPACE`
   * is always removed (trust is `trustWorkspace`).
   */
  readonly env?: { readonly [name: string]: string | Redacted.Redacted<string> }
  /** Names of host variables passed through unchanged when set (besides `PATH`, `LANG`, `LC_ALL`, `TZ`). */
  readonly passEnv?: ReadonlyArray<string>
  /**
   * `security.auth.selectedType` written into the clone's settings. Absent: the user's copied
   * value, else `gemini-api-key`. (Required in headless mode: with `GOOGLE_GEMINI_BASE_URL` set,
   * the type derived from the environment is rejected with exit 41.) Part of threads' compatibility
   * fingerprint.
   */
  readonly authType?: string
  /**
   * Trust the workspace for each run (`--skip-trust`, default `true`). With `false` the CLI
   * decides from the profile's `trustedFolders.json` and exits 55 in an untrusted folder.
   */
  readonly trustWorkspace?: boolean
  /**
   * `--approval-mode` (`default`, `auto_edit`, `yolo`, `plan`); absent: the CLI's default (the
   * profile's `general.defaultApprovalMode`), or `default` for a process of an agent with
   * approvals, whose host then decides every built-in call the CLI asks about, whatever the
   * user's settings and policy files allow (`auto_edit` or `yolo` given here still stand). Part of
   * threads' compatibility fingerprint.
   */
  readonly approvalMode?: "default" | "auto_edit" | "yolo" | "plan"
  /**
   * Attempts per model request (`general.maxAttempts` in the clone's settings, at most 10). The
   * CLI's own default is 10 with a back-off from 5 s to 30 s: about 220 s against a dead
   * endpoint. Default {@link defaultMaxAttempts} (about 15 s); a value in the user's copied
   * settings is used when this is absent.
   */
  readonly maxAttempts?: number
  /**
   * Bounds of a live session's start (`driver.live`, `gemini --acp`): `startTimeout` (default 2
   * minutes) covers `initialize` and the creation or load of the session; `hostedToolsTimeout`
   * (default 20 seconds) is how long the session waits for the CLI to list the hosted tools with
   * its credential before failing with `HostedToolsUnavailable` (a CLI given a wrong token drops
   * the server silently).
   */
  readonly live?: {
    readonly startTimeout?: Duration.DurationInput
    readonly hostedToolsTimeout?: Duration.DurationInput
  }
}

/**
 * What the driver can honour: resume (`--resume <uuid>`), no fork, MCP sources over stdio,
 * HTTP and SSE, appended instructions, per-turn tool allow-list (a `--policy` file), no sandbox
 * level (its approval modes are not a filesystem sandbox), no structured output; a live protocol
 * (`persistentProcess`) without input during a turn (`streamingInput` is `false`).
 *
 * @since 0.1.0
 * @category constants
 */
export const capabilities: Driver.Capabilities = internal.capabilities

/**
 * The Gemini CLI's configuration directory: `GEMINI_CLI_HOME` (which replaces the home
 * directory: everything lives in `<dir>/.gemini/`), natively `$HOME`. Settings
 * (`settings.json`, which also holds `mcpServers`, `GEMINI.md`, commands, policies,
 * `trustedFolders.json`), skills (`skills/`), authentication (OAuth and account files); the
 * driver reserves `.gemini/tether-instructions.md` and `.gemini/tether-tools-*.toml`. Siblings: `home` (`HOME`) and `tmp` (`TMPDIR`).
 *
 * @since 0.1.0
 * @category constants
 */
export const layout: ProfileLayout = internal.layout

/**
 * The attempt bound used when `Config.maxAttempts` is absent.
 *
 * @since 0.2.0
 * @category constants
 */
export const defaultMaxAttempts: number = internal.defaultMaxAttempts

/**
 * The settings file, relative to the clone, that the driver rewrites for each run.
 *
 * @since 0.1.0
 * @category constants
 */
export const settingsFile: string = internal.settingsFile

/**
 * The file, relative to the clone, holding the instructions.
 *
 * @since 0.1.0
 * @category constants
 */
export const instructionsFile: string = internal.instructionsFile

/**
 * The Gemini CLI driver.
 *
 * `prepare` fails with `ProtocolError` when a sandbox level or a fork is requested, the
 * layout's siblings are missing, the clone's settings are not a JSON object, or they already
 * declare an MCP server under the hosted key (`HostedToolsUnavailable`) or a definition
 * source's key, or when two of the turn's hosted tools would reach the CLI under one name (it
 * shortens names over 63 characters, `mcp_<key>_` included: `HostedToolsUnavailable`, naming
 * both). Its `sessionConfig` (what enters threads' compatibility fingerprint) is `model`,
 * `authType` and `approvalMode` (absent when none is set); never `env` or `binary`. `parse` maps
 * the stream-json protocol: `init` → `SessionStarted` (a resumed session that comes back with
 * another id fails with `ResumeRejected`), `message` user →
 * `Message`, assistant deltas → `TextDelta` (and the assembled assistant `Message` when a tool
 * call or the result closes it), `tool_use` / `tool_result` → `ToolCall` start / end (host
 * tools named `mcp_<hostedKey>_<tool>` come back as `<tool>` with source `host`, and so does a
 * tool of the run whose name the CLI shortened, under the catalog's name), `error` →
 * `Notice`, `result` → `Usage` + `Terminal` (`ok` when `status` is `success`; the final text is
 * the assistant text after the last tool call). Unknown records and non-JSON lines become
 * `Notice`s. `classifyExit` turns "Error resuming session" into `ResumeRejected`.
 *
 * `live.open` fails as `prepare` does (a fork included); for a resume it waits until the next
 * minute when the session's chat file was created in the current one (Gemini CLI 0.61's
 * `session/load` would reset that session: its new recording gets the same file name, which
 * carries the minute). `live.attach` fails with
 * `ProtocolError`: `HostedToolsUnavailable` when the turn offers hosted tools and the CLI does not
 * list them with its credential within `live.hostedToolsTimeout`; `ResumeRejected` when
 * `session/load` fails; `ProviderError` when the handshake fails, takes longer than
 * `live.startTimeout`, or the process ends. A live turn yields the one-shot outputs
 * (`SessionStarted` on the first turn, the user `Message`, deltas, tool calls, `Usage`, `Terminal`;
 * `ok` only for `end_turn`, so a cancelled turn ends with `ok: false`), except that the CLI's ACP
 * tool calls carry no input: `ToolCall` start has no `input`.
 *
 * @example
 * ```ts
 * import { Gemini } from "@tether/drivers"
 * import { Redacted } from "effect"
 *
 * declare const apiKey: string
 *
 * const driver = Gemini.driver({
 *   model: "gemini-2.5-flash",
 *   env: { GOOGLE_GEMINI_BASE_URL: "https://llm-proxy.internal", GEMINI_API_KEY: Redacted.make(apiKey) }
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
 * import { Gemini } from "@tether/drivers"
 * import { Config, Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const driver = yield* Gemini.driverConfig({
 *     model: Config.string("GEMINI_MODEL"),
 *     env: Config.all({
 *       GOOGLE_GEMINI_BASE_URL: Config.string("GOOGLE_GEMINI_BASE_URL"),
 *       GEMINI_API_KEY: Config.redacted("GEMINI_API_KEY")
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
 * The parser alone: what `driver(config).parse` is, except for a hosted tool whose name the CLI
 * shortened (over 63 characters with `mcp_<key>_`): the driver knows the tools of the runs it
 * prepared, this parser only those of a context that carries them (`hostedTools`), and otherwise
 * reports the shortened name.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parse: Driver.Driver["parse"] = parser.parse
