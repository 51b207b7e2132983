/**
 * Scrubbing a run's outputs of live token values before they become events or the result. Text
 * and reasoning deltas are a stream: a token split across two deltas is caught by holding back
 * the end of a delta while it could be the start of a token.
 *
 * @internal
 */
import * as Gateway from "@tether/gateway/Gateway"
import type * as Driver from "../Driver.js"
import type * as Process from "./process.js"

/** @internal */
export interface OutputScrubber {
  /** Hands `sink` the scrubbed outputs `output` releases (none while a delta is held back). */
  readonly push: (output: Driver.Output, sink: (output: Driver.Output) => void) => void
  /** Releases what is held back (the run's outputs ended). */
  readonly flush: (sink: (output: Driver.Output) => void) => void
}

const marker = Gateway.redactionMarker

/**
 * The end of one kind's deltas (text or reasoning) that could be the start of a token: `raw`, as
 * the CLI wrote it (with any token in it already replaced), of which the first `sent` characters
 * went out already. It is kept after a flush released it, so that the next delta of the kind is
 * read after it.
 */
interface Pending {
  raw: string
  sent: number
}

/**
 * `onToken` is called whenever an output carried a live token (whole or a long enough piece of
 * one, in a value or across deltas): the raw output the outputs were parsed from holds it too,
 * possibly in pieces no window finds (see `rawOf` in run.ts). Checked by identity: the redactor
 * returns what it was given when it replaced nothing, so a clean output costs nothing more.
 *
 * Deltas: each kind's deltas are read as one stream. A delta ending with what could be a token's
 * start holds that end back until the next delta of its kind. Another event (or a delta of the
 * other kind) releases it: as it is below 8 characters (the redactor's window rule), else as as
 * many of the marker's first characters (the whole marker at the turn's terminal record or the
 * run's end). The released end is still read before the kind's next delta, so the rest of a token
 * it began goes out as the rest of the marker. A token's characters all go out as the marker's,
 * except at most its first 7 when an event came between its start and its eighth character.
 * `Notice`: a driver quotes a line cut to a bounded length (and a third-party driver may quote
 * anything cut anywhere) in its `message` and a string `raw`: both are read as windows, a token
 * cut by either edge replaced from 8 characters on.
 *
 * @internal
 */
export const makeOutputScrubber = (redactor: Gateway.Redactor, onToken: () => void = () => {}): OutputScrubber => {
  const text: Pending = { raw: "", sent: 0 }
  const reasoning: Pending = { raw: "", sent: 0 }
  const windowed = (input: string): string => {
    const out = redactor.window(input)
    if (out !== input) onToken()
    return out
  }
  const delta = (
    pending: Pending,
    output: { readonly _tag: "TextDelta" | "ReasoningDelta"; readonly text: string },
    sink: (output: Driver.Output) => void
  ): void => {
    const joined = pending.raw === "" ? output.text : pending.raw + output.text
    const all = redactor.text(joined)
    if (all !== joined) onToken()
    const hold = redactor.heldBack(all)
    const keep = all.length - hold
    if (keep > pending.sent) {
      const out = pending.sent === 0 && hold === 0 ? all : all.slice(pending.sent, keep)
      sink(out === output.text ? output : { _tag: output._tag, text: out })
    }
    pending.sent = Math.max(0, pending.sent - keep)
    pending.raw = hold === 0 ? "" : all.slice(keep)
  }
  /**
   * Sends what `pending` holds back and has not sent yet. Its end that could be a token's start is
   * replaced from 8 characters on (the window rule): by the marker's characters one for one (the
   * next delta's rest of the token then goes out as the rest of the marker), or by the whole
   * marker at the run's end (`whole`).
   */
  const release = (
    pending: Pending,
    tag: "TextDelta" | "ReasoningDelta",
    whole: boolean,
    sink: (output: Driver.Output) => void
  ): void => {
    const raw = pending.raw
    if (pending.sent === raw.length) return
    const start = redactor.heldBack(raw)
    const piece = raw.slice(raw.length - start)
    let out = raw
    if (start > 0 && redactor.window(piece) !== piece) {
      onToken()
      out = raw.slice(0, raw.length - start) + (whole ? marker : marker.slice(0, start))
    }
    sink({ _tag: tag, text: out.slice(pending.sent) })
    pending.sent = raw.length
  }
  const releaseAll = (whole: boolean, sink: (output: Driver.Output) => void): void => {
    release(text, "TextDelta", whole, sink)
    release(reasoning, "ReasoningDelta", whole, sink)
  }
  return {
    push: (output, sink) => {
      switch (output._tag) {
        // What the other kind holds back came first: it is released before this delta.
        case "TextDelta":
          release(reasoning, "ReasoningDelta", false, sink)
          delta(text, output, sink)
          return
        case "ReasoningDelta":
          release(text, "TextDelta", false, sink)
          delta(reasoning, output, sink)
          return
        case "Notice": {
          releaseAll(false, sink)
          const message = windowed(output.message)
          const raw = typeof output.raw === "string" ? windowed(output.raw) : output.raw
          const cut = message === output.message && raw === output.raw ? output : { ...output, message, raw }
          // Whole tokens anywhere else in it.
          const scrubbed = redactor.value(cut)
          if (scrubbed !== cut) onToken()
          sink(scrubbed)
          return
        }
        default: {
          // The turn's end: nothing is expected to continue what is held back.
          releaseAll(output._tag === "Terminal", sink)
          const scrubbed = redactor.value(output)
          if (scrubbed !== output) onToken()
          sink(scrubbed)
        }
      }
    },
    flush: (sink) => {
      // The deltas ended inside what could be a token: a long enough piece of one is replaced.
      releaseAll(true, sink)
      text.raw = ""
      text.sent = 0
      reasoning.raw = ""
      reasoning.sent = 0
    }
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
