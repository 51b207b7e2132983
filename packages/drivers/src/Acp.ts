/**
 * The ACP driver: any coding agent that speaks the Agent Client Protocol over stdio
 * (JSON-RPC 2.0, https://agentclientprotocol.com), through Tether's one ACP client (built on the
 * official `@agentclientprotocol/sdk`, the same client as Gemini's live sessions). Verified with
 * `@zed-industries/claude-agent-acp` 0.23.1 (driving the pinned Claude Code) and
 * `@zed-industries/codex-acp` 0.16.0.
 *
 * A session: `initialize` (the agent's capabilities are checked: `mcpCapabilities.http` when the
 * turn offers hosted tools, else `HostedToolsUnavailable` before any prompt; `loadSession` for a
 * resume, else `ResumeRejected`), then `session/new {cwd, mcpServers}` declaring the hosted tools
 * as an HTTP MCP server with the process's bearer token in its `Authorization` header, and the
 * definition's MCP sources (stdio, and HTTP / SSE as the agent declares them; a source's
 * `bearerTokenEnv` is read from the host environment). A resume is `session/load`. Each turn is a
 * `session/prompt`; `session/update` notifications become the same outputs as every driver's (text
 * and reasoning deltas, messages, tool calls with source `host` / `mcp` / `builtin`, usage when the
 * agent reports it) and the prompt's `stopReason` the terminal (`end_turn` is success).
 * `session/request_permission` is answered with a decision mapped onto the offered options
 * (`allow` → `allow_once`, `allowForSession` → `allow_always` else `allow_once`, `deny` →
 * `reject_once` else `reject_always`; no fitting option: `cancelled`): a request for a hosted tool
 * or a tool of the definition's MCP sources is allowed (the host offered it; claude-agent-acp and
 * codex-acp ask for every MCP tool). Every other request (a built-in tool: a command, a file
 * edit, …) is an approval request of the agent's approvals (DESIGN §13; handler or event mode),
 * named by the driver's naming, with the command (the call's title) and what the agent sent; an
 * agent without approvals has them denied. A denied tool call fails and the model is told;
 * codex-acp's only refusal, `abort`, ends the turn (`canceled`). Approvals are asked on live
 * threads (`approvals.live`) and on one-shot runs (`approvals.tool`: the turn runner calls the
 * run's approver tool on the gateway, and the decision is mapped onto the options the same way);
 * a run of an agent without approvals denies.
 *
 * Live sessions (`driver.live`) run the agent itself as the thread's warm process: one session,
 * one `session/prompt` per turn, an interrupt is `session/cancel` (the process stays warm). Before
 * the first prompt the session waits (bounded by `live.hostedToolsTimeout`) until the gateway has
 * seen the agent list the hosted tools with the session's credential: an agent handed a wrong
 * token drops the server silently. ACP cannot steer (a second prompt cancels the first): there is
 * no `steer` and `streamingInput` is `false`.
 *
 * One-shot turns (`prepare` / `parse`) run a small turn runner with this Node, which spawns the
 * agent as its child in the same process group, drives the same ACP client for one turn, relays
 * the agent's stdout unchanged (what `parse` reads) and ends the agent (SIGTERM: the adapters do
 * not exit when stdin closes). It reads the hosted token from the process's token variable and
 * takes it out of the agent's environment, as it does the approver tool's token (the runner alone
 * calls that tool, with the official MCP client). It cannot see the gateway's listings, so the
 * hosted-tools listing check is made by live sessions only.
 *
 * What no ACP agent offers through the protocol fails before the spawn: a sandbox level, a fork,
 * a model (`session/set_model` is not stable ACP: configure the agent's model through its
 * arguments or environment), instructions and native skills (`read_skill` works).
 *
 * Spawn the agent's real executable, not a wrapper that does not forward signals:
 * `@zed-industries/codex-acp`'s `bin/codex-acp.js` runs the native binary with `spawnSync` and
 * orphans it on SIGTERM; run `@zed-industries/codex-acp-linux-x64/bin/codex-acp` (or the package
 * for the platform) instead.
 *
 * @example
 * ```ts
 * import { Acp, Claude } from "@tether/drivers"
 *
 * // Claude Code through the Claude Agent SDK's ACP adapter.
 * const driver = Acp.driver({
 *   name: "claude-agent-acp",
 *   command: process.execPath,
 *   args: ["node_modules/@zed-industries/claude-agent-acp/dist/index.js"],
 *   env: { CLAUDE_CODE_EXECUTABLE: "node_modules/.bin/claude" },
 *   passEnv: ["ANTHROPIC_API_KEY"],
 *   layout: Claude.layout,
 *   naming: Acp.claudeNaming
 * })
 * ```
 *
 * @since 0.3.0
 */
