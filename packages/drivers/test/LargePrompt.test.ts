/**
 * A 200 KiB prompt reaches the model whole on every driver: no driver puts the prompt in argv
 * (Linux refuses an argument over 128 KiB with E2BIG, and argv is readable by every local user
 * through /proc). The real Claude Code, Codex, Gemini and CodeBuddy CLIs against the scripted
 * servers, and the Cursor fake. One turn per driver.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import type * as Event from "@tether/core/Event"
import { Claude, CodeBuddy, Codex, Cursor, Gemini } from "@tether/drivers"
import {
  AnthropicServer,
  ChatCompletionsServer,
  CursorAgent,
  GeminiServer,
  Harness,
  ResponsesServer
} from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"

const Noop = Tool.make("noop", {
  description: "Does nothing.",
  input: {},
  output: Schema.Struct({ ok: Schema.Boolean }),
  revision: "noop/v1"
})
const Tools = Toolkit.make(Noop)
const ToolsLive = Tools.toLayer({ noop: () => Effect.succeed({ ok: true }) })

/** 200 KiB of numbered lines between two markers (a single argv entry may hold 128 KiB). */
const prompt = (() => {
  const lines: Array<string> = ["BEGIN-OF-LARGE-PROMPT"]
  let size = lines[0]!.length
  for (let i = 0; size < 200 * 1024; i++) {
    const line = `line ${i}: the quick brown fox jumps over the lazy dog; ${"x".repeat(40)}`
    lines.push(line)
    size += line.length + 1
  }
  lines.push("END-OF-LARGE-PROMPT")
  return lines.join("\n")
})()

/** Runs one turn; returns its events and the argv of the process it started. */
const turn = (driver: Driver.Driver, input: string) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    return yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver,
        definition: { instructions: "", skills: [], tools: Tools },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      const events: Array<Event.Event> = []
      yield* agent.stream(input).pipe(Stream.runForEach((event) => Effect.sync(() => events.push(event))))
      return events
    }).pipe(Effect.scoped)
  }).pipe(Effect.scoped, Effect.provide([ToolsLive, Harness.layer]))

const succeeded = (events: ReadonlyArray<Event.Event>) => {
  const finished = events.at(-1)
  expect(finished?._tag === "RunFinished" && finished.outcome).toBe("success")
  return finished?._tag === "RunFinished" ? finished.result : undefined
}

const whole = (text: string | undefined) => {
  expect(prompt.length).toBeGreaterThan(200 * 1024)
  expect(text).toBeDefined()
  expect(text!.includes(prompt)).toBe(true)
}

describe("A 200 KiB prompt on every driver", () => {
  it.live("Claude Code", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.reply("received") })
      const result = succeeded(
        yield* turn(
          Claude.driver({
            env: { ANTHROPIC_BASE_URL: server.url, ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake") }
          }),
          prompt
        )
      )
      expect(result?.text).toBe("received")
      whole(AnthropicServer.transcript((yield* server.messages)[0]!).at(-1)?.[1])
    }).pipe(Effect.scoped), 60_000)

  it.live("Codex", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make({ script: () => ResponsesServer.text("received") })
      const result = succeeded(
        yield* turn(
          Codex.driver({
            model: "fake-model",
            modelProvider: { id: "fake", baseUrl: server.baseUrl, apiKey: Redacted.make("sk-fake") },
            settings: Codex.offlineSettings
          }),
          prompt
        )
      )
      expect(result?.text).toBe("received")
      const requests = yield* server.requests
      whole(ResponsesServer.userTexts(requests[0]!).find((text) => text.includes("BEGIN-OF-LARGE-PROMPT")))
    }).pipe(Effect.scoped), 60_000)

  it.live("Gemini CLI", () =>
    Effect.gen(function*() {
      const server = yield* GeminiServer.make({ respond: () => GeminiServer.reply("received") })
      const result = succeeded(
        yield* turn(
          Gemini.driver({
            model: "gemini-2.5-flash",
            env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
          }),
          prompt
        )
      )
      expect(result?.text).toBe("received")
      whole(GeminiServer.transcript((yield* server.generations)[0]!).at(-1)?.[1])
    }).pipe(Effect.scoped), 60_000)

  it.live("CodeBuddy Code", () =>
    Effect.gen(function*() {
      const server = yield* ChatCompletionsServer.make({ script: () => ChatCompletionsServer.text("received") })
      const result = succeeded(
        yield* turn(
          CodeBuddy.driver({ endpoint: { baseUrl: server.baseUrl, apiKey: Redacted.make("sk-fake-codebuddy") } }),
          prompt
        )
      )
      expect(result?.text).toBe("received")
      // The CLI wraps the prompt: `<user_query>…</user_query>`.
      const requests = yield* server.requests
      whole(ChatCompletionsServer.texts(requests[0]!, "user").find((text) => text.includes("BEGIN-OF-LARGE-PROMPT")))
    }).pipe(Effect.scoped), 60_000)

  it.live("Cursor (fake CLI)", () =>
    Effect.gen(function*() {
      const events = yield* turn(Cursor.driver(CursorAgent.config()), `${prompt}\n${CursorAgent.say("received")}`)
      expect(succeeded(events)?.text).toBe("received")
      const user = events.find((e): e is Event.Message => e._tag === "Message" && e.role === "user")
      whole(user?.text)
    }), 60_000)
})
