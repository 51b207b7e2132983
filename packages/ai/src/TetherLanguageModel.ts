/**
 * A Tether agent as `@effect/ai`'s `LanguageModel`: an app written against
 * `LanguageModel.generateText` / `streamText` runs on Claude Code, Codex, Gemini CLI or Cursor
 * with the user's own CLI login, and the toolkit it passes is served to the CLI through the
 * gateway.
 *
 * Each call is one fresh agent (built from the layer's options, closed when the call ends) and
 * one run:
 *
 * - **Prompt**: system messages are appended to the definition's instructions. The other
 *   messages are a fresh turn, not a thread: when the prompt holds more than one user message,
 *   the messages before the last user message are rendered into the turn's input as a
 *   `<conversation>` (`<user>`, `<assistant>`, `<tool>` elements; tool calls and results as
 *   `<tool_call>` / `<tool_result>` with their JSON; earlier reasoning is left out), followed by
 *   the last user message; the elements' content is escaped as XML text (`&`, `<`, `>`), so an
 *   earlier message or tool result cannot close its element or forge another. A `LanguageModel`
 *   is stateless (the prompt is the whole history and a `Chat` may edit it), so nothing is
 *   resumed and nothing is stored. File parts fail with `UnsupportedRequest` (`FilePart`).
 * - **Tools**: the call's toolkit (passed with @effect/ai's own `toolkit` option, its handler
 *   layer provided to the call) is served next to the definition's Tether tools, with the
 *   rules of `AiToolkit` (a name both define fails, naming both owners). `toolChoice: "none"`
 *   serves none of the toolkit's tools, `"auto"` and `{ oneOf }` serve those; a CLI cannot be
 *   forced to call a tool, so `"required"`, `{ tool }` and `{ mode: "required" }` fail with
 *   `UnsupportedRequest` (`ToolChoice`). The CLI runs the tool loop itself, and @effect/ai does
 *   not hand `disableToolCallResolution` to a provider: it is not honoured, and every call of a
 *   served tool runs its handler. Keep a tool whose calls the app must decide on out of the
 *   toolkit, or give it a handler that asks.
 * - **Response**: text and reasoning arrive as `text-*` / `reasoning-*` parts as the CLI
 *   streams them (`generateText` joins each block into one part); the toolkit's calls, which
 *   the CLI made through the gateway, are provider-executed `tool-call` parts, and a call that
 *   succeeded is followed by its provider-executed `tool-result` (the encoded output, decoded by
 *   @effect/ai with the tool's schemas); a failed call has no result part and is listed under
 *   `metadata.tether.failedToolCalls` of the finish part. Calls of the agent's own Tether tools
 *   and of the CLI's built-ins are not parts (@effect/ai decodes only the toolkit's). A
 *   `response-metadata` part comes first (the run id, the model asked for), a `finish` part
 *   last with reason `stop`, the run's usage and `metadata.tether` (run id, provider, model,
 *   session).
 * - **Structured output**: `generateObject` runs the turn with Tether's structured output
 *   (`agent.streamAs`, see `@tether/core`'s `StructuredOutput`: the JSON Schema derived from the
 *   schema goes natively to Claude Code and Codex, as an instruction elsewhere; Tether validates
 *   the value, with the default repair turns). The answer's prose is not a part: the response's
 *   one text part is the decoded value encoded again as JSON, which @effect/ai decodes with the
 *   same schema; the finish part is the last attempt's. A value that still does not decode fails
 *   with `AiError.MalformedOutput` whose `cause` is the `StructuredOutputError` (the raw text and
 *   the schema's issues); a value of a Schema that only decodes (its encoding fails) with
 *   `MalformedOutput` whose `cause` is the `ParseError`.
 * - **Errors**: every failure is an `AiError`, as the `LanguageModel` contract requires, with
 *   Tether's typed error as its `cause`: `MalformedInput` for a request Tether cannot serve
 *   (`UnsupportedRequest`, an invalid toolkit, a missing handler, a capability the driver
 *   lacks), `MalformedOutput` for structured output that does not decode, `UnknownError` for a
 *   failed run (`RunError`).
 * - **Interruption**: interrupting the call (or stopping a `streamText` consumer) cancels the
 *   run and closes the agent: the CLI's process group is killed and its execution clone
 *   removed before the interruption completes.
 *
 * @example
 * ```ts
 * import * as NodeContext from "@effect/platform-node/NodeContext"
 * import { LanguageModel } from "@effect/ai"
 * import { TetherLanguageModel } from "@tether/ai"
 * import { Claude } from "@tether/drivers"
 * import { Gateway } from "@tether/gateway"
 * import { Effect } from "effect"
 *
 * const program = LanguageModel.generateText({ prompt: "Summarize README.md" }).pipe(
 *   Effect.provide(TetherLanguageModel.layer({ driver: Claude.driver(), workspace: "/srv/repo" })),
 *   Effect.provide([Gateway.layer(), NodeContext.layer])
 * )
 * ```
 *
 * @since 0.1.0
 */
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Agent from "@tether/core/Agent"
import type * as Approval from "@tether/core/Approval"
import type * as Mcp from "@tether/core/Mcp"
import type * as Skill from "@tether/core/Skill"
import type * as Tool from "@tether/tool/Tool"
import type * as Toolkit from "@tether/tool/Toolkit"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as internal from "./internal/languageModel.js"

