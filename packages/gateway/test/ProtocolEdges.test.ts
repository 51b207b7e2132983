/**
 * MCP protocol edges through the gateway, raw and with the SDK client: unknown and unadvertised
 * methods, initialize, notifications and client responses, invalid ids, bearer spellings, many
 * clients at once, and a call that outlasts the request timeout.
 */
import { describe, expect, it } from "@effect/vitest"
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js"
import { Gateway } from "@tether/gateway"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { makeExecutor } from "./fixtures/executors.js"
import { connect, logLayer, portOf, remember, settle } from "./fixtures/harness.js"
import { rawRequest } from "./fixtures/raw.js"

const live = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) => effect.pipe(Effect.scoped, Effect.provide(logLayer))

type Headers = ReadonlyArray<readonly [string, string]>
const base = (port: number, token: string): Headers => [
  ["Host", `127.0.0.1:${port}`],
  ["Content-Type", "application/json"],
  ["Accept", "application/json, text/event-stream"],
  ["Authorization", `Bearer ${token}`]
]
const rpc = (id: unknown, method: string, params?: unknown) =>
  JSON.stringify({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) })

const setup = Effect.gen(function*() {
  const gateway = yield* Gateway.make()
  const { executor, recorder } = yield* makeExecutor("a")
  const registration = yield* gateway.register(executor)
  const token = remember(registration.token)
  const port = portOf(registration.url)
  const post = (body: string, headers: Headers = base(port, token)) => rawRequest(port, { headers, body })
  return { registration, token, port, post, recorder }
})

describe("MCP protocol handling", () => {
  it.live("unknown and unadvertised methods are -32601 with the request's id (number, string, 0, empty)", () =>
    live(Effect.gen(function*() {
      const { post } = yield* setup
      for (const id of [7, "seven", 0, ""]) {
        for (
          const method of [
            "no/such",
            "resources/list",
            "prompts/list",
            "resources/templates/list",
            "logging/setLevel",
            "completion/complete"
          ]
        ) {
          const r = yield* post(rpc(id, method, {}))
          expect(r.status).toBe(200)
          expect(JSON.parse(r.body)).toEqual({
            jsonrpc: "2.0",
            id,
            error: { code: -32601, message: "Method not found" }
          })
        }
      }
    })))

  it.live("initialize (twice, unsupported version) advertises only tools; ping answers {}", () =>
    live(Effect.gen(function*() {
      const { post } = yield* setup
      for (const version of ["2025-06-18", "1999-01-01"]) {
        const r = yield* post(
          rpc(1, "initialize", { protocolVersion: version, capabilities: {}, clientInfo: { name: "x", version: "1" } })
        )
        const body = JSON.parse(r.body)
        expect(body.result.capabilities).toEqual({ tools: {} })
        expect(body.result.protocolVersion).toBe(version === "1999-01-01" ? LATEST_PROTOCOL_VERSION : version)
      }
      const ping = yield* post(rpc(9, "ping"))
      expect(JSON.parse(ping.body)).toEqual({ jsonrpc: "2.0", id: 9, result: {} })
    })))

  it.live("notifications and client responses get 202 and run nothing; a tools/call without an id runs nothing", () =>
    live(Effect.gen(function*() {
      const { post, recorder } = yield* setup
      for (
        const body of [
          JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
          JSON.stringify({ jsonrpc: "2.0", id: 5, result: {} }),
          JSON.stringify({ jsonrpc: "2.0", id: 5, error: { code: 1, message: "x" } }),
          JSON.stringify({ jsonrpc: "2.0", method: "tools/call", params: { name: "echo", arguments: { text: "x" } } })
        ]
      ) {
        const r = yield* post(body)
        expect(r.status).toBe(202)
        expect(r.body).toBe("")
      }
      expect(recorder.calls.length).toBe(0)
    })))

  it.live("invalid ids (null, fraction, object) are 400", () =>
    live(Effect.gen(function*() {
      const { post } = yield* setup
      for (const id of [null, 1.5, {}, true]) {
        const r = yield* post(rpc(id, "tools/list", {}))
        expect(r.status).toBe(400)
      }
    })))

  it.live("tools/list with a cursor; an Mcp-Session-Id is ignored", () =>
    live(Effect.gen(function*() {
      const { post, port, token } = yield* setup
      const r = yield* post(rpc(1, "tools/list", { cursor: "abc" }))
      expect(JSON.parse(r.body).result.tools.length).toBe(6)
      const s = yield* post(rpc(1, "tools/list", {}), [...base(port, token), ["Mcp-Session-Id", "nope"]])
      expect(s.status).toBe(200)
    })))

  it.live("bearer scheme case and spacing", () =>
    live(Effect.gen(function*() {
      const { post, port, token } = yield* setup
      const h = (v: string): Headers => [
        ...base(port, token).filter(([k]) => k !== "Authorization"),
        ["Authorization", v]
      ]
      expect((yield* post(rpc(1, "ping"), h(`bearer ${token}`))).status).toBe(200)
      expect((yield* post(rpc(1, "ping"), h(`BEARER ${token}`))).status).toBe(200)
      expect((yield* post(rpc(1, "ping"), h(`Bearer  ${token}`))).status).toBe(200)
      expect((yield* post(rpc(1, "ping"), h(`Bearer ${token}x`))).status).toBe(401)
      expect((yield* post(rpc(1, "ping"), h(`Bearer ${token.slice(0, -1)}`))).status).toBe(401)
      expect((yield* post(rpc(1, "ping"), h(`Bearer\t${token}`))).status).toBe(401)
      expect((yield* post(rpc(1, "ping"), h(`Basic ${token}`))).status).toBe(401)
    })))

  it.live("many SDK clients at once each list and call", () =>
    live(Effect.gen(function*() {
      const { registration } = yield* setup
      const results = yield* Effect.forEach(
        Array.from({ length: 100 }, (_, i) => i),
        (i) =>
          Effect.gen(function*() {
            const client = yield* connect(registration.url, registration.token)
            const tools = yield* Effect.promise(() => client.listTools())
            const r = yield* settle(() => client.callTool({ name: "echo", arguments: { text: `n${i}` } }))
            return tools.tools.length === 6 && r.ok && (r.value as any).structuredContent.text === `n${i}`
          }),
        { concurrency: 50 }
      )
      expect(results.every(Boolean)).toBe(true)
    })), 60_000)

  it.live("a call that outlasts requestTimeout is still answered (the timeout bounds receiving the request)", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make({ headersTimeout: "300 millis", requestTimeout: "600 millis" })
      const { executor } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      const port = portOf(registration.url)
      const token = remember(registration.token)
      const raw = yield* rawRequest(port, {
        headers: base(port, token),
        body: rpc(3, "tools/call", { name: "stubborn", arguments: { text: "x" } })
      })
      expect(raw.status).toBe(200)
      expect(JSON.parse(raw.body).result.structuredContent.text).toBe("late")
      const client = yield* connect(registration.url, registration.token)
      const r = yield* settle(() => client.callTool({ name: "stubborn", arguments: { text: "x" } }))
      expect(r.ok).toBe(true)
    })))
})
