import { afterAll, describe, expect, layer } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Layer from "effect/Layer"
import type { Recorder } from "./fixtures/executors.js"
import { makeExecutor } from "./fixtures/executors.js"
import { expectNoTokenInLogs, logLayer, portOf, remember } from "./fixtures/harness.js"
import type { RawResponse } from "./fixtures/raw.js"
import { callBody, header, listBody, rawExchange, rawRequest, requestText } from "./fixtures/raw.js"

class Fixture extends Context.Tag("Fixture")<Fixture, {
  readonly port: number
  readonly token: string
  readonly recorder: Recorder
}>() {}

const FixtureLive = Layer.scoped(
  Fixture,
  Effect.gen(function*() {
    const gateway = yield* Gateway.make({
      maxBodyBytes: 1024,
      maxHeaderBytes: 4096,
      headersTimeout: "300 millis",
      requestTimeout: "600 millis"
    })
    const { executor, recorder } = yield* makeExecutor("a")
    const registration = yield* gateway.register(executor)
    return { port: portOf(registration.url), token: remember(registration.token), recorder }
  })
).pipe(Layer.provide(logLayer))

type Headers = ReadonlyArray<readonly [string, string]>

const fixed = (code: number, message: string) => ({ jsonrpc: "2.0", error: { code, message }, id: null })

const base = (port: number, token: string): Headers => [
  ["Host", `127.0.0.1:${port}`],
  ["Content-Type", "application/json"],
  ["Accept", "application/json, text/event-stream"],
  ["Authorization", `Bearer ${token}`]
]

const without = (headers: Headers, name: string): Headers =>
  headers.filter(([key]) => key.toLowerCase() !== name.toLowerCase())

const replace = (headers: Headers, name: string, value: string): Headers => [
  ...without(headers, name),
  [name, value]
]

/** Sends a tools/call and asserts the status, the fixed body, and that no handler ran. */
const refused = (
  fixture: Context.Tag.Service<Fixture>,
  request: { headers: Headers; method?: string; target?: string; body?: string },
  status: number,
  body: unknown
) =>
  Effect.gen(function*() {
    const before = fixture.recorder.calls.length
    const response = yield* rawRequest(fixture.port, { body: callBody("echo"), ...request })
    expect(response.status).toBe(status)
    expect(JSON.parse(response.body)).toEqual(body)
    expect(fixture.recorder.calls.length).toBe(before)
    expect(header(response, "X-Powered-By")).toBeUndefined()
    expect(response.headers.some(([k]) => k.toLowerCase().startsWith("access-control-"))).toBe(false)
    return response
  })

const served = (fixture: Context.Tag.Service<Fixture>, headers: Headers): Effect.Effect<RawResponse> =>
  rawRequest(fixture.port, { headers, body: callBody("echo") })

