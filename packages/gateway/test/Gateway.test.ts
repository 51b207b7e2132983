import { afterAll, describe, expect, it, vi } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import type * as Catalog from "@tether/tool/Catalog"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Scope from "effect/Scope"
import * as Util from "node:util"
import * as Timer from "../src/internal/timer.js"
import { makeExecutor } from "./fixtures/executors.js"
import {
  captured,
  connect,
  expectNoTokenInLogs,
  issuedTokens,
  logLayer,
  portOf,
  remember,
  settle
} from "./fixtures/harness.js"
import { callBody, header, rawExchange, rawRequest, requestText } from "./fixtures/raw.js"

const authHeaders = (url: string, token: string) =>
  [
    ["Host", `127.0.0.1:${portOf(url)}`],
    ["Content-Type", "application/json"],
    ["Accept", "application/json, text/event-stream"],
    ["Authorization", `Bearer ${token}`]
  ] as const

const live = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) => effect.pipe(Effect.scoped, Effect.provide(logLayer))

/** One tool, `slow`, that answers after 100 ms. */
const slowExecutor: Catalog.Executor = {
  catalog: {
    descriptors: [{
      name: "slow",
      title: undefined,
      description: "Sleeps 100 ms.",
      inputSchema: { type: "object", properties: {} },
      annotations: {},
      revision: undefined
    }],
    fingerprint: "slow"
  },
  execute: () => Effect.sleep("100 millis").pipe(Effect.as<Catalog.Outcome>({ _tag: "Success", text: "done" }))
}

/** A raw `tools/call` of `tool` with JSON-RPC request id `id`. */
const callWithId = (tool: string, id: number | string) =>
  JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name: tool, arguments: { text: "x" } } })

/** A raw `notifications/cancelled` naming the request id `requestId`. */
const cancelBody = (requestId: number | string) =>
  JSON.stringify({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId, reason: "stop" } })

