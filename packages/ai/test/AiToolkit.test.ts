/**
 * @effect/ai tools as Tether tools, without a CLI: the definitions (schemas, hints, title,
 * revision, fingerprint), the merge with Tether toolkits, the failure rules through the real
 * executor, and a thread's revision rule with the reference driver.
 */
import * as AiTool from "@effect/ai/Tool"
import * as AiTools from "@effect/ai/Toolkit"
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { describe, expect, it } from "@effect/vitest"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { AiToolkit } from "@tether/ai"
import { Agent } from "@tether/core"
import { Harness, Reference } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"

class UnknownCity extends Schema.TaggedError<UnknownCity>()("UnknownCity", { city: Schema.String }) {}

const GetWeather = AiToolkit.rejectFailure(
  AiTool.make("get_weather", {
    description: "The current weather of a city.",
    parameters: { city: Schema.String },
    success: Schema.Struct({ celsius: Schema.Number }),
    failure: UnknownCity
  })
    .annotate(AiTool.Title, "Weather")
    .annotate(AiTool.Readonly, true)
    .annotate(AiTool.Destructive, false)
    .annotate(AiToolkit.Revision, "get_weather/v1"),
  (failure) => Tool.reject("unknown_city", `There is no city called ${failure.city}; ask for another one.`)
)

// Same declared failure, no mapping: the failure must stay generic.
const GetForecast = AiTool.make("get_forecast", {
  description: "Tomorrow's forecast of a city.",
  parameters: { city: Schema.String },
  success: Schema.Struct({ summary: Schema.String }),
  failure: UnknownCity,
  failureMode: "return"
}).annotate(AiToolkit.Revision, "get_forecast/v1")

const Ping = AiTool.make("ping", { description: "Answers nothing." })

class Greeting extends Context.Tag("test/Greeting")<Greeting, string>() {}

const Weather = AiTools.make(GetWeather, GetForecast, Ping)

const WeatherLive = Weather.toLayer(Effect.gen(function*() {
  const greeting = yield* Greeting
  return {
    get_weather: ({ city }) =>
      city === "Atlantis"
        ? Effect.fail(new UnknownCity({ city }))
        : city === "Boom"
        ? Effect.die(new Error("SECRET-weather-defect"))
        : city === "Wrong"
        // Not a value of the failure schema: the mapping must not see it.
        ? Effect.fail("not an UnknownCity" as unknown as UnknownCity)
        : Effect.succeed({ celsius: greeting.length }),
    get_forecast: ({ city }) => Effect.fail(new UnknownCity({ city })),
    ping: () => Effect.void
  }
})).pipe(Layer.provide(Layer.succeed(Greeting, "hello")))

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String }),
  revision: "lookup_issue/v1"
})
const IssueTools = Toolkit.make(LookupIssue)

describe("AiToolkit definitions", () => {
  it.effect("an @effect/ai tool is described like the Tether tool with the same schemas, hints and revision", () =>
    Effect.gen(function*() {
      const tools = yield* AiToolkit.merge(AiTools.make(GetWeather))
      const twin = Toolkit.make(Tool.make("get_weather", {
        description: "The current weather of a city.",
        input: { city: Schema.String },
        output: Schema.Struct({ celsius: Schema.Number }),
        title: "Weather",
        revision: "get_weather/v1",
        annotations: { readOnly: true, destructive: false }
      }))
      const adapted = yield* Toolkit.catalog(tools)
      const native = yield* Toolkit.catalog(twin)
      expect(adapted.descriptors).toEqual(native.descriptors)
      expect(adapted.fingerprint).toBe(native.fingerprint)
      expect(adapted.descriptors[0]!.annotations).toEqual({ readOnlyHint: true, destructiveHint: false })
    }))

  it.effect("unset hints stay unspecified; no parameters is a closed empty object; Void is sent as null", () =>
    Effect.gen(function*() {
      const catalog = yield* Toolkit.catalog(yield* AiToolkit.merge(AiTools.make(Ping)))
      const [ping] = catalog.descriptors
      expect(ping!.annotations).toEqual({})
      expect(ping!.revision).toBeUndefined()
      expect(ping!.inputSchema).toEqual({ type: "object", properties: {}, additionalProperties: false })
      expect(ping!.outputSchema).toMatchObject({ properties: { result: { type: "null" } } })
    }))

  it.effect("the revision annotation enters the fingerprint", () =>
    Effect.gen(function*() {
      const v2 = GetWeather.annotate(AiToolkit.Revision, "get_weather/v2")
      const one = yield* Toolkit.catalog(yield* AiToolkit.merge(AiTools.make(GetWeather)))
      const two = yield* Toolkit.catalog(yield* AiToolkit.merge(AiTools.make(v2)))
      expect(two.descriptors[0]!.revision).toBe("get_weather/v2")
      expect(two.fingerprint).not.toBe(one.fingerprint)
    }))

  it.effect("a name in both toolkits fails construction naming both owners", () =>
    Effect.gen(function*() {
      const Clash = AiTool.make("lookup_issue", { description: "Another lookup." })
      const error = yield* Effect.flip(AiToolkit.merge(IssueTools, AiTools.make(GetWeather, Clash)))
      expect(error._tag).toBe("ToolDefinitionError")
      expect(error.reason).toBe("DuplicateName")
      expect(error.tool).toBe("lookup_issue")
      expect(error.message).toContain("toolkits[0] (a Tether toolkit)")
      expect(error.message).toContain("toolkits[1] (an @effect/ai toolkit)")
    }))

  it.effect("its failed span ends with the error's tag and reason only (docs/tracing.md), not the message", () => {
    const exporter = new InMemorySpanExporter()
    return Effect.gen(function*() {
      const Clash = AiTool.make("lookup_issue", { description: "Another lookup." })
      yield* Effect.flip(AiToolkit.merge(IssueTools, AiTools.make(GetWeather, Clash)))
      const span = exporter.getFinishedSpans().find((s) => s.name === "AiToolkit.merge")
      expect(span?.status.message).toBe("failed: ToolDefinitionError DuplicateName")
      // Nor in an event: the message names the tool and the toolkits.
      expect(JSON.stringify(span?.events.map((e) => e.attributes))).not.toContain("lookup_issue")
    }).pipe(
      Effect.provide(NodeSdk.layer(() => ({
        resource: { serviceName: "tether-test" },
        spanProcessor: new SimpleSpanProcessor(exporter)
      })))
    )
  })

  it.effect("a tool without a description and a provider-run tool fail construction, naming the tool", () =>
    Effect.gen(function*() {
      const bare = yield* Effect.flip(AiToolkit.merge(AiTools.make(AiTool.make("bare"))))
      expect([bare.tool, bare.reason]).toEqual(["bare", "EmptyDescription"])
      const Hosted = AiTool.providerDefined({
        id: "example.web_search",
        toolkitName: "WebSearch",
        providerName: "web_search",
        args: {}
      })({})
      const hosted = yield* Effect.flip(AiToolkit.merge(AiTools.make(Hosted)))
      expect([hosted.tool, hosted.reason]).toEqual(["WebSearch", "MissingHandler"])
      expect(hosted.message).toContain("provider-defined")
    }))
})

