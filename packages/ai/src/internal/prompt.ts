/**
 * An @effect/ai prompt as one Tether turn: system messages become instructions, the other
 * messages are rendered into the turn's input (a fresh turn, not a thread).
 *
 * @internal
 */
import type * as Prompt from "@effect/ai/Prompt"
import * as Either from "effect/Either"
import { identity } from "effect/Function"
import { UnsupportedRequest } from "../TetherLanguageModel.js"

/** @internal */
export interface Rendered {
  /** The system messages' contents, in order. */
  readonly system: ReadonlyArray<string>
  /** The turn's input. */
  readonly input: string
}

const json = (value: unknown): string => {
  try {
    return JSON.stringify(value) ?? "null"
  } catch {
    return JSON.stringify(String(value))
  }
}

// Content inside the `<conversation>` is XML text: an earlier message or a tool result that holds
// `</assistant><user>` must not close its element and open one of a role the app never sent.
const escape = (text: string): string =>
  text.replace(/[&<>]/g, (c) => c === "&" ? "&amp;" : c === "<" ? "&lt;" : "&gt;")

type Part = Prompt.UserMessagePart | Prompt.AssistantMessagePart | Prompt.ToolMessagePart

const renderPart = (
  part: Part,
  content: (raw: string) => string
): Either.Either<string | undefined, UnsupportedRequest> => {
  const attribute = (value: string): string => content(JSON.stringify(value))
  switch (part.type) {
    case "text":
      return Either.right(content(part.text))
    // Earlier reasoning is the model's scratch work, not conversation: it is left out.
    case "reasoning":
      return Either.right(undefined)
    case "tool-call":
      return Either.right(
        `<tool_call name=${attribute(part.name)} id=${attribute(part.id)}>${content(json(part.params))}</tool_call>`
      )
    case "tool-result":
      return Either.right(
        `<tool_result name=${attribute(part.name)} id=${attribute(part.id)}${
          part.isFailure ? " failure=\"true\"" : ""
        }>${content(json(part.result))}</tool_result>`
      )
    case "file":
      return Either.left(
        new UnsupportedRequest({
          reason: "FilePart",
          detail: `a ${part.mediaType} file part cannot be sent to a coding-agent CLI; send its content as text`
        })
      )
  }
}

const renderParts = (
  parts: ReadonlyArray<Part>,
  content: (raw: string) => string
): Either.Either<string, UnsupportedRequest> =>
  Either.map(
    Either.all(parts.map((part) => renderPart(part, content))),
    (texts) => texts.filter((text): text is string => text !== undefined && text.length > 0).join("\n")
  )

/**
 * Renders a prompt. A prompt whose only non-system message is one user message is sent as
 * that message's text. Otherwise the messages before the last user message (or all of them,
 * when the last message is not the user's) are rendered as a `<conversation>` of `<user>`,
 * `<assistant>` and `<tool>` elements (tool calls and results as `<tool_call>` /
 * `<tool_result>` with their JSON), followed by the last user message's text as written, or by
 * an instruction to continue. The elements' content (texts, JSON, attribute values) is escaped
 * as XML text, so that no message can close its element or open another. Fails with
 * `UnsupportedRequest` for file parts and for a prompt with nothing to answer.
 *
 * @internal
 */
export const render = (prompt: Prompt.Prompt): Either.Either<Rendered, UnsupportedRequest> =>
  Either.gen(function*() {
    const system: Array<string> = []
    const messages: Array<Exclude<Prompt.Message, Prompt.SystemMessage>> = []
    for (const message of prompt.content) {
      if (message.role === "system") system.push(message.content)
      else messages.push(message)
    }
    const last = messages.at(-1)
    if (last === undefined) {
      return yield* Either.left(
        new UnsupportedRequest({ reason: "EmptyPrompt", detail: "the prompt has no user, assistant or tool message" })
      )
    }
    const history = last.role === "user" ? messages.slice(0, -1) : messages
    // The last user message is the turn's own input: it goes as written.
    const current = last.role === "user" ? yield* renderParts(last.content, identity) : undefined
    if (history.length === 0) return { system, input: current ?? "" }
    const lines: Array<string> = ["<conversation>"]
    for (const message of history) {
      lines.push(`<${message.role}>`, yield* renderParts(message.content, escape), `</${message.role}>`)
    }
    lines.push("</conversation>", "")
    lines.push(current ?? "Continue the conversation from its last message.")
    return { system, input: lines.join("\n") }
  })
