/**
 * A turn's built-in tool policy through the real Codex CLI (pinned 0.171.0), offline against the
 * scripted Responses server: the denied built-ins are switched off for that run and are not
 * offered to the model.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Codex } from "@tether/drivers"
import { Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"

const offered = (request: ResponsesServer.RecordedRequest | undefined): ReadonlyArray<string> => {
  const tools =
    (request?.body as { readonly tools?: ReadonlyArray<{ readonly name?: string; readonly type?: string }> })
      ?.tools ?? []
  return tools.map((tool) => tool.name ?? tool.type ?? "?")
}

describe("Codex built-in tool policy (real CLI)", () => {
  it.live(
    "denied built-ins are not offered for that turn only; an unmappable name fails before spawn",
    () =>
      Effect.gen(function*() {
        const server = yield* ResponsesServer.make()
        const sandbox = yield* Harness.sandbox
        yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: Codex.driver({
              model: "fake-model",
              modelProvider: {
                id: "fake",
                baseUrl: server.baseUrl,
                apiKey: Redacted.make("sk-fake-codex"),
                requestMaxRetries: 0,
                streamMaxRetries: 0
              },
              settings: Codex.offlineSettings
            }),
            definition: { instructions: "", tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          yield* agent.run({ input: "Hello.", builtinTools: { deny: ["exec_command", "view_image", "web_search"] } })
          yield* agent.run("Hello.")
          const unmappable = yield* Effect.flip(agent.run({ input: "x", builtinTools: { deny: ["teleport"] } }))
          expect(unmappable).toMatchObject({ _tag: "RunError", reason: "PrepareFailed" })
          expect(unmappable.message).toContain("teleport")
        }).pipe(Effect.scoped, Effect.provide(Harness.layer))
        const [first, second, ...rest] = yield* server.requests
        expect(rest).toEqual([])
        for (const name of ["exec_command", "write_stdin", "view_image", "web_search"]) {
          expect(offered(first)).not.toContain(name)
          expect(offered(second)).toContain(name)
        }
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
      }).pipe(Effect.scoped),
    120_000
  )
})