describe("Gateway over the official MCP client", () => {
  it.live("initializes, lists tools with schemas, title and tri-state annotations", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const { executor } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      remember(registration.token)
      expect(registration.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/)
      expect(registration.tokenVariable).toMatch(/^[A-Z][A-Z0-9_]*$/)
      expect(Redacted.value(registration.token)).toMatch(/^[A-Za-z0-9_-]{43}$/)
      const client = yield* connect(registration.url, registration.token)
      const { tools } = yield* Effect.promise(() => client.listTools())
      expect(tools.map((t) => t.name)).toEqual(["echo", "reject", "fail", "block", "stubborn", "big"])
      const echo = tools[0]!
      expect(echo.title).toBe("Echo")
      expect(echo.inputSchema).toEqual(executor.catalog.descriptors[0]!.inputSchema)
      expect(echo.outputSchema).toEqual(executor.catalog.descriptors[0]!.outputSchema)
      expect(echo.annotations).toEqual({ readOnlyHint: true, destructiveHint: false })
      expect(tools[1]!.annotations).toBeUndefined()
      expect(tools[1]!.title).toBeUndefined()
    })))

  it.live("calls a tool: success, rejection and generic failure; the executor sees only name and input", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const { executor, recorder } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      remember(registration.token)
      const client = yield* connect(registration.url, registration.token)
      const ok = yield* Effect.promise(() => client.callTool({ name: "echo", arguments: { text: "hello" } }))
      expect(ok.isError).toBeFalsy()
      expect(ok.structuredContent).toEqual({ text: "hello", owner: "a" })
      expect(ok.content).toEqual([{ type: "text", text: JSON.stringify({ text: "hello", owner: "a" }) }])
      const rejected = yield* Effect.promise(() => client.callTool({ name: "reject", arguments: { text: "k" } }))
      expect(rejected.isError).toBe(true)
      expect(rejected.content).toEqual([{ type: "text", text: "not_found: Choose an issue key that exists." }])
      const failed = yield* Effect.promise(() => client.callTool({ name: "fail", arguments: { text: "k" } }))
      expect(failed.isError).toBe(true)
      expect(failed.content).toEqual([{ type: "text", text: "internal_error: The tool failed." }])
      expect(recorder.calls[0]!.name).toBe("echo")
      expect(recorder.calls[0]!.input).toEqual({ text: "hello" })
      // The gateway answers the deadline itself and interrupts the call in place (its close then
      // waits for the handler's finalizers): the executor gets no options at all.
      expect(recorder.calls[0]!.options).toBeUndefined()
    })))

  it.live("a tool without an output schema is listed without one and answered with its text alone", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      // Such a tool's result is read from its one text block (Claude Code's permission prompt
      // tool refuses a result that carries structured content).
      const executor: Catalog.Executor = {
        catalog: {
          descriptors: [{
            name: "approve",
            title: undefined,
            description: "Answers with text.",
            inputSchema: { type: "object", properties: { tool_name: { type: "string" } } },
            annotations: {},
            revision: undefined
          }],
          fingerprint: "text-only"
        },
        execute: (_name, input) =>
          Effect.succeed({ _tag: "Success", text: JSON.stringify({ behavior: "allow", seen: input }) })
      }
      const registration = yield* gateway.register(executor)
      remember(registration.token)
      const client = yield* connect(registration.url, registration.token)
      const { tools } = yield* Effect.promise(() => client.listTools())
      expect(tools.map((t) => t.name)).toEqual(["approve"])
      expect("outputSchema" in tools[0]!).toBe(false)
      const answer = yield* Effect.promise(() => client.callTool({ name: "approve", arguments: { tool_name: "Bash" } }))
      expect("structuredContent" in answer).toBe(false)
      expect(answer.content).toEqual([{
        type: "text",
        text: JSON.stringify({ behavior: "allow", seen: { tool_name: "Bash" } })
      }])
    })))

  it.live("serves concurrent calls, each with its own result", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const { executor } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      remember(registration.token)
      const client = yield* connect(registration.url, registration.token)
      const texts = Array.from({ length: 24 }, (_, i) => `call-${i}`)
      const results = yield* Effect.forEach(
        texts,
        (text) => Effect.promise(() => client.callTool({ name: "echo", arguments: { text } })),
        { concurrency: "unbounded" }
      )
      expect(results.map((r) => r.structuredContent)).toEqual(texts.map((text) => ({ text, owner: "a" })))
    })))

  it.live("a tool outside the catalog is a JSON-RPC error that names nothing", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const { executor, recorder } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      remember(registration.token)
      const client = yield* connect(registration.url, registration.token)
      const missing = yield* settle(() => client.callTool({ name: "nope_secret_name", arguments: {} }))
      expect(missing.ok).toBe(false)
      expect(String(missing.ok ? "" : missing.error)).toContain("Unknown tool")
      expect(String(missing.ok ? "" : missing.error)).not.toContain("nope_secret_name")
      expect(recorder.calls).toEqual([])
    })))
})