layer(FixtureLive, { excludeTestServices: true })("SECURITY.md rules in front of the SDK", (it) => {
  describe("request shape", () => {
    it.effect("a valid request is served (the baseline every refusal differs from)", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        const response = yield* served(f, base(f.port, f.token))
        expect(response.status).toBe(200)
        expect(JSON.parse(response.body).result.structuredContent).toEqual({ text: "hi", owner: "a" })
        expect(header(response, "X-Powered-By")).toBeUndefined()
      }))

    it.effect("two Host headers are refused with 400 (Node keeps only the first)", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        const headers = base(f.port, f.token)
        yield* refused(f, { headers: [headers[0]!, ...headers] }, 400, fixed(-32600, "Bad Request"))
        yield* refused(f, { headers: [...headers, ["Host", "evil.example"]] }, 400, fixed(-32600, "Bad Request"))
      }))

    it.effect("an absolute-form target is refused with 400", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        const headers = base(f.port, f.token)
        yield* refused(f, { headers, target: `http://127.0.0.1:${f.port}/mcp` }, 400, fixed(-32600, "Bad Request"))
        yield* refused(f, { headers, target: "http://evil.example/mcp" }, 400, fixed(-32600, "Bad Request"))
      }))

    it.effect("a missing Host is refused with 400", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        yield* refused(f, { headers: without(base(f.port, f.token), "Host") }, 400, fixed(-32600, "Bad Request"))
      }))

    it.effect("other spellings of the loopback address or port are refused with 403, never echoed", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        for (
          const host of [
            `localhost:${f.port}`,
            `127.0.0.1`,
            `127.1:${f.port}`,
            `[::1]:${f.port}`,
            `127.0.0.1:0${f.port}`,
            `127.0.0.1:${f.port + 1}`,
            `evil-rebind.example:${f.port}`,
            `127.0.0.1:${f.port}.`
          ]
        ) {
          const response = yield* refused(
            f,
            { headers: replace(base(f.port, f.token), "Host", host) },
            403,
            fixed(-32000, "Forbidden")
          )
          expect(response.text).not.toContain("evil-rebind")
        }
      }))

    it.effect("Origin: absent is allowed, exact is allowed, anything else is 403 and not echoed", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        const exact = yield* served(f, [...base(f.port, f.token), ["Origin", `http://127.0.0.1:${f.port}`]])
        expect(exact.status).toBe(200)
        for (
          const origin of ["http://evil.example", `http://localhost:${f.port}`, "null", `https://127.0.0.1:${f.port}`]
        ) {
          const response = yield* refused(
            f,
            { headers: [...base(f.port, f.token), ["Origin", origin]] },
            403,
            fixed(-32000, "Forbidden")
          )
          expect(response.text).not.toContain("evil.example")
        }
      }))

    it.effect("a CORS preflight gets no CORS headers", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        const response = yield* refused(
          f,
          {
            method: "OPTIONS",
            headers: [
              ["Host", `127.0.0.1:${f.port}`],
              ["Origin", `http://127.0.0.1:${f.port}`],
              ["Access-Control-Request-Method", "POST"]
            ],
            body: ""
          },
          405,
          fixed(-32000, "Method Not Allowed")
        )
        expect(header(response, "Allow")).toBe("POST")
      }))

    it.effect("other paths and /.well-known/* are 404; other methods 405; other content types 415", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        const headers = base(f.port, f.token)
        yield* refused(f, { headers, target: "/" }, 404, fixed(-32000, "Not Found"))
        yield* refused(f, { headers, target: "/mcp/" }, 404, fixed(-32000, "Not Found"))
        yield* refused(f, { headers, target: "/.well-known/oauth-protected-resource" }, 404, fixed(-32000, "Not Found"))
        yield* refused(
          f,
          { headers, target: "/.well-known/oauth-authorization-server" },
          404,
          fixed(-32000, "Not Found")
        )
        yield* refused(f, { headers, method: "GET", body: "" }, 405, fixed(-32000, "Method Not Allowed"))
        yield* refused(f, { headers, method: "DELETE", body: "" }, 405, fixed(-32000, "Method Not Allowed"))
        yield* refused(
          f,
          { headers: replace(headers, "Content-Type", "text/plain") },
          415,
          fixed(-32000, "Unsupported Media Type")
        )
        yield* refused(
          f,
          { headers: replace(headers, "Content-Type", "application/jsonx") },
          415,
          fixed(-32000, "Unsupported Media Type")
        )
      }))

    it.effect(
      "a refused request without a body leaves its connection open (an MCP client's GET); one with a body closes it",
      () =>
        Effect.gen(function*() {
          const f = yield* Fixture
          const keepAlive = (method: string, headers: Headers, body = "") =>
            Buffer.concat([
              Buffer.from(
                [`${method} /mcp HTTP/1.1`, ...headers.map(([k, v]) => `${k}: ${v}`)].join("\r\n") + "\r\n",
                "latin1"
              ),
              Buffer.from(body === "" ? "\r\n" : `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
            ])
          const headers = without(base(f.port, f.token), "Content-Type")
          const list = requestText({ headers: base(f.port, f.token), body: listBody })
          const statuses = (text: string) => Array.from(text.matchAll(/HTTP\/1\.1 (\d{3}) /g), (m) => Number(m[1]))
          // The GET, then (once its 405 is read) a tools/list on the same connection: both answered.
          const open = yield* rawExchange(f.port, [keepAlive("GET", headers), list], { gapMs: 100 })
          expect(statuses(open.text)).toEqual([405, 200])
          expect(header(open, "Connection")).toBe("keep-alive")
          expect(open.text).toContain("\"tools\":")
          // A GET with a body: its refusal closes the connection, the next request is not read.
          const closed = yield* rawExchange(f.port, [keepAlive("GET", headers, "{}"), list], { gapMs: 100 })
          expect(statuses(closed.text)).toEqual([405])
          expect(header(closed, "Connection")).toBe("close")
        })
    )

    it.effect("a JSON-RPC batch is refused", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        yield* refused(
          f,
          { headers: base(f.port, f.token), body: `[${callBody("echo")},${callBody("echo")}]` },
          400,
          fixed(-32600, "Batches are not supported")
        )
      }))

    it.effect("a tools/call with malformed params is Invalid params, without the SDK's validation issues", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        const before = f.recorder.calls.length
        const malformed: ReadonlyArray<unknown> = [
          { name: 5, arguments: {} },
          { arguments: { text: "x" } },
          { name: "echo", arguments: "SECRET-ARGUMENT" },
          { name: ["SECRET-NAME"] }
        ]
        for (const params of malformed) {
          const body = JSON.stringify({ jsonrpc: "2.0", id: 41, method: "tools/call", params })
          const response = yield* rawRequest(f.port, { headers: base(f.port, f.token), body })
          expect(response.status).toBe(200)
          expect(JSON.parse(response.body)).toEqual({
            jsonrpc: "2.0",
            id: 41,
            error: { code: -32602, message: "Invalid params" }
          })
        }
        // Params that do not make a JSON-RPC request at all get the transport's fixed 400.
        for (const params of ["SECRET-PARAMS", { name: "echo", _meta: { progressToken: { x: "SECRET-META" } } }]) {
          const response = yield* rawRequest(f.port, {
            headers: base(f.port, f.token),
            body: JSON.stringify({ jsonrpc: "2.0", id: 41, method: "tools/call", params })
          })
          expect(response.status).toBe(400)
          expect(response.body).not.toContain("SECRET")
        }
        expect(f.recorder.calls.length).toBe(before)
      }))

    it.effect("a JSON body that is not an object is a fixed error and the gateway keeps serving", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        const before = f.recorder.calls.length
        // Found by the long fuzz run: reading `.method` of `null` threw in the request handler,
        // an uncaught exception in the host.
        for (const body of ["null", "5", "\"tools/call\"", "true"]) {
          const response = yield* rawRequest(f.port, { headers: base(f.port, f.token), body })
          expect(response.status).toBe(400)
          expect(JSON.parse(response.body).error.message).toBe("Parse error: Invalid JSON-RPC message")
        }
        expect(f.recorder.calls.length).toBe(before)
        expect((yield* served(f, base(f.port, f.token))).status).toBe(200)
      }))

    it.effect("an unsupported protocol version header is refused without echoing it", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        const response = yield* refused(
          f,
          { headers: [...base(f.port, f.token), ["MCP-Protocol-Version", "1999-01-01-echo"]] },
          400,
          fixed(-32600, "Bad Request")
        )
        expect(response.text).not.toContain("1999-01-01-echo")
      }))
  })

  describe("authentication", () => {
    it.effect("missing, wrong, empty, other-scheme and doubled credentials get one fixed 401", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        const headers = base(f.port, f.token)
        const wrong = f.token.slice(0, -1) + (f.token.endsWith("A") ? "B" : "A")
        const cases: Array<Headers> = [
          without(headers, "Authorization"),
          replace(headers, "Authorization", `Bearer ${wrong}`),
          replace(headers, "Authorization", "Bearer "),
          replace(headers, "Authorization", ""),
          replace(headers, "Authorization", `Basic ${f.token}`),
          replace(headers, "Authorization", f.token),
          replace(headers, "Authorization", `Bearer ${f.token} extra`),
          [...headers, ["Authorization", `Bearer ${f.token}`]],
          [...headers, ["Authorization", `Bearer ${wrong}`]]
        ]
        for (const headers of cases) {
          const response = yield* refused(f, { headers }, 401, fixed(-32001, "Unauthorized"))
          expect(header(response, "WWW-Authenticate")).toBe("Bearer error=\"invalid_token\"")
          expect(response.text).not.toContain(f.token)
        }
      }))

    it.effect("a token in the query string is never accepted", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        const headers = without(base(f.port, f.token), "Authorization")
        yield* refused(f, { headers, target: `/mcp?access_token=${f.token}` }, 404, fixed(-32000, "Not Found"))
        yield* refused(f, { headers, target: `/mcp?token=${f.token}` }, 404, fixed(-32000, "Not Found"))
      }))
  })

  describe("limits", () => {
    it.effect("a declared body over the limit is 413 before it is read", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        yield* refused(
          f,
          { headers: [...base(f.port, f.token), ["Content-Length", "5000000"]], body: "" },
          413,
          fixed(-32000, "Payload Too Large")
        )
      }))

    it.effect("a chunked body over the limit is 413", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        const args = { text: "y".repeat(2000) }
        const payload = callBody("echo", args)
        const chunked = `${payload.length.toString(16)}\r\n${payload}\r\n0\r\n\r\n`
        yield* refused(
          f,
          { headers: [...base(f.port, f.token), ["Transfer-Encoding", "chunked"]], body: chunked },
          413,
          fixed(-32000, "Payload Too Large")
        )
        const small = callBody("echo")
        const ok = yield* rawRequest(f.port, {
          headers: [...base(f.port, f.token), ["Transfer-Encoding", "chunked"]],
          body: `${small.length.toString(16)}\r\n${small}\r\n0\r\n\r\n`
        })
        expect(ok.status).toBe(200)
      }))

    it.effect("Expect: 100-continue is answered only after the shape, the credential and the size passed", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        const before = f.recorder.calls.length
        const body = callBody("echo")
        const head = (headers: Headers, length: number) =>
          requestText({ headers: [...headers, ["Expect", "100-continue"], ["Content-Length", String(length)]] })
        // Refused requests never get `100 Continue`: the client would send its body for nothing.
        const cases: ReadonlyArray<readonly [Headers, number, number]> = [
          [without(base(f.port, f.token), "Authorization"), body.length, 401],
          [replace(base(f.port, f.token), "Authorization", "Bearer wrong"), body.length, 401],
          [replace(base(f.port, f.token), "Host", "evil.example"), body.length, 403],
          [[...base(f.port, f.token), ["Origin", "http://evil.example"]], body.length, 403],
          [without(base(f.port, "-"), "Authorization"), 2 * 1024 * 1024, 401],
          [base(f.port, f.token), 2 * 1024 * 1024, 413]
        ]
        for (const [headers, length, status] of cases) {
          const response = yield* rawExchange(f.port, [head(headers, length)], { timeoutMs: 3000 })
          expect(response.text.startsWith(`HTTP/1.1 ${status} `)).toBe(true)
          expect(response.text).not.toContain("100 Continue")
        }
        expect(f.recorder.calls.length).toBe(before)
        // A request that passes every check is invited, then served.
        const served = yield* rawExchange(f.port, [head(base(f.port, f.token), body.length), body], { gapMs: 300 })
        expect(served.text.startsWith("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK")).toBe(true)
        expect(f.recorder.calls.length).toBe(before + 1)
      }))

    it.effect("a header block over the limit is 431", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        yield* refused(
          f,
          { headers: [...base(f.port, f.token), ["X-Padding", "p".repeat(6000)]] },
          431,
          fixed(-32000, "Request Header Fields Too Large")
        )
      }))

    it.effect("a client that never finishes its headers gets 408", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        const before = f.recorder.calls.length
        const response = yield* rawExchange(f.port, [`POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${f.port}\r\n`], {
          timeoutMs: 5000
        })
        expect(response.status).toBe(408)
        expect(JSON.parse(response.body)).toEqual(fixed(-32000, "Request Timeout"))
        expect(f.recorder.calls.length).toBe(before)
      }))

    it.effect("a client that never finishes its body gets 408", () =>
      Effect.gen(function*() {
        const f = yield* Fixture
        const before = f.recorder.calls.length
        const request = requestText({ headers: base(f.port, f.token), body: callBody("echo") })
        const response = yield* rawExchange(f.port, [request.subarray(0, request.length - 5)], { timeoutMs: 5000 })
        expect(response.status).toBe(408)
        expect(JSON.parse(response.body)).toEqual(fixed(-32000, "Request Timeout"))
        expect(f.recorder.calls.length).toBe(before)
      }))
  })

  describe("properties", () => {
    const alive = (f: Context.Tag.Service<Fixture>, before: number) =>
      Effect.gen(function*() {
        expect(f.recorder.calls.length).toBe(before)
        const response = yield* rawRequest(f.port, { headers: base(f.port, f.token), body: listBody })
        expect(response.status).toBe(200)
      })

    it.effect.prop(
      "arbitrary bytes never crash the gateway nor reach a handler",
      [FastCheck.uint8Array({ maxLength: 600 })],
      ([bytes]) =>
        Effect.gen(function*() {
          const f = yield* Fixture
          const before = f.recorder.calls.length
          yield* rawExchange(f.port, [Buffer.from(bytes)], { timeoutMs: 1500 })
          yield* alive(f, before)
        }),
      { fastCheck: { numRuns: 20 } }
    )

    it.effect.prop(
      "arbitrary JSON bodies without a valid token get 401 and never reach a handler",
      [FastCheck.jsonValue({ maxDepth: 4 }), FastCheck.option(FastCheck.base64String({ maxLength: 60 }))],
      ([json, token]) =>
        Effect.gen(function*() {
          const f = yield* Fixture
          const before = f.recorder.calls.length
          const headers = token === null
            ? without(base(f.port, f.token), "Authorization")
            : replace(base(f.port, f.token), "Authorization", `Bearer ${token}`)
          const response = yield* rawRequest(f.port, { headers, body: JSON.stringify(json) ?? "null" })
          expect(response.status).toBe(401)
          yield* alive(f, before)
        }),
      { fastCheck: { numRuns: 40 } }
    )

    const headerName = FastCheck.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,20}$/)
    const headerValue = FastCheck.stringMatching(/^[\x21-\x7e]{0,40}$/)
    it.effect.prop(
      "arbitrary header sets never crash the gateway nor reach a handler without the token",
      [FastCheck.array(FastCheck.tuple(headerName, headerValue), { maxLength: 12 }), FastCheck.boolean()],
      ([extra, withHost]) =>
        Effect.gen(function*() {
          const f = yield* Fixture
          const before = f.recorder.calls.length
          const headers: Headers = [
            ...(withHost ? [["Host", `127.0.0.1:${f.port}`] as const] : []),
            ["Content-Type", "application/json"],
            ...extra.filter(([name]) => !/^(content-length|transfer-encoding|connection)$/i.test(name))
          ]
          yield* rawExchange(f.port, [requestText({ headers, body: callBody("echo") })], { timeoutMs: 1500 })
          yield* alive(f, before)
        }),
      { fastCheck: { numRuns: 40 } }
    )
  })
})

afterAll(() => expectNoTokenInLogs())
