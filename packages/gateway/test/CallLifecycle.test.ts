/**
 * The lifecycle of a host tool call through the gateway with a real Toolkit executor and
 * the official MCP SDK client — close waiting for an interrupted handler's finalizers, the scope a
 * handler's scoped resources live in, and the `Gateway.call` span of a canceled call.
 */
import { describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import { Tool, Toolkit } from "@tether/tool"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Tracer from "effect/Tracer"
import { connect, logLayer, remember, settle } from "./fixtures/harness.js"

const Block = Tool.make("block", {
  description: "Blocks until interrupted; its finalizer takes a while.",
  input: {},
  output: Schema.Struct({ ok: Schema.Boolean })
})
const Acquire = Tool.make("acquire", {
  description: "Uses a scoped resource for the duration of the call.",
  input: {},
  output: Schema.Struct({ ok: Schema.Boolean })
})
const Tools = Toolkit.make(Block, Acquire)

interface Probe {
  readonly started: Deferred.Deferred<void>
  finalized: boolean
  open: number
}

const toolsLive = (probe: Probe) =>
  Tools.toLayer({
    block: () =>
      Deferred.succeed(probe.started, undefined).pipe(
        Effect.zipRight(Effect.never),
        // e.g. rolling back a transaction, releasing a lock: takes a moment.
        Effect.onInterrupt(() =>
          Effect.sleep("300 millis").pipe(Effect.zipRight(Effect.sync(() => (probe.finalized = true))))
        )
      ),
    // A handler that needs a scoped resource (a connection, a temp file, a lock) for the call.
    acquire: () =>
      Effect.acquireRelease(Effect.sync(() => probe.open++), () => Effect.sync(() => probe.open--)).pipe(
        Effect.as({ ok: true })
      )
  })

const makeProbe = Effect.map(Deferred.make<void>(), (started): Probe => ({ started, finalized: false, open: 0 }))

/** A tracer that records every span it makes. */
const recordingTracer = (spans: Array<{ name: string; attributes: Map<string, unknown>; ended: boolean }>) =>
  Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      const attributes = new Map<string, unknown>()
      const record = { name, attributes, ended: false }
      spans.push(record)
      const span: Tracer.Span = {
        _tag: "Span",
        name,
        spanId: Math.random().toString(16).slice(2),
        traceId: "trace",
        parent,
        context,
        status: { _tag: "Started", startTime },
        attributes,
        links,
        sampled: true,
        kind,
        end: () => {
          record.ended = true
        },
        attribute: (key, value) => {
          attributes.set(key, value)
        },
        event: () => {},
        addLinks: () => {}
      }
      return span
    },
    context: (f) => f()
  })

describe("a call's lifecycle through the gateway (real Toolkit executor, official client)", () => {
  // The gateway's default handler deadline, and none (the executor once ran the handler in a
  // daemon fiber only when it was given a deadline).
  for (const handlerDeadline of [undefined, Duration.infinity]) {
    it.live(
      `closing the registration waits for the interrupted handler's finalizers (deadline: ${
        handlerDeadline === undefined ? "default" : "none"
      })`,
      () =>
        Effect.gen(function*() {
          const probe = yield* makeProbe
          yield* Effect.gen(function*() {
            const executor = yield* Toolkit.executor(Tools)
            const gateway = yield* Gateway.make(handlerDeadline === undefined ? {} : { handlerDeadline })
            const registrationScope = yield* Scope.make()
            const registration = yield* gateway.register(executor).pipe(Scope.extend(registrationScope))
            remember(registration.token)
            const client = yield* connect(registration.url, registration.token)
            const call = yield* Effect.fork(settle(() => client.callTool({ name: "block", arguments: {} })))
            yield* Deferred.await(probe.started)
            // "closing the registration revokes the token (then 401) and cancels its in-flight calls"
            yield* Scope.close(registrationScope, Exit.void)
            expect(probe.finalized).toBe(true)
            expect((yield* Fiber.join(call)).ok).toBe(false)
          }).pipe(Effect.scoped, Effect.provide(toolsLive(probe)))
        }).pipe(Effect.provide(logLayer))
    )
  }

  it.live("a handler's scoped resource is released when its call ends, not when the handler layer closes", () =>
    Effect.gen(function*() {
      const probe = yield* makeProbe
      yield* Effect.gen(function*() {
        const executor = yield* Toolkit.executor(Tools)
        const gateway = yield* Gateway.make()
        const registration = yield* gateway.register(executor)
        remember(registration.token)
        const client = yield* connect(registration.url, registration.token)
        for (let i = 0; i < 3; i++) {
          const result = yield* Effect.promise(() => client.callTool({ name: "acquire", arguments: {} }))
          expect(result.structuredContent).toEqual({ ok: true })
        }
        // Three calls answered: none of them still holds its resource.
        expect(probe.open).toBe(0)
      }).pipe(Effect.scoped, Effect.provide(toolsLive(probe)))
      // Released only here, when the handlers' layer closed.
      expect(probe.open).toBe(0)
    }).pipe(Effect.provide(logLayer)))

  it.live("a canceled call's Gateway.call span carries tool.outcome and tool.code", () => {
    const spans: Array<{ name: string; attributes: Map<string, unknown>; ended: boolean }> = []
    return Effect.gen(function*() {
      const probe = yield* makeProbe
      yield* Effect.gen(function*() {
        const executor = yield* Toolkit.executor(Tools)
        const gateway = yield* Gateway.make()
        const registration = yield* gateway.register(executor)
        remember(registration.token)
        const client = yield* connect(registration.url, registration.token)
        const controller = new AbortController()
        const call = yield* Effect.fork(
          settle(() => client.callTool({ name: "block", arguments: {} }, undefined, { signal: controller.signal }))
        )
        yield* Deferred.await(probe.started)
        controller.abort("user pressed Esc")
        expect((yield* Fiber.join(call)).ok).toBe(false)
        yield* Effect.sleep("600 millis")
      }).pipe(Effect.scoped, Effect.provide(toolsLive(probe)))
      const span = Option.fromNullable(spans.find((s) => s.name === "Gateway.call"))
      expect(Option.isSome(span)).toBe(true)
      const attributes = Object.fromEntries(Option.getOrThrow(span).attributes)
      // The log line of the same call says outcome "canceled", code "canceled".
      expect(attributes).toEqual({ "tool.name": "block", "tool.outcome": "canceled", "tool.code": "canceled" })
    }).pipe(Effect.provide(Layer.merge(logLayer, Layer.setTracer(recordingTracer(spans)))))
  })
})