import type * as Driver from "@tether/core/Driver"
import type { ProfileLayout } from "@tether/profile/ProfileLayout"
import type * as Duration from "effect/Duration"
import type * as Redacted from "effect/Redacted"
import * as internal from "./internal/acpDriver.js"
import * as AcpMap from "./internal/acpMap.js"

/**
 * What an agent tells of a tool call: its id, ACP's optional programmatic `name`, the display
 * `title` and the `kind` (`read`, `edit`, `execute`, …).
 *
 * @since 0.3.0
 * @category naming
 */
export interface ToolCallInfo {
  readonly toolCallId: string
  readonly name: string | undefined
  readonly title: string | undefined
  readonly kind: string | undefined
  /** The update's `_meta`, the agent's own (claude-agent-acp names the tool there). */
  readonly meta: unknown
  /** The call's `rawInput` as the agent sent it. */
  readonly input: unknown
}

/**
 * How an agent's tool calls map back to a tool name and a source: `host` for the hosted tools
 * (named as in the catalog), `mcp` for a definition's MCP source, `builtin` for the agent's own
 * tools. Agents name calls differently (ACP leaves the name optional). A call named `host` has its
 * permission requests allowed (the host offered the tool), so a naming must never read a hosted
 * tool from what the model chooses for a built-in tool (a title is often the command itself).
 *
 * @since 0.3.0
 * @category naming
 */
export type ToolNaming = (
  call: ToolCallInfo,
  hostedKey: string
) => { readonly name: string; readonly source: "host" | "mcp" | "builtin" }

/**
 * Names for agents that follow no other convention: ACP's `name`; a name `mcp__<server>__<tool>`
 * is an MCP tool (the hosted tool `<tool>` when `<server>` is the hosted key), anything else is
 * built in. A call without a `name` is built in, named by its title (display text, never read as a
 * hosted tool).
 *
 * @since 0.3.0
 * @category naming
 */
export const genericNaming: ToolNaming = AcpMap.genericNaming

/**
 * Driver configuration.
 *
 * @since 0.3.0
 * @category models
 */
