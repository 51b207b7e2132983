/**
 * Property-based fuzzing of the gateway over raw sockets (SECURITY.md "Limits", "Errors"):
 * generated scenarios of concurrent connections (pipelined requests, early refusals, smuggling
 * attempts, slow and vanishing clients; see `fuzz/requests.ts`), after each of which
 * - no response carries the token, a stack trace or `X-Powered-By`;
 * - no call outlives its exchange (every handler that started has ended);
 * - every slot of the concurrency bound is free, and a valid call still succeeds.
 * At the end the gateway closes without waiting for an exchange counted as in flight.
 *
 * `npm test` runs a short, fixed-seed setting; `npm run fuzz` runs the long one (see
 * `fuzz/settings.ts`: `TETHER_FUZZ=long`, `FUZZ_SEED`, `FUZZ_RUNS`).
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Scope from "effect/Scope"
import { allSlotsFree, call, gatedExecutor, headersFor } from "./fixtures/gate.js"
import { expectNoTokenInLogs, logLayer, portOf, remember } from "./fixtures/harness.js"
import { rawRequest } from "./fixtures/raw.js"
import * as Requests from "./fuzz/requests.js"
import * as Settings from "./fuzz/settings.js"

const bound = 3
const maxBodyBytes = 4096

/** Whether `condition` holds within 10 s (polled). */
const eventually = (condition: () => boolean) =>
  Effect.gen(function*() {
    for (let waited = 0; waited < 10_000 && !condition(); waited += 5) yield* Effect.sleep("5 millis")
    return condition()
  })

describe("gateway fuzzing over raw sockets", () => {
  it.live(
    "generated connections never wedge the gateway, leak a slot or a call, or echo a secret",
    () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const gateway = yield* Gateway.make({
          maxConcurrentCalls: bound,
          maxBodyBytes,
          maxHeaderBytes: 4096,
          headersTimeout: "300 millis",
          requestTimeout: "600 millis",
          closeTimeout: "1 minute"
        }).pipe(Scope.extend(scope))
        const { executor, gate } = gatedExecutor()
        const registration = yield* gateway.register(executor).pipe(Scope.extend(scope))
        const target: Requests.Target = { port: portOf(registration.url), token: remember(registration.token) }
        const numRuns = Settings.runs(60, 1_000)
        const totals = { scenarios: 0, connections: 0, requests: 0, bytesRead: 0, statuses: new Map<string, number>() }
        const scenario = FastCheck.array(
          Requests.connectionArb(maxBodyBytes, Settings.long ? 250 : 60),
          { minLength: 1, maxLength: 3 }
        )
        yield* Effect.promise(() =>
          FastCheck.assert(
            FastCheck.asyncProperty(scenario, async (connections) => {
              const seen = await Effect.runPromise(Effect.forEach(
                connections,
                (connection) => Requests.exchange(connection, target, Settings.long ? 700 : 150),
                { concurrency: "unbounded" }
              ))
              for (const { bytes } of seen) {
                const text = bytes.toString("latin1")
                for (const status of text.match(/HTTP\/1\.1 \d{3}/g) ?? []) {
                  totals.statuses.set(status.slice(9), (totals.statuses.get(status.slice(9)) ?? 0) + 1)
                }
                totals.bytesRead += bytes.length
                expect(text).not.toContain(target.token)
                expect(text).not.toMatch(/\n\s+at |x-powered-by/i)
              }
              totals.scenarios++
              totals.connections += connections.length
              totals.requests += connections.reduce((n, c) => n + c.requests.length, 0)
              await Effect.runPromise(Effect.gen(function*() {
                // A call ends with its exchange: the connections are gone, so are their calls.
                expect(yield* eventually(() => gate.running === 0)).toBe(true)
                expect(yield* allSlotsFree(target.port, target.token, bound, gate)).toEqual([200, 200, 200])
                const response = yield* rawRequest(target.port, {
                  headers: headersFor(target.port, target.token),
                  body: call("echo")
                })
                expect(JSON.parse(response.body).result.structuredContent).toEqual({ text: "echo" })
              }))
            }),
            { seed: Settings.seed, numRuns, endOnFailure: true }
          )
        )
        // In-flight accounting: with an exchange counted for ever, closing would wait for the close
        // timeout (1 minute) instead of dropping idle connections at once.
        const closed = yield* Scope.close(scope, Exit.void).pipe(Effect.timeout("10 seconds"), Effect.either)
        expect(closed._tag).toBe("Right")
        expect(totals.scenarios).toBe(numRuns)
        Settings.report(
          `fuzz gateway: seed ${Settings.seed}, ${totals.scenarios} scenarios, ${totals.connections} connections, ` +
            `${totals.requests} requests, ${(totals.bytesRead / 1024).toFixed(0)} KiB read; responses by status: ${
              [...totals.statuses].sort().map(([status, n]) => `${status}×${n}`).join(" ")
            }`
        )
      }).pipe(Effect.provide(logLayer)),
    Settings.long ? 3_600_000 : 60_000
  )
})

afterAll(() => expectNoTokenInLogs())
