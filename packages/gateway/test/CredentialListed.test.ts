/**
 * `Credential.listed` completes only for a `tools/list` the gateway answered with the tools: a
 * refused one (406, 400) or one sent as a notification leaves a live driver waiting.
 */
import { describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { makeExecutor } from "./fixtures/executors.js"
import { logLayer, portOf, remember } from "./fixtures/harness.js"
import { rawRequest } from "./fixtures/raw.js"

const live = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) => effect.pipe(Effect.scoped, Effect.provide(logLayer))

describe("Credential.listed", () => {
  it.live("a tools/list the gateway refused or never answered does not complete listed", () =>
    live(Effect.gen(function*() {
      const gateway = yield* Gateway.make()
      const { executor } = yield* makeExecutor("a")
      const registration = yield* gateway.register(executor)
      const port = portOf(registration.url)
      const cases: ReadonlyArray<
        { readonly accept: string | undefined; readonly body: unknown; readonly status: number }
      > = [
        // A client whose Accept lacks text/event-stream: 406, no tools reach it.
        { accept: "application/json", body: { jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }, status: 406 },
        // Not a JSON-RPC message (wrong version): 400.
        { accept: undefined, body: { jsonrpc: "1.0", id: 1, method: "tools/list" }, status: 400 },
        // A notification: 202, no tools in the answer.
        { accept: undefined, body: { jsonrpc: "2.0", method: "tools/list" }, status: 202 }
      ]
      for (const { accept, body, status } of cases) {
        const credential = yield* registration.credential()
        const token = remember(credential.token)
        const response = yield* rawRequest(port, {
          headers: [
            ["Host", `127.0.0.1:${port}`],
            ["Content-Type", "application/json"],
            ["Accept", accept ?? "application/json, text/event-stream"],
            ["Authorization", `Bearer ${token}`]
          ],
          body: JSON.stringify(body)
        })
        expect(response.status).toBe(status)
        const listed = yield* credential.listed.pipe(Effect.timeout("200 millis"), Effect.option)
        expect({ status, listed: Option.isSome(listed) }).toEqual({ status, listed: false })
      }
    })))
})
