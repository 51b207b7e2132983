/**
 * Tracing: the agent's spans exported with OpenTelemetry through `@effect/opentelemetry`'s
 * `NodeSdk`. A thread turn calls a host tool; the trace shows `Agent.make`, the run
 * (`Run.execute`: provider, model, outcome, token counts, the thread key only as a keyed hash)
 * with the tool call (`Gateway.call`) as its child, and `Agent.close`. No prompt, text, tool
 * argument or output and no token is ever an attribute.
 *
 *   node --conditions=@tether/source --import tsx examples/tracing.ts [--console] [--driver claude|codex|gemini]
 *
 * The spans are printed as a tree; `--console` also wires OpenTelemetry's `ConsoleSpanExporter`.
 * For a collector, add e.g. `new BatchSpanProcessor(new OTLPTraceExporter())` from
 * `@opentelemetry/exporter-trace-otlp-http` to `spanProcessor`.
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base"
import { ConsoleSpanExporter, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Agent } from "@tether/core"
import { Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Schema from "effect/Schema"
import * as Model from "./support/model.js"
import * as View from "./support/view.js"

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String, state: Schema.String }),
  revision: "lookup_issue/v1"
})
const Tools = Toolkit.make(LookupIssue)
const ToolsLive = Tools.toLayer({
  lookup_issue: ({ key }) => Effect.succeed({ title: `Login fails on Safari (${key})`, state: "open" })
})

const script: Model.Model = ({ results }) =>
  results.length === 0
    ? Model.call("lookup_issue", { key: "ISSUE-42" })
    : Model.answer("ISSUE-42 is still open.")

// Where the spans go: kept in memory to print them below, and to the console with `--console`.
const memory = new InMemorySpanExporter()
const TracingLive = NodeSdk.layer(() => ({
  resource: { serviceName: "tether-example" },
  spanProcessor: [
    new SimpleSpanProcessor(memory),
    ...(process.argv.includes("--console") ? [new SimpleSpanProcessor(new ConsoleSpanExporter())] : [])
  ]
}))

const prompt = "Is ISSUE-42 still open?"
const key = "tenant-42/issue-42"

const program = Effect.gen(function*() {
  yield* Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const agent = yield* Agent.make({
      driver: yield* Model.offline(Model.driverArg(), script),
      definition: { instructions: "You triage issues.", skills: [], tools: Tools },
      workspace: sandbox.workspace,
      profile: sandbox.selection
    })
    const thread = yield* agent.thread(key)
    const result = yield* thread.run(prompt)
    View.write(`${View.bold("answer")} ${result.text}\n`)
  }).pipe(Effect.scoped) // the agent closes here: its Agent.close span ends

  // Printed as a tree of our spans (each under its nearest ancestor among them), by start time.
  const spans = memory.getFinishedSpans()
  const ours = new Set(["Agent.make", "Run.execute", "Gateway.call", "Agent.close"])
  const byId = new Map(spans.map((span) => [span.spanContext().spanId, span]))
  const ancestor = (span: ReadableSpan): ReadableSpan | undefined => {
    const parent = span.parentSpanContext === undefined ? undefined : byId.get(span.parentSpanContext.spanId)
    return parent === undefined ? undefined : ours.has(parent.name) ? parent : ancestor(parent)
  }
  const shown = spans.filter((span) => ours.has(span.name))
    .sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1])
  const print = (parent: ReadableSpan | undefined, depth: number): void => {
    for (const span of shown.filter((span) => ancestor(span) === parent)) {
      const attributes = Object.entries(span.attributes).map(([name, value]) => `${name}=${String(value)}`)
      View.write(`${"  ".repeat(depth)}${View.bold(span.name)}  ${View.dim(attributes.join(" "))}\n`)
      print(span, depth + 1)
    }
  }
  print(undefined, 0)

  const check = View.checks()
  const run = shown.find((span) => span.name === "Run.execute")
  const call = shown.find((span) => span.name === "Gateway.call")
  check.claim(
    "the tool call is a child of its run",
    run !== undefined && call?.parentSpanContext?.spanId === run.spanContext().spanId
  )
  check.claim(
    "the run reports its outcome and token counts",
    run?.attributes["run.outcome"] === "success" &&
      typeof run.attributes["run.usage.input_tokens"] === "number"
  )
  const texts = spans.flatMap((span) => Object.values(span.attributes).map(String))
  check.claim(
    "no attribute holds the prompt, the tool's argument or output, or the thread key",
    texts.every((text) => !text.includes(prompt) && !text.includes("ISSUE-42") && !text.includes(key))
  )
  check.conclude("traced: make → run → tool call, close")
}).pipe(
  Effect.provide([ToolsLive, Harness.layer]),
  Effect.provide(TracingLive),
  Logger.withMinimumLogLevel(LogLevel.Warning)
)

// runMain: SIGINT / SIGTERM interrupt the program, so every scope closes (the agent's ordered
// close: processes stopped, clone removed, token revoked) before the process exits.
NodeRuntime.runMain(program)
