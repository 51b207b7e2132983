/**
 * SECURITY.md's header limit (431) and timeouts (408), and a malformed request's 400, hold for a
 * second request on a kept-alive connection (every MCP client's) as for a first one.
 */
import { describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { makeExecutor } from "./fixtures/executors.js"
import { logLayer, portOf, remember } from "./fixtures/harness.js"
import { listBody, rawExchange } from "./fixtures/raw.js"

const live = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) => effect.pipe(Effect.scoped, Effect.provide(logLayer))

const keepAlive = (port: number, token: string, extra: ReadonlyArray<string> = []) =>
  Buffer.from(
    [
      "POST /mcp HTTP/1.1",
      `Host: 127.0.0.1:${port}`,
      "Content-Type: application/json",
      "Accept: application/json, text/event-stream",
      `Authorization: Bearer ${token}`,
      ...extra,
      `Content-Length: ${Buffer.byteLength(listBody)}`
    ].join("\r\n") + "\r\n\r\n" + listBody,
    "latin1"
  )

const statuses = (text: string) => Array.from(text.matchAll(/HTTP\/1\.1 (\d{3}) /g), (m) => Number(m[1]))

describe("refusals on a kept-alive connection", () => {
  it.live("a second request whose header block is over the limit gets 431 like a first one", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make({ maxHeaderBytes: 4096 })
      const { executor } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      const port = portOf(registration.url)
      const token = remember(registration.token)
      const big = [`X-Pad: ${"a".repeat(8000)}`]
      const first = yield* rawExchange(port, [keepAlive(port, token, big)])
      expect(statuses(first.text)).toEqual([431])
      const second = yield* rawExchange(port, [keepAlive(port, token), keepAlive(port, token, big)], { gapMs: 200 })
      expect(statuses(second.text)).toEqual([200, 431])
    })))

  it.live("a second request that never finishes its headers gets 408 like a first one", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make({ headersTimeout: "300 millis", requestTimeout: "600 millis" })
      const { executor } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      const port = portOf(registration.url)
      const token = remember(registration.token)
      const partial = Buffer.from(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n`, "latin1")
      const first = yield* rawExchange(port, [partial], { timeoutMs: 3000 })
      expect(statuses(first.text)).toEqual([408])
      const second = yield* rawExchange(port, [keepAlive(port, token), partial], { gapMs: 200, timeoutMs: 3000 })
      expect(statuses(second.text)).toEqual([200, 408])
    })))

  it.live("a second request that is malformed HTTP gets 400 like a first one", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const { executor } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      const port = portOf(registration.url)
      const token = remember(registration.token)
      const malformed = Buffer.from(`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nBad Header: x\r\n\r\n`, "latin1")
      const first = yield* rawExchange(port, [malformed])
      expect(statuses(first.text)).toEqual([400])
      const second = yield* rawExchange(port, [keepAlive(port, token), malformed], { gapMs: 200 })
      expect(statuses(second.text)).toEqual([200, 400])
    })))
})
