/**
 * Gemini CLI 0.61 adds `wait_for_previous` to every tool it offers the model, and the
 * model sends it back in its calls. The gateway strips it before the host tool's handler runs
 * (`Driver.injectedArguments`), but the run's `ToolCall` events and transcript report the
 * CLI's `tool_use.parameters` as they are: the host tool's input carries a key its schema does
 * not have and its handler never saw. Real CLI against the scripted GeminiServer (one turn).
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Event from "@tether/core/Event"
import { Gemini } from "@tether/drivers"
import { GeminiServer, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ state: Schema.String }),
  revision: "lookup_issue/v1"
})
const IssueTools = Toolkit.make(LookupIssue)
const seen: Array<unknown> = []
const IssueToolsLive = IssueTools.toLayer({
  lookup_issue: (input) => Effect.sync(() => (seen.push(input), { state: `open:${input.key}` }))
})

describe("Gemini's injected wait_for_previous in ToolCall events", () => {
  it.live("a host tool's ToolCall input is the tool's own input (what its handler got)", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const server = yield* GeminiServer.make({
        script: [
          GeminiServer.callTool("lookup_issue", { key: "ISSUE-1", wait_for_previous: true }),
          GeminiServer.reply("Looked up.")
        ]
      })
      const events = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver: Gemini.driver({
            model: "gemini-2.5-flash",
            env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
          }),
          definition: { instructions: "", skills: [], tools: IssueTools },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        return Array.from(yield* Stream.runCollect(agent.stream("Look up ISSUE-1.")))
      }).pipe(Effect.scoped)
      const finished = events.at(-1)
      expect(finished?._tag === "RunFinished" && finished.outcome).toBe("success")
      // The handler got exactly its own input...
      expect(seen).toEqual([{ key: "ISSUE-1" }])
      // ...and the events and the transcript should say the same.
      const start = events.find((e): e is Event.ToolCall => e._tag === "ToolCall" && e.phase === "start")
      expect(start).toMatchObject({ name: "lookup_issue", source: "host" })
      const transcript = finished?._tag === "RunFinished" ? finished.result.transcript : []
      const entry = transcript.find((e) => e._tag === "ToolCall")
      expect({ event: start?.input, transcript: entry?._tag === "ToolCall" ? entry.input : undefined }).toEqual({
        event: { key: "ISSUE-1" },
        transcript: { key: "ISSUE-1" }
      })
    }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.layer])), 90_000)
})
