/**
 * Tracing across the cluster (docs/tracing.md) on one in-memory runner
 * (`Runner.layerTest`), every span exported through `@effect/opentelemetry` to an in-memory
 * exporter, with a processor that also records which spans started (to find spans never ended).
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { describe, expect, it } from "@effect/vitest"
import type { Context } from "@opentelemetry/api"
import type { ReadableSpan, Span, SpanProcessor } from "@opentelemetry/sdk-trace-base"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Reference } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import * as Fixture from "./fixtures/agent.js"
import { withRunner } from "./fixtures/withRunner.js"

/** Exports ended spans and remembers every started one. */
class Tracking implements SpanProcessor {
  readonly started = new Map<string, string>()
  readonly inner: SimpleSpanProcessor
  constructor(readonly exporter: InMemorySpanExporter) {
    this.inner = new SimpleSpanProcessor(exporter)
  }
  onStart(span: Span, context: Context) {
    this.started.set(span.spanContext().spanId, span.name)
    this.inner.onStart(span, context)
  }
  onEnd(span: ReadableSpan) {
    this.inner.onEnd(span)
  }
  forceFlush() {
    return this.inner.forceFlush()
  }
  shutdown() {
    return this.inner.shutdown()
  }
  /** Spans that started and never ended. */
  unended(): Array<string> {
    const ended = new Set(this.exporter.getFinishedSpans().map((span) => span.spanContext().spanId))
    return [...this.started].filter(([id]) => !ended.has(id)).map(([, name]) => name)
  }
}

const otel = (processor: Tracking) =>
  NodeSdk.layer(() => ({ resource: { serviceName: "tether-test" }, spanProcessor: processor }))

/** The names of a span's ancestors, nearest first (spans of this exporter only). */
const ancestors = (spans: ReadonlyArray<ReadableSpan>, span: ReadableSpan): Array<string> => {
  const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]))
  const names: Array<string> = []
  let parent = span.parentSpanContext?.spanId
  while (parent !== undefined) {
    const next = byId.get(parent)
    if (next === undefined) {
      names.push(`<missing ${parent}>`)
      break
    }
    names.push(next.name)
    parent = next.parentSpanContext?.spanId
  }
  return names
}

describe("tracing across the cluster", () => {
  it.live("the host's trace reaches the runner: Run.execute and Gateway.call descend from RemoteThread.*", () => {
    const exporter = new InMemorySpanExporter()
    const processor = new Tracking(exporter)
    return withRunner(({ threads }) =>
      Effect.gen(function*() {
        const thread = threads.thread("tenant-1/propagation")
        yield* thread.run(Fixture.turn("one")).pipe(Effect.withSpan("host.run"))
        yield* Stream.runDrain(thread.stream(Fixture.turn("two"))).pipe(Effect.withSpan("host.stream"))
      })
    ).pipe(
      Effect.andThen(() => {
        const spans = exporter.getFinishedSpans()
        const runs = spans.filter((span) => span.name === "Run.execute")
        const calls = spans.filter((span) => span.name === "Gateway.call")
        expect(runs).toHaveLength(2)
        expect(calls).toHaveLength(2)
        const chains = [...runs, ...calls].map((span) => ancestors(spans, span))
        expect(chains.filter((chain) => chain.includes("RemoteThread.run"))).toHaveLength(2)
        expect(chains.filter((chain) => chain.includes("RemoteThread.stream"))).toHaveLength(2)
        const host = spans.filter((span) => span.name.startsWith("host."))
        for (const span of [...runs, ...calls]) {
          expect(host.map((h) => h.spanContext().traceId)).toContain(span.spanContext().traceId)
        }
      }),
      // The exporter's spans are read before the SDK shuts down (its shutdown clears them).
      Effect.provide(otel(processor))
    )
  }, 60_000)

  it.live("every span ends: a canceled turn, a turn closed by Close, a redelivered committed turn", () => {
    const exporter = new InMemorySpanExporter()
    const processor = new Tracking(exporter)
    return withRunner(
      ({ threads }) =>
        Effect.gen(function*() {
          const thread = threads.thread("tenant-1/ends")
          yield* thread.run("warm")
          // Cancel.
          const canceled = yield* Effect.fork(Effect.flip(thread.run("slow")))
          yield* Effect.sleep("700 millis")
          yield* thread.cancel()
          expect(yield* Fiber.join(canceled)).toMatchObject({ _tag: "RunError", reason: "Canceled" })
          // Close during a streamed turn.
          const closed = yield* Effect.fork(Effect.either(Stream.runDrain(thread.stream("slow"))))
          yield* Effect.sleep("700 millis")
          yield* thread.close
          yield* Fiber.join(closed)
          // The same turn id twice: the second answers the first's result.
          yield* thread.run({ input: "warm", id: "turn-same" })
          yield* thread.run({ input: "warm", id: "turn-same" })
          yield* Effect.either(Stream.runDrain(thread.stream({ input: "warm", id: "turn-same" })))
        }),
      { agent: (options) => ({ ...options, driver: Fixture.referenceDriver(5_000) }) }
    ).pipe(
      Effect.andThen(() => {
        expect(processor.unended()).toEqual([])
      }),
      // The exporter's spans are read before the SDK shuts down (its shutdown clears them).
      Effect.provide(otel(processor))
    )
  }, 60_000)
  it.live("a live thread on a runner: each turn's Gateway.call is a child of that turn's Run.execute", () => {
    const exporter = new InMemorySpanExporter()
    const processor = new Tracking(exporter)
    const driver = Reference.driver({
      live: true,
      respond: (prompt) => [{ _tag: "$call", tool: "whoami", input: {} }, ...Reference.answer(`done ${prompt}`)]
    })
    return withRunner(
      ({ threads }) =>
        Effect.gen(function*() {
          const thread = threads.thread("tenant-1/live")
          expect((yield* thread.run("one")).text).toBe("done one")
          expect((yield* Stream.runCollect(thread.stream("two"))).length).toBeGreaterThan(0)
          expect((yield* thread.run("three")).text).toBe("done three")
        }),
      { agent: (options) => ({ ...options, driver }) }
    ).pipe(
      Effect.andThen(() => {
        const spans = exporter.getFinishedSpans()
        const byStart = (a: ReadableSpan, b: ReadableSpan) =>
          a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]
        const runs = spans.filter((span) => span.name === "Run.execute").sort(byStart)
        const calls = spans.filter((span) => span.name === "Gateway.call").sort(byStart)
        expect(runs).toHaveLength(3)
        expect(calls.map((call) => call.parentSpanContext?.spanId)).toEqual(runs.map((run) => run.spanContext().spanId))
        expect(processor.unended()).toEqual([])
      }),
      Effect.provide(otel(processor))
    )
  }, 60_000)
})
