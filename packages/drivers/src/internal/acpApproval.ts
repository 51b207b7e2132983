/**
 * ACP `session/request_permission` ↔ Tether's approval decisions (DESIGN §13): what the agent
 * asks, read into the fields of an approval request, and a decision (`allow`, `allowForSession`,
 * `deny`) turned into the outcome the agent reads, by the kinds of the options it offered (their
 * ids differ per agent: Gemini `proceed_once`, claude-agent-acp `allow`, codex-acp `approved`).
 *
 * @internal
 */
import type * as Acp from "@agentclientprotocol/sdk"
import * as Approval from "@tether/core/Approval"
import type * as Driver from "@tether/core/Driver"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"

/** A host's decision: core's (`Allow`, `AllowForSession`, `Deny` with the message the model is told). @internal */
export type Decision = Approval.Decision

/** The decision while no approver is wired: the agent's tool call is refused. @internal */
export const denied: Decision = Approval.deny("No approver is configured: the action was not run.")

/** The decision for a permission request of a hosted or declared MCP tool: the host offered it. @internal */
export const allowHosted: Decision = Approval.allow

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
 * ACP does not say how far an `allow_always` option reaches, and agents differ: Gemini CLI offers,
 * for an MCP tool, "Allow all server tools for this session" (`proceed_always_server`) before
 * "Allow tool for this session" (`proceed_always_tool`); codex-acp's `approved-execpolicy-amendment`
 * writes an allow rule into Codex's `rules/` that every later session reads; claude-agent-acp's
 * "Always Allow" passes Claude Code's own suggestions on as they are, and for a command those save
 * a rule to the workspace's `.claude/settings.local.json`. So an `allow_always` option is taken
 * only when its id or label says it is for this session and names no wider reach (a server, "all",
 * an amendment, "don't ask again", …), and it is the only such; otherwise `allow_once`.
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
    const option = kind === "allow_always" ? narrowestAlways(options) : options.find((o) => o.kind === kind)
    if (option !== undefined) return { outcome: { outcome: "selected", optionId: option.optionId } }
  }
  return { outcome: { outcome: "cancelled" } }
}

/**
 * Words of an option that widen it past the call asked about (`proceed_always_server`, "Allow all
 * …"), or past the session: codex-acp's `approved-execpolicy-amendment` ("Yes, and don't ask
 * again for commands that start with …") writes an `allow` rule into Codex's `rules/`, which every
 * later session of the agent's profile reads; its "Allow and don't ask again" for a file change is
 * offered beside "Allow for this session".
 */
const wide =
  /(?:^|[^a-z])(?:all|server|servers|execpolicy|amendment|future|save|saved|permanently|forever)(?:[^a-z]|$)|\bdon'?t ask again\b|\bdo not ask again\b/i

/** Words of an option that keep it to the session ("Allow for this session", `approved-for-session`). */
const sessionOnly = /(?:^|[^a-z])session(?:[^a-z]|$)/i

/**
 * The only `allow_always` option that says it is for this session and names no wider reach (see
 * `outcomeOf`).
 */
const narrowestAlways = (options: ReadonlyArray<Acp.PermissionOption>): Acp.PermissionOption | undefined => {
  const narrow = options.filter((o) =>
    o.kind === "allow_always" && (sessionOnly.test(o.optionId) || sessionOnly.test(o.name)) &&
    !wide.test(o.optionId) && !wide.test(o.name)
  )
  return narrow.length === 1 ? narrow[0] : undefined
}

/**
 * The host's decision on a file change as the agent is answered: `allowForSession` is allowed this
 * once. An agent's "always" for a write may be a mode that runs other tools unasked: Gemini CLI
 * (0.61) turns it into its session's autoEdit mode, under which `write_file`, `replace` and
 * `web_fetch` run ahead of every policy rule; claude-agent-acp (0.23) into Claude Code's
 * `acceptEdits`, which also runs `rm`, `mv`, `cp`, `sed`, `touch`, `mkdir` and `rmdir`: calls the
 * host decided nothing about.
 *
 * @internal
 */
export const onceForFileChange = (decision: Decision): Decision =>
  decision._tag === "AllowForSession" ? Approval.allow : decision

/** The approver tool's input: an {@link Ask}, as the turn runner read it from the agent's request. */
const AskInput = Schema.Struct({
  toolName: Schema.String,
  kind: Schema.Literal("command", "fileChange", "tool", "other"),
  input: Schema.optionalWith(Schema.Unknown, { exact: true }),
  callId: Schema.String,
  command: Schema.optionalWith(Schema.String, { exact: true }),
  cwd: Schema.optionalWith(Schema.String, { exact: true }),
  diff: Schema.optionalWith(Schema.String, { exact: true }),
  paths: Schema.optionalWith(Schema.Array(Schema.String), { exact: true }),
  options: Schema.Array(Schema.Struct({ id: Schema.String, kind: Schema.String, label: Schema.String }))
})

/** The approver tool's answer: core's decision in its encoded form, as the turn runner reads it back. */
const Answer = Schema.Struct({ decision: Approval.Decision })

const decodeAsk = Schema.decodeUnknownEither(AskInput)
const decodeAnswer = Schema.decodeUnknownEither(Schema.parseJson(Answer))
const encodeDecision = Schema.encodeSync(Approval.Decision)

/**
 * The approver tool of a one-shot ACP turn (DESIGN §13). The turn runner (`acpTurn.ts`) has no
 * route to core's approvals but the gateway: for each `session/request_permission` it would ask
 * `LiveContext.approve` on a live session, it calls this tool on the run's approver server
 * (`InvocationRequest.approvals`) with the {@link Ask} (named by the driver's naming), and maps the
 * decision it answers onto the offered options with {@link outcomeOf}, as a live session does.
 *
 * @internal
 */
export const approverTool: Driver.ApproverTool = {
  name: "approve",
  description: "Answers an ACP agent's session/request_permission for a built-in tool call (Tether approvals).",
  inputSchema: {
    type: "object",
    properties: {
      toolName: { type: "string" },
      kind: { type: "string", enum: ["command", "fileChange", "tool", "other"] },
      input: {},
      callId: { type: "string" },
      command: { type: "string" },
      cwd: { type: "string" },
      diff: { type: "string" },
      paths: { type: "array", items: { type: "string" } },
      options: {
        type: "array",
        items: {
          type: "object",
          properties: { id: { type: "string" }, kind: { type: "string" }, label: { type: "string" } },
          required: ["id", "kind", "label"]
        }
      }
    },
    required: ["toolName", "kind", "callId", "options"]
  },
  ask: (input) => {
    const decoded = decodeAsk(input)
    if (Either.isLeft(decoded)) return "expected the fields of an ACP permission request"
    const { input: raw, ...rest } = decoded.right
    return { ...rest, input: raw }
  },
  answer: (decision) => ({ decision: encodeDecision(decision) })
}

/**
 * The decision in the approver tool's answer (its one text block); `undefined` when the text is
 * not one (the turn runner then denies).
 *
 * @internal
 */
export const decisionOf = (text: string): Approval.Decision | undefined => {
  const decoded = decodeAnswer(text)
  return Either.isRight(decoded) ? decoded.right.decision : undefined
}
