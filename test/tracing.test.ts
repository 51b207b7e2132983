/**
 * Tracing through `@effect/opentelemetry` (NodeSdk with an in-memory exporter) of a real offline
 * Claude Code turn on a thread, with one host tool call: the span tree is Agent.make, the run
 * (Run.execute) with the tool call (Gateway.call) as its child, Agent.close; the attributes say
 * what ran and how it ended, and no attribute, event or status carries a secret or a value.
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { describe, expect, it } from "@effect/vitest"
import { SpanStatusCode } from "@opentelemetry/api"
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Agent } from "@tether/core"
import { Claude } from "@tether/drivers"
import { AnthropicServer, Harness, Reference } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as NodeFs from "node:fs"

const argument = "ARGUMENT-VALUE-81c4"
const output = "OUTPUT-VALUE-2f9e"
const prompt = "PROMPT-TEXT-77ab: look it up"
const key = "tenant-9/THREAD-KEY-5d10"
const instructions = "INSTRUCTIONS-TEXT-a3f0"
const apiKey = "sk-ant-API-KEY-90be"

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String }),
  revision: "lookup_issue/v1"
})
const Tools = Toolkit.make(LookupIssue)
const ToolsLive = Tools.toLayer({ lookup_issue: ({ key }) => Effect.succeed({ title: `${output} for ${key}` }) })

const everyText = (span: ReadableSpan): ReadonlyArray<string> => [
  span.name,
  ...Object.entries(span.attributes).flatMap(([name, value]) => [name, String(value)]),
  ...span.events.flatMap((event) => [
    event.name,
    ...Object.entries(event.attributes ?? {}).flatMap(([name, value]) => [name, String(value)])
  ]),
  span.status.message ?? ""
]

/** A real Claude Code agent against `server`, in a fresh sandbox, with the instructions and tools above. */
const claudeAgent = (server: AnthropicServer.AnthropicServer) =>
  Effect.flatMap(Harness.sandbox, (sandbox) =>
    Agent.make({
      driver: Claude.driver({
        env: { ANTHROPIC_BASE_URL: server.url, ANTHROPIC_API_KEY: Redacted.make(apiKey), CLAUDE_CODE_MAX_RETRIES: "0" }
      }),
      definition: { instructions, skills: [], tools: Tools },
      workspace: sandbox.workspace,
      profile: sandbox.selection
    }))

const Echo = Tool.make("echo", {
  description: "Echo a text.",
  input: { text: Schema.String },
  output: Schema.Struct({ text: Schema.String }),
  revision: "echo/v1"
})
const EchoTools = Toolkit.make(Echo)
const EchoLive = EchoTools.toLayer({ echo: ({ text }) => Effect.succeed({ text }) })

const otel = (exporter: InMemorySpanExporter) =>
  NodeSdk.layer(() => ({ resource: { serviceName: "tether-test" }, spanProcessor: new SimpleSpanProcessor(exporter) }))

