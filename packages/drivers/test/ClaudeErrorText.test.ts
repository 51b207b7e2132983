/**
 * `Result.text` is "the final assistant text only". When the model request fails, Claude
 * Code writes a synthetic assistant message (`model: "<synthetic>"`) and a `result` whose
 * `result` field is its own error text ("API Error: 500 …"). The parser turns the synthetic
 * message into an `api_error` notice ("not the model's message"), but passes the `result` field
 * on as the terminal's text, so the failed run's (partial) `Result.text` is the CLI's error text,
 * which the model never said. CodeBuddy Code, which shares the mapping, leaves it undefined.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import { Claude } from "@tether/drivers"
import { AnthropicServer, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"

const fixture = (name: string) =>
  Fs.readFileSync(Path.join(import.meta.dirname, "fixtures", "claude", name), "utf8")
    .split("\n")
    .filter((l) => l.length > 0)

const Ping = Tool.make("ping", {
  description: "Ping.",
  input: { text: Schema.String },
  output: Schema.Struct({ text: Schema.String }),
  revision: "ping/v1"
})
const NoTools = Toolkit.make(Ping)
const NoToolsLive = NoTools.toLayer({ ping: ({ text }) => Effect.succeed({ text }) })

describe("Claude's API error text is not the model's text", () => {
  it.effect("recorded error-500 / error-400: the terminal carries no assistant text", () =>
    Effect.gen(function*() {
      for (const status of [400, 500]) {
        const lines = fixture(`error-${status}.jsonl`)
        const session = (JSON.parse(lines[0]!) as { session_id: string }).session_id
        const out = yield* Claude.parse(Stream.fromIterable(lines), {
          hostedKey: "tether",
          session: { _tag: "New", id: session }
        }).pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray))
        // No assistant message was produced: the synthetic one is a notice.
        expect(out.filter((o) => o._tag === "Message")).toEqual([])
        const terminal = out.find((o): o is Driver.Terminal => o._tag === "Terminal")!
        expect(terminal.ok).toBe(false)
        expect(terminal.error).toContain(`API Error: ${status}`)
        expect({ status, text: terminal.text }).toEqual({ status, text: undefined })
      }
    }))

  it.live(
    "real CLI, model answers 500: the RunError's partial Result.text is not the CLI's error text",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({ script: [AnthropicServer.fail(500, "scripted outage")] })
        const sandbox = yield* Harness.sandbox
        const error = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: Claude.driver({
              env: {
                ANTHROPIC_BASE_URL: server.url,
                ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
                CLAUDE_CODE_MAX_RETRIES: "0"
              }
            }),
            definition: { instructions: "", skills: [], tools: NoTools },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          return yield* Effect.flip(agent.run("hello"))
        }).pipe(Effect.scoped)
        expect(error._tag).toBe("RunError")
        if (error._tag !== "RunError") return
        expect(error.reason).toBe("ProviderFailed")
        expect(error.result.transcript.filter((e) => e._tag === "Message" && e.role === "assistant")).toEqual([])
        expect(error.result.text).toBe("")
      }).pipe(Effect.scoped, Effect.provide([NoToolsLive, Harness.layer])),
    60_000
  )
})
