/**
 * Structured output: a turn whose answer is a value of an Effect Schema.
 *
 * `agent.runAs(schema, turn)` / `thread.runAs(schema, turn)` run the turn and return the
 * `Result` plus `value`, decoded with `schema`. The JSON Schema the provider is given is derived
 * from `schema` as every tool output's is (`Catalog.outputSchema` of `@tether/tool`: the encoded
 * side; a schema that is not an object travels in a `{ "result": … }` envelope).
 *
 * - A `native` driver (`Driver.capabilities.structuredOutput`) hands the JSON Schema to its
 *   provider (Claude Code `--json-schema`, Codex `--output-schema`) and reports what the provider
 *   returned. Claude Code validates the model's attempts itself and gives the model another try;
 *   Codex does not validate. An `instruction` driver gets the JSON Schema in an instruction
 *   appended to the turn's input, and the JSON value is extracted from the final answer's text:
 *   the whole text, else the last fenced code block that is JSON, else the last JSON object or
 *   array in it.
 * - Tether validates every value: it is decoded with `schema` (excess properties are an error).
 *   A value that does not decode, or an answer without one, fails with `StructuredOutputError`
 *   carrying the answer's text and the Schema's issues: nothing unvalidated reaches the caller.
 * - Repair turns: when the answer does not decode, up to `repairs` more turns (default 1) continue
 *   the same provider session, telling the model the issues, and the first value that decodes
 *   wins. A repair turn resumes the session, so it needs a driver that can resume: with one that
 *   cannot, the default is no repair turn and asking for one fails with `UnsupportedCapability`
 *   before anything runs. No repair turn follows a provider that gave up after its own retries
 *   (Claude Code's `error_max_structured_output_retries`).
 * - On a thread each attempt is a turn of the thread (a repair turn resumes the checkpoint the
 *   previous attempt committed, under a lease of its own; it carries no turn `id`). On a live
 *   thread (`Driver.capabilities.liveStructuredOutput`) the attempts of a driver whose live
 *   protocol takes the JSON Schema per turn (Codex `turn/start.outputSchema`) and of an
 *   instruction driver run on the warm process, repair turns included; a native driver whose
 *   live protocol cannot take it per turn (Claude Code) runs each attempt one-shot, resuming the
 *   checkpoint, and the thread's next turn goes on live.
 *
 * @example
 * ```ts
 * import type { Agent } from "@tether/core"
 * import { Effect, Schema } from "effect"
 *
 * declare const agent: Agent.Agent
 *
 * const Triage = Schema.Struct({
 *   severity: Schema.Literal("low", "high"),
 *   labels: Schema.Array(Schema.String)
 * })
 *
 * const program = Effect.gen(function*() {
 *   const { value, result } = yield* agent.runAs(Triage, "Triage ISSUE-42.")
 *   // value: { readonly severity: "low" | "high"; readonly labels: ReadonlyArray<string> }
 *   return `${value.severity} (${value.labels.join(", ")}), run ${result.runId}`
 * })
 * ```
 *
 * @since 0.2.0
 */
import * as Schema from "effect/Schema"
import { Result } from "./Result.js"

/**
 * The options of `runAs` / `streamAs`.
 *
 * - `repairs`: how many repair turns may follow an answer that does not decode (a non-negative
 *   integer; default 1, or 0 when the driver cannot resume).
 *
 * @since 0.2.0
 * @category models
 */
export interface Options {
  readonly repairs?: number
}

/**
 * The decoded answer: `value` and the `Result` of the turn that produced it (after repair turns,
 * the last one). `attempts` counts the turns run (1 without a repair).
 *
 * It is also the last element of `streamAs`, after the events of every attempt.
 *
 * @since 0.2.0
 * @category models
 */
export interface Decoded<A> {
  readonly _tag: "Decoded"
  readonly value: A
  readonly result: Result
  readonly attempts: number
}

/**
 * One issue of a value that does not decode: where (`path`, from the value's root) and what.
 *
 * @since 0.2.0
 * @category models
 */
export class Issue extends Schema.Class<Issue>("@tether/core/StructuredOutputIssue")({
  path: Schema.Array(Schema.Union(Schema.String, Schema.Number)),
  message: Schema.String
}) {}

/**
 * The turn's answer is not a value of the Schema, after every repair turn:
 * - `Missing`: the answer holds no JSON value (a native provider returned no structured output;
 *   the text of an instruction-driven answer holds no JSON);
 * - `Invalid`: the value does not decode with the Schema (`issues` says why);
 * - `ProviderGaveUp`: the provider validated the model's attempts itself and stopped after its
 *   own retries (`issues` holds its last message); the run failed.
 *
 * `text` is the last answer's raw text and `result` its turn's `Result`; `attempts` counts the
 * turns run. The value itself never leaves Tether.
 *
 * @since 0.2.0
 * @category errors
 */
export class StructuredOutputError
  extends Schema.TaggedError<StructuredOutputError>("@tether/core/StructuredOutputError")("StructuredOutputError", {
    reason: Schema.Literal("Missing", "Invalid", "ProviderGaveUp"),
    text: Schema.String,
    issues: Schema.Array(Issue),
    attempts: Schema.Number,
    result: Result
  })
{
  override get message(): string {
    const first = this.issues.slice(0, 3).map((issue) =>
      issue.path.length === 0 ? issue.message : `${issue.path.join(".")}: ${issue.message}`
    )
    const more = this.issues.length > 3 ? ` (and ${this.issues.length - 3} more)` : ""
    const after = `after ${this.attempts} ${this.attempts === 1 ? "attempt" : "attempts"}`
    switch (this.reason) {
      case "Missing":
        return `the answer holds no structured output (${after})`
      case "Invalid":
        return `the structured output does not match the schema (${after}): ${first.join("; ")}${more}`
      case "ProviderGaveUp":
        return `the provider gave up on the structured output (${after}): ${first.join("; ")}${more}`
    }
  }
}
