/**
 * A Claude Code live thread whose `runAs` attempt (one-shot, `--json-schema`, resuming the
 * checkpoint in the clone the warm process also holds) fails before it commits. DESIGN §12: "the
 * next turn starts fresh from the last healthy checkpoint"; docs/profiles.md: a process resuming
 * a thread's session resumes what was committed last, not what a failed turn wrote past it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { AnthropicServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { offlineClaude } from "./ClaudeHarness.js"

const Codename = Schema.Struct({ codename: Schema.String })

const structuredTool = (request: AnthropicServer.MessagesRequest) =>
  (request.tools as ReadonlyArray<{ readonly name: string }> | undefined)?.some((t) => t.name === "StructuredOutput")

describe("Claude live thread, a failed runAs attempt", () => {
  it.live("leaves nothing of the failed attempt in what later turns resume", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({
        respond: (request) =>
          structuredTool(request)
            ? AnthropicServer.fail(400, "invalid_request_error: refused")
            : AnthropicServer.reply("Noted.")
      })
      const sandbox = yield* Harness.sandbox
      const [failed, turns] = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver: offlineClaude(server.url),
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        const thread = yield* agent.thread("failed-attempt")
        yield* thread.run("ONE: the codename is KESTREL.")
        const failed = yield* Effect.either(thread.runAs(Codename, "LOST: what is the codename?", { repairs: 0 }))
        yield* thread.run("THREE: thanks.")
        // Every late write of the CLI saved (not the race of a fresh process's load with the late save).
        yield* Effect.sleep("3 seconds")
        yield* thread.close
        const again = yield* agent.thread("failed-attempt")
        yield* again.run("FOUR: bye.")
        const record = yield* again.snapshot
        yield* agent.close()
        return [failed, record._tag === "Some" ? record.value.turns : -1] as const
      }).pipe(Effect.scoped, Effect.provide(Harness.layer))
      expect(yield* Harness.entries(sandbox.root)).toEqual([])
      expect(failed._tag).toBe("Left")
      expect(turns).toBe(3)
      const requests = (yield* server.messages).filter((r) => !structuredTool(r))
      const seen = requests.map((r) =>
        AnthropicServer.transcript(r).map(([role, text]) => `${role}:${text}`).join(" | ")
      )
      for (const s of seen.slice(1)) expect(s).not.toContain("LOST")
      expect(seen.at(-1)).toContain("KESTREL")
      expect(seen.at(-1)).toContain("THREE")
    }).pipe(Effect.scoped), 150_000)
})
