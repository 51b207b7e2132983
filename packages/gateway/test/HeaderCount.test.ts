/**
 * SECURITY.md "Request shape" reads the raw headers so that a duplicate Host (or
 * Authorization) and any foreign Origin are refused. Node's http server keeps at most
 * `server.maxHeadersCount` (default 2000) headers in `req.rawHeaders` and silently drops the
 * rest, while the 16 KiB header block limit admits well over 2000 short headers: a header
 * placed after 2100 short fillers is never seen by the shape checks.
 */
import { describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import * as Effect from "effect/Effect"
import { makeExecutor } from "./fixtures/executors.js"
import { logLayer, portOf, remember } from "./fixtures/harness.js"
import { callBody, rawRequest } from "./fixtures/raw.js"

type Headers = ReadonlyArray<readonly [string, string]>

const fixed = (code: number, message: string) => ({ jsonrpc: "2.0", error: { code, message }, id: null })

/** 2100 headers of 6 bytes each (`a: b\r\n`): 12.6 KB, under the default 16 KiB header block limit. */
const fillers: Headers = Array.from({ length: 2100 }, () => ["a", "b"] as const)

describe("request shape past Node's default header count limit", () => {
  it.live(
    "a second Host, a foreign Origin or a second Authorization after 2100 short headers is still refused",
    () =>
      Effect.gen(function*() {
        const gateway = yield* Gateway.make()
        const { executor, recorder } = yield* makeExecutor("a")
        const registration = yield* gateway.register(executor)
        const port = portOf(registration.url)
        const token = remember(registration.token)
        const base: Headers = [
          ["Host", `127.0.0.1:${port}`],
          ["Content-Type", "application/json"],
          ["Accept", "application/json, text/event-stream"],
          ["Authorization", `Bearer ${token}`]
        ]
        const send = (headers: Headers) => rawRequest(port, { headers, body: callBody("echo") })

        // Baselines: the fillers alone are a valid request (within the header block limit) ...
        expect((yield* send([...base, ...fillers])).status).toBe(200)
        // ... and each extra header alone, without the fillers, is refused as documented.
        expect((yield* send([...base, ["Host", "evil.example"]])).status).toBe(400)
        expect((yield* send([...base, ["Origin", "http://evil.example"]])).status).toBe(403)
        expect((yield* send([...base, ["Authorization", "Bearer other"]])).status).toBe(401)
        const before = recorder.calls.length

        const cases: ReadonlyArray<readonly [string, readonly [string, string], number, unknown]> = [
          ["second Host", ["Host", "evil.example"], 400, fixed(-32600, "Bad Request")],
          ["foreign Origin", ["Origin", "http://evil.example"], 403, fixed(-32000, "Forbidden")],
          ["second Authorization", ["Authorization", "Bearer other"], 401, fixed(-32001, "Unauthorized")]
        ]
        const seen: Array<string> = []
        for (const [label, extra, status, body] of cases) {
          const response = yield* send([...base, ...fillers, extra])
          seen.push(`${label}: ${response.status}`)
          if (response.status === status) expect(JSON.parse(response.body)).toEqual(body)
        }
        expect(seen).toEqual(["second Host: 400", "foreign Origin: 403", "second Authorization: 401"])
        // None of them reached a handler.
        expect(recorder.calls.length).toBe(before)
      }).pipe(Effect.scoped, Effect.provide(logLayer)),
    30_000
  )
})
