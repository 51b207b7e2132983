/**
 * Scrubbing a run's outputs of live token values before they become events or the result. Text
 * and reasoning deltas are a stream: a token split across two deltas is caught by holding back
 * the end of a delta while it could be the start of a token.
 *
 * @internal
 */
import type * as Gateway from "@tether/gateway/Gateway"
import type * as Driver from "../Driver.js"
import type * as Process from "./process.js"

/** @internal */
export interface OutputScrubber {
  /** Hands `sink` the scrubbed outputs `output` releases (none while a delta is held back). */
  readonly push: (output: Driver.Output, sink: (output: Driver.Output) => void) => void
  /** Releases what is held back (the run's outputs ended). */
  readonly flush: (sink: (output: Driver.Output) => void) => void
}

/**
 * `onToken` is called whenever an output carried a live token (whole or a long enough piece of
 * one, in a value or across deltas): the raw output the outputs were parsed from holds it too,
 * possibly in pieces no window finds (see `rawOf` in run.ts). Checked by identity: the redactor
 * returns what it was given when it replaced nothing, so a clean output costs nothing more.
 *
 * @internal
 */
export const makeOutputScrubber = (redactor: Gateway.Redactor, onToken: () => void = () => {}): OutputScrubber => {
  let text = ""
  let reasoning = ""
  const windowed = (input: string): string => {
    const out = redactor.window(input)
    if (out !== input) onToken()
    return out
  }
  const delta = (
    held: string,
    output: { readonly _tag: "TextDelta" | "ReasoningDelta"; readonly text: string },
    sink: (output: Driver.Output) => void
  ): string => {
    const joined = held === "" ? output.text : held + output.text
    const all = redactor.text(joined)
    if (all !== joined) onToken()
    const hold = redactor.heldBack(all)
    const out = hold === 0 ? all : all.slice(0, all.length - hold)
    if (out !== "") sink(out === output.text ? output : { _tag: output._tag, text: out })
    return hold === 0 ? "" : all.slice(all.length - hold)
  }
  const flush = (sink: (output: Driver.Output) => void): void => {
    // The deltas ended inside what could be a token: a long enough piece of one is replaced.
    if (text !== "") sink({ _tag: "TextDelta", text: windowed(text) })
    if (reasoning !== "") sink({ _tag: "ReasoningDelta", text: windowed(reasoning) })
    text = ""
    reasoning = ""
  }
  return {
    push: (output, sink) => {
      switch (output._tag) {
        // What the other kind holds back came first: it is released before this delta.
        case "TextDelta":
          if (reasoning !== "") {
            sink({ _tag: "ReasoningDelta", text: windowed(reasoning) })
            reasoning = ""
          }
          text = delta(text, output, sink)
          return
        case "ReasoningDelta":
          if (text !== "") {
            sink({ _tag: "TextDelta", text: windowed(text) })
            text = ""
          }
          reasoning = delta(reasoning, output, sink)
          return
        default:
          flush(sink)
          const scrubbed = redactor.value(output)
          if (scrubbed !== output) onToken()
          sink(scrubbed)
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

/**
 * A token's length less one: an occurrence that crosses the edge between two reads lies within
 * this many bytes on either side of it.
 */
const reach = 42

/** The bytes `[from, to)` of the tail (clamped to it), copied out of its reads. */
const bytesOf = (tail: Process.RawTail, from: number, to: number): Buffer => {
  const start = Math.max(0, from)
  const end = Math.min(tail.length, to)
  const out = Buffer.allocUnsafe(Math.max(0, end - start))
  let offset = 0
  for (const chunk of tail.chunks) {
    const next = offset + chunk.length
    if (next > start && offset < end) {
      out.set(
        chunk.subarray(Math.max(0, start - offset), Math.min(chunk.length, end - offset)),
        Math.max(0, offset - start)
      )
    }
    if (next >= end) break
    offset = next
  }
  return out
}

/**
 * Whether `redactor.window` leaves the tail's text as it is: no live token in its bytes, and none
 * cut by either of its edges. Read in the bytes as they came (a token is ASCII: its bytes occur
 * in the bytes exactly where it occurs in the text, since UTF-8 decoding never alters an ASCII
 * byte, and no other byte decodes to a token character), so a run's result leaves the text of a
 * clean tail to be decoded when someone reads it. A token minted later cannot be in output
 * written before it: 256 random bits. `false` whenever the redactor changes a piece, also where
 * the piece's own end is no edge of the tail: the text is then decoded and scrubbed at once.
 *
 * @internal
 */
export const windowKeeps = (redactor: Gateway.Redactor, tail: Process.RawTail): boolean => {
  if (tail.length === 0) return true
  // Many small reads are searched as one buffer rather than edge by edge.
  const whole: Process.RawTail = tail.chunks.length > 64
    ? { chunks: [Buffer.concat(tail.chunks)], length: tail.length, total: tail.total }
    : tail
  for (const chunk of whole.chunks) if (redactor.bytes(chunk) !== chunk) return false
  let offset = 0
  for (let i = 0; i < whole.chunks.length - 1; i++) {
    offset += whole.chunks[i]!.length
    const seam = bytesOf(whole, offset - reach, offset + reach)
    if (redactor.bytes(seam) !== seam) return false
  }
  // One character per byte: the bytes of a token are its characters, and any other byte is a
  // character no token holds, as its decoded character (U+FFFD or beyond ASCII) is too.
  const head = bytesOf(whole, 0, reach).toString("latin1")
  const end = bytesOf(whole, whole.length - reach, whole.length).toString("latin1")
  return redactor.window(head) === head && redactor.window(end) === end
}
