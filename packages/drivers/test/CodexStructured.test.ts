/**
 * `runAs` through the real Codex CLI (0.171.0), offline against the scripted Responses server:
 * `--output-schema` (one-shot) and `turn/start.outputSchema` (a live thread's warm `app-server`)
 * make Codex send the Schema's JSON Schema as the strict `text.format`; Codex does not validate
 * the reply, Tether does.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Approval } from "@tether/core"
import type * as Event from "@tether/core/Event"
import { Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { offlineCodex } from "./CodexHarness.js"

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

const driverFor = (server: ResponsesServer.ResponsesServer) => offlineCodex(server.baseUrl)

/** A one-shot Codex agent with no tools, on the test's sandbox. */
const agentFor = (server: ResponsesServer.ResponsesServer) =>
  Effect.flatMap(Harness.sandbox, (sandbox) =>
    Agent.make({
      driver: driverFor(server),
      definition: { instructions: "", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection
    }))

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
        const agent = yield* agentFor(server)
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
    "a union of structs: the strict reply's nulls are read back in the branch the reply is, at the first attempt",
    () =>
      Effect.gen(function*() {
        const Step = Schema.Union(
          Schema.TaggedStruct("Edit", { path: Schema.String, note: Schema.optional(Schema.String) }),
          Schema.TaggedStruct("Done", { summary: Schema.optional(Schema.String) })
        )
        const Plan = Schema.Struct({ next: Step, later: Schema.Array(Step) })
        // What a strict model answers: every branch property present, the ones it leaves out null.
        const reply = { next: { _tag: "Edit", path: "a.ts", note: null }, later: [{ _tag: "Done", summary: null }] }
        const server = yield* ResponsesServer.make({ script: () => ResponsesServer.text(JSON.stringify(reply)) })
        const agent = yield* agentFor(server)
        const decoded = yield* agent.runAs(Plan, "Plan the change.", { repairs: 0 })
        expect(decoded.value).toEqual({ next: { _tag: "Edit", path: "a.ts" }, later: [{ _tag: "Done" }] })
        expect(decoded.attempts).toBe(1)
        const format = textFormat((yield* server.requests)[0]!)
        expect(format?.["schema"]).toMatchObject({
          properties: {
            next: {
              anyOf: [
                {
                  required: ["_tag", "path", "note"],
                  properties: { note: { anyOf: [{ type: "string" }, { type: "null" }] } }
                },
                { required: ["_tag", "summary"] }
              ]
            }
          }
        })
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    90_000
  )

  it.live(
    "a reply that is not JSON, without repair: StructuredOutputError with the raw text",
    () =>
      Effect.gen(function*() {
        const server = yield* ResponsesServer.make({ script: () => ResponsesServer.text("Severity: low.") })
        const agent = yield* agentFor(server)
        const error = yield* Effect.flip(agent.runAs(Triage, "Triage.", { repairs: 0 }))
        expect(error).toMatchObject({ _tag: "StructuredOutputError", reason: "Missing", text: "Severity: low." })
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    90_000
  )

  it.live(
    "a Schema OpenAI's strict mode refuses (a Record) goes by instruction, one-shot and on a live thread (warm app-server)",
    () =>
      Effect.gen(function*() {
        const Counts = Schema.Record({ key: Schema.String, value: Schema.Number })
        const server = yield* ResponsesServer.make({
          script: ResponsesServer.sequence(
            ResponsesServer.text("Counted: {\"docs\":2,\"bugs\":1}"),
            ResponsesServer.text("Noted."),
            ResponsesServer.text("{\"docs\":3}")
          )
        })
        const sandbox = yield* Harness.sandbox
        const agent = yield* Agent.make({
          driver: driverFor(server),
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        const oneShot = yield* agent.runAs(Counts, "Count the issues by label.", { repairs: 0 })
        const thread = yield* agent.thread("counts-live")
        const started: Array<Event.ProcessStarted> = []
        const record = <A extends { readonly _tag: string }>(item: A) =>
          Effect.sync(() => item._tag === "ProcessStarted" && started.push(item as unknown as Event.ProcessStarted))
        yield* Stream.runForEach(thread.stream("Remember: three docs issues."), record)
        const live = Array.from(
          yield* Stream.runCollect(Stream.tap(thread.streamAs(Counts, "Count them by label.", { repairs: 0 }), record))
        ).at(-1)!
        if (live._tag !== "Decoded") throw new Error("no decoded value")
        // The thread's turns ran on one warm app-server.
        expect(started.map((event) => event.pid)).toEqual([started[0]!.pid, started[0]!.pid])
        expect(started[1]!.reused).toBe(true)
        expect([oneShot.value, live.value]).toEqual([{ docs: 2, bugs: 1 }, { docs: 3 }])
        const requests = yield* server.requests
        expect(requests).toHaveLength(3)
        // No strict text.format the endpoint would refuse with a 400: the JSON Schema is in the prompt.
        expect(requests.map((request) => textFormat(request)?.["type"] === "json_schema")).toEqual([
          false,
          false,
          false
        ])
        expect(ResponsesServer.userTexts(requests[0]!).at(-1)).toContain(
          "\"additionalProperties\":{\"type\":\"number\"}"
        )
        expect(ResponsesServer.userTexts(requests[2]!).at(-1)).toContain("JSON Schema:")
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    120_000
  )

  it.live(
    "on a live thread (an agent with approvals) the attempts run on the warm app-server with turn/start.outputSchema; repairs too; exhausted: StructuredOutputError",
    () =>
      Effect.gen(function*() {
        const violating = JSON.stringify({ ...strictReply, severity: "medium" })
        const server = yield* ResponsesServer.make({
          script: ResponsesServer.sequence(
            ResponsesServer.text("Noted."),
            // runAs #1: a violating reply (Codex passes it), then the repair turn's valid one.
            ResponsesServer.text(violating),
            ResponsesServer.text(JSON.stringify(strictReply)),
            // runAs #2: violating twice, so its one repair turn is exhausted.
            ResponsesServer.text(violating),
            ResponsesServer.text(JSON.stringify({ ...strictReply, labels: "docs" })),
            ResponsesServer.text("Bye.")
          )
        })
        const sandbox = yield* Harness.sandbox
        const agent = yield* Agent.make({
          driver: driverFor(server),
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection,
          // Codex asks approvals on live threads only: a one-shot attempt would be refused.
          approvals: { handler: () => Effect.succeed(Approval.deny("No commands.")) }
        })
        const thread = yield* agent.thread("triage-live")
        const events: Array<Event.Event> = []
        const record = <A extends { readonly _tag: string }>(item: A) =>
          Effect.sync(() => {
            if (item._tag !== "Decoded") events.push(item as unknown as Event.Event)
          })
        yield* Stream.runForEach(thread.stream("Remember ISSUE-3 is about docs."), record)
        const attempts = Array.from(
          yield* Stream.runCollect(Stream.tap(thread.streamAs(Triage, "Triage ISSUE-3."), record))
        )
        const decoded = attempts.at(-1)
        const error = yield* Effect.flip(
          Stream.runForEach(thread.streamAs(Triage, "Triage ISSUE-4.", { repairs: 1 }), record)
        )
        yield* Stream.runForEach(thread.stream("Thanks."), record)

        expect(decoded?._tag === "Decoded" && decoded.value).toEqual(valid)
        expect(decoded?._tag === "Decoded" && decoded.attempts).toBe(2)
        expect(error).toMatchObject({ _tag: "StructuredOutputError", reason: "Invalid", attempts: 2 })
        if (error._tag !== "StructuredOutputError") throw error
        // The raw text of the last answer and the Schema's issues (the strict null read back as absent).
        expect(error.text).toBe(JSON.stringify({ ...strictReply, labels: "docs" }))
        expect(error.issues.map((issue) => issue.path)).toEqual([["labels"]])
        // One app-server served every turn: the attempts and their repairs did not restart it.
        const started = events.filter((e): e is Event.ProcessStarted => e._tag === "ProcessStarted")
        expect(started).toHaveLength(6)
        expect(new Set(started.map((e) => e.pid)).size).toBe(1)
        expect(started.slice(1).every((e) => e.reused === true)).toBe(true)
        // The schema went with the attempts' turns only, as the strict format.
        const requests = yield* server.requests
        expect(requests).toHaveLength(6)
        const formats = requests.map(textFormat)
        expect(formats.map((format) => format?.["type"] === "json_schema")).toEqual([
          false,
          true,
          true,
          true,
          true,
          false
        ])
        expect(formats[1]).toMatchObject({ strict: true, name: "codex_output_schema" })
        expect(formats[1]?.["schema"]).toMatchObject({ required: ["severity", "labels", "owner", "links"] })
        // The repair turn continued the same conversation on the same process.
        expect(ResponsesServer.assistantTexts(requests[2]!).join("\n")).toContain("\"medium\"")
        expect(ResponsesServer.userTexts(requests[2]!).at(-1)).toContain(
          "- severity: Expected \"low\", actual \"medium\""
        )
        const snapshot = yield* thread.snapshot
        expect(snapshot._tag === "Some" && snapshot.value.turns).toBe(6)
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    120_000
  )
})
