/**
 * Live turns whose prompt the CLI may take without a replay (an empty prompt, a path that
 * starts with `/`, an unknown slash command): each turn ends (a terminal or a typed failure) and
 * the warm process serves the next one. Real CLI 2.1.197, offline.
 */
import { describe, expect, it } from "@effect/vitest"
import { AnthropicServer, Harness } from "@tether/testing"
import * as Effect from "effect/Effect"
import { driverFor, respond, runTurn, spawnLive } from "./ClaudeLiveHarness.js"

const summary = (done: { readonly outputs: ReadonlyArray<{ readonly _tag: string }>; readonly failure?: unknown }) => {
  const terminal = done.outputs.find((o) => o._tag === "Terminal") as { ok: boolean; text?: string } | undefined
  return done.failure !== undefined ? "failed" : terminal === undefined ? "no terminal" : `ended ok=${terminal.ok}`
}

describe("Claude live prompts the CLI takes without a replay (real CLI)", () => {
  for (
    const prompt of ["", "   ", "/etc/hosts: what is in this file?", "/no-such-command please"]
  ) {
    it.live(
      `prompt ${JSON.stringify(prompt)} ends its turn and the next turn works`,
      () =>
        Effect.gen(function*() {
          const server = yield* AnthropicServer.make({ respond })
          const { session } = yield* spawnLive(driverFor(server, { partialMessages: false }))
          const first = yield* runTurn(session, "one")
          expect(summary(first)).toBe("ended ok=true")
          const odd = yield* runTurn(session, prompt).pipe(Effect.timeout("20 seconds"), Effect.either)
          const oddSummary = odd._tag === "Left" ? "timed out" : summary(odd.right)
          const next = yield* runTurn(session, "three").pipe(Effect.timeout("20 seconds"), Effect.either)
          const nextSummary = next._tag === "Left" ? "timed out" : summary(next.right)
          expect(oddSummary).not.toBe("timed out")
          expect(nextSummary).toBe("ended ok=true")
        }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
      60_000
    )
  }
})
