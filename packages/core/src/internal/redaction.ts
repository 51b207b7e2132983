/**
 * Scrubbing a run's outputs of live token values before they become events or the result. Text
 * and reasoning deltas are a stream: a token split across two deltas is caught by holding back
 * the end of a delta while it could be the start of a token.
 *
 * @internal
 */
import type * as Gateway from "@tether/gateway/Gateway"
import type * as Driver from "../Driver.js"

/** @internal */
export interface OutputScrubber {
  /** Hands `sink` the scrubbed outputs `output` releases (none while a delta is held back). */
  readonly push: (output: Driver.Output, sink: (output: Driver.Output) => void) => void
  /** Releases what is held back (the run's outputs ended). */
  readonly flush: (sink: (output: Driver.Output) => void) => void
}

/** @internal */
export const makeOutputScrubber = (redactor: Gateway.Redactor): OutputScrubber => {
  let text = ""
  let reasoning = ""
  const delta = (
    held: string,
    output: { readonly _tag: "TextDelta" | "ReasoningDelta"; readonly text: string },
    sink: (output: Driver.Output) => void
  ): string => {
    const all = redactor.text(held === "" ? output.text : held + output.text)
    const hold = redactor.heldBack(all)
    const out = hold === 0 ? all : all.slice(0, all.length - hold)
    if (out !== "") sink(out === output.text ? output : { _tag: output._tag, text: out })
    return hold === 0 ? "" : all.slice(all.length - hold)
  }
  const flush = (sink: (output: Driver.Output) => void): void => {
    // The deltas ended inside what could be a token: a long enough piece of one is replaced.
    if (text !== "") sink({ _tag: "TextDelta", text: redactor.window(text) })
    if (reasoning !== "") sink({ _tag: "ReasoningDelta", text: redactor.window(reasoning) })
    text = ""
    reasoning = ""
  }
  return {
    push: (output, sink) => {
      switch (output._tag) {
        // What the other kind holds back came first: it is released before this delta.
        case "TextDelta":
          if (reasoning !== "") {
            sink({ _tag: "ReasoningDelta", text: redactor.window(reasoning) })
            reasoning = ""
          }
          text = delta(text, output, sink)
          return
        case "ReasoningDelta":
          if (text !== "") {
            sink({ _tag: "TextDelta", text: redactor.window(text) })
            text = ""
          }
          reasoning = delta(reasoning, output, sink)
          return
        default:
          flush(sink)
          sink(redactor.value(output))
      }
    },
    flush
  }
}

/**
 * The last lines of a CLI's stderr for an error message: at most `lines` lines and `chars`
 * characters, scrubbed (the excerpt is a window cut out of the output).
 *
 * @internal
 */
export const stderrExcerpt = (
  redactor: Gateway.Redactor,
  stderr: string,
  lines = 8,
  chars = 2000
): string => {
  const kept = stderr.split(/\r?\n/).map((line) => line.trimEnd()).filter((line) => line !== "").slice(-lines)
  const text = kept.join("\n")
  return redactor.window(text.length > chars ? text.slice(text.length - chars) : text)
}
