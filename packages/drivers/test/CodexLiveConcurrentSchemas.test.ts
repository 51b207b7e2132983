/**
 * Two threads of one Codex agent run `thread.runAs` at the same time with different
 * Schemas on their warm app-servers (`turn/start.outputSchema`): each turn's request carries its
 * own Schema, each decodes its own value, and each thread commits its attempt exactly once.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { offlineCodex } from "./CodexHarness.js"

const A = Schema.Struct({ title: Schema.String, note: Schema.optional(Schema.String) })
const B = Schema.Struct({ count: Schema.Number, tags: Schema.Array(Schema.String) })

describe("concurrent Codex live runAs", () => {
  it.live("two threads' runAs turns with different Schemas do not cross", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make({
        script: (request) => {
          const body = request.body as { readonly text?: { readonly format?: { readonly schema?: any } } }
          const props = Object.keys(body.text?.format?.schema?.properties ?? {})
          if (props.includes("title")) {
            return ResponsesServer.delayed(300, ResponsesServer.text(JSON.stringify({ title: "t", note: null })))
          }
          if (props.includes("count")) {
            return ResponsesServer.text(JSON.stringify({ count: 2, tags: ["x"] }))
          }
          return ResponsesServer.text("ok")
        }
      })
      const sandbox = yield* Harness.sandbox
      const agent = yield* Agent.make({
        driver: offlineCodex(server.baseUrl),
        definition: { instructions: "", skills: [], tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      const one = yield* agent.thread("one")
      const two = yield* agent.thread("two")
      yield* Effect.all([one.run("hi"), two.run("hi")], { concurrency: 2 })
      const [a, b] = yield* Effect.all([
        one.runAs(A, "Title?", { repairs: 0 }),
        two.runAs(B, "Count?", { repairs: 0 })
      ], { concurrency: 2 })
      expect([a.value, b.value]).toEqual([{ title: "t" }, { count: 2, tags: ["x"] }])
      const snaps = yield* Effect.all([one.snapshot, two.snapshot])
      expect(snaps.map((s) => s._tag === "Some" ? s.value.turns : -1)).toEqual([2, 2])
    }).pipe(Effect.scoped, Effect.provide(Harness.layer)), 120_000)
})