describe("Registrations", () => {
  it.live("two registrations with the same tool names never cross results; revoking one leaves the other", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const a = yield* makeExecutor("a")
      const b = yield* makeExecutor("b")
      const regA = yield* gateway.register(a.executor)
      const scopeB = yield* Scope.make()
      const regB = yield* gateway.register(b.executor).pipe(Scope.extend(scopeB))
      remember(regA.token)
      const tokenB = remember(regB.token)
      expect(regA.url).toBe(regB.url)
      expect(regA.tokenVariable).not.toBe(regB.tokenVariable)
      const clientA = yield* connect(regA.url, regA.token)
      const clientB = yield* connect(regB.url, regB.token)
      const calls = Array.from({ length: 30 }, (_, i) => ({ client: i % 2 === 0 ? clientA : clientB, i }))
      const results = yield* Effect.forEach(
        calls,
        ({ client, i }) => Effect.promise(() => client.callTool({ name: "echo", arguments: { text: `${i}` } })),
        { concurrency: "unbounded" }
      )
      results.forEach((r, i) => expect(r.structuredContent).toEqual({ text: `${i}`, owner: i % 2 === 0 ? "a" : "b" }))
      yield* Scope.close(scopeB, Exit.void)
      const after = yield* rawRequest(portOf(regB.url), {
        headers: authHeaders(regB.url, tokenB),
        body: callBody("echo")
      })
      expect(after.status).toBe(401)
      const stillA = yield* Effect.promise(() => clientA.callTool({ name: "echo", arguments: { text: "x" } }))
      expect(stillA.structuredContent).toEqual({ text: "x", owner: "a" })
      expect(b.recorder.calls.length).toBe(15)
    })))

  it.live("closing a registration answers its in-flight call with a well-formed JSON-RPC error", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const keep = yield* makeExecutor("keep")
      yield* gateway.register(keep.executor)
      const { executor, recorder } = yield* makeExecutor("a")
      const scope = yield* Scope.make()
      const registration = yield* gateway.register(executor).pipe(Scope.extend(scope))
      const token = remember(registration.token)
      const pending = yield* Effect.fork(rawRequest(portOf(registration.url), {
        headers: authHeaders(registration.url, token),
        body: callBody("block")
      }))
      yield* Deferred.await(recorder.started)
      yield* Scope.close(scope, Exit.void)
      // Closing waited for the handler's interruption finalizer.
      expect(recorder.interrupted).toBe(1)
      const response = yield* Fiber.join(pending)
      expect(response.status).toBe(200)
      const body = JSON.parse(response.body)
      expect(body).toEqual({ jsonrpc: "2.0", id: 2, error: { code: -32603, message: "MCP error -32603: canceled" } })
      expect(recorder.interrupted).toBe(1)
    })))

  it.live("closing a registration answers a call whose handler ignores interruption without waiting for it", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const { executor, recorder } = yield* makeExecutor("a")
      const scope = yield* Scope.make()
      const registration = yield* gateway.register(executor).pipe(Scope.extend(scope))
      const token = remember(registration.token)
      const started = Date.now()
      const pending = yield* Effect.fork(rawRequest(portOf(registration.url), {
        headers: authHeaders(registration.url, token),
        body: callBody("stubborn")
      }))
      yield* Deferred.await(recorder.started)
      yield* Effect.fork(Scope.close(scope, Exit.void))
      const response = yield* Fiber.join(pending)
      // The stubborn handler runs 1500 ms uninterruptibly; the answer must not wait for it.
      expect(Date.now() - started).toBeLessThan(1200)
      expect(JSON.parse(response.body).error.message).toBe("MCP error -32603: canceled")
    })))

  it.live("credential mints a narrower credential: it lists and calls only its subset, then is revoked", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const { executor, recorder } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      remember(registration.token)
      const turn = yield* Scope.make()
      const credential = yield* registration.credential({ tools: ["reject", "echo", "not_in_catalog"] }).pipe(
        Scope.extend(turn)
      )
      const turnToken = remember(credential.token)
      expect(credential.tools).toEqual(["echo", "reject"])
      expect(turnToken).not.toBe(Redacted.value(registration.token))
      const client = yield* connect(registration.url, credential.token)
      const { tools } = yield* Effect.promise(() => client.listTools())
      expect(tools.map((t) => t.name)).toEqual(["echo", "reject"])
      const outside = yield* settle(() => client.callTool({ name: "fail", arguments: { text: "x" } }))
      const missing = yield* settle(() => client.callTool({ name: "does_not_exist", arguments: { text: "x" } }))
      expect(outside.ok).toBe(false)
      expect(String(outside.ok ? "" : outside.error)).toBe(String(missing.ok ? "" : missing.error))
      expect(recorder.calls).toEqual([])
      const full = yield* connect(registration.url, registration.token)
      expect((yield* Effect.promise(() => full.listTools())).tools.length).toBe(6)
      yield* Scope.close(turn, Exit.void)
      const revoked = yield* rawRequest(portOf(registration.url), {
        headers: authHeaders(registration.url, turnToken),
        body: callBody("echo")
      })
      expect(revoked.status).toBe(401)
      expect((yield* Effect.promise(() => full.callTool({ name: "fail", arguments: { text: "x" } }))).isError).toBe(
        true
      )
    })))
})

