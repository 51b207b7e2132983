/**
 * `Gateway.layerConfig`: the limits come from `Config` (here a map standing for the environment).
 */
import { describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { makeExecutor } from "./fixtures/executors.js"
import { portOf, remember } from "./fixtures/harness.js"
import { callBody, rawRequest } from "./fixtures/raw.js"

const limits = {
  maxBodyBytes: Config.integer("TETHER_GATEWAY_MAX_BODY_BYTES"),
  handlerDeadline: Config.duration("TETHER_GATEWAY_HANDLER_DEADLINE").pipe(Config.withDefault("2 minutes"))
}

const withEnvironment = (env: ReadonlyArray<readonly [string, string]>) =>
  Layer.setConfigProvider(ConfigProvider.fromMap(new Map(env)))

const headersFor = (url: string, token: string) =>
  [
    ["Host", `127.0.0.1:${portOf(url)}`],
    ["Content-Type", "application/json"],
    ["Accept", "application/json, text/event-stream"],
    ["Authorization", `Bearer ${token}`]
  ] as const

describe("Gateway.layerConfig", () => {
  it.live("reads its limits from Config: a body over the configured limit gets 413", () =>
    Effect.gen(function*() {
      const { executor } = yield* makeExecutor("a")
      const body = callBody("echo", { text: "x".repeat(300) })
      expect(body.length).toBeGreaterThan(256)
      const post = (gateway: Gateway.Gateway["Type"]) =>
        Effect.gen(function*() {
          const registration = yield* gateway.register(executor)
          const headers = headersFor(registration.url, remember(registration.token))
          return (yield* rawRequest(portOf(registration.url), { headers, body })).status
        }).pipe(Effect.scoped)
      expect(yield* post(yield* Gateway.Gateway)).toBe(413)
      // The same request under the default limit is served.
      expect(yield* post(yield* Gateway.make())).toBe(200)
    }).pipe(
      Effect.scoped,
      Effect.provide(
        Gateway.layerConfig(limits).pipe(
          Layer.provide(withEnvironment([["TETHER_GATEWAY_MAX_BODY_BYTES", "256"]]))
        )
      )
    ))

  it.live("a missing or invalid value fails the layer with the ConfigError", () =>
    Effect.gen(function*() {
      const missing = yield* Effect.exit(
        Layer.build(Gateway.layerConfig(limits)).pipe(
          Effect.provide(withEnvironment([])),
          Effect.scoped
        )
      )
      expect(Exit.isFailure(missing) && String(missing.cause)).toContain("TETHER_GATEWAY_MAX_BODY_BYTES")
      const invalid = yield* Effect.exit(
        Layer.build(Gateway.layerConfig(limits)).pipe(
          Effect.provide(withEnvironment([["TETHER_GATEWAY_MAX_BODY_BYTES", "lots"]])),
          Effect.scoped
        )
      )
      expect(Exit.isFailure(invalid)).toBe(true)
    }))
})
