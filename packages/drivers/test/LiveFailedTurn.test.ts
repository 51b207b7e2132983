/**
 * A live thread's turn that the provider fails (the model API answers 400: the CLI's result is an
 * error) leaves the warm process holding a turn the thread did not commit: it is shut down, and
 * the next turn resumes the checkpoint on a fresh process (docs/threads.md), as a one-shot
 * thread's does. Reused, every later turn sent the refused prompt again and failed the same way.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import { AnthropicServer, Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import { offlineClaude } from "./ClaudeHarness.js"
import { offlineCodex } from "./CodexHarness.js"

/** A turn, a turn whose prompt the model endpoint refuses (any request carrying it), a third turn. */
const threeTurns = (driver: Driver.Driver) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const [failed, third] = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver,
        definition: { instructions: "", skills: [], tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      const thread = yield* agent.thread("failed-turn")
      yield* thread.run("ONE: the codename is KESTREL.")
      // The first turn's late save lands (the CLI writes its answer into the session after its
      // result): a turn sent before it can leave the failed turn in the clone (docs/threads.md).
      yield* Effect.sleep("1 second")
      const failed = yield* Effect.either(thread.run("POISON: a prompt the API refuses."))
      const third = yield* Effect.either(thread.run("THREE: thanks."))
      yield* agent.close()
      return [failed, third] as const
    }).pipe(Effect.scoped, Effect.provide(Harness.layer))
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    expect(failed._tag).toBe("Left")
    // The failed turn is not part of the thread: turn three is answered.
    expect(third._tag === "Left" ? third.left.message : "ok").toBe("ok")
  })

describe("a live thread after a turn the provider failed", () => {
  it.live(
    "Claude Code: the next turn runs from the last committed checkpoint, not the failed turn's prompt",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          respond: (request) =>
            AnthropicServer.transcript(request).some(([role, text]) => role === "user" && text.includes("POISON"))
              ? AnthropicServer.fail(400, "invalid_request_error: prompt is too long")
              : AnthropicServer.reply("Noted.")
        })
        yield* threeTurns(offlineClaude(server.url))
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "Codex: the next turn runs from the last committed checkpoint, not the failed turn's prompt",
    () =>
      Effect.gen(function*() {
        const server = yield* ResponsesServer.make({
          script: (request) =>
            ResponsesServer.userTexts(request).some((t) => t.includes("POISON"))
              ? ResponsesServer.fail(400, "prompt is too long")
              : ResponsesServer.text("Noted.")
        })
        yield* threeTurns(offlineCodex(server.baseUrl))
      }).pipe(Effect.scoped),
    120_000
  )
})
