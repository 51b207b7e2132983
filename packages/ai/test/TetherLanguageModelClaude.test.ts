/**
 * An app written against @effect/ai's LanguageModel running on the real Claude Code CLI (the
 * pinned binary, offline: the scripted Anthropic server on 127.0.0.1 is the model).
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Response from "@effect/ai/Response"
import * as AiTool from "@effect/ai/Tool"
import * as AiTools from "@effect/ai/Toolkit"
import { describe, expect, it } from "@effect/vitest"
import { AiToolkit, TetherLanguageModel } from "@tether/ai"
import { Claude } from "@tether/drivers"
import { AnthropicServer, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { agentProcesses } from "./fixtures/processes.js"

const GetWeather = AiTool.make("get_weather", {
  description: "The current weather of a city.",
  parameters: { city: Schema.String },
  success: Schema.Struct({ celsius: Schema.Number })
}).annotate(AiToolkit.Revision, "get_weather/v1")
const Weather = AiTools.make(GetWeather)
const asked: Array<string> = []
const WeatherLive = Weather.toLayer({
  get_weather: ({ city }) => Effect.sync(() => asked.push(city)).pipe(Effect.as({ celsius: 21 }))
})

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String })
})
const IssueTools = Toolkit.make(LookupIssue)
const IssueToolsLive = IssueTools.toLayer({ lookup_issue: ({ key }) => Effect.succeed({ title: key }) })

/** Runs `body` with a LanguageModel backed by Claude agents in a fresh sandbox; checks nothing is left. */
const withModel = <A, E, R>(
  server: AnthropicServer.AnthropicServer,
  body: Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const model = TetherLanguageModel.layer({
      driver: Claude.driver({
        env: {
          ANTHROPIC_BASE_URL: server.url,
          ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
          CLAUDE_CODE_MAX_RETRIES: "0"
        }
      }),
      definition: { instructions: "You are a weather bot.", tools: IssueTools },
      workspace: sandbox.workspace,
      profile: sandbox.selection
    })
    const value = yield* body.pipe(Effect.provide(model))
    expect(yield* agentProcesses).toEqual([])
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    return value
  }).pipe(Effect.provide([IssueToolsLive, Harness.layer]))

