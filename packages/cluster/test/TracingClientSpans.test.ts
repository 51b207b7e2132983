/**
 * A failed cluster call whose error quotes a provider's text. Tether's own spans
 * (RemoteThread.run / .stream) end content-free, and so must @effect/cluster's client span of each
 * call (`tether/Thread.client.Run` / `.RunStream` / `.Send`, a child of RemoteThread.* on the host,
 * whose trace context reaches the runner): it ends with the call's exit, and a `RunError`'s (or a
 * `ProtocolError`'s) message quotes the provider's text.
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { describe, expect, it } from "@effect/vitest"
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Driver, type Event } from "@tether/core"
import { FakeCli, Reference } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import { withRunner } from "./fixtures/withRunner.js"

const otel = (exporter: InMemorySpanExporter) =>
  NodeSdk.layer(() => ({ resource: { serviceName: "tether-test" }, spanProcessor: new SimpleSpanProcessor(exporter) }))

/** Every attribute (but the documented `entity.id`), event and status text of a span. */
const everyText = (span: ReadableSpan): ReadonlyArray<string> => [
  ...Object.entries(span.attributes).filter(([name]) => name !== "entity.id").flatMap(([name, value]) => [
    name,
    String(value)
  ]),
  ...span.events.flatMap((event) => [
    event.name,
    ...Object.entries(event.attributes ?? {}).flatMap(([name, value]) => [name, String(value)])
  ]),
  span.status.message ?? ""
]

/** The spans that carry the provider's text, as `name: status`. */
const leaking = (exporter: InMemorySpanExporter) =>
  exporter.getFinishedSpans()
    .filter((span) => everyText(span).some((text) => text.includes("PROVIDER-TEXT")))
    .map((span) => `${span.name}: ${span.status.message}`)

/** The status messages of the client spans named `name`. */
const statuses = (exporter: InMemorySpanExporter, name: string) =>
  exporter.getFinishedSpans().filter((span) => span.name === name).map((span) => span.status.message)

/**
 * The reference driver's live process: a turn waits for steered input, but the provider refuses
 * every input with an error quoting its own text.
 */
const refusing: Driver.Driver = (() => {
  const base = Reference.driver({
    live: true,
    respond: (prompt) => [
      { _tag: "TextDelta", text: "waiting" },
      { _tag: "$sleep", ms: 30_000, untilInput: true },
      ...Reference.answer(prompt)
    ]
  })
  return {
    ...base,
    live: {
      ...base.live!,
      attach: (channel, context) =>
        Effect.map(base.live!.attach(channel, context), (session): Driver.LiveSession => ({
          ...session,
          steer: () =>
            Effect.fail(
              new Driver.ProtocolError({ reason: "ProviderError", detail: "PROVIDER-TEXT-7c1e quoted the input" })
            )
        }))
    }
  }
})()

describe("a failed cluster call's spans", () => {
  it.live("a failed cluster turn: no span on the host or the runner carries the provider's error text", () => {
    const exporter = new InMemorySpanExporter()
    return withRunner(({ threads }) =>
      Effect.gen(function*() {
        const thread = threads.thread("tenant-1/failing")
        const failing = FakeCli.script({ op: "result", ok: false, error: "PROVIDER-TEXT-41d2 quoted the prompt" })
        expect(yield* Effect.flip(thread.run(failing))).toMatchObject({ _tag: "RunError", reason: "ProviderFailed" })
        expect(yield* Effect.flip(Stream.runDrain(thread.stream(failing)))).toMatchObject({
          _tag: "RunError",
          reason: "ProviderFailed"
        })
      })
    ).pipe(
      Effect.andThen(() => {
        expect(leaking(exporter)).toEqual([])
        // The client spans are still there (they carry the trace to the runner), content-free.
        expect(statuses(exporter, "tether/Thread.client.Run")).toEqual(["failed: RunError ProviderFailed"])
        expect(statuses(exporter, "tether/Thread.client.RunStream")).toEqual(["failed: RunError ProviderFailed"])
      }),
      // The exporter's spans are read before the SDK shuts down (its shutdown clears them).
      Effect.provide(otel(exporter))
    )
  }, 60_000)

  it.live("a send the provider refused: no span carries the provider's error text", () => {
    const exporter = new InMemorySpanExporter()
    return withRunner(
      ({ threads }) =>
        Effect.gen(function*() {
          const thread = threads.thread("tenant-1/refusing")
          const events: Array<Event.Event> = []
          const turn = yield* thread.stream("long").pipe(
            Stream.runForEach((event) => Effect.sync(() => events.push(event))),
            Effect.either,
            Effect.fork
          )
          while (!events.some((event) => event._tag === "TextDelta")) yield* Effect.sleep("10 millis")
          expect(yield* Effect.flip(thread.send("go on"))).toMatchObject({
            _tag: "ProtocolError",
            reason: "ProviderError",
            detail: "PROVIDER-TEXT-7c1e quoted the input"
          })
          yield* thread.cancel()
          yield* Fiber.join(turn)
        }),
      { agent: (options) => ({ ...options, driver: refusing }) }
    ).pipe(
      Effect.andThen(() => {
        expect(leaking(exporter)).toEqual([])
        expect(statuses(exporter, "tether/Thread.client.Send")).toEqual(["failed: ProtocolError ProviderError"])
      }),
      // The exporter's spans are read before the SDK shuts down (its shutdown clears them).
      Effect.provide(otel(exporter))
    )
  }, 60_000)
})
