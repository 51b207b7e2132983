/**
 * The prompt goes to the CLI's stdin as plain text. A prompt that starts with a path
 * ("/etc/hosts …") must reach the model as the user's message, not be taken for a slash command.
 * docs/drivers.md: "the prompt goes to stdin as plain text".
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { CodeBuddy } from "@tether/drivers"
import { ChatCompletionsServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { baseRequest, mcpServer, runTurn, tempRoot } from "./ClaudeHarness.js"

const prompts = ["/etc/hosts has a stale entry: MARKER-5a1", "/clear the cache, then say MARKER-5a1"]

describe("CodeBuddy prompt starting with a slash (real CLI)", () => {
  for (const prompt of prompts) {
    it.live(`the model reads the prompt ${JSON.stringify(prompt)}`, () =>
      Effect.gen(function*() {
        const root = yield* tempRoot
        const token = `tok-${crypto.randomUUID()}`
        const mcp = yield* mcpServer(token)
        const server = yield* ChatCompletionsServer.make({ script: () => ChatCompletionsServer.text("ok") })
        const driver = CodeBuddy.driver({ endpoint: { baseUrl: server.baseUrl, apiKey: Redacted.make("sk-test") } })
        const turn = yield* runTurn(driver, baseRequest(root, mcp.url, { prompt }), token)
        const terminal = turn.outputs.find((o): o is Driver.Terminal => o._tag === "Terminal")
        const requests = yield* server.requests
        expect(requests.length).toBeGreaterThan(0)
        expect(ChatCompletionsServer.texts(requests[0]!, "user").join("\n")).toContain("MARKER-5a1")
        expect(terminal).toMatchObject({ ok: true, text: "ok" })
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 60_000)
  }
})
