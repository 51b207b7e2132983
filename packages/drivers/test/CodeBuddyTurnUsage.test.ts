/**
 * A CodeBuddy turn of two model requests (a tool call, then the answer) reports the turn's
 * own usage: every request's tokens, cached ones counted once.
 * docs/drivers.md: "The other drivers report each turn's own." and "`Usage.inputTokens` is every
 * input token the model read, cached or not, and `cachedInputTokens` the part read from the prompt
 * cache, for every driver".
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { CodeBuddy } from "@tether/drivers"
import { ChatCompletionsServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { baseRequest, mcpServer, runTurn, tempRoot } from "./ClaudeHarness.js"

describe("CodeBuddy usage over several model requests (real CLI)", () => {
  it.live("a turn with a tool call counts both requests' tokens", () =>
    Effect.gen(function*() {
      const root = yield* tempRoot
      const token = `tok-${crypto.randomUUID()}`
      const mcp = yield* mcpServer(token)
      const server = yield* ChatCompletionsServer.make({
        script: (request) =>
          ChatCompletionsServer.toolResults(request).length === 0
            ? ChatCompletionsServer.callTool("echo", { text: "x" }, {
              usage: { promptTokens: 100, completionTokens: 5, cachedTokens: 40 }
            })
            : ChatCompletionsServer.text("done", {
              usage: { promptTokens: 200, completionTokens: 7, cachedTokens: 150 }
            })
      })
      const driver = CodeBuddy.driver({ endpoint: { baseUrl: server.baseUrl, apiKey: Redacted.make("sk-test") } })
      const turn = yield* runTurn(driver, baseRequest(root, mcp.url, { prompt: "go" }), token)
      const terminal = turn.outputs.find((o) => o._tag === "Terminal") as Driver.Terminal | undefined
      expect(terminal?.ok).toBe(true)
      expect((yield* server.requests).length).toBe(2)
      expect(terminal?.usage).toMatchObject({ inputTokens: 300, cachedInputTokens: 190, outputTokens: 12 })
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 60_000)
})
