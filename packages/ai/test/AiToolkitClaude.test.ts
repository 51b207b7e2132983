/**
 * An @effect/ai toolkit next to a Tether toolkit on a real Claude Code agent (the pinned CLI,
 * offline: the scripted Anthropic server on 127.0.0.1 is the model, the real gateway serves
 * both toolkits).
 */
import * as AiTool from "@effect/ai/Tool"
import * as AiTools from "@effect/ai/Toolkit"
import { describe, expect, it } from "@effect/vitest"
import { AiToolkit } from "@tether/ai"
import { Agent } from "@tether/core"
import { Claude } from "@tether/drivers"
import { AnthropicServer, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"

class UnknownCity extends Schema.TaggedError<UnknownCity>()("UnknownCity", { city: Schema.String }) {}

const GetWeather = AiToolkit.rejectFailure(
  AiTool.make("get_weather", {
    description: "The current weather of a city.",
    parameters: { city: Schema.String },
    success: Schema.Struct({ celsius: Schema.Number }),
    failure: UnknownCity
  }).annotate(AiTool.Readonly, true).annotate(AiToolkit.Revision, "get_weather/v1"),
  (failure) => Tool.reject("unknown_city", `There is no city called ${failure.city}.`)
)
const GetForecast = AiTool.make("get_forecast", {
  description: "Tomorrow's forecast of a city.",
  parameters: { city: Schema.String },
  success: Schema.Struct({ summary: Schema.String }),
  failure: UnknownCity
}).annotate(AiToolkit.Revision, "get_forecast/v1")
const Weather = AiTools.make(GetWeather, GetForecast)

const secret = "SECRET-forecast-failure-77"
const WeatherLive = Weather.toLayer({
  get_weather: ({ city }) =>
    city === "Atlantis" ? Effect.fail(new UnknownCity({ city })) : Effect.succeed({ celsius: 21 }),
  get_forecast: () => Effect.fail(new UnknownCity({ city: secret }))
})

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String }),
  revision: "lookup_issue/v1"
})
const IssueTools = Toolkit.make(LookupIssue)
const IssueToolsLive = IssueTools.toLayer({ lookup_issue: ({ key }) => Effect.succeed({ title: `Title of ${key}` }) })

describe("an @effect/ai toolkit on a real Claude agent", () => {
  it.live(
    "one turn calls an @effect/ai tool and a Tether tool; a mapped failure is a rejection, an unmapped one internal_error",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          script: [
            AnthropicServer.callTool("get_weather", { city: "Paris" }),
            AnthropicServer.callTool("lookup_issue", { key: "ISSUE-7" }),
            AnthropicServer.callTool("get_weather", { city: "Atlantis" }),
            AnthropicServer.callTool("get_forecast", { city: "Paris" }),
            AnthropicServer.reply("All done.")
          ]
        })
        const sandbox = yield* Harness.sandbox
        const started = performance.now()
        const { marker, result } = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: Claude.driver({
              env: {
                ANTHROPIC_BASE_URL: server.url,
                ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
                CLAUDE_CODE_MAX_RETRIES: "0"
              }
            }),
            definition: { instructions: "", tools: yield* AiToolkit.merge(IssueTools, Weather) },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          return { marker: agent.marker, result: yield* agent.run("Weather in Paris, then ISSUE-7.") }
        }).pipe(Effect.scoped)
        console.log(
          `[ai] @effect/ai + Tether tools on Claude, make → close: ${(performance.now() - started).toFixed(0)} ms`
        )

        expect(result.text).toBe("All done.")
        expect(result.effectiveTools).toEqual(["get_forecast", "get_weather", "lookup_issue"])
        const messages = yield* server.messages
        expect(messages).toHaveLength(5)
        // Both toolkits are offered with the schemas Tether derived from their Effect Schemas.
        const offered = messages[0]!.tools as ReadonlyArray<{ readonly name: string; readonly input_schema: unknown }>
        expect(offered.find((t) => t.name === "mcp__tether__get_weather")?.input_schema).toMatchObject({
          type: "object",
          properties: { city: { type: "string" } },
          required: ["city"]
        })
        expect(offered.map((t) => t.name)).toEqual(
          expect.arrayContaining(["mcp__tether__get_weather", "mcp__tether__get_forecast", "mcp__tether__lookup_issue"])
        )
        const [weather] = AnthropicServer.toolResults(messages[1]!)
        expect(weather!.isError).toBe(false)
        expect(JSON.parse(weather!.text)).toEqual({ celsius: 21 })
        const [issue] = AnthropicServer.toolResults(messages[2]!)
        expect(JSON.parse(issue!.text)).toEqual({ title: "Title of ISSUE-7" })
        const [rejected] = AnthropicServer.toolResults(messages[3]!)
        expect(rejected!.isError).toBe(true)
        expect(rejected!.text).toContain("unknown_city")
        expect(rejected!.text).toContain("There is no city called Atlantis.")
        const [unmapped] = AnthropicServer.toolResults(messages[4]!)
        expect(unmapped!.isError).toBe(true)
        expect(unmapped!.text).toContain("internal_error")
        expect(unmapped!.text).not.toContain("UnknownCity")
        for (const request of yield* server.requests) expect(request.body).not.toContain(secret)

        expect(yield* Harness.markedProcesses(marker)).toEqual([])
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
      }).pipe(
        Effect.scoped,
        Effect.provide([IssueToolsLive, AiToolkit.layer(Weather).pipe(Layer.provide(WeatherLive)), Harness.layer])
      ),
    90_000
  )
})