describe("TetherLanguageModel on the real Claude CLI", () => {
  it.live(
    "generateText: history and system rendered, the app's toolkit served through the gateway, usage reported",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          script: [
            AnthropicServer.callTool("get_weather", { city: "Paris" }, { text: "Checking." }),
            AnthropicServer.reply("It is 21 degrees in Paris.", { usage: { inputTokens: 30, outputTokens: 9 } })
          ]
        })
        const started = performance.now()
        const response = yield* withModel(
          server,
          LanguageModel.generateText({
            prompt: [
              { role: "system", content: "Answer briefly." },
              { role: "user", content: "Hi" },
              { role: "assistant", content: "Hello!" },
              { role: "user", content: "Weather in Paris?" }
            ],
            toolkit: Weather
          }).pipe(Effect.provide(WeatherLive))
        )
        console.log(`[ai] generateText on Claude with a tool call: ${(performance.now() - started).toFixed(0)} ms`)

        expect(response.text).toBe("Checking.It is 21 degrees in Paris.")
        expect(asked).toEqual(["Paris"])
        expect(response.toolCalls).toHaveLength(1)
        expect(response.toolCalls[0]).toMatchObject({
          name: "get_weather",
          params: { city: "Paris" },
          providerExecuted: true
        })
        expect(response.toolResults).toHaveLength(1)
        expect(response.toolResults[0]).toMatchObject({
          id: response.toolCalls[0]!.id,
          name: "get_weather",
          result: { celsius: 21 },
          isFailure: false,
          providerExecuted: true
        })
        expect(response.finishReason).toBe("stop")
        const usage = response.usage
        expect(usage.inputTokens).toBeGreaterThan(0)
        expect(usage.outputTokens).toBeGreaterThan(0)
        expect(usage.totalTokens).toBe(usage.inputTokens! + usage.outputTokens!)
        const finish = response.content.find((p): p is Response.FinishPart => p.type === "finish")
        expect(finish?.metadata["tether"]).toMatchObject({ provider: "claude", failedToolCalls: [] })

        const [first] = yield* server.messages
        const system = JSON.stringify(first!.system)
        expect(system).toContain("You are a weather bot.")
        expect(system).toContain("Answer briefly.")
        const [[role, input]] = AnthropicServer.transcript(first!)
        expect(role).toBe("user")
        expect(input).toContain(
          "<conversation>\n<user>\nHi\n</user>\n<assistant>\nHello!\n</assistant>\n</conversation>"
        )
        expect(input).toContain("Weather in Paris?")
        expect(first!.tools?.map((t) => t.name)).toEqual(
          expect.arrayContaining(["mcp__tether__get_weather", "mcp__tether__lookup_issue"])
        )
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "streamText: the first delta reaches the app while the model is still writing the rest",
    () =>
      Effect.gen(function*() {
        const gate = yield* Deferred.make<void>()
        const server = yield* AnthropicServer.make({
          script: [AnthropicServer.replyInPieces(["The ", "weather ", "is fine."], { between: Deferred.await(gate) })]
        })
        const seen: Array<string> = []
        let atFirstDelta: ReadonlyArray<string> | undefined
        const parts = yield* withModel(
          server,
          LanguageModel.streamText({ prompt: "Weather?" }).pipe(
            Stream.tap((part) => {
              seen.push(part.type)
              if (part.type !== "text-delta" || atFirstDelta !== undefined) return Effect.void
              atFirstDelta = [...seen]
              // The scripted model holds the rest of its answer until the app has this delta.
              return Deferred.succeed(gate, undefined)
            }),
            Stream.runCollect,
            Effect.map(Chunk.toReadonlyArray)
          )
        )
        expect(atFirstDelta).toEqual(["response-metadata", "text-start", "text-delta"])
        const types = parts.map((p) => p.type)
        expect(types[0]).toBe("response-metadata")
        expect(types.slice(1, 3)).toEqual(["text-start", "text-delta"])
        expect(types.slice(-2)).toEqual(["text-end", "finish"])
        const deltas = parts.flatMap((p) => p.type === "text-delta" ? [p.delta] : [])
        expect(deltas[0]).toBe("The ")
        expect(deltas.join("")).toBe("The weather is fine.")
        const finish = parts.at(-1) as Response.FinishPart
        expect(finish.usage.outputTokens).toBeGreaterThan(0)
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "interrupting a streamText call kills the CLI and removes its clone before the interruption completes",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          script: [AnthropicServer.replyInPieces(["Working", " forever"], { between: Effect.never })]
        })
        const firstDelta = yield* Deferred.make<ReadonlyArray<number>>()
        yield* withModel(
          server,
          Effect.gen(function*() {
            const fiber = yield* LanguageModel.streamText({ prompt: "Work." }).pipe(
              Stream.tap((part) =>
                part.type === "text-delta"
                  ? Effect.flatMap(agentProcesses, (pids) => Deferred.succeed(firstDelta, pids))
                  : Effect.void
              ),
              Stream.runDrain,
              Effect.fork
            )
            // The CLI is mid-answer (its model holds the rest forever) when the call is interrupted.
            const running = yield* Deferred.await(firstDelta)
            expect(running.length).toBeGreaterThan(0)
            yield* Fiber.interrupt(fiber)
            expect(yield* agentProcesses).toEqual([])
          })
        )
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "generateObject: Claude's native structured output, the value decoded by Tether and then by @effect/ai",
    () =>
      Effect.gen(function*() {
        const Forecast = Schema.Struct({
          city: Schema.String,
          celsius: Schema.Number,
          rain: Schema.optional(Schema.Boolean)
        })
        const server = yield* AnthropicServer.make({
          script: [
            AnthropicServer.reply("It is warm."),
            // After the CLI's enforcement message, the model calls the schema's tool.
            AnthropicServer.callTool("StructuredOutput", { city: "Paris", celsius: 21 })
          ]
        })
        const response = yield* withModel(server, LanguageModel.generateObject({ prompt: "Paris?", schema: Forecast }))
        expect(response.value).toEqual({ city: "Paris", celsius: 21 })
        expect(response.text).toBe("{\"city\":\"Paris\",\"celsius\":21}")
        const requests = yield* server.messages
        const offered = requests[0]!.tools?.find((tool) => tool.name === "StructuredOutput") as
          | { readonly input_schema?: unknown }
          | undefined
        expect(offered?.input_schema).toMatchObject({ required: ["city", "celsius"], additionalProperties: false })
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "generateObject: a value Tether rejects gets a repair turn, and the repaired value is returned",
    () =>
      Effect.gen(function*() {
        const Answer = Schema.Struct({
          code: Schema.String.pipe(Schema.filter((s) => s.startsWith("ok"), { message: () => "must start with ok" }))
        })
        const server = yield* AnthropicServer.make({
          script: [
            AnthropicServer.callTool("StructuredOutput", { code: "bad" }),
            AnthropicServer.callTool("StructuredOutput", { code: "ok-1" })
          ]
        })
        const response = yield* withModel(server, LanguageModel.generateObject({ prompt: "Code?", schema: Answer }))
        expect(response.value).toEqual({ code: "ok-1" })
        expect((yield* server.messages).length).toBe(2)
      }).pipe(Effect.scoped),
    90_000
  )
})
