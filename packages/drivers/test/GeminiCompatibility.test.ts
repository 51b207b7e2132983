/**
 * Gemini's part of threads' compatibility fingerprint (DESIGN §10): the driver's session
 * configuration (model, authentication type, approval mode; never `env`), so a thread
 * checkpointed under one model is not resumed on another. The last test runs the real Gemini
 * CLI (pinned 0.61.0) offline against the scripted GeminiServer.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, ThreadStore } from "@tether/core"
import { Gemini } from "@tether/drivers"
import { GeminiServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { fingerprints } from "./Fingerprints.js"

const env = (url: string, key: string) => ({ GOOGLE_GEMINI_BASE_URL: url, GEMINI_API_KEY: Redacted.make(key) })

/** The fingerprints of agents on one sandbox, one per driver configuration. */
const fingerprintsOf = (configs: ReadonlyArray<Gemini.Config>) => fingerprints(configs.map((c) => Gemini.driver(c)))

describe("Gemini compatibility fingerprint", () => {
  it.live("differs by the driver's model, auth type and approval mode; not by env, binary or bounds", () =>
    Effect.gen(function*() {
      const [a, b, sameA, authType, approval, bare, bareAgain] = yield* fingerprintsOf([
        { model: "model-a", env: env("http://127.0.0.1:1", "key-1") },
        { model: "model-b", env: env("http://127.0.0.1:1", "key-1") },
        // Another endpoint, another key, another binary, other bounds: the same conversation.
        {
          model: "model-a",
          env: env("http://127.0.0.1:2", "key-2"),
          binary: "/opt/gemini",
          maxAttempts: 1,
          trustWorkspace: true,
          live: { startTimeout: "1 minute" }
        },
        { model: "model-a", authType: "vertex-ai", env: env("http://127.0.0.1:1", "key-1") },
        { model: "model-a", approvalMode: "plan", env: env("http://127.0.0.1:1", "key-1") },
        {},
        { env: env("http://127.0.0.1:3", "key-3") }
      ])
      expect(a).not.toBe(b)
      expect(sameA).toBe(a)
      expect(authType).not.toBe(a)
      expect(approval).not.toBe(a)
      expect(bare).toBe(bareAgain)
      expect(new Set([a, b, authType, approval, bare]).size).toBe(5)
      // Never a secret.
      expect(JSON.stringify(Gemini.driver({ model: "m", env: env("http://h", "key-1") }).sessionConfig)).toBe(
        JSON.stringify({ model: "m" })
      )
    }))

  it.live(
    "a thread checkpointed on one model is not resumed by an agent on another (real CLI)",
    () =>
      Effect.gen(function*() {
        const server = yield* GeminiServer.make({ respond: () => GeminiServer.reply("answer") })
        const sandbox = yield* Harness.sandbox
        const agentOn = (model: string) =>
          Agent.make({
            driver: Gemini.driver({ model, env: env(server.url, "fake-gemini-key") }),
            definition: { instructions: "", tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            live: { threads: false }
          })
        const refused = yield* Effect.gen(function*() {
          const first = yield* agentOn("model-a")
          yield* (yield* first.thread("k")).run("hello")
          yield* first.close()
          const other = yield* agentOn("model-b")
          return yield* Effect.flip(
            Effect.flatMap(other.thread("k", { resumeOnly: true }), (thread) => thread.run("again"))
          )
        }).pipe(Effect.scoped, Effect.provide(Layer.merge(Harness.layer, ThreadStore.layerMemory)))
        expect(refused).toMatchObject({
          _tag: "ThreadIncompatible",
          reason: "Fingerprint",
          components: ["driverConfig"]
        })
        expect((yield* server.generations).map((g) => g.model)).toEqual(["model-a"])
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
      }).pipe(Effect.scoped),
    120_000
  )
})