export interface Config {
  /** The driver's name (events' `provider`, threads' fingerprint). Default `acp`. */
  readonly name?: string
  /** The agent's executable: an absolute path, or a name on the `PATH` given to the process. */
  readonly command: string
  readonly args?: ReadonlyArray<string>
  /**
   * Extra variables for the agent (secrets as `Redacted`, unwrapped only for the spawn). The
   * driver sets each of `layout.selectorEnv` to the execution clone, `HOME` and `TMPDIR` to the
   * clone's `home` / `tmp` siblings when the layout declares them; those win. A variable of this
   * option or of the host never sets the hosted token variable: core sets it to the process's own
   * token (a live process also gets the session's token, see {@link Config.headerSecrets}).
   */
  readonly env?: { readonly [name: string]: string | Redacted.Redacted<string> }
  /** Names of host variables passed through unchanged when set (besides `PATH`, `LANG`, `LC_ALL`, `TZ`). */
  readonly passEnv?: ReadonlyArray<string>
  /** Where the agent keeps its configuration and sessions (e.g. `Claude.layout`, `Codex.layout`). */
  readonly layout: ProfileLayout
  /**
   * How tool calls map to names and sources. Default {@link genericNaming}. One-shot turns allow
   * the hosted tools' permission requests only with the naming functions of this module (the turn
   * runner is told which one by name); with another function they are denied there.
   */
  readonly naming?: ToolNaming
  /**
   * How the secret MCP header values (the hosted tools' session token, an MCP source's
   * `bearerTokenEnv`) reach the agent. `inline`: their values in `session/new`. `environment`:
   * `Authorization: Bearer ${VAR}` references in `session/new`, the values in the agent's
   * environment (the hosted token under the token variable's name plus `_S`, a source's under its
   * `bearerTokenEnv`), for agents that put the headers on a command line, where any local user
   * reads them: claude-agent-acp passes them to Claude Code as `--mcp-config`, and Claude Code
   * expands the references from its environment. Default `environment` with {@link claudeNaming},
   * else `inline`.
   */
  readonly headerSecrets?: "inline" | "environment"
  /**
   * Declared `resume` capability (default `true`); a resume still fails with `ResumeRejected`
   * when the agent's `initialize` does not offer `loadSession`.
   */
  readonly resume?: boolean
  /** Transports of MCP sources the agent takes (default `["stdio", "http"]`). */
  readonly mcpTransports?: ReadonlyArray<Driver.McpTransport>
  /** Configuration that enters threads' compatibility fingerprint (never a secret). */
  readonly sessionConfig?: unknown
  /** How to install the agent, quoted when its spawn fails. */
  readonly install?: string
  /**
   * Bounds of a session: `startTimeout` (default 2 minutes) covers `initialize` and the creation
   * or load of the session; `hostedToolsTimeout` (default 20 seconds) how long a live session
   * waits for the agent to list the hosted tools; `cancelTimeout` (default 30 seconds) how long a
   * cancelled prompt may take to end before the next turn fails.
   */
  readonly live?: {
    readonly startTimeout?: Duration.DurationInput
    readonly hostedToolsTimeout?: Duration.DurationInput
    readonly cancelTimeout?: Duration.DurationInput
  }
}

/**
 * The capabilities a driver built from `config` declares: `resume` as configured, no fork, MCP
 * sources over `mcpTransports`, no instructions, no skills projection, no sandbox level, no
 * per-turn allow-list of its own (the process's gateway credential lists only the turn's tools),
 * no input during a turn, no structured output; a live protocol.
 *
 * @since 0.3.0
 * @category constructors
 */
export const capabilities: (config: Config) => Driver.Capabilities = internal.capabilitiesOf

/**
 * The ACP driver for one agent.
 *
 * `prepare` and `live.open` fail with `ProtocolError` (`ProviderError`) for a sandbox level, a
 * model or a fork. A session fails with `ProtocolError`: `HostedToolsUnavailable` when the turn
 * offers hosted tools and the agent does not take HTTP MCP servers, or (live) does not list the
 * hosted tools with its credential within `live.hostedToolsTimeout`; `ResumeRejected` when the
 * agent cannot load sessions or `session/load` fails; `ProviderError` when the agent speaks
 * another ACP version, cannot take a definition's MCP source, the handshake fails or takes longer
 * than `live.startTimeout`, or the process ends. A turn ends with its `Terminal` (`ok` only for
 * `end_turn`: a cancelled turn is not ok); its session is the agent's session id, the checkpoint.
 *
 * @since 0.3.0
 * @category constructors
 */
export const driver: (config: Config) => Driver.Driver = internal.driver

/**
 * Names for `@zed-industries/claude-agent-acp`: the Claude Code tool name its updates carry in
 * `_meta.claudeCode.toolName` (the title of a built-in call is for display: `Terminal`, then the
 * command), read as {@link genericNaming} reads names (`mcp__<server>__<tool>`).
 *
 * @since 0.3.0
 * @category naming
 */
export const claudeNaming: ToolNaming = AcpMap.claudeNaming

/**
 * Names for `@zed-industries/codex-acp`: an MCP call's input is `{server, tool, arguments}` (its
 * title `Tool: <server>/<tool>` is for display), the hosted tool `<tool>` when `<server>` is the
 * hosted key, else `mcp__<server>__<tool>`; other calls as {@link genericNaming} names them.
 *
 * @since 0.3.0
 * @category naming
 */
export const codexNaming: ToolNaming = AcpMap.codexNaming
