/**
 * Claude Code's live protocol frames (LIVE.md): the process, the lines the session writes and
 * the control-request hook.
 *
 * @internal
 */
import type * as Driver from "@tether/core/Driver"
import type { Usage } from "@tether/core/Result"
import * as Effect from "effect/Effect"
import { usageFrom } from "./lines.js"

/**
 * A control request the CLI sent (`can_use_tool` with `--permission-prompt-tool stdio`,
 * `hook_callback`, `mcp_message`, …).
 *
 * @internal
 */
export interface ControlRequest {
  readonly requestId: string
  readonly subtype: string
  /** The request object as the CLI sent it. */
  readonly request: { readonly [key: string]: unknown }
}

/**
 * The answer to a control request: `Success` carries the `response` body (for `can_use_tool`:
 * `{behavior: "allow", updatedInput}` or `{behavior: "deny", message}`); `Error` makes the CLI
 * fail the request with that message (a `can_use_tool` then becomes an error tool result).
 *
 * @internal
 */
export type ControlReply =
  | { readonly _tag: "Success"; readonly response: unknown }
  | { readonly _tag: "Error"; readonly error: string }

/**
 * Answers the CLI's control requests: the approvals hook. Runs in its own fiber per request,
 * interrupted when the CLI cancels the request (`control_cancel_request`); a defect is answered
 * as an `Error`.
 *
 * @internal
 */
export type ControlHandler = (request: ControlRequest) => Effect.Effect<ControlReply>

/** @internal */
export interface AttachOptions {
  /**
   * The handler of the CLI's control requests. Absent: every request is answered at once with an
   * `Error` (the CLI never waits on one) and reported as a `Notice` of kind `control_request`.
   */
  readonly onControlRequest?: ControlHandler
  /** Ids of written frames (user `uuid`, control `request_id`); default: random UUIDs. */
  readonly newId?: () => string
}

/** The flag that makes the CLI print each user line back when it takes it. @internal */
export const replayFlag = "--replay-user-messages"

/**
 * The live process: the one-shot invocation of `prepare` (same flags, files and environment),
 * plus `--replay-user-messages`, with stdin left to the channel.
 *
 * @internal
 */
export const open = <E, R>(
  prepare: (request: Driver.InvocationRequest) => Effect.Effect<Driver.Invocation, E, R>
) =>
(request: Driver.InvocationRequest): Effect.Effect<Driver.Invocation, E, R> =>
  Effect.map(prepare(request), (invocation) => ({
    ...invocation,
    args: [...invocation.args, replayFlag],
    stdin: undefined
  }))

/** A user line: the one-shot prompt message, plus the id its replay carries. @internal */
export const userFrame = (text: string, uuid: string): string =>
  JSON.stringify({
    type: "user",
    message: { role: "user", content: text },
    parent_tool_use_id: null,
    session_id: "",
    uuid
  })

/** @internal */
export const interruptFrame = (requestId: string): string =>
  JSON.stringify({ type: "control_request", request_id: requestId, request: { subtype: "interrupt" } })

/** @internal */
export const controlResponseFrame = (requestId: string, reply: ControlReply): string =>
  JSON.stringify({
    type: "control_response",
    response: reply._tag === "Success"
      ? { subtype: "success", request_id: requestId, response: reply.response }
      : { subtype: "error", request_id: requestId, error: reply.error }
  })

/** Input the CLI may run as a slash command (`/compact`), which it takes without a replay. @internal */
export const isCommand = (text: string): boolean => text.trimStart().startsWith("/")

/** The sum of two counts; absent when both are. */
const sum = (a: number | undefined, b: number | undefined): number | undefined =>
  a === undefined && b === undefined ? undefined : (a ?? 0) + (b ?? 0)

/** Field-wise sum; a field absent on both sides stays absent. @internal */
export const addUsage = (a: Usage | undefined, b: Usage | undefined): Usage | undefined =>
  a === undefined || b === undefined
    ? a ?? b
    // Sums of two `Usage` values' fields (finite numbers).
    : usageFrom(
      sum(a.inputTokens, b.inputTokens),
      sum(a.outputTokens, b.outputTokens),
      sum(a.cachedInputTokens, b.cachedInputTokens),
      sum(a.reasoningTokens, b.reasoningTokens),
      sum(a.costUsd, b.costUsd)
    )

/**
 * A result's usage with `costUsd` replaced by this CLI turn's share: the CLI reports
 * `total_cost_usd` as a running total over the process. Rounded to 1e-12 USD (float noise).
 * Built without the class's own check: a `Usage`'s fields and a number, it would only repeat it.
 *
 * @internal
 */
export const withCost = (usage: Usage, cost: number): Usage =>
  usageFrom(
    usage.inputTokens,
    usage.outputTokens,
    usage.cachedInputTokens,
    usage.reasoningTokens,
    Math.round(cost * 1e12) / 1e12
  )
