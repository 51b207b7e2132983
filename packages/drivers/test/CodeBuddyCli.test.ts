/**
 * The CodeBuddy driver against the real CodeBuddy Code CLI (2.117.0, bundled in
 * @tencent-ai/agent-sdk) run offline against the scripted Chat Completions server, driver level:
 * what the CLI reports of a wrong key, of cached prompt tokens, a run without partial messages, and
 * the user's copied settings never taking the turn to another endpoint.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { CodeBuddy } from "@tether/drivers"
import { ChatCompletionsServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { baseRequest, mcpServer, runTurn, tempRoot } from "./ClaudeHarness.js"

const turnWith = (script: ChatCompletionsServer.Script, config: CodeBuddy.Config = {}) =>
  Effect.gen(function*() {
    const root = yield* tempRoot
    const token = `tok-${crypto.randomUUID()}`
    const mcp = yield* mcpServer(token)
    const server = yield* ChatCompletionsServer.make({ script })
    const driver = CodeBuddy.driver({
      endpoint: { baseUrl: server.baseUrl, apiKey: Redacted.make("sk-audit") },
      ...config
    })
    return yield* runTurn(driver, baseRequest(root, mcp.url, { prompt: "go" }), token)
  })

const terminalOf = (outputs: ReadonlyArray<Driver.Output>) =>
  outputs.find((o): o is Driver.Terminal => o._tag === "Terminal")

describe("CodeBuddy driver with the real CLI", () => {
  it.live(
    "a 401 from the model endpoint (bad API key) is an api_error notice, not the model's message",
    () =>
      Effect.gen(function*() {
        const turn = yield* turnWith(() => ChatCompletionsServer.fail(401, "invalid api key"))
        const terminal = terminalOf(turn.outputs)
        expect(terminal?.ok).toBe(false)
        expect(terminal?.error).toContain("401")
        // docs/drivers.md: "a failed model request, which the CLI reports as assistant text, is an
        // `api_error` notice, not the model's message".
        const assistant = turn.outputs.filter((o) => o._tag === "Message" && o.role === "assistant")
        expect(assistant).toEqual([])
        expect(turn.outputs.some((o) => o._tag === "Notice" && o.kind === "api_error")).toBe(true)
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    60_000
  )

  it.live("usage: prompt tokens served from the cache are counted once in inputTokens", () =>
    Effect.gen(function*() {
      // OpenAI Chat Completions: `prompt_tokens` (100) already includes `cached_tokens` (40).
      const turn = yield* turnWith(() =>
        ChatCompletionsServer.text("ok", { usage: { promptTokens: 100, completionTokens: 7, cachedTokens: 40 } })
      )
      const terminal = terminalOf(turn.outputs)
      expect(terminal?.ok).toBe(true)
      // core/src/Result.ts: "`inputTokens`: every input token the model read, cached or not";
      // "`cachedInputTokens`: the part of `inputTokens` read from the provider's prompt cache".
      expect(terminal?.usage).toMatchObject({ inputTokens: 100, cachedInputTokens: 40, outputTokens: 7 })
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 60_000)

  for (const where of ["user", "workspace"] as const) {
    it.live(
      `the configured endpoint gets the turn and the host's key, whatever the ${
        where === "user" ? "user's settings.json" : "workspace's .codebuddy/settings.json"
      } env says`,
      () =>
        Effect.gen(function*() {
          const root = yield* tempRoot
          const token = `tok-${crypto.randomUUID()}`
          const mcp = yield* mcpServer(token)
          const configured = yield* ChatCompletionsServer.make({
            script: () => ChatCompletionsServer.text("configured")
          })
          const other = yield* ChatCompletionsServer.make({ script: () => ChatCompletionsServer.text("other") })
          // The user's own endpoint and key in the settings copied into the clone.
          const settings = JSON.stringify({
            env: { CODEBUDDY_BASE_URL: other.baseUrl, CODEBUDDY_API_KEY: "sk-user-own" }
          })
          // A repository's own settings would get the turn, and the host's key, sent elsewhere.
          const dir = where === "user" ? root.profile : Path.join(root.work, ".codebuddy")
          Fs.mkdirSync(dir, { recursive: true })
          Fs.writeFileSync(Path.join(dir, "settings.json"), settings)
          const driver = CodeBuddy.driver({
            endpoint: { baseUrl: configured.baseUrl, apiKey: Redacted.make("sk-host") }
          })
          const turn = yield* runTurn(driver, baseRequest(root, mcp.url, { prompt: "go" }), token)
          expect(terminalOf(turn.outputs)).toMatchObject({ ok: true, text: "configured" })
          expect(yield* other.requests).toEqual([])
          expect((yield* configured.requests).every((r) => !JSON.stringify(r.headers).includes("sk-user-own"))).toBe(
            true
          )
        }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
      60_000
    )
  }

  it.live(
    "without partial messages, reasoning still arrives and the final text is the last message",
    () =>
      Effect.gen(function*() {
        const turn = yield* turnWith(
          (request) =>
            ChatCompletionsServer.toolResults(request).length === 0
              ? ChatCompletionsServer.callTool("echo", { text: "x" }, { text: "Before." })
              : ChatCompletionsServer.text("After.", { reasoning: "pondering" }),
          { partialMessages: false }
        )
        const terminal = terminalOf(turn.outputs)
        expect(terminal).toMatchObject({ ok: true, text: "After." })
        expect(turn.outputs.filter((o) => o._tag === "ToolCall").map((o) => o._tag === "ToolCall" && o.phase))
          .toEqual(["start", "end"])
        expect(turn.outputs.flatMap((o) => o._tag === "ReasoningDelta" ? [o.text] : []).join("")).toBe("pondering")
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    60_000
  )
})
