/**
 * What a one-shot Gemini run reports, from the real Gemini CLI 0.61 against the scripted
 * GeminiServer:
 * - `Result.text` is the model's final text: the CLI runs every streamed text chunk through
 *   `stripAnsi` unless `--raw-output` (its stream-json is JSON, where such characters are
 *   escaped), which altered a reply holding an escape sequence; Claude Code and Codex pass the
 *   text as the model wrote it.
 * - A model response the CLI cannot use (empty, blocked, cut at the token limit: its "invalid
 *   stream") is an `error` record with the reason, then a `result` with `status: "error"` and no
 *   `error` field: the run's failure says that reason.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Gemini } from "@tether/drivers"
import { GeminiServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"

/** One run of `input` on an agent of the real CLI against `server`. */
const runOn = (server: GeminiServer.GeminiServer, input: string) =>
  Effect.gen(function*() {
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
    return yield* Effect.either(agent.run(input))
  }).pipe(Effect.scoped, Effect.provide(Harness.layer))

const said = "Use printf '\u001b[31mred\u001b[0m' to print red. Done \u2714\ufe0f \ud83d\ude80."

describe("a one-shot Gemini run", () => {
  it.live(
    "a reply with an escape sequence (and non-ASCII split over the server's chunks) comes back as written",
    () =>
      Effect.gen(function*() {
        const server = yield* GeminiServer.make({ script: [GeminiServer.reply(said)] })
        const result = yield* runOn(server, "How do I print red?")
        expect(result._tag === "Right" ? result.right.text : result.left).toBe(said)
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "an unusable model response fails with the CLI's reason, not only 'status error'",
    () =>
      Effect.gen(function*() {
        const server = yield* GeminiServer.make({ respond: () => GeminiServer.reply("") })
        const outcome = yield* runOn(server, "Hello?")
        expect(outcome._tag).toBe("Left")
        if (outcome._tag !== "Left" || outcome.left._tag !== "RunError") return
        expect(outcome.left.reason).toBe("ProviderFailed")
        expect(outcome.left.result.raw.stdout).toContain("The model returned an empty response")
        expect(outcome.left.detail).toContain("The model returned an empty response")
      }).pipe(Effect.scoped),
    120_000
  )
})