describe("Limits on calls", () => {
  it.live("a handler that ignores interruption is answered deadline_exceeded at the deadline", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make({ handlerDeadline: "200 millis" })
      const { executor } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      remember(registration.token)
      const client = yield* connect(registration.url, registration.token)
      const started = Date.now()
      const result = yield* Effect.promise(() => client.callTool({ name: "stubborn", arguments: { text: "x" } }))
      // The stubborn handler takes 1500 ms; the answer must not wait for it.
      expect(Date.now() - started).toBeLessThan(1200)
      expect(result.isError).toBe(true)
      expect(result.content).toEqual([{
        type: "text",
        text: "deadline_exceeded: The tool did not finish before its deadline."
      }])
    })))

  for (const deadline of [Duration.infinity, Duration.days(30)]) {
    it.live(`handlerDeadline ${Duration.format(deadline)} (past one Node timer's reach): a 100 ms call succeeds`, () =>
      live(Effect.gen(function*() {
        const gateway = yield* Gateway.make({ handlerDeadline: deadline })
        const registration = yield* gateway.register(slowExecutor)
        remember(registration.token)
        const client = yield* connect(registration.url, registration.token)
        const result = yield* Effect.promise(() => client.callTool({ name: "slow", arguments: {} }))
        expect(result.isError).toBeFalsy()
        expect(result.content).toEqual([{ type: "text", text: "done" }])
      })))
  }

  it("a deadline past one Node timer's reach fires when it is due, not before; an infinite one never", () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] })
    try {
      const fired: Array<string> = []
      Timer.after(Duration.days(30), () => fired.push("30 days"))
      Timer.after(Duration.infinity, () => fired.push("infinity"))
      const stopped = Timer.after(Duration.days(60), () => fired.push("stopped"))
      vi.advanceTimersByTime(Duration.toMillis(Duration.days(30)) - 1)
      expect(fired).toEqual([])
      vi.advanceTimersByTime(1)
      expect(fired).toEqual(["30 days"])
      stopped()
      vi.advanceTimersByTime(Duration.toMillis(Duration.days(365)))
      expect(fired).toEqual(["30 days"])
    } finally {
      vi.useRealTimers()
    }
  })

  it.live("requestTimeout infinity: the listener starts and serves; the header timeout still answers 408", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make({ requestTimeout: Duration.infinity, headersTimeout: "300 millis" })
      const registration = yield* gateway.register(slowExecutor)
      const token = remember(registration.token)
      const port = portOf(registration.url)
      const served = yield* rawRequest(port, { headers: authHeaders(registration.url, token), body: callBody("slow") })
      expect(served.status).toBe(200)
      expect(JSON.parse(served.body).result.content).toEqual([{ type: "text", text: "done" }])
      const slow = yield* rawExchange(port, [`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n`], { timeoutMs: 5000 })
      expect(slow.status).toBe(408)
    })))

  it.live("headersTimeout and requestTimeout infinity: the listener starts and serves", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make({ requestTimeout: Duration.infinity, headersTimeout: Duration.infinity })
      const registration = yield* gateway.register(slowExecutor)
      remember(registration.token)
      const client = yield* connect(registration.url, registration.token)
      const result = yield* Effect.promise(() => client.callTool({ name: "slow", arguments: {} }))
      expect(result.isError).toBeFalsy()
    })))

  it.live("an output over the output limit becomes invalid_output", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make({ maxOutputBytes: 1000 })
      const { executor } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      remember(registration.token)
      const client = yield* connect(registration.url, registration.token)
      const big = yield* Effect.promise(() => client.callTool({ name: "big", arguments: { text: "x" } }))
      expect(big.isError).toBe(true)
      expect(String((big.content as Array<{ text: string }>)[0]!.text)).toMatch(/^invalid_output: /)
      const small = yield* Effect.promise(() => client.callTool({ name: "echo", arguments: { text: "x" } }))
      expect(small.isError).toBeFalsy()
    })))

  it.live("beyond the concurrency bound a call gets 503 with Retry-After; the slot returns after an abort", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make({ maxConcurrentCalls: 1 })
      const { executor, recorder } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      const token = remember(registration.token)
      const port = portOf(registration.url)
      const request = requestText({ headers: authHeaders(registration.url, token), body: callBody("block") })
      // The blocked call holds the only slot until its connection is dropped.
      const blocked = yield* Effect.fork(rawExchange(port, [request], { timeoutMs: 60_000 }))
      yield* Deferred.await(recorder.started)
      const busy = yield* rawRequest(port, { headers: authHeaders(registration.url, token), body: callBody("echo") })
      expect(busy.status).toBe(503)
      expect(header(busy, "Retry-After")).toBe("1")
      expect(recorder.calls.map((c) => c.name)).toEqual(["block"])
      yield* Fiber.interrupt(blocked)
      yield* Effect.sleep("100 millis")
      expect(recorder.interrupted).toBe(1)
      const free = yield* rawRequest(port, { headers: authHeaders(registration.url, token), body: callBody("echo") })
      expect(free.status).toBe(200)
      expect(JSON.parse(free.body).result.structuredContent).toEqual({ text: "hi", owner: "a" })
    })))
})

