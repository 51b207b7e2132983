/**
 * The driver conformance suite of @tether/testing, run with `CodeBuddy.driver` and the real
 * CodeBuddy Code CLI (bundled in @tencent-ai/agent-sdk) against the scripted Chat Completions
 * server (one server per clause).
 */
import { describe, it } from "@effect/vitest"
import { CodeBuddy } from "@tether/drivers"
import { ChatCompletionsServer, Conformance } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"

const slowMarker = "[slow turn]"

/** Plain turns get an immediate answer; the slow turn's answer comes after 20 s. */
const script: ChatCompletionsServer.Script = (request) => {
  const last = ChatCompletionsServer.texts(request, "user").at(-1) ?? ""
  return last.includes(slowMarker)
    ? ChatCompletionsServer.delayed(20_000, ChatCompletionsServer.text("finally"))
    : ChatCompletionsServer.text("plain answer")
}

const subjectFor = (baseUrl: string): Conformance.Subject => ({
  driver: CodeBuddy.driver({ endpoint: { baseUrl, apiKey: Redacted.make("sk-fake-codebuddy") } }),
  plain: "Say something plain.",
  plainText: "plain answer",
  slow: `Take your time. ${slowMarker}`
})

describe("CodeBuddy driver conformance (real CLI)", () => {
  for (const { id, title } of Conformance.clauses(subjectFor("http://127.0.0.1:1/v1"))) {
    it.live(`${id} ${title}`, () =>
      Effect.gen(function*() {
        const server = yield* ChatCompletionsServer.make({ script })
        const clause = Conformance.clauses(subjectFor(server.baseUrl)).find((c) => c.id === id)!
        yield* clause.run
      }).pipe(Effect.scoped), 90_000)
  }
})
