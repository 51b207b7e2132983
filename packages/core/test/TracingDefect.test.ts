/**
 * A driver defect whose error quotes the provider's output (a parser failing on the model's
 * line): the run's span carries no content (docs/tracing.md: a failed run's span carries only its
 * reason; never an attribute: the prompt, any text). The run's `died of a defect` log line was
 * logged inside `Run.execute`, where Effect's tracer logger made it a span event with the cause's
 * text.
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { describe, expect, it } from "@effect/vitest"
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Agent, ThreadStore } from "@tether/core"
import type { Driver } from "@tether/core"
import { Profile } from "@tether/profile"
import { Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as Tracer from "effect/Tracer"
import { text, withThreads } from "./fixtures/threadTest.js"

const everyText = (span: ReadableSpan): ReadonlyArray<string> => [
  span.name,
  ...Object.entries(span.attributes).flatMap(([name, value]) => [name, String(value)]),
  ...span.events.flatMap((event) => [
    event.name,
    ...Object.entries(event.attributes ?? {}).flatMap(([name, value]) => [name, String(value)])
  ]),
  span.status.message ?? ""
]

/** `self` with the harness and an OpenTelemetry SDK whose spans go to `exporter`. */
const exportingTo =
  (exporter: InMemorySpanExporter) => <A, E>(self: Effect.Effect<A, E, Layer.Layer.Success<typeof Harness.layer>>) =>
    self.pipe(
      Effect.provide(Harness.layer),
      Effect.provide(NodeSdk.layer(() => ({
        resource: { serviceName: "tether-test" },
        spanProcessor: new SimpleSpanProcessor(exporter)
      })))
    )

describe("a driver defect and the run's span", () => {
  it.live("a parser defect quoting the model's text is in no span's attribute, event or status", () => {
    const exporter = new InMemorySpanExporter()
    const reference = Reference.driver()
    // A parser bug on the provider's output: its message quotes the line it choked on.
    const broken: Driver.Driver = {
      ...reference,
      parse: (lines, context) =>
        reference.parse(lines, context).pipe(Stream.map((output) => {
          if (output._tag === "Terminal") throw new Error(`cannot parse terminal: ${JSON.stringify(output.text)}`)
          return output
        }))
    }
    return Effect.gen(function*() {
      yield* Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        const agent = yield* Agent.make({
          driver: broken,
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        // The reference provider answers the prompt back: the terminal's text is the prompt.
        yield* Effect.exit(agent.run("PROMPT-TEXT-d3f5 secret plan"))
      }).pipe(Effect.scoped)
      const spans = exporter.getFinishedSpans()
      expect(spans.filter((span) => span.name === "Run.execute")).toHaveLength(1)
      const leaking = spans.flatMap((span) =>
        everyText(span).filter((text) => text.includes("PROMPT-TEXT-d3f5")).map((text) =>
          `${span.name}: ${text.slice(0, 160)}`
        )
      )
      expect(leaking).toEqual([])
    }).pipe(exportingTo(exporter))
  }, 60_000)
})

// docs/tracing.md: every span of Tether's that fails ends with the error's tag and reason only. An
// Agent.make whose profile source is missing fails inside Profile.clone, whose message names the path.
it.live("a failed Profile.clone (and Agent.make) span ends with the error's tag and reason, not its message", () => {
  const exporter = new InMemorySpanExporter()
  return Effect.gen(function*() {
    const error = yield* Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      return yield* Agent.make({
        driver: Reference.driver({ respond: () => Reference.answer("x") }),
        definition: { instructions: "", skills: [], tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: Profile.cloneFrom(`${sandbox.base}/PROFILE-PATH-6b1e`, sandbox.root)
      }).pipe(Effect.flip)
    }).pipe(Effect.scoped)
    expect(error._tag).toBe("AgentConfigError")
    const failed = exporter.getFinishedSpans().filter((span) => span.status.code === 2)
    expect(failed.map((span) => span.name)).toContain("Agent.make")
    const leaking = exporter.getFinishedSpans().flatMap((span) => [
      ...(span.status.message?.includes("PROFILE-PATH") ? [`${span.name} status: ${span.status.message}`] : []),
      ...span.events.filter((event) => JSON.stringify(event.attributes ?? {}).includes("PROFILE-PATH"))
        .map((event) => `${span.name} event ${event.name}`)
    ])
    expect(leaking).toEqual([])
  }).pipe(exportingTo(exporter))
}, 60_000)

const answer = "ANSWER-TEXT-0c5d"

// docs/tracing.md keeps text off spans: the line logged when a thread's onCommit dies (its cause may
// quote the answer the host failed to save) is no event of the run's span.
it.live("a dying onCommit that quotes the answer: no span event holds the answer", () =>
  Effect.gen(function*() {
    const spans: Array<Tracer.Span> = []
    const native = yield* Effect.tracer
    const recording = Tracer.make({
      span: (...args) => {
        const span = native.span(...args)
        spans.push(span)
        return span
      },
      context: native.context
    })
    yield* withThreads(() => ThreadStore.layerMemory, ({ agent }) =>
      Effect.gen(function*() {
        const thread = yield* agent.thread("tenant/commit", {
          onCommit: ({ result }) => Effect.die(new Error(`answers table refused row ${JSON.stringify(result.text)}`))
        })
        const result = yield* thread.run({ input: text(answer) })
        expect(result.text).toBe(answer)
      })).pipe(Effect.withTracer(recording))
    const eventTexts = (span: Tracer.Span) =>
      (span as unknown as { events: Array<[string, bigint, Record<string, unknown>]> }).events.flatMap((
        [name, , attributes]
      ) => [name, ...Object.values(attributes).map(String)])
    const leaking = spans
      .filter((span) => eventTexts(span).some((t) => t.includes(answer)))
      .map((span) => `${span.name}: ${eventTexts(span).find((t) => t.includes(answer))!.slice(0, 120)}`)
    expect(spans.some((span) => span.name === "Run.execute")).toBe(true)
    expect(leaking).toEqual([])
  }), 60_000)
