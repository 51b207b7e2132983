/**
 * Structured output: `agent.runAs(schema, turn)` returns the turn's answer as a value of an Effect
 * Schema, decoded and validated by Tether. The JSON Schema derived from the Schema goes to Claude
 * Code natively (`--json-schema`) and to Codex (`--output-schema`); the Gemini CLI gets it in an
 * instruction and the JSON is taken from its answer. Here the scripted model first answers with a
 * value that violates the Schema: Claude Code itself rejects it and lets the model try again;
 * with Codex and Gemini Tether catches it and runs one repair turn on the same session. Last, an
 * answer that never holds a valid value is the typed `StructuredOutputError`, with the raw text.
 *
 *   node --conditions=@tether/source --import tsx examples/structured-output.ts [--driver claude|codex|gemini]
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Agent } from "@tether/core"
import { Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Schema from "effect/Schema"
import * as Model from "./support/model.js"
import * as View from "./support/view.js"

// #region readme-schema
const Triage = Schema.Struct({
  severity: Schema.Literal("low", "high"),
  labels: Schema.Array(Schema.String),
  duplicateOf: Schema.optional(Schema.String)
})
// #endregion readme-schema

const triage = { severity: "high", labels: ["crash", "regression"] }

// The model's first try says "urgent", which the Schema does not allow; a retry (the CLI's own,
// or Tether's repair turn naming the issue) gets it right. "Refuse" turns never give a value.
const script: Model.Model = ({ prompt, results, offered, history }) => {
  if (history.includes("Refuse")) return Model.answer("I would rather not say.")
  const retry = results.length > 0 || prompt.includes("does not match the required JSON Schema")
  const value = retry ? triage : { ...triage, severity: "urgent" }
  return offered.includes("StructuredOutput")
    ? Model.call("StructuredOutput", value) // Claude Code's tool for --json-schema
    : Model.answer(JSON.stringify(value))
}

const program = Effect.gen(function*() {
  const sandbox = yield* Harness.sandbox
  const name = Model.driverArg()
  const agent = yield* Agent.make({
    driver: yield* Model.offline(name, script),
    definition: { instructions: "You triage issues.", skills: [], tools: Toolkit.empty },
    workspace: sandbox.workspace,
    profile: sandbox.selection
  })

  // #region readme-runas
  // `value` is a `typeof Triage.Type`; `result` is the Result of the turn that gave it.
  const { value, attempts, result } = yield* agent.runAs(Triage, "Triage ISSUE-42: the app crashes on start.")
  // No valid value (after `repairs` repair turns, default 1): StructuredOutputError with the raw text.
  const failure = yield* Effect.flip(agent.runAs(Triage, "Refuse to triage ISSUE-43.", { repairs: 0 }))
  // #endregion readme-runas
  View.write(`${View.bold("value".padEnd(9))} ${JSON.stringify(value)}  ${View.dim(`after ${attempts} turn(s)`)}\n`)
  View.write(`${View.bold("failure".padEnd(9))} ${failure.message}\n`)

  const check = View.checks()
  check.claim("the value is decoded with the Schema", value.severity === "high" && value.labels.length === 2)
  check.claim(
    "a violating first answer was retried: by Claude Code itself, else by one Tether repair turn",
    name === "claude" ? attempts === 1 : attempts === 2
  )
  check.claim("the Result of the turn that gave the value comes with it", result.session !== undefined)
  check.claim(
    "no value: StructuredOutputError with the answer's raw text",
    failure._tag === "StructuredOutputError" && failure.text === "I would rather not say."
  )
  check.conclude(`structured output: ${JSON.stringify(value)}`)
}).pipe(
  Effect.scoped,
  Effect.provide(Harness.layer),
  Logger.withMinimumLogLevel(LogLevel.Warning)
)

// runMain: SIGINT / SIGTERM interrupt the program, so every scope closes (the agent's ordered
// close: processes stopped, clone removed, token revoked) before the process exits.
NodeRuntime.runMain(program)
