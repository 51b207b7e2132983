/**
 * `runAs` Schemas with defaults, transformations, brands, optional unions and a root union
 * through the real Codex CLI (offline, scripted Responses server), answered as OpenAI's strict
 * mode does (every property present, the optional ones left out as `null`).
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { offlineCodex } from "./CodexHarness.js"

const Owner = Schema.Union(
  Schema.String,
  Schema.Struct({ name: Schema.String, email: Schema.optional(Schema.String) })
)
const Ticket = Schema.Struct({
  id: Schema.String.pipe(Schema.brand("TicketId")),
  due: Schema.Date,
  points: Schema.NumberFromString,
  priority: Schema.optionalWith(Schema.Number, { default: () => 3 }),
  reviewer: Schema.optionalWith(Schema.String, { nullable: true }),
  owner: Schema.optional(Owner),
  kind: Schema.Literal("bug", 1, true)
})
const Step = Schema.Union(
  Schema.TaggedStruct("Edit", { path: Schema.String, note: Schema.optional(Schema.String) }),
  Schema.TaggedStruct("Done", { summary: Schema.optional(Schema.String) })
)

describe("Codex runAs shapes (real CLI, --output-schema)", () => {
  it.live(
    "transformations, defaults, brands and an optional union decode from a strict reply",
    () =>
      Effect.gen(function*() {
        const reply = {
          id: "T-1",
          due: "2026-01-02T00:00:00.000Z",
          points: "5",
          priority: null,
          reviewer: null,
          owner: { name: "ana", email: null },
          kind: 1
        }
        const server = yield* ResponsesServer.make({ script: () => ResponsesServer.text(JSON.stringify(reply)) })
        const sandbox = yield* Harness.sandbox
        const agent = yield* Agent.make({
          driver: offlineCodex(server.baseUrl),
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        const one = yield* agent.runAs(Ticket, "File it.", { repairs: 0 }).pipe(Effect.either)
        expect(one._tag === "Right" ? one.right.value : one.left).toEqual({
          id: "T-1",
          due: new Date("2026-01-02T00:00:00.000Z"),
          points: 5,
          priority: 3,
          owner: { name: "ana" },
          kind: 1
        })
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    90_000
  )

  it.live(
    "a root union of tagged structs (in the result envelope) decodes from a strict reply",
    () =>
      Effect.gen(function*() {
        const server = yield* ResponsesServer.make({
          script: () => ResponsesServer.text(JSON.stringify({ result: { _tag: "Done", summary: null } }))
        })
        const sandbox = yield* Harness.sandbox
        const agent = yield* Agent.make({
          driver: offlineCodex(server.baseUrl),
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        const one = yield* agent.runAs(Step, "Next?", { repairs: 0 }).pipe(Effect.either)
        expect(one._tag === "Right" ? one.right.value : one.left).toEqual({ _tag: "Done" })
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    90_000
  )
})
