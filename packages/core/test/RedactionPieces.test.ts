/**
 * Where a live token hides from a scan of the whole text: in an error's `cause` chain (a run's
 * `RunError.cause`, rendered by Effect's loggers), and in pieces streamed one record each (Claude
 * Code's `stream_event` `text_delta` lines), which a live thread's stdout tail would keep while its
 * warm process, and its credential, live on.
 */
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Gateway } from "@tether/gateway"
import { Toolkit } from "@tether/tool"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type * as Process from "../src/internal/process.js"
import * as Redaction from "../src/internal/redaction.js"
import * as Run from "../src/internal/run.js"

const marker = Gateway.redactionMarker

/** A gateway's redactor and one of its live tokens. */
const liveToken = Effect.gen(function*() {
  const gateway = yield* Gateway.make()
  const registration = yield* gateway.register(yield* Toolkit.executor(Toolkit.empty))
  return { redactor: gateway.redactor, token: Redacted.value(registration.token) }
})

describe("A run's failure cause", () => {
  it.live("a token in an error's cause chain or own fields is replaced; the chain is kept", () =>
    Effect.gen(function*() {
      const { redactor, token } = yield* liveToken
      const root = new Error(`upstream refused key ${token}`)
      const error = Object.assign(new Error("lookup failed", { cause: root }), { code: "E_KEY", key: token })
      const scrubbed = Run.scrubCause(redactor, error) as Error & { code: string; key: string }
      expect(scrubbed).not.toBe(error)
      expect(scrubbed.message).toBe("lookup failed")
      expect(scrubbed.code).toBe("E_KEY")
      expect(scrubbed.key).toBe(marker)
      expect((scrubbed.cause as Error).message).toBe(`upstream refused key ${marker}`)
      // As Effect's loggers render it.
      const rendered = Cause.pretty(Cause.fail(scrubbed), { renderErrorCause: true })
      expect(rendered).toContain("lookup failed")
      expect(rendered).toContain(`upstream refused key ${marker}`)
      expect(rendered).not.toContain(token)
      // A clean chain is kept as it is.
      const clean = new Error("lookup failed", { cause: new Error("upstream refused") })
      expect(Run.scrubCause(redactor, clean)).toBe(clean)
      // A chain that loops ends.
      const looped = new Error(`again ${token}`)
      ;(looped as { cause?: unknown }).cause = looped
      expect(Cause.pretty(Cause.fail(Run.scrubCause(redactor, looped)), { renderErrorCause: true })).not.toContain(
        token
      )
    }).pipe(Effect.scoped))
})

/** Claude Code's partial record for one piece of streamed text. */
const deltaLine = (text: string) =>
  JSON.stringify({
    type: "stream_event",
    event: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text } }
  })

const tailOf = (text: string): Process.RawTail => {
  const bytes = Buffer.from(text)
  return { chunks: [bytes], length: bytes.length, total: bytes.length }
}

describe("A live thread's raw stdout", () => {
  it.live("a token streamed in pieces too short for a window leaves no tail to join them from", () =>
    Effect.gen(function*() {
      const { redactor, token } = yield* liveToken
      const pieces = ["The environment: TETHER_MCP_X=", ...token.match(/.{1,5}/g)!, "\nDone."]
      const stdout = pieces.map(deltaLine).join("\n") + "\n"
      // The gap: no window finds the token in the tail, yet joining the pieces gives it back.
      expect(redactor.window(stdout)).toBe(stdout)
      const joined = stdout.split("\n").filter((line) => line !== "").map((line) => JSON.parse(line).event.delta.text)
        .join("")
      expect(joined).toContain(token)

      const running = {
        stdoutTail: () => tailOf(stdout),
        stderrTail: () => tailOf("")
      } as unknown as Process.Running
      const state = { live: true, running, terminal: undefined }
      const deltas: Array<Driver.Output> = []
      const scrubber = Redaction.makeOutputScrubber(redactor, () => Run.noteToken(state))
      for (const text of pieces) scrubber.push({ _tag: "TextDelta", text }, (output) => deltas.push(output))
      scrubber.flush((output) => deltas.push(output))
      // The deltas as events: the token is replaced across them.
      const events = deltas.map((output) => (output as { text: string }).text).join("")
      expect(events).toContain(marker)
      expect(events).not.toContain(token)

      const raw = Run.rawOf({ redactor }, state)
      expect(raw.stdout).toBe("")
      expect(raw.stdoutBytes).toBe(Buffer.byteLength(stdout))
      // Every later turn of the same process too.
      expect(Run.rawOf({ redactor }, state).stdout).toBe("")

      // A clean turn on another process keeps its tail, decoded when read.
      const clean = pieces.slice(0, 1).map(deltaLine).join("\n") + "\n"
      const other = {
        live: true,
        running: { stdoutTail: () => tailOf(clean), stderrTail: () => tailOf("") } as unknown as Process.Running,
        terminal: undefined
      }
      const quiet = Redaction.makeOutputScrubber(redactor, () => Run.noteToken(other))
      quiet.push({ _tag: "TextDelta", text: "nothing secret" }, () => {})
      quiet.flush(() => {})
      expect(Run.rawOf({ redactor }, other).stdout).toBe(clean)
    }).pipe(Effect.scoped))
})
