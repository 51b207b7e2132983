// The gateway's closes run inside finalizers, their waits made interruptible so that closeTimeout
// bounds them. When the fiber that closes the scope was itself interrupted (a host's main fiber on
// SIGTERM: NodeRuntime.runMain interrupts it, and the layer's scope closes in that fiber), the
// close still waits for a handler's cleanup and still stops the listener.
import { describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import type * as Catalog from "@tether/tool/Catalog"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Scope from "effect/Scope"
import { makeExecutor } from "./fixtures/executors.js"
import { logLayer, portOf, remember } from "./fixtures/harness.js"
import { callBody, connectionRefused, rawRequest } from "./fixtures/raw.js"

const authHeaders = (url: string, token: string) =>
  [
    ["Host", `127.0.0.1:${portOf(url)}`],
    ["Content-Type", "application/json"],
    ["Accept", "application/json, text/event-stream"],
    ["Authorization", `Bearer ${token}`]
  ] as const

describe("gateway closes run by an interrupted fiber", () => {
  it.live("the layer's close stops the listener of a registration that outlives it", () =>
    Effect.gen(function*() {
      const { executor } = yield* makeExecutor("a")
      const registrationScope = yield* Scope.make()
      const ready = yield* Deferred.make<string>()
      // The host's program: the gateway's layer scoped to a fiber that is then interrupted.
      const host = yield* Effect.fork(Effect.scoped(Effect.gen(function*() {
        const gateway = yield* Gateway.make({ closeTimeout: "2 seconds" })
        const registration = yield* gateway.register(executor).pipe(Scope.extend(registrationScope))
        yield* Deferred.succeed(ready, registration.url)
        return yield* Effect.never
      })))
      const port = portOf(yield* Deferred.await(ready))
      expect(yield* connectionRefused(port)).toBe(false)
      yield* Fiber.interrupt(host)
      const refused = yield* connectionRefused(port)
      yield* Scope.close(registrationScope, Exit.void)
      expect(refused).toBe(true)
    }).pipe(Effect.provide(logLayer)), 15_000)

  it.live(
    "a registration's close waits for a handler's cleanup (well within closeTimeout)",
    () =>
      Effect.gen(function*() {
        const started = yield* Deferred.make<void>()
        let cleaned = false
        const { executor } = yield* makeExecutor("a")
        const slowCleanup: Catalog.Executor = {
          ...executor,
          execute: () =>
            Deferred.succeed(started, undefined).pipe(
              Effect.zipRight(Effect.never),
              Effect.onInterrupt(() =>
                Effect.sleep("400 millis").pipe(Effect.zipRight(Effect.sync(() => (cleaned = true))))
              ),
              Effect.as<Catalog.Outcome>({ _tag: "Success", text: "never" })
            )
        }
        const layerScope = yield* Scope.make()
        const gateway = yield* Gateway.make({ closeTimeout: "5 seconds" }).pipe(Scope.extend(layerScope))
        const ready = yield* Deferred.make<{ url: string; token: string }>()
        const owner = yield* Effect.fork(Effect.scoped(Effect.gen(function*() {
          const registration = yield* gateway.register(slowCleanup)
          yield* Deferred.succeed(ready, { url: registration.url, token: remember(registration.token) })
          return yield* Effect.never
        })))
        const { token, url } = yield* Deferred.await(ready)
        const pending = yield* Effect.fork(
          rawRequest(portOf(url), { headers: authHeaders(url, token), body: callBody("echo") })
        )
        yield* Deferred.await(started)
        yield* Fiber.interrupt(owner)
        const cleanedAtClose = cleaned
        yield* Fiber.await(pending).pipe(Effect.timeoutOption("2 seconds"))
        yield* Effect.sleep("600 millis")
        yield* Scope.close(layerScope, Exit.void)
        expect({ cleanedAtClose, cleanedLater: cleaned }).toEqual({ cleanedAtClose: true, cleanedLater: true })
      }).pipe(Effect.provide(logLayer)),
    15_000
  )
})
