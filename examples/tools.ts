/**
 * Tools: Schema-typed host tools, served to the CLI by the gateway. What the model sees:
 * - a success: the tool's encoded output;
 * - a rejection, `Tool.reject(code, message)`: exactly that code and message (the only failure
 *   a model is meant to act on);
 * - any other failure (a defect here): a fixed generic error; the handler's error text stays in
 *   the host (its log), never reaches the model;
 * - an input that does not decode: a generic `invalid_input`, the handler never runs.
 *
 *   node --conditions=@tether/source --import tsx examples/tools.ts [--driver claude|codex|gemini]
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Agent } from "@tether/core"
import { Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Schema from "effect/Schema"
import * as Model from "./support/model.js"
import * as View from "./support/view.js"

const Convert = Tool.make("convert", {
  description: "Convert an amount between two currencies.",
  input: { amount: Schema.Number, from: Schema.String, to: Schema.String },
  output: Schema.Struct({ amount: Schema.Number, currency: Schema.String }),
  revision: "convert/v1",
  annotations: { readOnly: true, idempotent: true, openWorld: false }
})

const Refund = Tool.make("refund", {
  description: "Refund an order.",
  input: { orderId: Schema.String },
  output: Schema.Struct({ refunded: Schema.Boolean }),
  revision: "refund/v1",
  annotations: { destructive: true }
})

const Tools = Toolkit.make(Convert, Refund)

const secret = "db password is hunter2"
const handled: Array<string> = []
const ToolsLive = Tools.toLayer({
  convert: ({ amount, from, to }) =>
    Effect.sync(() => handled.push(`convert ${amount} ${from}`)).pipe(
      Effect.zipRight(
        from === "EUR" && to === "USD"
          ? Effect.succeed({ amount: Math.round(amount * 108) / 100, currency: "USD" })
          : Tool.reject("unsupported_pair", `Only EUR to USD is supported, not ${from} to ${to}.`)
      )
    ),
  // A bug: the error text (with a secret in it) must not reach the model.
  refund: () => Effect.die(new Error(`refund service down: ${secret}`))
})

// The scripted model: four calls, then it answers with what it saw.
const seen: Array<string> = []
const script: Model.Model = ({ results }) => {
  if (results.length > 0) seen.push(results.at(-1)!.text)
  switch (results.length) {
    case 0:
      return Model.call("convert", { amount: 20, from: "EUR", to: "USD" })
    case 1:
      return Model.call("convert", { amount: 20, from: "EUR", to: "JPY" })
    case 2:
      return Model.call("refund", { orderId: "A-17" })
    case 3:
      return Model.call("convert", { amount: "twenty", from: "EUR", to: "USD" })
    default:
      return Model.answer("20 EUR is 21.6 USD; JPY is not supported; the refund failed.")
  }
}

const program = Effect.gen(function*() {
  const sandbox = yield* Harness.sandbox
  const agent = yield* Agent.make({
    driver: yield* Model.offline(Model.driverArg(), script),
    definition: { instructions: "You help with orders.", skills: [], tools: Tools },
    workspace: sandbox.workspace,
    profile: sandbox.selection
  })
  const result = yield* agent.run("Convert 20 EUR to USD and JPY, then refund order A-17.")
  View.write(
    `${View.bold("the model saw:")}\n${seen.map((text, i) => `  ${i + 1}. ${text.replace(/\s+/g, " ")}`).join("\n")}\n`
  )
  View.write(`${View.bold("final answer:")} ${result.text}\n`)

  const check = View.checks()
  check.claim("a success reaches the model as the tool's output", seen[0]?.includes("21.6") === true)
  check.claim(
    "a rejection reaches it as its code and message",
    seen[1]?.includes("unsupported_pair") === true && seen[1].includes("Only EUR to USD")
  )
  check.claim(
    "a defect reaches it only as a generic internal_error",
    seen[2]?.includes("internal_error") === true && !seen.join("\n").includes(secret)
  )
  // The gateway answers `invalid_input`; a CLI may also validate against the schema first.
  check.claim(
    "an input that does not decode is refused as invalid; the handler never ran",
    /invalid_input|must be number/.test(seen[3] ?? "") && !handled.some((line) => line.includes("twenty"))
  )
  check.claim(
    "the transcript records each call and whether it failed",
    result.transcript.filter((e) => e._tag === "ToolCall" && e.output !== undefined).length === 4
  )
  check.conclude("tools: outputs, rejections and generic errors as the model sees them")
}).pipe(
  Effect.scoped,
  Effect.provide([ToolsLive, Harness.layer]),
  // The gateway logs every call, and the defect with its cause, to the host's log: silenced here.
  Logger.withMinimumLogLevel(LogLevel.None)
)

// runMain: SIGINT / SIGTERM interrupt the program, so every scope closes (the agent's ordered
// close: processes stopped, clone removed, token revoked) before the process exits.
NodeRuntime.runMain(program)
