/**
 * Codex's and Cursor's part of threads' compatibility fingerprint (DESIGN §10): the driver's
 * session configuration (Codex: model, model provider id and name, settings; Cursor: model,
 * `force`; never `env`, keys, endpoints or binaries), so a thread checkpointed under one model or
 * provider is not resumed on another. No process is started.
 */
import { describe, expect, it } from "@effect/vitest"
import { Codex, Cursor } from "@tether/drivers"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { fingerprints } from "./Fingerprints.js"

const provider = (id: string, baseUrl: string, key: string): Codex.ModelProvider => ({
  id,
  baseUrl,
  apiKey: Redacted.make(key)
})

describe("the compatibility fingerprint covers the driver's session configuration", () => {
  it.live("Codex: model, provider and settings; not the endpoint, key, env, binary or bounds", () =>
    Effect.gen(function*() {
      const [a, b, sameA, otherProvider, otherSettings, bare, bareAgain] = yield* fingerprints([
        Codex.driver({ model: "model-a", modelProvider: provider("p", "http://127.0.0.1:1/v1", "k1") }),
        Codex.driver({ model: "model-b", modelProvider: provider("p", "http://127.0.0.1:1/v1", "k1") }),
        // Another port, key, binary, environment and reconnect bound: the same conversation.
        Codex.driver({
          model: "model-a",
          modelProvider: { ...provider("p", "http://127.0.0.1:2/v1", "k2"), requestMaxRetries: 0 },
          binary: "/opt/codex",
          env: { EXTRA: "x" },
          maxReconnects: 0
        }),
        Codex.driver({ model: "model-a", modelProvider: provider("q", "http://127.0.0.1:1/v1", "k1") }),
        Codex.driver({
          model: "model-a",
          modelProvider: provider("p", "http://127.0.0.1:1/v1", "k1"),
          settings: { model_reasoning_effort: "high" }
        }),
        Codex.driver({}),
        Codex.driver({ binary: "/opt/codex", env: { EXTRA: "y" } })
      ])
      expect(a).not.toBe(b)
      expect(sameA).toBe(a)
      expect(bare).toBe(bareAgain)
      expect(new Set([a, b, otherProvider, otherSettings, bare]).size).toBe(5)
      // Never a secret or an endpoint.
      const config = JSON.stringify(
        Codex.driver({ model: "m", modelProvider: provider("p", "http://127.0.0.1:9/v1", "sk-secret") }).sessionConfig
      )
      expect(config).toBe(JSON.stringify({ model: "m", modelProvider: { id: "p" } }))
    }))

  it.live("Cursor: model and force; not the env, binary or data directory", () =>
    Effect.gen(function*() {
      const [a, b, sameA, forced, bare, bareAgain] = yield* fingerprints([
        Cursor.driver({ model: "model-a" }),
        Cursor.driver({ model: "model-b" }),
        Cursor.driver({ model: "model-a", binary: "/opt/agent", env: { CURSOR_API_KEY: Redacted.make("k") } }),
        Cursor.driver({ model: "model-a", force: true }),
        Cursor.driver({}),
        Cursor.driver({ dataDir: "/var/lib/chats" })
      ])
      expect(a).not.toBe(b)
      expect(sameA).toBe(a)
      expect(forced).not.toBe(a)
      expect(bare).toBe(bareAgain)
      expect(new Set([a, b, forced, bare]).size).toBe(4)
    }))
})