describe("AiToolkit handlers through the executor", () => {
  const executor = Effect.gen(function*() {
    const tools = yield* AiToolkit.merge(IssueTools, Weather)
    return yield* Toolkit.executor(tools)
  }).pipe(
    Effect.provide([
      IssueTools.toLayer({ lookup_issue: ({ key }) => Effect.succeed({ title: `Title of ${key}` }) }),
      AiToolkit.layer(Weather).pipe(Layer.provide(WeatherLive))
    ])
  )

  it.effect("@effect/ai handlers run with their context; outputs go out encoded and validated", () =>
    Effect.gen(function*() {
      const run = yield* executor
      expect(yield* run.execute("get_weather", { city: "Paris" })).toMatchObject({
        _tag: "Success",
        structuredContent: { celsius: 5 }
      })
      expect(yield* run.execute("ping", {})).toMatchObject({ _tag: "Success", structuredContent: { result: null } })
      expect(yield* run.execute("lookup_issue", { key: "A-1" })).toMatchObject({ _tag: "Success" })
      expect(yield* run.execute("get_weather", { city: "Paris", extra: 1 })).toMatchObject({
        _tag: "Failed",
        code: "invalid_input"
      })
    }))

  it.effect("a declared failure is a rejection only through its mapping; everything else is internal_error", () =>
    Effect.gen(function*() {
      const run = yield* executor
      expect(yield* run.execute("get_weather", { city: "Atlantis" })).toEqual({
        _tag: "Rejected",
        code: "unknown_city",
        message: "There is no city called Atlantis; ask for another one."
      })
      const generic = { _tag: "Failed", code: "internal_error", message: "The tool failed." }
      expect(yield* run.execute("get_forecast", { city: "Atlantis" })).toEqual(generic)
      expect(yield* run.execute("get_weather", { city: "Wrong" })).toEqual(generic)
      expect(yield* run.execute("get_weather", { city: "Boom" })).toEqual(generic)
    }))

  it.effect("a missing @effect/ai handler is MissingHandler when the executor is built", () =>
    Effect.gen(function*() {
      const tools = yield* AiToolkit.merge(Weather)
      const error = yield* Effect.flip(
        Toolkit.executor(tools).pipe(
          Effect.provide(
            AiToolkit.layer(Weather).pipe(
              Layer.provide(Layer.succeedContext(Context.empty()))
            )
          )
        ) as Effect.Effect<unknown, Tool.ToolDefinitionError>
      )
      expect(error.reason).toBe("MissingHandler")
    }))
})

describe("AiToolkit on an agent's thread", () => {
  it.live("a thread refuses an @effect/ai tool without a revision before its driver starts", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const run = <E, R>(tools: Effect.Effect<Toolkit.Any, E, R>) =>
        Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: Reference.driver({ capabilities: { resume: true } }),
            definition: { instructions: "", tools: yield* tools },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          return yield* Effect.either(Effect.flatMap(agent.thread("k"), (thread) => thread.run("hello")))
        }).pipe(
          Effect.scoped,
          // The handlers of every tool of `Weather`: a superset of what either toolkit needs.
          Effect.provide(AiToolkit.layer(Weather).pipe(Layer.provide(WeatherLive)))
        ) as Effect.Effect<Either.Either<unknown, { readonly _tag: string; readonly message: string }>, unknown, R>
      const refused = yield* run(AiToolkit.merge(Weather))
      expect(refused._tag).toBe("Left")
      if (refused._tag === "Left") {
        expect(refused.left._tag).toBe("ToolRevisionMissing")
        expect(refused.left.message).toContain("ping")
        expect(refused.left.message).not.toContain("get_weather")
      }
      const accepted = yield* run(AiToolkit.merge(AiTools.make(GetWeather, GetForecast)))
      expect(accepted._tag).toBe("Right")
    }).pipe(Effect.scoped, Effect.provide(Harness.layer)))
})
