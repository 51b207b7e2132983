/**
 * A live token only in an error's own fields (not its message or stack): a tool handler fails or
 * dies with an error holding the argument the model passed (its token). `Cause.pretty`, which the
 * log redactor checked first, shows an Error's message and stack only; a logger that renders the
 * error itself (Node's console / util.inspect, JSON, Effect's browser-mode `prettyLogger`, which
 * hands `Cause.prettyErrors` to the console) writes its fields out. None of them may see the token.
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { describe, expect, it } from "@effect/vitest"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Gateway } from "@tether/gateway"
import { Tool, Toolkit } from "@tether/tool"
import * as Cause from "effect/Cause"
import * as Console from "effect/Console"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Util from "node:util"
import { connect } from "./fixtures/harness.js"

class LookupFailed extends Error {
  constructor(readonly key: string) {
    super("lookup failed")
    this.name = "LookupFailed"
  }
}
class KeyRefused extends Data.TaggedError("KeyRefused")<{ readonly key: string }> {}
class UpstreamError extends Schema.TaggedError<UpstreamError>()("UpstreamError", {
  message: Schema.String,
  input: Schema.Unknown
}) {}

/** Each way a handler's error may carry its argument only in fields. */
const shapes: Record<string, (key: string) => Effect.Effect<never, unknown>> = {
  "Error subclass, own field (fail)": (key) => Effect.fail(new LookupFailed(key)),
  "Error subclass, own field (die)": (key) => Effect.die(new LookupFailed(key)),
  "Data.TaggedError field": (key) => Effect.fail(new KeyRefused({ key })),
  "Schema.TaggedError with a message field": (key) =>
    Effect.fail(new UpstreamError({ message: "upstream refused", input: { request: { url: `https://x/?k=${key}` } } })),
  "own field of an error in the cause chain": (key) =>
    Effect.fail(new Error("lookup failed", { cause: new LookupFailed(key) })),
  // Controls: rendered by `Cause.pretty`, so the redactor sees them.
  "plain object (die) [control]": (key) => Effect.die({ key }),
  "token in the message [control]": (key) => Effect.fail(new Error(`refused ${key}`))
}

const Lookup = Tool.make("lookup", {
  description: "Look up.",
  input: { shape: Schema.String, key: Schema.String },
  output: Schema.String
})
const Tools = Toolkit.make(Lookup)
const ToolsLive = Tools.toLayer({ lookup: ({ key, shape }) => shapes[shape]!(key) })

