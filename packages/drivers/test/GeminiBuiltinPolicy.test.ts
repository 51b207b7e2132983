/**
 * A turn's built-in tool policy through the real Gemini CLI (pinned 0.61.0), offline against the
 * scripted GeminiServer: the driver's `--policy` file denies the named built-ins, and the CLI
 * stops offering them to the model.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Gemini } from "@tether/drivers"
import { GeminiServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"

describe("Gemini built-in tool policy (real CLI)", () => {
  it.live(
    "a denied built-in is not offered for that turn only; allow is refused before anything starts",
    () =>
      Effect.gen(function*() {
        const server = yield* GeminiServer.make({ respond: () => GeminiServer.reply("done") })
        const sandbox = yield* Harness.sandbox
        yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: Gemini.driver({
              model: "gemini-2.5-flash",
              env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
            }),
            definition: { instructions: "", tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          const denied = yield* agent.run({ input: "List the files.", builtinTools: { deny: ["read_file", "glob"] } })
          expect(denied.text).toBe("done")
          const free = yield* agent.run("List the files.")
          expect(free.text).toBe("done")
          const refused = yield* Effect.flip(agent.run({ input: "x", builtinTools: { allow: ["read_file"] } }))
          expect(refused).toMatchObject({ _tag: "InvalidTurn", reason: "UnsupportedCapability" })
        }).pipe(Effect.scoped, Effect.provide(Harness.layer))
        const [first, second, ...rest] = yield* server.generations
        expect(rest).toEqual([])
        const offered = (request: GeminiServer.GenerateRequest | undefined) =>
          request === undefined ? [] : GeminiServer.declaredTools(request)
        expect(offered(first)).not.toContain("read_file")
        expect(offered(first)).not.toContain("glob")
        expect(offered(first)).toContain("list_directory")
        expect(offered(second)).toEqual(expect.arrayContaining(["read_file", "glob", "list_directory"]))
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
      }).pipe(Effect.scoped),
    120_000
  )
})
