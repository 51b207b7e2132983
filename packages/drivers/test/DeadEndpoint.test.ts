/**
 * A dead model endpoint fails the run on the real CLIs within the drivers' retry bounds (Claude
 * `maxRetries`, Gemini `maxAttempts`; Codex `maxReconnects` is proven in CodexAgent.test.ts;
 * CodeBuddy Code has no bound of its own and would wait forever: its parser ends the turn)
 * instead of the CLIs' own minutes (Claude ≈ 2.5 min, Gemini ≈ 220 s). Claude runs with its
 * default bound (≈ 6 s); Gemini's default (3 attempts, ≈ 23 s) and Codex's (2 reconnections,
 * ≈ 26 s) were measured the same way but would cost CI too much: here Gemini runs with
 * `maxAttempts: 1` to prove the CLI honours the setting the driver writes, and the drivers'
 * unit tests prove the defaults are written. The bound is the test's timeout; nothing here
 * asserts a duration.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import { Claude, CodeBuddy, Gemini } from "@tether/drivers"
import { Harness } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { NoopTools, NoopToolsLive } from "./fixtures/noopTools.js"

/** Nothing listens on port 1 of the loopback address: every connection is refused. */
const dead = "http://127.0.0.1:1"

const failureOf = (driver: Driver.Driver) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const started = performance.now()
    const error = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver,
        definition: { instructions: "", skills: [], tools: NoopTools },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      return yield* Effect.flip(agent.run("Hello?"))
    }).pipe(Effect.scoped)
    console.info(`[dead endpoint] ${driver.name}: ${error._tag} after ${Math.round(performance.now() - started)} ms`)
    return error
  }).pipe(Effect.scoped, Effect.provide([NoopToolsLive, Harness.layer]))

// Mostly waiting out retries (each test its own CLI, agent and sandbox): the three run at once.
describe("A dead model endpoint fails within the drivers' retry bounds", { concurrent: true }, () => {
  it.live("Claude Code (default maxRetries)", () =>
    Effect.gen(function*() {
      const error = yield* failureOf(
        Claude.driver({ env: { ANTHROPIC_BASE_URL: dead, ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake") } })
      )
      expect(error._tag === "RunError" && error.reason).toBe("ProviderFailed")
    }), 60_000)

  it.live("Gemini CLI (maxAttempts 1: the CLI honours the setting)", () =>
    Effect.gen(function*() {
      const error = yield* failureOf(
        Gemini.driver({
          model: "gemini-2.5-flash",
          maxAttempts: 1,
          env: { GOOGLE_GEMINI_BASE_URL: dead, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
        })
      )
      expect(error._tag === "RunError" && error.reason).toBe("ProviderFailed")
      expect(error.message).toContain("fetch failed")
    }), 60_000)

  it.live(
    "CodeBuddy Code (no retry setting: the parser ends the turn the CLI would leave hanging)",
    () =>
      Effect.gen(function*() {
        const error = yield* failureOf(
          CodeBuddy.driver({ endpoint: { baseUrl: `${dead}/v1`, apiKey: Redacted.make("sk-fake-codebuddy") } })
        )
        expect(error._tag === "RunError" && error.reason).toBe("ProviderFailed")
        expect(error.message).toContain("ECONNREFUSED")
      }),
    60_000
  )
})
