/**
 * `runAs` through the real Claude Code CLI (2.1.197), offline against the scripted Anthropic
 * server: `--json-schema` offers the model a `StructuredOutput` tool; what it returns is
 * `result.structured_output`, which Tether decodes again with the Effect Schema.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Event from "@tether/core/Event"
import { Claude } from "@tether/drivers"
import { AnthropicServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"

const Triage = Schema.Struct({
  severity: Schema.Literal("low", "high"),
  labels: Schema.Array(Schema.String),
  owner: Schema.optional(Schema.String),
  links: Schema.Array(Schema.Struct({ url: Schema.String, note: Schema.optional(Schema.String) }))
})
const valid = { severity: "high", labels: ["bug"], links: [{ url: "https://example.invalid/1", note: "repro" }] }

const withAgent = <A, E>(
  server: AnthropicServer.AnthropicServer,
  body: (agent: Agent.Agent) => Effect.Effect<A, E>
) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const agent = yield* Agent.make({
      driver: Claude.driver({
        env: {
          ANTHROPIC_BASE_URL: server.url,
          ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
          CLAUDE_CODE_MAX_RETRIES: "0",
          // The CLI's own retries of invalid StructuredOutput calls (default 5).
          MAX_STRUCTURED_OUTPUT_RETRIES: "2"
        }
      }),
      definition: { instructions: "", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection
    })
    return yield* body(agent)
  }).pipe(Effect.scoped, Effect.provide(Harness.layer))

const structuredTool = (request: AnthropicServer.MessagesRequest) =>
  (request.tools as ReadonlyArray<{ readonly name: string; readonly input_schema?: unknown }> | undefined)
    ?.find((tool) => tool.name === "StructuredOutput")

describe("Claude runAs (real CLI, --json-schema)", () => {
  it.live(
    "the Schema's JSON Schema is the StructuredOutput tool's; the CLI's own retry of an invalid call is observed",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          script: [
            AnthropicServer.callTool("StructuredOutput", { ...valid, severity: "urgent" }),
            AnthropicServer.callTool("StructuredOutput", valid)
          ]
        })
        const decoded = yield* withAgent(server, (agent) => agent.runAs(Triage, "Triage ISSUE-42."))
        expect(decoded.value).toEqual(valid)
        expect(decoded.attempts).toBe(1)
        const requests = yield* server.messages
        const offered = structuredTool(requests[0]!)
        expect(offered?.input_schema).toMatchObject({
          type: "object",
          required: ["severity", "labels", "links"],
          properties: { severity: { enum: ["low", "high"] } },
          additionalProperties: false
        })
        // The CLI validated the first call itself and gave the model another try.
        const retry = AnthropicServer.toolResults(requests[1]!)
        expect(retry).toHaveLength(1)
        expect(retry[0]!.isError).toBe(true)
        // The prompt goes as it is: no instruction is added for a native driver.
        expect(AnthropicServer.transcript(requests[0]!).at(-1)![1]).toMatch(/\n\nTriage ISSUE-42\.$/)
        expect(requests).toHaveLength(2)
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "a model that never gives the value: absent structured_output, then a repair turn resuming the session",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          script: [
            AnthropicServer.reply("It is a high severity bug."),
            // The CLI's one enforcement message, answered with prose again.
            AnthropicServer.reply("Still prose."),
            // Tether's repair turn, on the resumed session.
            AnthropicServer.callTool("StructuredOutput", valid)
          ]
        })
        const decoded = yield* withAgent(server, (agent) => agent.runAs(Triage, "Triage ISSUE-7."))
        expect(decoded.value).toEqual(valid)
        expect(decoded.attempts).toBe(2)
        const requests = yield* server.messages
        expect(requests).toHaveLength(3)
        expect(AnthropicServer.transcript(requests[1]!).at(-1)![1]).toContain("You MUST call the StructuredOutput tool")
        const repair = AnthropicServer.transcript(requests[2]!)
        // The resumed conversation carries the first turn, then the repair message.
        expect(repair.map(([, text]) => text).join("\n")).toContain("Triage ISSUE-7.")
        expect(repair.at(-1)![1]).toContain("did not provide the required structured output")
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "no value and no repair left: StructuredOutputError (Missing) with the answer's text; a CLI that gave up: ProviderGaveUp",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          script: [AnthropicServer.reply("Prose only."), AnthropicServer.reply("Prose again.")]
        })
        const [missing, gaveUp] = yield* withAgent(server, (agent) =>
          Effect.gen(function*() {
            const missing = yield* Effect.flip(agent.runAs(Triage, "Triage.", { repairs: 0 }))
            yield* server.enqueue(
              AnthropicServer.callTool("StructuredOutput", { severity: "urgent" }),
              AnthropicServer.callTool("StructuredOutput", { severity: "urgent" })
            )
            const gaveUp = yield* Effect.flip(agent.runAs(Triage, "Triage again."))
            return [missing, gaveUp] as const
          }))
        expect(missing).toMatchObject({ _tag: "StructuredOutputError", reason: "Missing", attempts: 1 })
        expect(missing._tag === "StructuredOutputError" && missing.text).toBe("Prose again.")
        expect(gaveUp).toMatchObject({ _tag: "StructuredOutputError", reason: "ProviderGaveUp", attempts: 1 })
        expect(gaveUp._tag === "StructuredOutputError" && gaveUp.issues[0]!.message).toBe(
          "Failed to provide valid structured output after 2 attempts"
        )
        // No repair turn followed the CLI's own retries: 2 requests per run.
        expect(yield* server.messages).toHaveLength(4)
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "on a live thread the attempt runs one-shot with --json-schema, resuming the checkpoint; the thread goes on live",
    () =>
      Effect.gen(function*() {
        const Codename = Schema.Struct({ codename: Schema.String })
        const server = yield* AnthropicServer.make({
          respond: (request) => {
            const said = AnthropicServer.transcript(request).map(([, text]) => text).join("\n")
            if (structuredTool(request) !== undefined) {
              return AnthropicServer.callTool("StructuredOutput", {
                codename: /codename is (\w+)/.exec(said)?.[1] ?? "unknown"
              })
            }
            return AnthropicServer.reply(said.includes("Thanks.") ? "You are welcome." : "Noted.")
          }
        })
        const [first, attempt, decoded, after, turns] = yield* withAgent(server, (agent) =>
          Effect.gen(function*() {
            const thread = yield* agent.thread("codename")
            const first = Array.from(yield* Stream.runCollect(thread.stream("Remember: the codename is BLUEBIRD.")))
            const attempt = Array.from(yield* Stream.runCollect(thread.streamAs(Codename, "What is the codename?")))
            const decoded = attempt.at(-1)
            const after = Array.from(yield* Stream.runCollect(thread.stream("Thanks.")))
            const record = yield* thread.snapshot
            return [first, attempt, decoded, after, record._tag === "Some" ? record.value.turns : 0] as const
          }))
        expect(decoded?._tag === "Decoded" && decoded.value).toEqual({ codename: "BLUEBIRD" })
        expect(turns).toBe(3)
        const started = (events: ReadonlyArray<{ readonly _tag: string }>) =>
          events.filter((e): e is Event.ProcessStarted => e._tag === "ProcessStarted")
        const [live] = started(first)
        const [oneShot] = started(attempt)
        const [next] = started(after)
        // The attempt had a process of its own; the turn after it a fresh live process (the warm
        // one was started without the schema and no longer holds the checkpoint's turns).
        expect(oneShot!.pid).not.toBe(live!.pid)
        expect(next!.pid).not.toBe(live!.pid)
        expect(next!.pid).not.toBe(oneShot!.pid)
        const requests = yield* server.messages
        expect(requests.map((r) => structuredTool(r) !== undefined)).toEqual([false, true, false])
        // The last turn's conversation carries the structured turn.
        expect(AnthropicServer.transcript(requests[2]!).map(([, text]) => text).join("\n")).toContain(
          "What is the codename?"
        )
      }).pipe(Effect.scoped),
    120_000
  )
  it.live(
    "a Schema Claude Code's validator would read otherwise (a tuple, a format, a fractional multipleOf, a minLength in UTF-16 units) is sent as one it reads alike",
    () =>
      Effect.gen(function*() {
        // Claude Code's StructuredOutput validator is a default Ajv (Draft-07, strict, no formats):
        // `prefixItems` or `format: "uuid"` left the tool out, and its exact `multipleOf` and
        // code-point `minLength` refused 0.07 and "😀", which the Schema takes.
        const Quote = Schema.Struct({
          range: Schema.Tuple(Schema.Number, Schema.Number),
          id: Schema.UUID,
          price: Schema.Number.pipe(Schema.multipleOf(0.01)),
          mark: Schema.String.pipe(Schema.minLength(2))
        })
        const value = { range: [3, 9], id: "123e4567-e89b-12d3-a456-426614174000", price: 0.07, mark: "😀" }
        expect(Schema.decodeUnknownSync(Quote)(value)).toEqual(value)
        const server = yield* AnthropicServer.make({
          respond: (request) =>
            structuredTool(request) === undefined
              ? AnthropicServer.reply("No StructuredOutput tool was offered.")
              : AnthropicServer.callTool("StructuredOutput", value)
        })
        const decoded = yield* withAgent(server, (agent) => agent.runAs(Quote, "Quote it.", { repairs: 0 }))
        expect(decoded.value).toEqual(value)
      }).pipe(Effect.scoped),
    90_000
  )

  it.live(
    "a JSON Schema larger than one command-line argument is asked for by instruction, not --json-schema (E2BIG)",
    () =>
      Effect.gen(function*() {
        const files = Array.from({ length: 12_000 }, (_, i) => `src/module-${i}/index.ts`)
        const Pick = Schema.Struct({ file: Schema.Literal(...files) })
        const server = yield* AnthropicServer.make({
          respond: (request) =>
            structuredTool(request) === undefined
              ? AnthropicServer.reply(JSON.stringify({ file: "src/module-42/index.ts" }))
              : AnthropicServer.callTool("StructuredOutput", { file: "src/module-42/index.ts" })
        })
        const decoded = yield* withAgent(server, (agent) => agent.runAs(Pick, "Which file?", { repairs: 0 }))
        expect(decoded.value).toEqual({ file: "src/module-42/index.ts" })
        // By instruction: the model was offered no StructuredOutput tool.
        const requests = yield* server.requests
        expect(requests.some((r) => structuredTool((r.json ?? {}) as AnthropicServer.MessagesRequest) !== undefined))
          .toBe(false)
      }).pipe(Effect.scoped),
    90_000
  )
})
