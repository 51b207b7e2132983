/**
 * DESIGN §6 ordered close with a host tool call in flight (fake CLI calling the real
 * gateway with the official MCP SDK client): the handler is interrupted, and its finalizers
 * must have run before close returns (before the handlers' own layer is released).
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { FakeCli, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"

const Transfer = Tool.make("transfer", {
  description: "Moves money; rolls back when interrupted.",
  input: {},
  output: Schema.Struct({ ok: Schema.Boolean }),
  revision: "transfer/v1"
})
const Tools = Toolkit.make(Transfer)

describe("agent close with a host tool call in flight", () => {
  it.live("close returns only after the interrupted handler's finalizer ran, before its services are released", () =>
    Effect.gen(function*() {
      const order: Array<string> = []
      const called = yield* Deferred.make<void>()
      // The handler's service, e.g. a database pool: released when the host's layers close.
      const ToolsLive = Tools.toLayer(Effect.gen(function*() {
        yield* Effect.addFinalizer(() => Effect.sync(() => order.push("handler services released")))
        return {
          transfer: () =>
            Deferred.succeed(called, undefined).pipe(
              Effect.zipRight(Effect.never),
              // A rollback that takes a moment, using the services above.
              Effect.onInterrupt(() =>
                Effect.sleep("300 millis").pipe(Effect.zipRight(Effect.sync(() => order.push("handler rolled back"))))
              ),
              Effect.as({ ok: true })
            )
        }
      }))
      const sandbox = yield* Harness.sandbox
      yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver: FakeCli.driver(),
          definition: { instructions: "", skills: [], tools: Tools },
          workspace: sandbox.workspace,
          profile: sandbox.selection,
          processes: { killGrace: "300 millis" }
        })
        yield* agent.stream(FakeCli.script({ op: "call", tool: "transfer" })).pipe(Stream.runDrain, Effect.fork)
        yield* Deferred.await(called)
        yield* agent.close()
        order.push("agent closed")
      }).pipe(Effect.scoped, Effect.provide(Layer.merge(ToolsLive, Harness.layer)))
      yield* Effect.sleep("600 millis")
      expect(order).toEqual(["handler rolled back", "agent closed", "handler services released"])
    }).pipe(Effect.scoped))
})
