/**
 * Agent as a Layer: an Effect application composes the agent like any other service.
 * `Agent.layer(Tag, options)` builds the agent when the layer is built and closes it (ordered:
 * runs, processes, clone, gateway token) when the layer is released. Services that use it just
 * depend on the tag; the tool handlers, the gateway and the platform come from their own layers.
 *
 *   node --conditions=@tether/source --import tsx examples/layer.ts [--driver claude|codex|gemini]
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Agent } from "@tether/core"
import type * as AgentError from "@tether/core/AgentError"
import { Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Schema from "effect/Schema"
import * as Model from "./support/model.js"
import * as View from "./support/view.js"

// --- The application's own services -------------------------------------------------------

class Inventory extends Context.Tag("app/Inventory")<Inventory, {
  readonly stock: (sku: string) => Effect.Effect<number>
}>() {}

const InventoryLive = Layer.succeed(Inventory, {
  stock: (sku) => Effect.succeed(sku === "SKU-1" ? 12 : 0)
})

const Stock = Tool.make("stock", {
  description: "Units in stock for a SKU.",
  input: { sku: Schema.String },
  output: Schema.Struct({ sku: Schema.String, units: Schema.Number }),
  revision: "stock/v1",
  annotations: { readOnly: true }
})
const ShopTools = Toolkit.make(Stock)

// The handlers depend on the app's Inventory service, provided by its layer.
const ShopToolsLive = ShopTools.toLayer(Effect.gen(function*() {
  const inventory = yield* Inventory
  return { stock: ({ sku }) => Effect.map(inventory.stock(sku), (units) => ({ sku, units })) }
})).pipe(Layer.provide(InventoryLive))

/** The agent, as a service of the app. */
class Clerk extends Context.Tag("app/Clerk")<Clerk, Agent.Agent>() {}

// In production this is `Agent.layer(Clerk, { driver: Claude.driver(), definition, workspace })`.
// Here the driver points at the scripted model server, itself a scoped resource, so the layer
// is built from it (the server then outlives the agent: layers release in reverse order).
const ClerkLive = Layer.unwrapScoped(Effect.gen(function*() {
  const sandbox = yield* Harness.sandbox
  const driver = yield* Model.offline(Model.driverArg(), ({ results }) =>
    results.length === 0
      ? Model.call("stock", { sku: "SKU-1" })
      : Model.answer(`We have ${/"units"\s*:\s*(\d+)/.exec(results[0]!.text)?.[1] ?? "?"} units of SKU-1.`))
  return Agent.layer(Clerk, {
    driver,
    definition: { instructions: "You answer stock questions.", skills: [], tools: ShopTools },
    workspace: sandbox.workspace,
    profile: sandbox.selection
  })
}))

/** A service of the app that uses the agent. */
class StockDesk extends Context.Tag("app/StockDesk")<StockDesk, {
  readonly ask: (
    question: string
  ) => Effect.Effect<string, AgentError.RunError | AgentError.AgentClosed | AgentError.InvalidTurn>
  readonly marker: string
}>() {}

const StockDeskLive = Layer.effect(
  StockDesk,
  Effect.map(Clerk, (clerk) => ({
    ask: (question: string) => Effect.map(clerk.run(question), (result) => result.text),
    marker: clerk.marker
  }))
)

// The whole app: each layer gets what it needs from the ones below it.
const AppLive = StockDeskLive.pipe(
  Layer.provide(ClerkLive),
  Layer.provide(ShopToolsLive),
  Layer.provide(Harness.layer) // = Gateway.layer() + NodeContext.layer
)

const program = Effect.gen(function*() {
  const desk = yield* StockDesk
  const answer = yield* desk.ask("How many SKU-1 do we have?")
  View.write(`${View.bold("answer")} ${answer}\n`)
  return { answer, marker: desk.marker }
})

const main = Effect.gen(function*() {
  const { answer, marker } = yield* program.pipe(Effect.provide(AppLive)) // layers released here
  const check = View.checks()
  check.claim("the tool ran through the app's Inventory service", answer === "We have 12 units of SKU-1.")
  check.claim(
    "releasing the layers closed the agent: no process left",
    (yield* Harness.markedProcesses(marker)).length === 0
  )
  check.conclude("Agent.layer: the agent composed as a service and closed with its layer")
}).pipe(Logger.withMinimumLogLevel(LogLevel.Warning))

// runMain: SIGINT / SIGTERM interrupt the program, so every scope closes (the agent's ordered
// close: processes stopped, clone removed, token revoked) before the process exits.
NodeRuntime.runMain(main)
