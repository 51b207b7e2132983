/**
 * A handler failure Effect's `Cause.pretty` cannot render (a bigint in a plain object) still
 * reaches the host's log as the handler's failure, and the model gets the generic error.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { captured, expectNoTokenInLogs, listedClient, logLayer, settle } from "./fixtures/harness.js"

// A handler whose failure is a plain object holding a bigint (a database row, a ledger entry):
// Effect's `Cause.pretty` cannot render it (JSON.stringify throws on a bigint).
const Charge = Tool.make("charge", {
  description: "Charge an account.",
  input: { account: Schema.String },
  output: Schema.Struct({ ok: Schema.Boolean }),
  revision: "charge/v1"
})
const Tools = Toolkit.make(Charge)
const ToolsLive = Tools.toLayer({
  charge: ({ account }) =>
    account === "die"
      ? Effect.die({ account, balance: -5n })
      : Effect.fail({ account, balance: -5n })
})

describe("a handler failure that Effect cannot render", () => {
  it.live("is the generic internal_error result, and the failure is logged", () =>
    Effect.gen(function*() {
      const client = yield* listedClient(Tools)
      const before = captured.length
      for (const account of ["fail", "die"]) {
        const result = yield* settle(() => client.callTool({ name: "charge", arguments: { account } }))
        expect(result.ok ? result.value : String(result.error)).toEqual({
          content: [{ type: "text", text: "internal_error: The tool failed." }],
          isError: true
        })
      }
      // The handler's own failure reaches the host's log (Tool.ts: "logged, never shown").
      const lines = captured.slice(before)
      expect(lines.filter((line) => line.includes("tool handler failed") && line.includes("-5n")).length)
        .toBe(2)
      expect(lines.filter((line) => line.includes("codec failed unexpectedly"))).toEqual([])
    }).pipe(Effect.scoped, Effect.provide([ToolsLive, Gateway.layer()]), Effect.provide(logLayer)))
})

afterAll(() => expectNoTokenInLogs())