describe("Calls the client cancels", () => {
  it.live("a call the MCP client aborts or times out is interrupted and frees its slot", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make({ maxConcurrentCalls: 1 })
      const { executor, recorder } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      remember(registration.token)
      const client = yield* connect(registration.url, registration.token)
      const before = captured.length
      // The SDK client sends `notifications/cancelled` in a request of its own and leaves the
      // call's request open: only the gateway's routing of the cancel ends the call.
      const controller = new AbortController()
      const aborted = yield* Effect.fork(
        settle(() =>
          client.callTool({ name: "block", arguments: { text: "x" } }, undefined, { signal: controller.signal })
        )
      )
      yield* Deferred.await(recorder.started)
      controller.abort("user pressed Esc")
      expect((yield* Fiber.join(aborted)).ok).toBe(false)
      yield* Effect.sleep("500 millis")
      expect(recorder.interrupted).toBe(1)
      const next = yield* settle(() => client.callTool({ name: "echo", arguments: { text: "next" } }))
      expect(next.ok).toBe(true)
      // The SDK client's request timeout cancels the same way.
      const timedOut = yield* settle(() =>
        client.callTool({ name: "block", arguments: { text: "x" } }, undefined, { timeout: 300 })
      )
      expect(timedOut.ok).toBe(false)
      yield* Effect.sleep("500 millis")
      expect(recorder.interrupted).toBe(2)
      const last = yield* settle(() => client.callTool({ name: "echo", arguments: { text: "last" } }))
      expect(last.ok).toBe(true)
      const canceled = captured.slice(before).filter((line) => line.includes("'outcome', 'canceled'"))
      expect(canceled.length).toBe(2)
    })))

  it.live("a cancel made with another credential, or naming another id, changes nothing", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make({ maxConcurrentCalls: 1 })
      const { executor, recorder } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      const token = remember(registration.token)
      const other = yield* registration.credential()
      const otherToken = remember(other.token)
      const port = portOf(registration.url)
      const post = (as: string, body: string) => rawRequest(port, { headers: authHeaders(registration.url, as), body })
      const request = requestText({ headers: authHeaders(registration.url, token), body: callWithId("block", 41) })
      const blocked = yield* Effect.fork(rawExchange(port, [request], { timeoutMs: 60_000 }))
      yield* Deferred.await(recorder.started)
      // Another credential of the same registration naming the call's id; the same credential
      // naming an unknown id, and the call's id as a string (another JSON-RPC id).
      for (const [as, id] of [[otherToken, 41], [token, 42], [token, "41"]] as const) {
        expect((yield* post(as, cancelBody(id))).status).toBe(202)
      }
      yield* Effect.sleep("300 millis")
      expect(recorder.interrupted).toBe(0)
      expect(yield* Fiber.poll(blocked)).toEqual(Option.none())
      expect((yield* post(token, callBody("echo"))).status).toBe(503)
      // The call's own credential and id: the call is answered canceled, its handler interrupted,
      // and its slot free once the handler has ended.
      expect((yield* post(token, cancelBody(41))).status).toBe(202)
      const answer = yield* Fiber.join(blocked).pipe(Effect.timeout("5 seconds"))
      expect(answer.status).toBe(200)
      expect(JSON.parse(answer.body)).toEqual({
        jsonrpc: "2.0",
        id: 41,
        error: { code: -32603, message: "MCP error -32603: canceled" }
      })
      for (let i = 0; i < 100 && recorder.interrupted === 0; i++) yield* Effect.sleep("10 millis")
      expect(recorder.interrupted).toBe(1)
      // The handler's fiber ends just after its finalizer counted the interruption.
      let free = yield* post(token, callBody("echo"))
      for (let i = 0; i < 50 && free.status === 503; i++) {
        yield* Effect.sleep("10 millis")
        free = yield* post(token, callBody("echo"))
      }
      expect(free.status).toBe(200)
      expect(JSON.parse(free.body).result.structuredContent).toEqual({ text: "hi", owner: "a" })
      // A cancel after the call ended, and one naming it again, change nothing either.
      expect((yield* post(token, cancelBody(41))).status).toBe(202)
      expect((yield* post(otherToken, callBody("echo"))).status).toBe(200)
    })))
})

