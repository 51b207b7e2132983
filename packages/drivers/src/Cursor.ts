/**
 * The Cursor CLI driver (`agent`, not published on npm; tested against the protocol-faithful
 * fake of `@tether/testing/CursorAgent`).
 *
 * Each turn runs `agent -p --output-format stream-json --workspace <cwd> --trust --approve-mcps
 * [--force] [--model <m>] [--resume <session_id>]` with the prompt written to stdin (never in
 * argv) and stdin then closed. `CURSOR_CONFIG_DIR` and `CURSOR_DATA_DIR` are the execution
 * clone (`dataDir` can put the chats in a host-owned directory instead). The hosted tools are
 * declared in the clone's `mcp.json` (the user's copied servers kept) as a URL server whose
 * `Authorization` header references the token variable with Cursor's syntax
 * (`Bearer ${env:VAR}`), never the token. A new session's id comes from the CLI
 * (`result.session_id` is the checkpoint); later turns pass `--resume <session_id>`.
 *
 * Cursor has no appended system prompt, no native structured output and no fork: the
 * capabilities say so, and asking for them fails before spawn.
 *
 * Endpoint: Cursor's CLI talks to Cursor's own service; its key is `env.CURSOR_API_KEY` (as
 * `Redacted`) and its model `model`. No setting for another base URL, nor for its retries, is
 * published, so this driver offers neither (its CLI cannot run here to find one).
 *
 * @since 0.1.0
 */
import type * as Driver from "@tether/core/Driver"
import type { ProfileLayout } from "@tether/profile/ProfileLayout"
import * as EffectConfig from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import type * as Redacted from "effect/Redacted"
import * as internal from "./internal/cursor.js"
import * as parser from "./internal/cursorParse.js"

/**
 * Driver configuration. Everything is optional.
 *
 * @since 0.1.0
 * @category models
 */
export interface Config {
  /** The executable (default `agent`, looked up on the `PATH` given to the process). */
  readonly binary?: string
  /** Arguments placed before the driver's own (e.g. a script path when `binary` is `node`). */
  readonly binaryArgs?: ReadonlyArray<string>
  /** Default model (`--model`); a turn's `model` wins. Absent: the CLI's default. */
  readonly model?: string
  /** Pass `--force` (allow commands without asking). Default `false`. */
  readonly force?: boolean
  /**
   * Extra variables for the CLI, e.g. `CURSOR_API_KEY` (as `Redacted`). They cannot override
   * the variables the driver owns (`HOME`, `TMPDIR`, `CURSOR_CONFIG_DIR`, `CURSOR_DATA_DIR`, the
   * token variable).
   */
  readonly env?: { readonly [name: string]: string | Redacted.Redacted<string> }
  /** Names of host variables passed through unchanged when set (besides `PATH`, `LANG`, `LC_ALL`, `TZ`). */
  readonly passEnv?: ReadonlyArray<string>
  /**
   * `CURSOR_DATA_DIR`, where the CLI keeps its chats (the sessions `--resume` reopens). Default:
   * the execution clone, so sessions live as long as the agent. A thread that must resume after
   * the agent is rebuilt (a host restart: the old clone is gone) needs a host-owned directory
   * here that outlives the agent; the driver never writes into it itself.
   */
  readonly dataDir?: string
}

/**
 * What the driver can honour: resume only; no fork, no appended instructions, no structured
 * output, no sandbox level, no per-turn allow-list flag (the gateway still enforces each turn's
 * tools at `tools/list` and `tools/call`).
 *
 * @since 0.1.0
 * @category constants
 */
export const capabilities: Driver.Capabilities = internal.capabilities

/**
 * Cursor's configuration directory: `CURSOR_CONFIG_DIR` (chats go to `CURSOR_DATA_DIR`, set to
 * the same clone), natively `$HOME/.cursor`. Settings (`cli-config.json`, `rules/`), MCP
 * declarations (`mcp.json`), skills (`skills/`), authentication (`auth.json`). Siblings: `home`
 * (`HOME`) and `tmp` (`TMPDIR`).
 *
 * @since 0.1.0
 * @category constants
 */
export const layout: ProfileLayout = internal.layout

/**
 * The MCP declarations file, relative to the clone, that the driver rewrites for each run.
 *
 * @since 0.1.0
 * @category constants
 */
export const mcpFile: string = internal.mcpFile

/**
 * The CLI's settings file, relative to the clone, that the driver rewrites for each run: the
 * user's copied settings, with an allow rule (`Mcp(<server>:<tool>)`) for each of the turn's
 * hosted tools and each of the definition's MCP sources (headless, the CLI rejects an MCP tool
 * call no rule allows unless `force` is set).
 *
 * @since 0.2.0
 * @category constants
 */
export const cliConfigFile: string = internal.cliConfigFile

/**
 * The Cursor driver.
 *
 * `prepare` fails with `ProtocolError` for instructions, a sandbox level or a fork (core refuses
 * them earlier from `capabilities`), missing siblings, an `mcp.json` or `cli-config.json` that is
 * not a JSON object, an `mcp.json` that already declares the hosted key
 * (`HostedToolsUnavailable`) or a source's key, and a project's `.cursor/mcp.json` (in the
 * workspace or a directory above it, which the CLI also reads and prefers) that declares either.
 * `parse` maps the stream-json protocol: `system/init` → `SessionStarted` (a resumed session
 * that comes back with another id fails with `ResumeRejected`), `user` / `assistant` →
 * `Message`, `thinking` deltas → `ReasoningDelta`, `tool_call` `started` / `completed` →
 * `ToolCall` start / end (`mcpToolCall` of the hosted server → the catalog name with source
 * `host`; other MCP servers → `mcp`; Cursor's own tools → `builtin`), `result` → `Terminal`
 * (`ok` for `success` without `is_error`; the text is the last assistant message after the last
 * tool call, else `result`). Unknown records and non-JSON lines become `Notice`s.
 * `classifyExit` turns "session … not found" on a resume into `ResumeRejected`.
 *
 * @example
 * ```ts
 * import { Cursor } from "@tether/drivers"
 * import { Redacted } from "effect"
 *
 * declare const apiKey: string
 *
 * // Cursor's CLI (`cursor-agent`) talks to Cursor's own service, with the account's API key:
 * const driver = Cursor.driver({ model: "gpt-5", env: { CURSOR_API_KEY: Redacted.make(apiKey) } })
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
 * import { Cursor } from "@tether/drivers"
 * import { Config, Effect } from "effect"
 *
 * const program = Effect.gen(function*() {
 *   const driver = yield* Cursor.driverConfig({
 *     binary: Config.string("CURSOR_AGENT_BINARY"),
 *     model: Config.string("CURSOR_MODEL"),
 *     env: Config.all({ CURSOR_API_KEY: Config.redacted("CURSOR_API_KEY") })
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