/**
 * A request this model cannot serve, before any process starts:
 *
 * - `ToolChoice`: a tool choice that forces a tool call (`"required"`, `{ tool }`,
 *   `{ mode: "required" }`): a coding-agent CLI decides on its own whether to call a tool;
 * - `FilePart`: a file in the prompt;
 * - `EmptyPrompt`: a prompt with nothing but system messages;
 * - `Approvals`: `approvals` without a `handler` (event mode waits for `agent.approve`, which
 *   no `LanguageModel` call can reach: each request would wait for the deadline).
 *
 * It reaches the caller as the `cause` of an `AiError.MalformedInput`.
 *
 * @since 0.1.0
 * @category errors
 */
export class UnsupportedRequest extends Schema.TaggedError<UnsupportedRequest>("@tether/ai/UnsupportedRequest")(
  "UnsupportedRequest",
  {
    reason: Schema.Literal("ToolChoice", "FilePart", "EmptyPrompt", "Approvals"),
    detail: Schema.String
  }
) {
  override get message(): string {
    return `${this.reason}: ${this.detail}`
  }
}

/**
 * What every call's agent is built from: `Agent.Options` without the per-call parts. The
 * definition is optional (default: no instructions, no tools) and its tools are served on every
 * call beside the call's own toolkit. Events are always delivered without drops, so streamed
 * text is complete; no thread is used, so there are no thread options.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<Tools extends Toolkit.Any>
  extends Omit<Agent.Options<Tools>, "definition" | "events" | "threads" | "approvals">
{
  /**
   * Approvals of the CLI's built-in tools, answered by `handler`: a `LanguageModel` call has no
   * `approve`, so there is no event mode here (a request would wait for the deadline; a call
   * made with approvals but no handler fails `UnsupportedRequest` `Approvals`).
   */
  readonly approvals?: Approval.Options & { readonly handler: NonNullable<Approval.Options["handler"]> }
  readonly definition?: {
    readonly instructions?: string
    readonly skills?: ReadonlyArray<Skill.Skill>
    readonly tools?: Tools
    readonly mcp?: ReadonlyArray<Mcp.Source>
  }
}

/**
 * The `LanguageModel` service backed by Tether agents built from `options` (see the module
 * documentation). Validates the definition's tools first (`ToolDefinitionError`); captures the
 * services agents need (the gateway, the platform, the definition's tool handlers).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: <Tools extends Toolkit.Any = Toolkit.Toolkit<{}>>(
  options: Options<Tools>
) => Effect.Effect<
  LanguageModel.Service,
  Tool.ToolDefinitionError,
  Exclude<Agent.Requirements, Scope.Scope> | Toolkit.HandlerServices<Tools>
> = internal.make as never

/**
 * `make` as a Layer of `LanguageModel.LanguageModel`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <Tools extends Toolkit.Any = Toolkit.Toolkit<{}>>(
  options: Options<Tools>
): Layer.Layer<
  LanguageModel.LanguageModel,
  Tool.ToolDefinitionError,
  Exclude<Agent.Requirements, Scope.Scope> | Toolkit.HandlerServices<Tools>
> => Layer.effect(internal.LanguageModelTag, make(options))
