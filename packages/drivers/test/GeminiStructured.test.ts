/**
 * `runAs` through the real Gemini CLI (0.61.0), offline against the scripted Gemini server. Gemini
 * has no native structured output: the turn carries an instruction with the JSON Schema and the
 * JSON value is extracted from the final answer, then validated by Tether. A thread's attempts
 * and repair turns run on its warm `gemini --acp` process.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Event from "@tether/core/Event"
import { Gemini } from "@tether/drivers"
import { GeminiServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"

const Triage = Schema.Struct({
  severity: Schema.Literal("low", "high"),
  labels: Schema.Array(Schema.String),
  owner: Schema.optional(Schema.String),
  links: Schema.Array(Schema.Struct({ url: Schema.String, note: Schema.optional(Schema.String) }))
})
const valid = { severity: "high", labels: ["crash", "p1"], links: [{ url: "https://example.invalid/9" }] }

describe("Gemini runAs (real CLI, instruction and extraction)", () => {
  it.live(
    "a live thread's answer violating the schema gets a repair turn on the same process; exhausted repairs and a one-shot failure keep the raw text",
    () =>
      Effect.gen(function*() {
        const server = yield* GeminiServer.make({
          script: [
            GeminiServer.reply(`Here is the triage:\n{"severity":"critical","labels":["crash"],"links":[]}`),
            GeminiServer.reply("```json\n" + JSON.stringify(valid) + "\n```"),
            GeminiServer.reply(`{"severity":"low","labels":["p2"],"links":[{"href":"x"}]}`),
            GeminiServer.reply(`{"severity":"low","labels":["p2"],"links":[{"url":7}]}`),
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
        const events: Array<Event.Event> = []
        const keep = <A extends { readonly _tag: string }>(item: A) =>
          Effect.sync(() => {
            if (item._tag !== "Decoded") events.push(item as unknown as Event.Event)
          })
        const attempts = Array.from(
          yield* Stream.runCollect(Stream.tap(thread.streamAs(Triage, "Triage ISSUE-9."), keep))
        )
        const decoded = attempts.at(-1)!
        if (decoded._tag !== "Decoded") throw new Error("no value")
        expect(decoded.value).toEqual(valid)
        expect(decoded.attempts).toBe(2)
        const exhausted = yield* Effect.flip(Stream.runForEach(thread.streamAs(Triage, "Triage ISSUE-11."), keep))
        expect(exhausted).toMatchObject({
          _tag: "StructuredOutputError",
          reason: "Invalid",
          text: `{"severity":"low","labels":["p2"],"links":[{"url":7}]}`,
          attempts: 2
        })
        if (exhausted._tag !== "StructuredOutputError") throw exhausted
        expect(exhausted.issues.map((issue) => issue.path)).toEqual([["links", 0, "url"]])
        // Every attempt and repair turn ran on the one warm process (no restart, no resume).
        const started = events.filter((e): e is Event.ProcessStarted => e._tag === "ProcessStarted")
        expect(started).toHaveLength(4)
        expect(new Set(started.map((e) => e.pid)).size).toBe(1)
        expect(started.slice(1).every((e) => e.reused === true)).toBe(true)
        const requests = yield* server.generations
        expect(requests).toHaveLength(4)
        const first = GeminiServer.transcript(requests[0]!).at(-1)![1]
        expect(first).toContain("Triage ISSUE-9.\n\nGive your final answer as one JSON value")
        expect(first).toContain("\"severity\":{\"type\":\"string\",\"enum\":[\"low\",\"high\"]}")
        // The repair turn resumed the session: the first exchange, then the issues.
        const repair = GeminiServer.transcript(requests[1]!)
        expect(repair.map(([, text]) => text).join("\n")).toContain("\"critical\"")
        expect(repair.at(-1)![1]).toContain("- severity: Expected \"low\", actual \"critical\"")
        const record = yield* thread.snapshot
        expect(record._tag === "Some" && record.value.turns).toBe(4)

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
