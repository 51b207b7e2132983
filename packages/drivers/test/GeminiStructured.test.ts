/**
 * `runAs` through the real Gemini CLI (0.61.0), offline against the scripted Gemini server. Gemini
 * has no native structured output: the turn carries an instruction with the JSON Schema and the
 * JSON value is extracted from the final answer, then validated by Tether.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Gemini } from "@tether/drivers"
import { GeminiServer, Harness } from "@tether/testing"
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
const valid = { severity: "high", labels: ["crash", "p1"], links: [{ url: "https://example.invalid/9" }] }

describe("Gemini runAs (real CLI, instruction and extraction)", () => {
  it.live(
    "a thread's answer violating the schema gets a repair turn on the resumed session; a last failure keeps the raw text",
    () =>
      Effect.gen(function*() {
        const server = yield* GeminiServer.make({
          script: [
            GeminiServer.reply(`Here is the triage:\n{"severity":"critical","labels":["crash"],"links":[]}`),
            GeminiServer.reply("```json\n" + JSON.stringify(valid) + "\n```"),
            GeminiServer.reply("I would rather not say.")
          ]
        })
        const sandbox = yield* Harness.sandbox
        const agent = yield* Agent.make({
          driver: Gemini.driver({
            model: "gemini-2.5-flash",
            env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
          }),
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        const thread = yield* agent.thread("triage-9")
        const decoded = yield* thread.runAs(Triage, "Triage ISSUE-9.")
        expect(decoded.value).toEqual(valid)
        expect(decoded.attempts).toBe(2)
        const requests = yield* server.generations
        expect(requests).toHaveLength(2)
        const first = GeminiServer.transcript(requests[0]!).at(-1)![1]
        expect(first).toContain("Triage ISSUE-9.\n\nGive your final answer as one JSON value")
        expect(first).toContain("\"severity\":{\"type\":\"string\",\"enum\":[\"low\",\"high\"]}")
        // The repair turn resumed the session: the first exchange, then the issues.
        const repair = GeminiServer.transcript(requests[1]!)
        expect(repair.map(([, text]) => text).join("\n")).toContain("\"critical\"")
        expect(repair.at(-1)![1]).toContain("- severity: Expected \"low\", actual \"critical\"")
        const record = yield* thread.snapshot
        expect(record._tag === "Some" && record.value.turns).toBe(2)

        const error = yield* Effect.flip(agent.runAs(Triage, "Triage ISSUE-10.", { repairs: 0 }))
        expect(error).toMatchObject({
          _tag: "StructuredOutputError",
          reason: "Missing",
          text: "I would rather not say.",
          attempts: 1
        })
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    120_000
  )
})
