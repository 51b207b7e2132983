/**
 * ACP `session/request_permission` ↔ Tether's approval decisions (DESIGN §13): what the agent
 * asks, read into the fields of an approval request, and a decision (`allow`, `allowForSession`,
 * `deny`) turned into the outcome the agent reads, by the kinds of the options it offered (their
 * ids differ per agent: Gemini `proceed_once`, claude-agent-acp `allow`, codex-acp `approved`).
 *
 * @internal
 */
import type * as Acp from "@agentclientprotocol/sdk"

/**
 * A host's decision, structurally the `Decision` of core's approvals (`Allow`, `AllowForSession`,
 * `Deny` with the message the model is told).
 *
 * @internal
 */
export type Decision =
  | { readonly _tag: "Allow" }
  | { readonly _tag: "AllowForSession" }
  | { readonly _tag: "Deny"; readonly message: string }

/** The decision while no approver is wired: the agent's tool call is refused. @internal */
export const denied: Decision = { _tag: "Deny", message: "No approver is configured: the action was not run." }

/** The decision for a permission request of a hosted or declared MCP tool: the host offered it. @internal */
export const allowHosted: Decision = { _tag: "Allow" }

/** What an approval request carries, as read from the agent's permission request. @internal */
export interface Ask {
  readonly toolName: string
  readonly kind: "command" | "fileChange" | "tool" | "other"
  readonly input: unknown
  readonly callId: string
  /** A command's line, as the agents show it in the call's title. */
  readonly command?: string
  /** A command's working directory, when the agent gives it (codex-acp's `rawInput.cwd`). */
  readonly cwd?: string
  readonly diff?: string
  readonly paths?: ReadonlyArray<string>
  readonly options: ReadonlyArray<{ readonly id: string; readonly kind: string; readonly label: string }>
}

const kindOf = (kind: string | null | undefined): Ask["kind"] => {
  switch (kind) {
    case "execute":
      return "command"
    case "edit":
    case "delete":
    case "move":
      return "fileChange"
    case undefined:
    case null:
    case "other":
      return "other"
    default:
      return "tool"
  }
}

/** The permission request as an approval's fields. @internal */
export const askOf = (request: Acp.RequestPermissionRequest): Ask => {
  const call = request.toolCall
  const diffs = (call.content ?? []).flatMap((block) =>
    block.type === "diff" ? [`--- ${block.path}\n${block.oldText ?? ""}\n+++ ${block.path}\n${block.newText}`] : []
  )
  const paths = (call.locations ?? []).map((location) => location.path)
  const kind = kindOf(call.kind)
  const raw = call.rawInput
  const cwd = typeof raw === "object" && raw !== null && "cwd" in raw && typeof raw.cwd === "string"
    ? raw.cwd
    : undefined
  return {
    toolName: call.name ?? call.title ?? call.toolCallId,
    kind,
    input: raw,
    callId: call.toolCallId,
    // Gemini CLI, claude-agent-acp and codex-acp title an `execute` call with its command line.
    ...(kind === "command" && typeof call.title === "string" ? { command: call.title } : {}),
    ...(cwd === undefined ? {} : { cwd }),
    ...(diffs.length > 0 ? { diff: diffs.join("\n") } : {}),
    ...(paths.length > 0 ? { paths } : {}),
    options: request.options.map((option) => ({ id: option.optionId, kind: option.kind, label: option.name }))
  }
}

/**
 * The outcome for `decision` among the offered `options`. `Allow` picks `allow_once`;
 * `AllowForSession` picks `allow_always`, else `allow_once` (never more than asked); `Deny` picks
 * `reject_once`, else `reject_always`. When no option fits, the request is answered `cancelled`,
 * which every agent treats as a refusal: an allow never turns into a broader permission.
 *
 * @internal
 */
export const outcomeOf = (
  decision: Decision,
  options: ReadonlyArray<Acp.PermissionOption>
): Acp.RequestPermissionResponse => {
  const preference: ReadonlyArray<Acp.PermissionOptionKind> = decision._tag === "Allow"
    ? ["allow_once"]
    : decision._tag === "AllowForSession"
    ? ["allow_always", "allow_once"]
    : ["reject_once", "reject_always"]
  for (const kind of preference) {
    const option = options.find((o) => o.kind === kind)
    if (option !== undefined) return { outcome: { outcome: "selected", optionId: option.optionId } }
  }
  return { outcome: { outcome: "cancelled" } }
}
