/**
 * The driver conformance suite of @tether/testing, run with `Claude.driver` and the real
 * Claude Code binary against the scripted Anthropic server (one server per clause).
 */
import { describe, it } from "@effect/vitest"
import { Claude } from "@tether/drivers"
import { AnthropicServer, Conformance } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"

const slowMarker = "[slow turn]"

/** Plain turns get an immediate answer; the slow turn's answer comes after 20 s. */
const respond: AnthropicServer.Responder = (request) => {
  const last = AnthropicServer.transcript(request).at(-1)?.[1] ?? ""
  return last.includes(slowMarker)
    ? AnthropicServer.delayed(20_000, AnthropicServer.reply("finally"))
    : AnthropicServer.reply("plain answer")
}

const subjectFor = (url: string): Conformance.Subject => ({
  driver: Claude.driver({
    env: { ANTHROPIC_BASE_URL: url, ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"), CLAUDE_CODE_MAX_RETRIES: "0" }
  }),
  plain: "Say something plain.",
  plainText: "plain answer",
  slow: `Take your time. ${slowMarker}`
})

describe("Claude driver conformance (real CLI)", () => {
  for (const { id, title } of Conformance.clauses(subjectFor("http://127.0.0.1:1"))) {
    it.live(`${id} ${title}`, () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({ respond })
        const clause = Conformance.clauses(subjectFor(server.url)).find((c) => c.id === id)!
        yield* clause.run
      }).pipe(Effect.scoped), 90_000)
  }
})
