import { afterAll, describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"
import { connect, expectNoTokenInLogs, logLayer, portOf, remember } from "./fixtures/harness.js"
import { callBody, rawExchange, requestText } from "./fixtures/raw.js"

// SECURITY.md: "Tool calls run under a global concurrency bound (default 32); beyond it 503 with
// `Retry-After`, never an unbounded queue". Gateway.ts (`maxConcurrentCalls`): "Tool calls running
// at once across all registrations". A handler shaped as docs/tools.md recommends
// (`Effect.acquireRelease`, whose release runs uninterruptibly) outlives its answer when its client
// goes away or the deadline answers: the slot was given back with the answer, so a client holding
// a token (a model with a shell) could run any number of handlers at once. It is the handler's now
// until it has ended.

const bound = 2
const calls = 8

const makeTools = () => {
  const counters = { running: 0, started: 0, max: 0 }
  const Work = Tool.make("work", {
    description: "Holds a scoped resource whose release takes 1.5 s.",
    input: {},
    output: Schema.Struct({ ok: Schema.Boolean })
  })
  const tools = Toolkit.make(Work)
  const layer = tools.toLayer({
    work: () =>
      Effect.gen(function*() {
        yield* Effect.acquireRelease(
          Effect.sync(() => {
            counters.running++
            counters.started++
            counters.max = Math.max(counters.max, counters.running)
          }),
          () => Effect.sleep("1500 millis").pipe(Effect.ensuring(Effect.sync(() => counters.running--)))
        )
        return yield* Effect.never
      })
  })
  return { counters, tools, layer }
}

const headers = (url: string, token: string) =>
  [
    ["Host", `127.0.0.1:${portOf(url)}`],
    ["Content-Type", "application/json"],
    ["Accept", "application/json, text/event-stream"],
    ["Authorization", `Bearer ${token}`]
  ] as const

describe("the concurrency bound counts running handlers", () => {
  it.live("calls aborted by their client cannot run more handlers at once than the bound", () => {
    const { counters, layer, tools } = makeTools()
    return Effect.gen(function*() {
      const gateway = yield* Gateway.make({ maxConcurrentCalls: bound })
      const registration = yield* gateway.register(yield* Toolkit.executor(tools))
      const token = remember(registration.token)
      const port = portOf(registration.url)
      const statuses: Array<number> = []
      // A client holding the token sends a call and drops its connection, again and again.
      for (let i = 0; i < calls; i++) {
        const before = counters.started
        const request = requestText({ headers: headers(registration.url, token), body: callBody("work", {}) })
        const exchange = yield* Effect.fork(rawExchange(port, [request], { timeoutMs: 10_000 }))
        for (let waited = 0; waited < 100 && counters.started === before; waited++) {
          const done = yield* Fiber.poll(exchange)
          if (done._tag === "Some") break
          yield* Effect.sleep("10 millis")
        }
        const done = yield* Fiber.poll(exchange)
        if (done._tag === "Some" && done.value._tag === "Success") statuses.push(done.value.value.status)
        yield* Fiber.interrupt(exchange)
        yield* Effect.sleep("20 millis")
      }
      // Each call the gateway accepted started a handler that is still running (releasing).
      expect({ handlersRunningAtOnce: counters.max, refused: statuses }).toEqual({
        handlersRunningAtOnce: bound,
        refused: Array.from({ length: calls - bound }, () => 503)
      })
    }).pipe(Effect.scoped, Effect.provide(layer), Effect.provide(logLayer))
  }, 30_000)

  it.live("calls answered deadline_exceeded cannot run more handlers at once than the bound", () => {
    const { counters, layer, tools } = makeTools()
    return Effect.gen(function*() {
      const gateway = yield* Gateway.make({ maxConcurrentCalls: bound, handlerDeadline: "100 millis" })
      const registration = yield* gateway.register(yield* Toolkit.executor(tools))
      remember(registration.token)
      const client = yield* connect(registration.url, registration.token)
      const answers: Array<string> = []
      for (let i = 0; i < calls; i++) {
        const result = yield* Effect.promise(() =>
          client.callTool({ name: "work", arguments: {} }).then(
            (r) => String((r.content as Array<{ text: string }>)[0]?.text).split(":")[0]!,
            (e: unknown) => `error ${String(e)}`.slice(0, 60)
          )
        )
        answers.push(result)
      }
      // Every call is answered at its deadline and its slot returned, while its handler still runs.
      expect(counters.max).toBeLessThanOrEqual(bound)
    }).pipe(Effect.scoped, Effect.provide(layer), Effect.provide(logLayer))
  }, 30_000)
})

afterAll(() => expectNoTokenInLogs())
