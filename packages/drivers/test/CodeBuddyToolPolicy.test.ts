/**
 * A turn's `toolPolicy` narrowing with the real CodeBuddy Code CLI. The denied tool
 * must not be offered to the model, and a call of it must never reach the host's handler.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { CodeBuddy } from "@tether/drivers"
import { ChatCompletionsServer, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String }),
  revision: "lookup_issue/v1"
})
const CloseIssue = Tool.make("close_issue", {
  description: "Close an issue.",
  input: { key: Schema.String },
  output: Schema.Struct({ closed: Schema.Boolean }),
  revision: "close_issue/v1"
})
const IssueTools = Toolkit.make(LookupIssue, CloseIssue)
const handled: Array<string> = []
const IssueToolsLive = IssueTools.toLayer({
  lookup_issue: ({ key }) => Effect.sync(() => (handled.push(`lookup ${key}`), { title: `T ${key}` })),
  close_issue: ({ key }) => Effect.sync(() => (handled.push(`close ${key}`), { closed: true }))
})

describe("CodeBuddy toolPolicy narrowing (real CLI)", () => {
  it.live(
    "a denied hosted tool is not offered and a call of it never reaches the handler",
    () =>
      Effect.gen(function*() {
        const server = yield* ChatCompletionsServer.make({
          script: (request) =>
            ChatCompletionsServer.toolResults(request).length === 0 &&
              ChatCompletionsServer.toolNames(request).includes("mcp__tether__close_issue")
              ? ChatCompletionsServer.callTool("close_issue", { key: "ISSUE-9" })
              : ChatCompletionsServer.text("done")
        })
        const sandbox = yield* Harness.sandbox
        const { events, marker } = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: CodeBuddy.driver({ endpoint: { baseUrl: server.baseUrl, apiKey: Redacted.make("sk-x") } }),
            definition: { instructions: "", skills: [], tools: IssueTools },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          const events = Array.from(
            yield* Stream.runCollect(agent.stream({ input: "Close ISSUE-9.", toolPolicy: { deny: ["close_issue"] } }))
          )
          return { events, marker: agent.marker }
        }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.layer]))
        const requests = yield* server.requests
        const offered = ChatCompletionsServer.toolNames(requests[0]!).filter((n) => n.startsWith("mcp__"))
        expect(offered).toEqual(["mcp__tether__lookup_issue"])
        expect(handled).toEqual([])
        const finished = events.at(-1)
        expect(finished?._tag === "RunFinished" && finished.result.effectiveTools).toEqual(["lookup_issue"])
        expect(yield* Harness.markedProcesses(marker)).toEqual([])
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
      }).pipe(Effect.scoped),
    90_000
  )
})
