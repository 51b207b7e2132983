/**
 * A CLI's stdout is bytes: what is not UTF-8 is decoded with replacement characters, line by
 * line, and never fails or kills the run. The provider is a real `/bin/sh` process speaking the
 * reference driver's protocol (one `Driver.Output` as JSON per line).
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import { Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"

const Tools = Toolkit.empty
const ToolsLive = Tools.toLayer({})

/** The reference protocol from `sh -c`: `printf` octal escapes write raw bytes. */
const shell = (script: string): Driver.Driver => {
  const base = Reference.driver()
  return {
    ...base,
    prepare: (request) =>
      Effect.map(base.prepare(request), (invocation) => ({
        ...invocation,
        command: "/bin/sh",
        args: ["-c", script],
        stdin: undefined
      }))
  }
}

const terminal = JSON.stringify({
  _tag: "Terminal",
  ok: true,
  text: "done",
  usage: { inputTokens: 1, outputTokens: 1 },
  model: "m",
  session: "s-1",
  raw: {}
})

describe("stdout that is not UTF-8", () => {
  it.live("invalid bytes become U+FFFD: inside a JSON string the text keeps the rest, a garbage line is a notice", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const agent = yield* Agent.make({
        driver: shell([
          `printf '%s\\n' '{"_tag":"SessionStarted","sessionId":"s-1","model":"m"}'`,
          // An invalid lead byte, a lone continuation byte, then a valid "é" split by the shell
          // into two writes around a pause (one character across two pipe reads).
          `printf '{"_tag":"TextDelta","text":"a\\377b\\200c'; sleep 0.05; printf '\\303'; sleep 0.05`,
          `printf '\\251"}\\n'`,
          `printf '\\376\\377 not json at all\\n'`,
          `printf '%s\\n' '${terminal}'`
        ].join("\n")),
        definition: { instructions: "", skills: [], tools: Tools },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      const events = Array.from(yield* Stream.runCollect(agent.stream("go")))
      const texts = events.flatMap((event) => event._tag === "TextDelta" ? [event.text] : [])
      expect(texts.join("")).toBe("a\uFFFDb\uFFFDcé")
      const notices = events.filter((event) => event._tag === "Notice" && event.kind === "malformed")
      expect(notices).toHaveLength(1)
      expect(notices[0]?._tag === "Notice" && notices[0].message).toBe("\uFFFD\uFFFD not json at all")
      const finished = events.at(-1)
      expect(finished?._tag === "RunFinished" && finished.outcome).toBe("success")
      expect(finished?._tag === "RunFinished" && finished.result.text).toBe("done")
    }).pipe(Effect.scoped, Effect.provide([ToolsLive, Harness.layer])))
})
