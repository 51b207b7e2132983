/**
 * The driver conformance suite of @tether/testing, run with `Acp.driver` and two real ACP agents
 * (one-shot turns: the turn runner spawns the agent, one server per clause): claude-agent-acp
 * driving the pinned Claude Code against the scripted Anthropic server, and codex-acp against the
 * scripted Responses server.
 */
import { describe, it } from "@effect/vitest"
import { AnthropicServer, Conformance, ResponsesServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import { claudeAgentDriver, codexAgentDriver } from "./AcpHarness.js"

const slowMarker = "[slow turn]"

const claudeSubject = (url: string): Conformance.Subject => ({
  driver: claudeAgentDriver(url),
  plain: "Say something plain.",
  plainText: "plain answer",
  slow: `Take your time. ${slowMarker}`
})

const codexSubject = (baseUrl: string): Conformance.Subject => ({
  driver: codexAgentDriver(baseUrl),
  plain: "Say something plain.",
  slow: `Take your time. ${slowMarker}`
})

describe("ACP driver conformance: claude-agent-acp (real adapter and CLI)", () => {
  for (const { id, title } of Conformance.clauses(claudeSubject("http://127.0.0.1:1"))) {
    it.live(`${id} ${title}`, () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          respond: (request) => {
            const last = AnthropicServer.transcript(request).at(-1)?.[1] ?? ""
            return last.includes(slowMarker)
              ? AnthropicServer.delayed(20_000, AnthropicServer.reply("finally"))
              : AnthropicServer.reply("plain answer")
          }
        })
        yield* Conformance.clauses(claudeSubject(server.url)).find((c) => c.id === id)!.run
      }).pipe(Effect.scoped), 90_000)
  }
})

describe("ACP driver conformance: codex-acp (real adapter)", () => {
  for (const { id, title } of Conformance.clauses(codexSubject("http://127.0.0.1:1/v1"))) {
    it.live(`${id} ${title}`, () =>
      Effect.gen(function*() {
        const server = yield* ResponsesServer.make({
          script: (request) =>
            ResponsesServer.userTexts(request).some((text) => text.includes(slowMarker))
              ? ResponsesServer.delayed(20_000, ResponsesServer.text("finally"))
              : ResponsesServer.text("plain answer")
        })
        yield* Conformance.clauses(codexSubject(server.baseUrl)).find((c) => c.id === id)!.run
      }).pipe(Effect.scoped), 90_000)
  }
})