describe("tracing", () => {
  it.live("a thread turn with a tool call: run → tool call, with attributes and no content", () => {
    const exporter = new InMemorySpanExporter()
    const observed: Array<Harness.Observed> = []
    return Effect.gen(function*() {
      yield* Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          respond: AnthropicServer.roundTrip(
            () =>
              AnthropicServer.callTool("lookup_issue", { key: argument }, {
                usage: { inputTokens: 21, outputTokens: 4 }
              }),
            () => AnthropicServer.reply("done", { usage: { inputTokens: 40, outputTokens: 6 } })
          )
        })
        const agent = yield* claudeAgent(server)
        const thread = yield* agent.thread(key)
        const result = yield* thread.run(prompt)
        expect(result.text).toBe("done")
        expect(result.transcript.some((entry) => entry._tag === "ToolCall")).toBe(true)
      }).pipe(Effect.scoped)

      const spans = exporter.getFinishedSpans()
      const byName = (name: string) => spans.filter((span) => span.name === name)
      const [run] = byName("Run.execute")
      const [call] = byName("Gateway.call")
      expect(byName("Run.execute")).toHaveLength(1)
      expect(byName("Gateway.call")).toHaveLength(1)
      expect(byName("Agent.make")).toHaveLength(1)
      expect(byName("Agent.close")).toHaveLength(1)

      // The tool call is the run's child, in the same trace.
      expect(call!.parentSpanContext?.spanId).toBe(run!.spanContext().spanId)
      expect(call!.spanContext().traceId).toBe(run!.spanContext().traceId)

      expect(run!.attributes).toMatchObject({
        "run.provider": "claude",
        "run.outcome": "success",
        "run.usage.input_tokens": 61,
        "run.usage.output_tokens": 10
      })
      expect(run!.attributes["run.id"]).toMatch(/^[0-9a-f-]{36}$/)
      expect(typeof run!.attributes["run.model"]).toBe("string")
      expect(run!.attributes["thread.key_hash"]).toMatch(/^[0-9a-f]{32}$/)
      expect(call!.attributes).toEqual({ "tool.name": "lookup_issue", "tool.outcome": "success", "tool.code": "ok" })
      expect(byName("Agent.make")[0]!.attributes["agent.provider"]).toBe("claude")
      expect(byName("Agent.close")[0]!.attributes["agent.provider"]).toBe("claude")
      // No content and no secret anywhere: names, attributes, events, statuses.
      const texts = spans.flatMap(everyText)
      const tokens = observed.map((registration) => Redacted.value(registration.token))
      for (const forbidden of [argument, output, prompt, key, "THREAD-KEY", instructions, apiKey, ...tokens]) {
        expect(texts.filter((text) => text.includes(forbidden)), forbidden).toEqual([])
      }
      // Nor any gateway token: they are 43 base64url characters.
      expect(texts.filter((text) => /[A-Za-z0-9_-]{43}/.test(text))).toEqual([])
    }).pipe(
      Effect.provide([ToolsLive, Harness.recordingLayer(observed)]),
      Effect.provide(NodeSdk.layer(() => ({
        resource: { serviceName: "tether-test" },
        spanProcessor: new SimpleSpanProcessor(exporter)
      })))
    )
  }, 120_000)

  it.live("a tool handler that fails: its error text and cause chain are in no span event or attribute", () => {
    const exporter = new InMemorySpanExporter()
    const observed: Array<Harness.Observed> = []
    // The handler's error quotes the argument, and its cause a live token (the registration's).
    const FailingLive = Tools.toLayer({
      lookup_issue: ({ key }) =>
        Effect.die(
          new Error(`no issue ${key}`, {
            cause: new Error(`upstream refused key ${observed.map((r) => Redacted.value(r.token)).join(" ")}`)
          })
        )
    })
    return Effect.gen(function*() {
      yield* Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          respond: AnthropicServer.roundTrip(
            () => AnthropicServer.callTool("lookup_issue", { key: argument }),
            () => AnthropicServer.reply("done")
          )
        })
        const agent = yield* claudeAgent(server)
        const result = yield* agent.run(prompt)
        expect(result.text).toBe("done")
      }).pipe(Effect.scoped)

      const spans = exporter.getFinishedSpans()
      const calls = spans.filter((span) => span.name === "Gateway.call")
      expect(calls).toHaveLength(1)
      expect(calls[0]!.attributes).toEqual({
        "tool.name": "lookup_issue",
        "tool.outcome": "failed",
        "tool.code": "internal_error"
      })
      const texts = spans.flatMap(everyText)
      const tokens = observed.map((registration) => Redacted.value(registration.token))
      expect(tokens.length).toBeGreaterThan(0)
      for (const forbidden of [argument, "no issue", "upstream refused", apiKey, ...tokens]) {
        expect(texts.filter((text) => text.includes(forbidden)), forbidden).toEqual([])
      }
      expect(texts.filter((text) => /[A-Za-z0-9_-]{43}/.test(text))).toEqual([])
    }).pipe(
      Effect.provide([FailingLive, Harness.recordingLayer(observed)]),
      Effect.provide(NodeSdk.layer(() => ({
        resource: { serviceName: "tether-test" },
        spanProcessor: new SimpleSpanProcessor(exporter)
      })))
    )
  }, 120_000)

  it.live("a failed span records no code.stacktrace (Effect's capture of a line inside Tether)", () => {
    const exporter = new InMemorySpanExporter()
    return Effect.gen(function*() {
      const error = yield* Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        // A file, not a directory: the make fails with an AgentConfigError inside its span.
        const file = `${sandbox.workspace}/not-a-directory`
        NodeFs.writeFileSync(file, "")
        return yield* Agent.make({
          driver: Claude.driver(),
          definition: { instructions, skills: [], tools: Tools },
          workspace: file,
          profile: sandbox.selection
        }).pipe(Effect.flip)
      }).pipe(Effect.scoped)
      expect(error._tag).toBe("AgentConfigError")
      const [make] = exporter.getFinishedSpans().filter((span) => span.name === "Agent.make")
      expect(make!.status.code).toBe(SpanStatusCode.ERROR)
      expect(Object.keys(make!.attributes)).not.toContain("code.stacktrace")
    }).pipe(
      Effect.provide([ToolsLive, Harness.layer]),
      Effect.provide(NodeSdk.layer(() => ({
        resource: { serviceName: "tether-test" },
        spanProcessor: new SimpleSpanProcessor(exporter)
      })))
    )
  }, 60_000)

  it.live(
    "a live thread: each turn's host tool call is a child of that turn's Run.execute, not the first turn's",
    () => {
      const exporter = new InMemorySpanExporter()
      const respond = (prompt: string): ReadonlyArray<Reference.Step> => [
        { _tag: "$call", tool: "echo", input: { text: prompt } },
        ...Reference.answer(`done ${prompt}`)
      ]
      return Effect.gen(function*() {
        yield* Effect.gen(function*() {
          const sandbox = yield* Harness.sandbox
          const agent = yield* Agent.make({
            driver: Reference.driver({ live: true, respond }),
            definition: { instructions: "", skills: [], tools: EchoTools },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          const thread = yield* agent.thread("tenant/live")
          expect((yield* thread.run("one")).text).toBe("done one")
          expect((yield* thread.run("two")).text).toBe("done two")
        }).pipe(Effect.scoped)
        const spans = exporter.getFinishedSpans()
        const runs = spans.filter((span) => span.name === "Run.execute")
        const calls = spans.filter((span) => span.name === "Gateway.call")
        expect(runs).toHaveLength(2)
        expect(calls).toHaveLength(2)
        // In time order: turn one's call, then turn two's.
        const byStart = (a: ReadableSpan, b: ReadableSpan) =>
          a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]
        runs.sort(byStart)
        calls.sort(byStart)
        expect(calls.map((call) => call.parentSpanContext?.spanId)).toEqual(
          runs.map((run) => run.spanContext().spanId)
        )
      }).pipe(Effect.provide([EchoLive, Harness.layer]), Effect.provide(otel(exporter)))
    },
    60_000
  )

  it.live(
    "a provider failure quoting the prompt: no span's attribute, event or status holds that text or the key",
    () => {
      const exporter = new InMemorySpanExporter()
      const quoted = "PROMPT-TEXT-c0ffee"
      const respond = (input: string): ReadonlyArray<Reference.Step> => [
        { _tag: "SessionStarted", sessionId: "s", model: "reference-model" },
        {
          _tag: "Terminal",
          ok: false,
          text: "",
          usage: undefined,
          model: "reference-model",
          session: "s",
          // A provider's error text may quote the request (an API error echoing the message).
          error: `PROVIDER-ERROR-TEXT rejected the message: ${input}`,
          raw: {}
        }
      ]
      return Effect.gen(function*() {
        const error = yield* Effect.gen(function*() {
          const sandbox = yield* Harness.sandbox
          const agent = yield* Agent.make({
            driver: Reference.driver({ live: true, respond }),
            definition: { instructions: "", skills: [], tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          // One-shot (Agent.run), streamed (Agent.stream) and on a thread (Thread.run).
          yield* agent.run(quoted).pipe(Effect.flip)
          yield* Stream.runDrain(agent.stream(quoted)).pipe(Effect.flip)
          const thread = yield* agent.thread("tenant/THREAD-KEY-failing")
          return yield* thread.run(quoted).pipe(Effect.flip)
        }).pipe(Effect.scoped)
        expect(error._tag).toBe("RunError")
        expect((error as { readonly reason?: string }).reason).toBe("ProviderFailed")
        const spans = exporter.getFinishedSpans()
        expect(spans.filter((span) => span.name === "Run.execute")).toHaveLength(3)
        const leaking = spans
          .filter((span) =>
            everyText(span).some((text) =>
              text.includes(quoted) || text.includes("PROVIDER-ERROR-TEXT") || text.includes("THREAD-KEY")
            )
          )
          .map((span) => span.name)
        expect(leaking).toEqual([])
        // Each failed span still says what failed: the error's tag and reason.
        for (const name of ["Agent.run", "Agent.stream", "Thread.run"]) {
          const [span] = spans.filter((span) => span.name === name)
          expect(span!.status.code, name).toBe(SpanStatusCode.ERROR)
          expect(everyText(span!).join(" "), name).toContain("failed: RunError ProviderFailed")
        }
      }).pipe(Effect.provide(Harness.layer), Effect.provide(otel(exporter)))
    },
    60_000
  )
})
