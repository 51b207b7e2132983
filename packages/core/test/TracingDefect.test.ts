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
import { Agent } from "@tether/core"
import type { Driver } from "@tether/core"
import { Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"

const everyText = (span: ReadableSpan): ReadonlyArray<string> => [
  span.name,
  ...Object.entries(span.attributes).flatMap(([name, value]) => [name, String(value)]),
  ...span.events.flatMap((event) => [
    event.name,
    ...Object.entries(event.attributes ?? {}).flatMap(([name, value]) => [name, String(value)])
  ]),
  span.status.message ?? ""
]

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
    }).pipe(
      Effect.provide(Harness.layer),
      Effect.provide(NodeSdk.layer(() => ({
        resource: { serviceName: "tether-test" },
        spanProcessor: new SimpleSpanProcessor(exporter)
      })))
    )
  }, 60_000)
})
