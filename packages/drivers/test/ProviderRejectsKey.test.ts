/**
 * What a user sees when the model endpoint rejects the key (401), through the public Agent API,
 * one-shot runs and threads (live processes), on each driver's real CLI offline: a RunError whose
 * detail quotes the provider (the endpoint's words; Codex's CLI puts its own in their place), no
 * assistant message or Result.text carrying the error, a bounded time, no checkpoint, nothing left.
 * An ACP agent's error answer to `session/prompt` fails the turn as the provider's failure too
 * (`ProviderFailed`, as a one-shot CLI's failed result does), quoting what the agent said (its
 * `data.message` too, where codex-acp puts the cause); it was a `ProtocolError`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import { Claude, Codex, Gemini } from "@tether/drivers"
import { AnthropicServer, GeminiServer, Harness, ResponsesServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as H from "./AcpHarness.js"
import { NoopTools, NoopToolsLive } from "./fixtures/noopTools.js"

const words = "KEY-REJECTED-MARKER-7 invalid api key"

const failureOf = (driver: Driver.Driver, mode: "run" | "thread") =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const started = performance.now()
    const out = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver,
        definition: { instructions: "", skills: [], tools: NoopTools },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      if (mode === "run") {
        const error = yield* Effect.flip(agent.run("Hello?"))
        return { error, snapshot: Option.none<unknown>(), marker: agent.marker }
      }
      const thread = yield* agent.thread("rejected-key")
      const error = yield* Effect.flip(thread.run("Hello?"))
      const snapshot = yield* thread.snapshot
      return { error, snapshot: snapshot as Option.Option<unknown>, marker: agent.marker }
    }).pipe(Effect.scoped)
    const elapsed = Math.round(performance.now() - started)
    const leftProcesses = yield* Harness.markedProcesses(out.marker)
    const leftClones = yield* Harness.entries(sandbox.root)
    return { ...out, elapsed, leftProcesses, leftClones }
  }).pipe(Effect.scoped, Effect.provide([NoopToolsLive, Harness.layer]))

const codexWords = "Your access token could not be refreshed"

const check = (
  out: Effect.Effect.Success<ReturnType<typeof failureOf>>,
  expected: { readonly reason: string; readonly quotes: string } = { reason: "ProviderFailed", quotes: words }
) => {
  const { error } = out
  expect(error._tag).toBe("RunError")
  if (error._tag !== "RunError") return
  const assistant = error.result.transcript.filter((e) => e._tag === "Message" && e.role === "assistant")
  expect({
    reason: error.reason,
    quotes: error.detail.includes(expected.quotes),
    assistantText: JSON.stringify(assistant).includes("KEY-REJECTED-MARKER-7"),
    resultText: error.result.text.includes("KEY-REJECTED-MARKER-7"),
    bounded: out.elapsed < 30_000,
    checkpoint: Option.isSome(out.snapshot),
    processes: out.leftProcesses,
    clones: out.leftClones
  }).toEqual({
    reason: expected.reason,
    quotes: true,
    assistantText: false,
    resultText: false,
    bounded: true,
    checkpoint: false,
    processes: [],
    clones: []
  })
}

const claude = (url: string, retries?: string) =>
  Claude.driver({
    env: {
      ANTHROPIC_BASE_URL: url,
      ANTHROPIC_API_KEY: Redacted.make("sk-ant-wrong"),
      ...(retries === undefined ? {} : { CLAUDE_CODE_MAX_RETRIES: retries })
    }
  })

const codex = (server: ResponsesServer.ResponsesServer) =>
  Codex.driver({
    model: "fake-model",
    modelProvider: {
      id: "fake",
      baseUrl: server.baseUrl,
      apiKey: Redacted.make("sk-wrong-codex"),
      requestMaxRetries: 0,
      streamMaxRetries: 0
    },
    settings: Codex.offlineSettings
  })

const gemini = (server: GeminiServer.GeminiServer) =>
  Gemini.driver({
    model: "gemini-2.5-flash",
    env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("wrong-gemini-key") }
  })

describe("a 401 from the model endpoint: a RunError quoting the provider, no assistant text, bounded, nothing left", () => {
  for (const mode of ["run", "thread"] as const) {
    it.live(`Claude ${mode}`, () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.fail(401, words) })
        check(yield* failureOf(claude(server.url), mode))
      }).pipe(Effect.scoped), 60_000)

    it.live(`Codex ${mode}`, () =>
      Effect.gen(function*() {
        const server = yield* ResponsesServer.make({ script: () => ResponsesServer.fail(401, words) })
        check(yield* failureOf(codex(server), mode), { reason: "ProviderFailed", quotes: codexWords })
      }).pipe(Effect.scoped), 60_000)

    it.live(`Gemini ${mode}`, () =>
      Effect.gen(function*() {
        const server = yield* GeminiServer.make({ respond: () => GeminiServer.fail(401, words) })
        // A thread runs `gemini --acp`: the agent's error answer to the prompt.
        check(yield* failureOf(gemini(server), mode), { reason: "ProviderFailed", quotes: words })
      }).pipe(Effect.scoped), 60_000)

    it.live(`claude-agent-acp ${mode}`, () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.fail(401, words) })
        check(yield* failureOf(H.claudeAgentDriver(server.url), mode), { reason: "ProviderFailed", quotes: words })
      }).pipe(Effect.scoped), 60_000)

    it.live(`codex-acp ${mode}`, () =>
      Effect.gen(function*() {
        const server = yield* ResponsesServer.make({ script: () => ResponsesServer.fail(401, words) })
        check(yield* failureOf(H.codexAgentDriver(server.baseUrl), mode), {
          reason: "ProviderFailed",
          quotes: codexWords
        })
      }).pipe(Effect.scoped), 60_000)
  }
})