describe("Logging and secrets", () => {
  it.live("each call is one log line with tool, outcome, code and duration, and no argument value", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const { executor } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      remember(registration.token)
      const client = yield* connect(registration.url, registration.token)
      const before = captured.length
      yield* Effect.promise(() => client.callTool({ name: "reject", arguments: { text: "ARGUMENT-VALUE-7731" } }))
      const lines = captured.slice(before).filter((line) => line.includes("tool call"))
      expect(lines.length).toBe(1)
      expect(lines[0]).toContain("'tool', 'reject'")
      expect(lines[0]).toContain("'outcome', 'rejected'")
      expect(lines[0]).toContain("'code', 'not_found'")
      expect(lines[0]).toContain("durationMs")
      expect(captured.join("\n")).not.toContain("ARGUMENT-VALUE-7731")
    })))

  it.live("a call interrupted at its deadline is one log line: outcome failed, code deadline_exceeded", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make({ handlerDeadline: "100 millis" })
      const { executor, recorder } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      remember(registration.token)
      const client = yield* connect(registration.url, registration.token)
      const before = captured.length
      const result = yield* Effect.promise(() => client.callTool({ name: "block", arguments: { text: "x" } }))
      expect(result.isError).toBe(true)
      // The line is written once the interrupted handler has stopped (its finalizer takes 50 ms).
      const lines = () => captured.slice(before).filter((line) => line.includes("tool call"))
      for (let i = 0; i < 100 && lines().length === 0; i++) yield* Effect.sleep("20 millis")
      expect(recorder.interrupted).toBe(1)
      expect(lines().length).toBe(1)
      expect(lines()[0]).toContain("'tool', 'block'")
      expect(lines()[0]).toContain("'outcome', 'failed'")
      expect(lines()[0]).toContain("'code', 'deadline_exceeded'")
    })))

  it.live("each call runs inside a Gateway.call span naming the tool", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const executor: Catalog.Executor = {
        catalog: { descriptors: [], fingerprint: "span" },
        execute: () =>
          Effect.currentSpan.pipe(
            Effect.map((span): Catalog.Outcome => ({
              _tag: "Success",
              structuredContent: { name: span.name, tool: String(span.attributes.get("tool.name")) },
              text: span.name
            })),
            Effect.orDie
          )
      }
      const { executor: base } = yield* makeExecutor("a")
      const registration = yield* gateway.register({ catalog: base.catalog, execute: executor.execute })
      remember(registration.token)
      const client = yield* connect(registration.url, registration.token)
      const result = yield* Effect.promise(() => client.callTool({ name: "echo", arguments: { text: "x" } }))
      expect(result.structuredContent).toEqual({ name: "Gateway.call", tool: "echo" })
    })))

  it.live("a call's Gateway.call span is a child of the span where its credential was minted", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const { executor: base } = yield* makeExecutor("a")
      const registration = yield* gateway.register({
        catalog: base.catalog,
        execute: () =>
          Effect.currentSpan.pipe(
            Effect.map((span): Catalog.Outcome => {
              const parent = span.parent._tag === "Some" && span.parent.value._tag === "Span"
                ? span.parent.value.name
                : "none"
              return { _tag: "Success", structuredContent: { parent }, text: parent }
            }),
            Effect.orDie
          )
      })
      remember(registration.token)
      const credential = yield* registration.credential({ tools: ["echo"] }).pipe(Effect.withSpan("a run"))
      remember(credential.token)
      const viaCredential = yield* connect(registration.url, credential.token)
      const viaRegistration = yield* connect(registration.url, registration.token)
      const call = (client: typeof viaCredential) =>
        Effect.promise(() => client.callTool({ name: "echo", arguments: { text: "x" } }))
      expect((yield* call(viaCredential)).structuredContent).toEqual({ parent: "a run" })
      expect((yield* call(viaRegistration)).structuredContent).toEqual({ parent: "Gateway.register" })
    })))

  it.live("the token never appears in the string, JSON or inspected form of exported objects", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const { executor } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      const token = remember(registration.token)
      const credential = yield* registration.credential({ tools: ["echo"] })
      const turnToken = remember(credential.token)
      const error = new Gateway.GatewayError({ reason: "ListenFailed", detail: "x" })
      for (const value of [registration, credential, gateway, error]) {
        for (const rendered of [String(value), JSON.stringify(value), Util.inspect(value, { depth: 20 })]) {
          expect(rendered).not.toContain(token)
          expect(rendered).not.toContain(turnToken)
        }
      }
      expect(JSON.stringify(registration)).toContain("<redacted>")
    })))

  afterAll(() => {
    expect(issuedTokens.length).toBeGreaterThan(0)
    expectNoTokenInLogs()
  })
})
