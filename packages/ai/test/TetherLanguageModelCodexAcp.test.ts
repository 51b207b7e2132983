/**
 * TetherLanguageModel on the ACP driver with the real `codex-acp` adapter (its own Codex core),
 * offline against the scripted Responses server of @tether/testing:
 *
 * - a toolkit call that succeeds is a `tool-call` and its `tool-result` (codex-acp reports an MCP
 *   call's input as `{server, tool, arguments}` and its output as the `CallToolResult`: the ACP
 *   mapping unwraps them; before, the call was listed as failed with the wrapper as its input);
 * - a preamble the model wrote before reasoning and a tool call is returned once (before, twice).
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as AiTool from "@effect/ai/Tool"
import * as AiTools from "@effect/ai/Toolkit"
import { describe, expect, it } from "@effect/vitest"
import { AiToolkit, TetherLanguageModel } from "@tether/ai"
import { Acp, Codex } from "@tether/drivers"
import { Harness, ResponsesServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Path from "node:path"
import { agentProcesses } from "./fixtures/processes.js"

// As packages/drivers/test/AcpHarness.ts configures it (a model codex-acp has metadata for).
const codexAcp = Path.resolve(
  import.meta.dirname,
  "../../../node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp"
)
const codexAcpDriver = (baseUrl: string) =>
  Acp.driver({
    name: "codex-acp",
    command: codexAcp,
    args: [
      "-c",
      `model="gpt-5.4"`,
      "-c",
      `model_provider="fake"`,
      "-c",
      `model_providers.fake={ name = "fake", base_url = "${baseUrl}", wire_api = "responses", env_key = "FAKE_CODEX_KEY", request_max_retries = 0, stream_max_retries = 0 }`,
      "-c",
      "check_for_update_on_startup=false",
      "-c",
      "features.plugins=false",
      "-c",
      "analytics.enabled=false",
      "-c",
      "feedback.enabled=false"
    ],
    env: { FAKE_CODEX_KEY: Redacted.make("sk-fake-codex") },
    layout: Codex.layout,
    naming: Acp.codexNaming
  })

const Count = AiTool.make("count", {
  description: "Counts the letters of a word.",
  parameters: { word: Schema.String },
  success: Schema.Number
}).annotate(AiToolkit.Revision, "count/v1")
const Words = AiTools.make(Count)
const counted: Array<string> = []
const WordsLive = Words.toLayer({
  count: ({ word }) => Effect.sync(() => counted.push(word)).pipe(Effect.as(word.length))
})

const generate = (script: ResponsesServer.Script) =>
  Effect.gen(function*() {
    const server = yield* ResponsesServer.make({ model: "gpt-5.4", script })
    const sandbox = yield* Harness.sandbox
    const response = yield* LanguageModel.generateText({ prompt: "How many letters has abc?", toolkit: Words }).pipe(
      Effect.provide(WordsLive),
      Effect.provide(
        TetherLanguageModel.layer({
          driver: codexAcpDriver(server.baseUrl),
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
      )
    )
    expect(yield* agentProcesses).toEqual([])
    return response
  }).pipe(Effect.scoped, Effect.provide(Harness.layer))

describe("TetherLanguageModel on codex-acp (real adapter, offline)", () => {
  it.live(
    "a toolkit call that succeeded is a provider-executed tool-call followed by its tool-result",
    () =>
      Effect.gen(function*() {
        counted.length = 0
        const response = yield* generate((request) =>
          request.index === 0
            ? ResponsesServer.mcpTool("tether", "count", { word: "abc" })
            : ResponsesServer.text("abc has 3 letters.")
        )
        // The call went through the gateway and the handler answered 3.
        expect(counted).toEqual(["abc"])
        expect(response.text).toContain("abc has 3 letters.")
        const finish = response.content.find((part) => part.type === "finish")!
        // docs/ai.md / README: a failed call has no result part and is listed in failedToolCalls;
        // this call did not fail.
        expect(finish.metadata["tether"]?.["failedToolCalls"]).toEqual([])
        expect(response.toolCalls.map((call) => [call.name, call.params, call.providerExecuted])).toEqual([
          ["count", { word: "abc" }, true]
        ])
        expect(response.toolResults.map((result) => [result.name, result.result, result.isFailure])).toEqual([
          ["count", 3, false]
        ])
      }),
    120_000
  )

  it.live("a preamble written before reasoning and a tool call is returned once", () =>
    Effect.gen(function*() {
      const response = yield* generate((request) =>
        request.index === 0
          ? ResponsesServer.items([
            {
              id: "msg_1",
              type: "message",
              status: "completed",
              role: "assistant",
              content: [{ type: "output_text", text: "I will count the letters.", annotations: [] }]
            },
            { id: "rs_1", type: "reasoning", summary: [{ type: "summary_text", text: "Use the count tool." }] },
            {
              id: "fc_1",
              type: "function_call",
              status: "completed",
              call_id: "call_1",
              name: "count",
              namespace: "mcp__tether",
              arguments: JSON.stringify({ word: "abc" })
            }
          ])
          : ResponsesServer.text("It has 3.")
      )
      const texts = response.content.flatMap((part) => part.type === "text" ? [part.text] : [])
      expect(texts.filter((text) => text.includes("I will count the letters."))).toHaveLength(1)
      expect(response.text).toBe("I will count the letters.It has 3.")
    }), 120_000)
})
