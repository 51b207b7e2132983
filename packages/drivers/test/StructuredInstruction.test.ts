/**
 * `runAs` on the other instruction drivers: CodeBuddy Code (the real CLI 2.117.0, offline against
 * the scripted Chat Completions server) and Cursor (the fake agent speaking its stream-json).
 * The JSON Schema travels in an instruction; the JSON value is extracted and validated by Tether.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type { Driver } from "@tether/core"
import { CodeBuddy, Cursor } from "@tether/drivers"
import { ChatCompletionsServer, CursorAgent, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"

const Triage = Schema.Struct({
  severity: Schema.Literal("low", "high"),
  labels: Schema.Array(Schema.String),
  owner: Schema.optional(Schema.String),
  links: Schema.Array(Schema.Struct({ url: Schema.String, note: Schema.optional(Schema.String) }))
})
const valid = { severity: "low", labels: ["docs"], links: [{ url: "https://example.invalid/5", note: "typo" }] }

const makeAgent = (driver: Driver.Driver) =>
  Effect.flatMap(Harness.sandbox, (sandbox) =>
    Agent.make({
      driver,
      definition: { instructions: "", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection
    }))

describe("runAs with an instruction (CodeBuddy, Cursor)", () => {
  it.live(
    "CodeBuddy: a value violating the schema gets a repair turn on the resumed session",
    () =>
      Effect.gen(function*() {
        const server = yield* ChatCompletionsServer.make({
          script: (request) =>
            request.index === 0
              ? ChatCompletionsServer.text(`Result: {"severity":"low","labels":"docs","links":[]}`)
              : ChatCompletionsServer.text("```json\n" + JSON.stringify(valid) + "\n```")
        })
        const agent = yield* makeAgent(
          CodeBuddy.driver({ endpoint: { baseUrl: server.baseUrl, apiKey: Redacted.make("sk-fake-codebuddy") } })
        )
        const decoded = yield* agent.runAs(Triage, "Triage ISSUE-5.")
        expect(decoded.value).toEqual(valid)
        expect(decoded.attempts).toBe(2)
        const requests = yield* server.requests
        expect(requests).toHaveLength(2)
        expect(ChatCompletionsServer.texts(requests[0]!, "user").join("\n")).toContain(
          "Triage ISSUE-5.\n\nGive your final answer as one JSON value"
        )
        // The resumed conversation: the first answer, then the repair message with the issue.
        expect(ChatCompletionsServer.texts(requests[1]!, "assistant").join("\n")).toContain("\"labels\":\"docs\"")
        expect(ChatCompletionsServer.texts(requests[1]!, "user").at(-1)).toContain("- labels: Expected ReadonlyArray")
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    120_000
  )

  it.live(
    "Cursor: the final text's JSON is decoded; an answer without one fails with its text",
    () =>
      Effect.gen(function*() {
        const agent = yield* makeAgent(Cursor.driver(CursorAgent.config()))
        const decoded = yield* agent.runAs(Triage, CursorAgent.say(`Here: ${JSON.stringify(valid)}`))
        expect(decoded.value).toEqual(valid)
        expect(decoded.result.text).toBe(`Here: ${JSON.stringify(valid)}`)
        const error = yield* Effect.flip(agent.runAs(Triage, CursorAgent.say("No idea."), { repairs: 0 }))
        expect(error).toMatchObject({ _tag: "StructuredOutputError", reason: "Missing", text: "No idea." })
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )
})
