/**
 * A per-turn tool policy: the tools one turn may list and call.
 *
 * The effective tools of a turn are `definition.tools ∩ policy`: `allow` (when given) keeps only
 * the named tools, `deny` removes the named tools. The policy is applied at the request
 * boundary for that turn only: the gateway registration lists and accepts calls of the
 * effective tools alone (the turn's provider process runs on its own credential, minted by
 * `Registration.credential({ tools })` and revoked when the turn ends), and the driver's allow-list
 * (`InvocationRequest.hosted.tools`) holds the same names. The agent's definition and its
 * compatibility fingerprint never change: the next turn without a policy sees every tool again.
 *
 * @since 0.1.0
 */
import type * as Driver from "./Driver.js"
import * as internal from "./internal/toolPolicy.js"

/**
 * `allow`: only these tools (absent: every tool of the definition); `deny`: never these.
 * A name the definition does not have fails the turn with `InvalidTurn` before it is admitted
 * (a misspelled `deny` must never leave a tool allowed); a policy never adds a tool.
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolPolicy {
  readonly allow?: ReadonlyArray<string>
  readonly deny?: ReadonlyArray<string>
}

/**
 * The effective tool names, sorted: `tools ∩ allow \ deny` (`tools` sorted when there is no policy).
 *
 * @since 0.1.0
 * @category combinators
 */
export const effective: (
  tools: ReadonlyArray<string>,
  policy: ToolPolicy | undefined
) => ReadonlyArray<string> = internal.effective

/**
 * A per-turn policy over the CLI's own built-in tools (shell, file edits, web…), named as the
 * CLI names them (Claude Code: `Bash`, `Write`, `Edit`, `Read`, `WebFetch`…). `allow`: only these
 * built-ins are offered (absent: the CLI's set); `deny`: never these (not offered, and refused if
 * called). Enforcement is the CLI's: each driver maps it to the CLI's own switches
 * (`Driver.capabilities.builtinToolPolicy`); a driver without a mapping fails the turn with
 * `InvalidTurn` (`UnsupportedCapability`) before anything starts. The hosted tools are governed
 * by `ToolPolicy`, never by this.
 *
 * `sandbox`: this turn's sandbox level, where the CLI has one (`Driver.capabilities.sandbox`; a
 * level the driver lacks fails the turn with `InvalidTurn` `UnsupportedCapability`). It can only
 * narrow: it may not be wider than the agent's `policy.sandbox` (an agent without one allows
 * `readOnly` only, the narrowest level, since Tether cannot know the CLI's default); a wider level
 * fails the turn with `InvalidTurn` `PolicyWidened`. Like the lists, it is part of a live
 * process's configuration: a turn with another level does not reuse a warm process.
 *
 * @since 0.3.0
 * @category models
 */
export interface BuiltinToolPolicy {
  readonly allow?: ReadonlyArray<string>
  readonly deny?: ReadonlyArray<string>
  readonly sandbox?: Driver.SandboxLevel
}
