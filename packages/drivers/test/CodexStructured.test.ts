/**
 * `runAs` through the real Codex CLI (0.171.0), offline against the scripted Responses server:
 * `--output-schema` makes Codex send the Schema's JSON Schema as the strict `text.format`; Codex
 * does not validate the reply, Tether does.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Codex } from "@tether/drivers"
import { Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"

const Triage = Schema.Struct({
  severity: Schema.Literal("low", "high"),
  labels: Schema.Array(Schema.String),
  owner: Schema.optional(Schema.String),
  links: Schema.Array(Schema.Struct({ url: Schema.String, note: Schema.optional(Schema.String) }))
})
const valid = { severity: "low", labels: ["docs"], owner: "ana", links: [{ url: "https://example.invalid/3" }] }
// What a strict model answers for it: the optional property it leaves out is null.
const strictReply = { ...valid, links: [{ url: "https://example.invalid/3", note: null }] }

const textFormat = (request: ResponsesServer.RecordedRequest) => {
  const body = request.body as { readonly text?: { readonly format?: { readonly [key: string]: unknown } } }
  return body.text?.format
}

describe("Codex runAs (real CLI, --output-schema)", () => {
  it.live(
    "the strict form of the JSON Schema is the text.format; a reply violating it is caught by Tether and repaired",
    () =>
      Effect.gen(function*() {
        const server = yield* ResponsesServer.make({
          script: ResponsesServer.sequence(
            // Codex passes this through with exit 0: it does not validate.
            ResponsesServer.text(JSON.stringify({ ...strictReply, severity: "medium" })),
            ResponsesServer.text(JSON.stringify(strictReply))
          )
        })
        const sandbox = yield* Harness.sandbox
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
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        const decoded = yield* agent.runAs(Triage, "Triage ISSUE-3.")
        expect(decoded.value).toEqual(valid)
        expect(decoded.attempts).toBe(2)
        const requests = yield* server.requests
        expect(requests).toHaveLength(2)
        const format = textFormat(requests[0]!)
        expect(format).toMatchObject({ type: "json_schema", strict: true, name: "codex_output_schema" })
        // Strict: every property required, the optional ones nullable.
        expect(format?.["schema"]).toMatchObject({
          type: "object",
          required: ["severity", "labels", "owner", "links"],
          properties: {
            severity: { type: "string", enum: ["low", "high"] },
            owner: { anyOf: [{ type: "string" }, { type: "null" }] },
            links: { items: { required: ["url", "note"], additionalProperties: false } }
          },
          additionalProperties: false
        })
        // The repair turn resumed the thread (it carries the first reply) and kept the format.
        expect(ResponsesServer.assistantTexts(requests[1]!).join("\n")).toContain("\"medium\"")
        const repair = ResponsesServer.userTexts(requests[1]!).at(-1)!
        expect(repair).toContain("- severity: Expected \"low\", actual \"medium\"")
        expect(textFormat(requests[1]!)).toEqual(format)
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    90_000
  )

  it.live(
    "a reply that is not JSON, without repair: StructuredOutputError with the raw text",
    () =>
      Effect.gen(function*() {
        const server = yield* ResponsesServer.make({ script: () => ResponsesServer.text("Severity: low.") })
        const sandbox = yield* Harness.sandbox
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
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        const error = yield* Effect.flip(agent.runAs(Triage, "Triage.", { repairs: 0 }))
        expect(error).toMatchObject({ _tag: "StructuredOutputError", reason: "Missing", text: "Severity: low." })
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    90_000
  )
})
