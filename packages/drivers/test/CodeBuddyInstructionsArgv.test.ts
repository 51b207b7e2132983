/**
 * Instructions are passed as the value of `--append-system-prompt`. Instructions that are a
 * Markdown list ("- Be terse.") start with a dash: the CLI must still take them as the value.
 * docs/drivers.md: "instructions travel as the value of `--append-system-prompt`".
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { CodeBuddy } from "@tether/drivers"
import { ChatCompletionsServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { baseRequest, mcpServer, runTurn, tempRoot } from "./ClaudeHarness.js"

describe("CodeBuddy instructions that start with a dash (real CLI)", () => {
  it.live(
    "a Markdown list as instructions reaches the system prompt and the turn succeeds",
    () =>
      Effect.gen(function*() {
        const root = yield* tempRoot
        const token = `tok-${crypto.randomUUID()}`
        const mcp = yield* mcpServer(token)
        const server = yield* ChatCompletionsServer.make({ script: () => ChatCompletionsServer.text("ok") })
        const driver = CodeBuddy.driver({ endpoint: { baseUrl: server.baseUrl, apiKey: Redacted.make("sk-test") } })
        const instructions = "- Be terse.\n- MARKER-d41e"
        const turn = yield* runTurn(driver, baseRequest(root, mcp.url, { prompt: "go", instructions }), token)
        const terminal = turn.outputs.find((o): o is Driver.Terminal => o._tag === "Terminal")
        expect(terminal).toMatchObject({ ok: true, text: "ok" })
        const requests = yield* server.requests
        expect(ChatCompletionsServer.texts(requests[0]!, "system").join("\n")).toContain("MARKER-d41e")
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    60_000
  )
})
