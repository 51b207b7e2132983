/**
 * A GeminiServer scripting error (a `respond` that throws, such as a failed `expect` inside it)
 * with the real Gemini CLI: the CLI retries a 5xx with back-off, calling `respond` again and
 * taking ~18 s, so the server answers it 400, which ends the run at once with the message.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Gemini } from "@tether/drivers"
import { GeminiServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"

describe("GeminiServer scripting errors with the real Gemini CLI", () => {
  it.live(
    "a responder that throws ends the run promptly, the responder called once, its message told",
    () =>
      Effect.gen(function*() {
        let calls = 0
        const server = yield* GeminiServer.make({
          respond: () => {
            calls++
            throw new Error("expected the prompt to mention ISSUE-42")
          }
        })
        const sandbox = yield* Harness.sandbox
        const outcome = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: Gemini.driver({
              model: "gemini-2.5-flash",
              env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
            }),
            definition: { instructions: "", skills: [], tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            live: { threads: false }
          })
          return yield* agent.run("hi").pipe(Effect.flip, Effect.timeout("10 seconds"), Effect.option)
        }).pipe(Effect.scoped, Effect.provide(Harness.layer))
        expect(outcome._tag).toBe("Some")
        expect(calls).toBe(1)
        expect(outcome._tag === "Some" && outcome.value.message).toContain("expected the prompt to mention ISSUE-42")
      }).pipe(Effect.scoped),
    60_000
  )
})