describe("A token only in a handler error's own fields", () => {
  it.live(
    "reaches none of what the host reads: its loggers (however they render the cause), spans, the client",
    () =>
      Effect.gen(function*() {
        const exporter = new InMemorySpanExporter()
        /** What the host's loggers received, and wrote: one entry per rendering, per log line with a cause. */
        const written: Array<{ readonly shape: string; readonly sink: string; readonly text: string }> = []
        let shape = ""
        const recording = Logger.make(({ cause }) => {
          if (Cause.isEmpty(cause)) return
          written.push({
            shape,
            sink: "Cause.pretty (what the redactor checks)",
            text: Cause.pretty(cause, { renderErrorCause: true })
          })
          written.push({
            shape,
            sink: "util.inspect(Cause.squash(cause))",
            text: Util.inspect(Cause.squash(cause), { depth: 20 })
          })
          written.push({ shape, sink: "JSON.stringify(cause)", text: JSON.stringify(cause) })
        })
        // Effect's own pretty logger in browser mode hands `Cause.prettyErrors` to the console.
        const consoleLines: Array<string> = []
        const fakeConsole = new Proxy({}, {
          get: () => (...args: Array<unknown>) => consoleLines.push(Util.formatWithOptions({ depth: 20 }, ...args))
        }) as Console.UnsafeConsole
        const realConsole = yield* Console.consoleWith(Effect.succeed)
        const program = Effect.gen(function*() {
          const gateway = yield* Gateway.Gateway
          const registration = yield* gateway.register(yield* Toolkit.executor(Tools))
          const token = Redacted.value(registration.token)
          const client = yield* connect(registration.url, registration.token)
          const replies: Array<string> = []
          for (const name of Object.keys(shapes)) {
            shape = name
            const before = consoleLines.length
            const reply = yield* Effect.promise(() =>
              client.callTool({ name: "lookup", arguments: { shape: name, key: token } })
            )
            replies.push(JSON.stringify(reply))
            yield* Effect.sleep("20 millis")
            written.push({
              shape: name,
              sink: "Logger.prettyLogger({ mode: browser })",
              text: consoleLines.slice(before).join("\n")
            })
          }
          return { token, replies, spans: [...exporter.getFinishedSpans()] }
        }).pipe(
          Effect.scoped,
          Effect.provide([ToolsLive, Gateway.layer()]),
          Effect.withConsole({ ...realConsole, unsafe: fakeConsole }),
          Effect.provide(Logger.replace(Logger.defaultLogger, recording)),
          Effect.provide(Logger.add(Logger.prettyLogger({ mode: "browser", colors: false }))),
          Effect.provide(Logger.minimumLogLevel(LogLevel.All)),
          Effect.provide(NodeSdk.layer(() => ({
            resource: { serviceName: "redaction-error-fields" },
            spanProcessor: new SimpleSpanProcessor(exporter)
          })))
        )
        const { replies, spans, token } = yield* program

        // The client is answered with fixed texts only.
        for (const reply of replies) expect(reply).not.toContain(token)
        // No span carries it (attributes, events, status).
        expect(spans.some((span) => span.name === "Gateway.call")).toBe(true)
        expect(JSON.stringify(spans.map((s) => [s.name, s.attributes, s.events, s.status]))).not.toContain(token)

        // The redactor's own check is satisfied for every shape...
        const pretty = written.filter((w) => w.sink.startsWith("Cause.pretty"))
        expect(pretty.map((w) => w.shape)).toEqual(expect.arrayContaining(Object.keys(shapes)))
        for (const w of pretty) expect(w.text, w.shape).not.toContain(token)
        // ...yet the cause object the host's loggers receive still holds the token.
        const leaks = written.filter((w) => w.text.includes(token)).map((w) => `${w.shape} → ${w.sink}`)
        expect(leaks).toEqual([])
      }),
    60_000
  )

  it.live("a log annotation or message holding the token in a class instance reaches the host's loggers scrubbed", () =>
    Effect.gen(function*() {
      const Noted = Tool.make("noted", {
        description: "Logs what it was given.",
        input: { key: Schema.String },
        output: Schema.String
      })
      const NotedTools = Toolkit.make(Noted)
      const NotedLive = NotedTools.toLayer({
        noted: ({ key }) =>
          Effect.logInfo("calling upstream", new Map([["key", key]])).pipe(
            Effect.annotateLogs({ endpoint: new URL(`http://127.0.0.1:1/mcp?k=${key}`), bytes: Buffer.from(key) }),
            Effect.as("ok")
          )
      })
      const written: Array<string> = []
      const recording = Logger.make(({ annotations, message }) => {
        written.push(Util.inspect({ message, annotations: Object.fromEntries(annotations) }, { depth: Infinity }))
        for (const [, annotation] of annotations) {
          if (Buffer.isBuffer(annotation)) written.push(annotation.toString("latin1"))
        }
      })
      const token = yield* Effect.gen(function*() {
        const gateway = yield* Gateway.Gateway
        const registration = yield* gateway.register(yield* Toolkit.executor(NotedTools))
        const client = yield* connect(registration.url, registration.token)
        const token = Redacted.value(registration.token)
        yield* Effect.promise(() => client.callTool({ name: "noted", arguments: { key: token } }))
        return token
      }).pipe(
        Effect.scoped,
        Effect.provide([NotedLive, Gateway.layer()]),
        Effect.provide(Logger.replace(Logger.defaultLogger, recording))
      )
      expect(written.some((line) => line.includes("calling upstream"))).toBe(true)
      expect(written.filter((line) => line.includes(token))).toEqual([])
    }))
})
