/**
 * Gemini CLI 0.61.0's own ways, through `Agent.make` and the real CLI against the scripted
 * GeminiServer: it adds `wait_for_previous` to every tool schema it offers the model and sends
 * the key back in `tools/call` (frames recorded in packages/gateway/test/fixtures/frames), and it
 * reads `settings.json` as JSON with comments; it checks a tool's `structuredContent` against its
 * output schema as Draft-07. One CLI turn each (≈ 4 s).
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
import * as Fs from "node:fs"
import * as Path from "node:path"

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

// A tuple is published as `prefixItems` with `items: false` in Draft 2020-12, which the CLI's
// Draft-07 check reads as "no items at all".
const Locate = Tool.make("locate", {
  description: "Locate a point.",
  input: { key: Schema.String },
  output: Schema.Struct({ point: Schema.Tuple(Schema.Number, Schema.Number) }),
  revision: "locate/v1"
})
const PlaceTools = Toolkit.make(Locate)
const PlaceToolsLive = PlaceTools.toLayer({ locate: () => Effect.succeed({ point: [3, 4] as const }) })

describe("Gemini CLI quirks (real CLI)", () => {
  it.live(
    "host tools called with the injected wait_for_previous (true and false) run, and neither they nor the run's events see the key; a commented settings.json works",
    () =>
      Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        Fs.mkdirSync(Path.join(sandbox.source, ".gemini"), { mode: 0o700 })
        Fs.writeFileSync(
          Path.join(sandbox.source, Gemini.settingsFile),
          "// my settings\n{\n  /* the theme */ \"ui\": { \"theme\": \"Dracula\", },\n}\n"
        )
        const server = yield* GeminiServer.make({
          script: [
            GeminiServer.callTool("lookup_issue", { key: "ISSUE-1", wait_for_previous: true }),
            GeminiServer.callTool("lookup_issue", { key: "ISSUE-2", wait_for_previous: false }),
            GeminiServer.reply("Both looked up.")
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
          return Array.from(yield* Stream.runCollect(agent.stream("Look up ISSUE-1, then ISSUE-2.")))
        }).pipe(Effect.scoped)
        const finished = events.at(-1)
        expect(finished?._tag === "RunFinished" && finished.outcome).toBe("success")
        expect(finished?._tag === "RunFinished" && finished.result.text).toBe("Both looked up.")
        // The CLI offered the tool with the key it injects...
        const generations = yield* server.generations
        const declared = JSON.stringify(generations[0]!.tools ?? [])
        expect(declared).toContain("mcp_tether_lookup_issue")
        expect(declared).toContain("wait_for_previous")
        // ...sent it back, and the handler ran with exactly its own input; the run's events and
        // transcript report that input too (the one-shot parser leaves the key out).
        expect(seen).toEqual([{ key: "ISSUE-1" }, { key: "ISSUE-2" }])
        const starts = events.filter((e): e is Event.ToolCall => e._tag === "ToolCall" && e.phase === "start")
        expect(starts.map((e) => e.input)).toEqual([{ key: "ISSUE-1" }, { key: "ISSUE-2" }])
        const transcript = finished?._tag === "RunFinished" ? finished.result.transcript : []
        expect(transcript.flatMap((e) => e._tag === "ToolCall" ? [e.input] : [])).toEqual([
          { key: "ISSUE-1" },
          { key: "ISSUE-2" }
        ])
        const ends = events.filter((e): e is Event.ToolCall => e._tag === "ToolCall" && e.phase === "end")
        expect(ends.map((e) => [e.name, e.isError])).toEqual([["lookup_issue", false], ["lookup_issue", false]])
        const responses = generations.slice(1).flatMap((g) => GeminiServer.functionResponses(g))
        expect(JSON.stringify(responses)).toContain("open:ISSUE-1")
        expect(JSON.stringify(responses)).toContain("open:ISSUE-2")
        expect(JSON.stringify(responses)).not.toContain("invalid_input")
      }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.layer])),
    90_000
  )

  it.live(
    "a tool output holding a tuple reaches the model: the CLI's Draft-07 check of structuredContent accepts it",
    () =>
      Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        const server = yield* GeminiServer.make({
          script: [GeminiServer.callTool("locate", { key: "k" }), GeminiServer.reply("Located.")]
        })
        const events = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: Gemini.driver({
              model: "gemini-2.5-flash",
              env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
            }),
            definition: { instructions: "", skills: [], tools: PlaceTools },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            live: { threads: false }
          })
          return Array.from(yield* Stream.runCollect(agent.stream("Locate k.")))
        }).pipe(Effect.scoped)
        const ends = events.filter((e): e is Event.ToolCall => e._tag === "ToolCall" && e.phase === "end")
        // Gemini CLI reports the output as the MCP result's text.
        expect(ends.map((e) => [e.isError, JSON.parse(String(e.output))])).toEqual([[false, { point: [3, 4] }]])
        const responses = (yield* server.generations).slice(1).flatMap((g) => GeminiServer.functionResponses(g))
        expect(JSON.stringify(responses)).toContain("[3,4]")
        expect(JSON.stringify(responses)).not.toContain("reported an error")
      }).pipe(Effect.scoped, Effect.provide([PlaceToolsLive, Harness.layer])),
    60_000
  )

  it.live("a missing API key: the RunError quotes the CLI's own words from its stderr", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const error = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver: Gemini.driver({ model: "gemini-2.5-flash", env: { GOOGLE_GEMINI_BASE_URL: "http://127.0.0.1:1" } }),
          definition: { instructions: "", skills: [], tools: IssueTools },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        return yield* Effect.flip(agent.run("Hello?"))
      }).pipe(Effect.scoped)
      expect(error._tag === "RunError" && error.reason).toBe("ExitedWithoutResult")
      expect(error.message).toContain("GEMINI_API_KEY")
    }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.layer])), 60_000)
})
