/**
 * Two hosted tools a CLI would name alike (`issue.lookup`, `issue_lookup`): Claude Code and
 * CodeBuddy Code would serve one under the other's name, and their drivers refuse such a turn
 * before spawn; Codex 0.171 tells them apart itself (a suffix of each name's hash), so both reach
 * the model and the turn runs.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { ResponsesServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import { offlineCodex, withSandbox } from "./CodexHarness.js"
import { Clashing, ClashingLive } from "./DottedTools.js"

describe("Codex and hosted tools it names alike", () => {
  it.live("both reach the model under names it can tell apart, and the turn runs", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make({ script: () => ResponsesServer.text("done") })
      const outcome = yield* withSandbox((sandbox) =>
        Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: offlineCodex(server.baseUrl),
            definition: { instructions: "", skills: [], tools: Clashing },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          return yield* Effect.either(agent.run("Look up ISSUE-1."))
        }).pipe(Effect.provide(ClashingLive))
      )
      const requests = yield* server.requests
      const listed = requests.length === 0 ? [] : ResponsesServer.namespaceTools(requests[0]!)["mcp__tether"] ?? []
      expect(outcome._tag).toBe("Right")
      expect(listed).toHaveLength(2)
      expect(new Set(listed).size).toBe(2)
      expect(listed.every((name) => name.startsWith("issue_lookup"))).toBe(true)
    }).pipe(Effect.scoped), 90_000)
})
