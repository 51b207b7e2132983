/**
 * Overlapping `runAs` turns of one Codex agent (real CLI 0.171.0, offline). Runs of one
 * agent may overlap, and a turn's own state must never reach another turn's CLI through a file of
 * the shared clone (ConcurrentTurns.test.ts; core's materialize comment). Codex's `--output-schema`
 * is a file of the clone, named by its content (it was one fixed path, which the later turn
 * overwrote before the earlier turn's CLI read it).
 *
 * As in ConcurrentTurns.test.ts, the CLI starts through a wrapper that waits a second before
 * exec'ing it, so both turns have written their files before either CLI reads its own.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Codex } from "@tether/drivers"
import { Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Binary from "../src/internal/binary.js"
import * as CodexInternal from "../src/internal/codex.js"

const delayedLauncher = (dir: string, command: ReadonlyArray<string>): string => {
  const file = Path.join(dir, "delayed-cli")
  const quoted = command.map((part) => `'${part.replace(/'/g, `'\\''`)}'`).join(" ")
  Fs.writeFileSync(file, `#!/bin/sh\nsleep 1\nexec ${quoted} "$@"\n`, { mode: 0o700 })
  return file
}

const Alpha = Schema.Struct({ alpha: Schema.String })
const Beta = Schema.Struct({ beta: Schema.Number })

const schemaOf = (request: ResponsesServer.RecordedRequest) =>
  (request.body as { readonly text?: { readonly format?: { readonly schema?: unknown } } }).text?.format?.schema

describe("overlapping runAs turns of one Codex agent", () => {
  it.live("each overlapping runAs turn sends the model its own JSON Schema", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      // A model constrained by the strict schema it is sent (as OpenAI's strict json_schema is).
      const server = yield* ResponsesServer.make({
        script: (request) => {
          const required = (schemaOf(request) as { readonly required?: ReadonlyArray<string> } | undefined)?.required
          return ResponsesServer.delayed(
            300,
            ResponsesServer.text(JSON.stringify(required?.[0] === "alpha" ? { alpha: "a" } : { beta: 2 }))
          )
        }
      })
      const codex = Binary.resolve(CodexInternal.binarySpec, undefined)
      const binary = delayedLauncher(sandbox.base, [codex.command, ...codex.prefix])
      const [alpha, beta] = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver: Codex.driver({
            binary,
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
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        return yield* Effect.all([
          Effect.either(agent.runAs(Alpha, "TURN-ALPHA", { repairs: 0 })),
          Effect.either(agent.runAs(Beta, "TURN-BETA", { repairs: 0 }))
        ], { concurrency: 2 })
      }).pipe(Effect.scoped, Effect.provide(Harness.layer))
      const requests = yield* server.requests
      const sent = (marker: string) =>
        JSON.stringify(schemaOf(requests.find((r) => ResponsesServer.userTexts(r).some((t) => t.includes(marker)))!))
      expect(sent("TURN-ALPHA")).toContain("\"alpha\"")
      expect(sent("TURN-BETA")).toContain("\"beta\"")
      expect(alpha._tag).toBe("Right")
      expect(beta._tag).toBe("Right")
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 120_000)
})
