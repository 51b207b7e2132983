import { afterAll, describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as Net from "node:net"
import { allSlotsFree, call, gatedExecutor, headersFor, keepAlive, ping } from "./fixtures/gate.js"
import { expectNoTokenInLogs, logLayer, portOf, remember } from "./fixtures/harness.js"
import { rawExchange, rawRequest } from "./fixtures/raw.js"

const bound = 2

/** A gateway with a small bound and a long close timeout, in a scope the test closes itself. */
const setup = Effect.gen(function*() {
  const scope = yield* Scope.make()
  const gateway = yield* Gateway.make({ maxConcurrentCalls: bound, closeTimeout: "1 minute" }).pipe(
    Scope.extend(scope)
  )
  const { executor, gate } = gatedExecutor()
  const registration = yield* gateway.register(executor).pipe(Scope.extend(scope))
  const token = remember(registration.token)
  return { scope, registration, token, port: portOf(registration.url), gate }
})

/** Writes `data` in one write and resolves with everything read once the server closes. */
const oneWrite = (port: number, data: string) => rawExchange(port, [data], { timeoutMs: 5_000 })

/** A connection kept open until the returned `destroy` is called. */
const openConnection = (port: number, data: string) =>
  Effect.async<{ readonly destroy: () => void }>((resume) => {
    const socket = Net.connect({ host: "127.0.0.1", port }, () => {
      socket.write(data)
      resume(Effect.succeed({ destroy: () => socket.destroy() }))
    })
    socket.on("error", () => {})
  })

/** Whether `condition` holds within 10 s (polled). */
const eventually = (condition: () => boolean) =>
  Effect.gen(function*() {
    for (let waited = 0; waited < 10_000 && !condition(); waited += 5) yield* Effect.sleep("5 millis")
    return condition()
  })

const echoWorks = (port: number, token: string) =>
  Effect.gen(function*() {
    const response = yield* rawRequest(port, { headers: headersFor(port, token), body: call("echo") })
    expect(response.status).toBe(200)
    expect(JSON.parse(response.body).result.structuredContent).toEqual({ text: "echo" })
  })

describe("slots and in-flight accounting end with the exchange, however it ends", () => {
  it.live("a request refused before its body is read, pipelined ahead of a ping and a tools/call, leaks no slot", () =>
    Effect.gen(function*() {
      const { gate, port, registration, scope, token } = yield* setup
      // The refusal (415, Connection: close) ends the connection before the later responses can
      // be written; before the fix each such connection kept one slot for ever.
      for (let i = 0; i < bound + 1; i++) {
        const response = yield* oneWrite(
          port,
          keepAlive(port, token, "x", { contentType: "text/plain" }) + keepAlive(port, token, ping) +
            keepAlive(port, token, call("echo"))
        )
        expect(response.status).toBe(415)
      }
      expect(yield* allSlotsFree(port, token, bound, gate)).toEqual([200, 200])
      yield* echoWorks(port, token)
      const turn = yield* registration.credential({ tools: ["echo"] }).pipe(Scope.extend(scope))
      yield* echoWorks(port, Redacted.value(turn.token))
      yield* Scope.close(scope, Exit.void)
    }).pipe(Effect.provide(logLayer)))

  it.live("requests pipelined after a refusal that closes the connection are never dispatched", () =>
    Effect.gen(function*() {
      const { gate, port, scope, token } = yield* setup
      const response = yield* oneWrite(
        port,
        keepAlive(port, token, "x", { contentType: "text/plain" }) + keepAlive(port, token, call("hold"))
      )
      expect(response.status).toBe(415)
      // Only the refusal was answered, and the hold call never started (it would wait for the gate).
      expect(response.text.match(/HTTP\/1\.1 /g)).toHaveLength(1)
      expect(gate.held).toBe(0)
      expect(gate.running).toBe(0)
      yield* Scope.close(scope, Exit.void)
    }).pipe(Effect.provide(logLayer)))

  it.live("a call whose answer waits behind another on a connection that is destroyed is canceled and frees its slot", () =>
    Effect.gen(function*() {
      const { gate, port, scope, token } = yield* setup
      // Two pipelined calls: the second one's response is queued behind the first one's.
      const connection = yield* openConnection(
        port,
        keepAlive(port, token, call("block")) + keepAlive(port, token, call("block", 2))
      )
      expect(yield* eventually(() => gate.running === 2)).toBe(true)
      connection.destroy()
      expect(yield* eventually(() => gate.running === 0)).toBe(true)
      expect(yield* allSlotsFree(port, token, bound, gate)).toEqual([200, 200])
      yield* Scope.close(scope, Exit.void)
    }).pipe(Effect.provide(logLayer)))

  it.live("in-flight accounting ends with the exchange: after pipelined refusals the gateway closes without waiting", () =>
    Effect.gen(function*() {
      const { gate, port, scope, token } = yield* setup
      yield* oneWrite(
        port,
        keepAlive(port, token, "x", { contentType: "text/plain" }) + keepAlive(port, token, ping) +
          keepAlive(port, token, call("echo"))
      )
      // A keep-alive connection with a call in flight when the gateway closes: the call is
      // answered, then the connection is dropped as soon as nothing is in flight (milliseconds).
      // With exchanges counted as in flight for ever, nothing drops it: closing waits until Node's
      // keep-alive timeout (5 s) closes it, or the close timeout (1 minute here).
      const connection = yield* openConnection(port, keepAlive(port, token, call("block")))
      expect(yield* eventually(() => gate.running === 1)).toBe(true)
      const closed = yield* Scope.close(scope, Exit.void).pipe(Effect.timeout("3 seconds"), Effect.either)
      connection.destroy()
      expect(closed._tag).toBe("Right")
    }).pipe(Effect.provide(logLayer)))
})

afterAll(() => expectNoTokenInLogs())
