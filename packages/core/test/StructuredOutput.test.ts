/**
 * `runAs` / `streamAs` through the public API with the reference driver (a real process per
 * attempt): the instruction and native paths, Tether's own validation, repair turns and their
 * bounds. The real CLIs are covered in @tether/drivers (ClaudeStructured, CodexStructured,
 * GeminiStructured).
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type { Driver } from "@tether/core"
import { Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as SchemaAST from "effect/SchemaAST"
import * as Stream from "effect/Stream"

const Triage = Schema.Struct({
  severity: Schema.Literal("low", "high"),
  labels: Schema.Array(Schema.String),
  owner: Schema.optional(Schema.String),
  links: Schema.Array(Schema.Struct({ url: Schema.String, note: Schema.optional(Schema.String) }))
})
const valid = { severity: "high", labels: ["bug"], links: [{ url: "https://example.invalid/1" }] }

/** What the provider answers: a final text, or what it returned natively for the schema. */
type Answer =
  | { readonly text: string }
  | { readonly text: string; readonly structured: Driver.StructuredOutput | undefined; readonly ok?: boolean }

const steps = (answer: Answer, session: string): ReadonlyArray<Reference.Step> => {
  const [started, delta, message, terminal] = Reference.answer(answer.text, session)
  if (!("structured" in answer)) return [started!, delta!, message!, terminal!]
  const ok = answer.ok ?? true
  return [started!, delta!, message!, {
    ...(terminal as Driver.Terminal),
    ok,
    error: ok ? undefined : "the provider gave up",
    ...(answer.structured === undefined ? {} : { structuredOutput: answer.structured })
  }]
}

interface Seen {
  readonly prompts: Array<string>
  readonly sessions: Array<Driver.SessionRequest>
  readonly schemas: Array<Driver.JsonSchema | undefined>
}

/** The reference driver answering `answers` in turn, recording what each invocation asked. */
const scripted = (answers: ReadonlyArray<Answer>, capabilities: Partial<Driver.Capabilities> = {}) => {
  const seen: Seen = { prompts: [], sessions: [], schemas: [] }
  const base = Reference.driver({
    capabilities: { resume: true, ...capabilities },
    respond: () => steps(answers[seen.prompts.length - 1] ?? { text: "" }, "session-1")
  })
  const driver: Driver.Driver = {
    ...base,
    prepare: (request) =>
      Effect.suspend(() => {
        seen.prompts.push(request.prompt)
        seen.sessions.push(request.session)
        seen.schemas.push(request.outputSchema)
        return base.prepare(request)
      })
  }
  return { driver, seen }
}

const withAgent = <A, E>(driver: Driver.Driver, body: (agent: Agent.Agent) => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const agent = yield* Agent.make({
      driver,
      definition: { instructions: "Be brief.", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection
    })
    return yield* body(agent)
  }).pipe(Effect.scoped, Effect.provide(Harness.layer))

describe("runAs with an instruction driver", () => {
  it.live("the turn carries the JSON Schema; the answer's JSON is extracted from prose and decoded", () =>
    Effect.gen(function*() {
      const { driver, seen } = scripted([{
        text: `Here you are {not json}:\n\`\`\`json\n${JSON.stringify(valid)}\n\`\`\`\nDone.`
      }])
      const decoded = yield* withAgent(driver, (agent) => agent.runAs(Triage, "Triage ISSUE-42."))
      expect(decoded.value).toEqual(valid)
      expect(decoded.attempts).toBe(1)
      expect(decoded.result.text).toContain("Here you are")
      expect(seen.prompts[0]).toMatch(/^Triage ISSUE-42\.\n\n/)
      expect(seen.prompts[0]).toContain("\"severity\":{\"type\":\"string\",\"enum\":[\"low\",\"high\"]}")
      expect(seen.schemas).toEqual([undefined])
    }))

  it.live("an answer that does not decode gets a repair turn on the same session naming the issues", () =>
    Effect.gen(function*() {
      const wrong = { ...valid, severity: "urgent", extra: 1 }
      const { driver, seen } = scripted([{ text: JSON.stringify(wrong) }, { text: JSON.stringify(valid) }])
      const items = yield* withAgent(
        driver,
        (agent) => Stream.runCollect(agent.streamAs(Triage, { input: "Triage ISSUE-42.", id: "turn-1" }))
      )
      const all = Array.from(items)
      const last = all.at(-1)!
      expect(last._tag).toBe("Decoded")
      expect(last._tag === "Decoded" && last.value).toEqual(valid)
      expect(last._tag === "Decoded" && last.attempts).toBe(2)
      // Both attempts' events, each its own run, then the value.
      expect(all.filter((item) => item._tag === "RunFinished")).toHaveLength(2)
      expect(seen.sessions[0]!._tag).toBe("New")
      expect(seen.sessions[1]).toEqual({ _tag: "Resume", id: "session-1" })
      expect(seen.prompts[1]).toContain("does not match the required JSON Schema")
      expect(seen.prompts[1]).toContain("- severity: Expected \"low\", actual \"urgent\"")
      expect(seen.prompts[1]).toContain("- extra: is unexpected")
      expect(seen.prompts[1]).toContain("\n\nJSON Schema:\n{")
    }))

  it.live("a number JSON cannot hold (1e999 reads as Infinity) is invalid: a repair turn names where", () =>
    Effect.gen(function*() {
      const Readings = Schema.Struct({ values: Schema.Array(Schema.Number) })
      const { driver, seen } = scripted([{ text: "{\"values\":[1,-1e999]}" }, { text: "{\"values\":[1,2]}" }])
      const decoded = yield* withAgent(driver, (agent) => agent.runAs(Readings, "Read."))
      expect(decoded.value).toEqual({ values: [1, 2] })
      expect(decoded.attempts).toBe(2)
      expect(seen.prompts[1]).toContain("- values.[1]: Expected a finite number")
      // Without a repair turn: the issue is the error's.
      const again = scripted([{ text: "{\"values\":[1e999]}" }])
      const error = yield* withAgent(
        again.driver,
        (agent) => Effect.flip(agent.runAs(Readings, "Read.", { repairs: 0 }))
      )
      expect(error._tag === "StructuredOutputError" && [error.reason, error.issues.map((issue) => issue.path)])
        .toEqual(["Invalid", [["values", 0]]])
    }))

  it.live("an own __proto__ key (which the decoder would make the record's prototype) is invalid: repaired", () =>
    Effect.gen(function*() {
      const Counts = Schema.Record({ key: Schema.String, value: Schema.Number })
      const { driver, seen } = scripted([
        { text: "{\"a\":1,\"__proto__\":{\"polluted\":1}}" },
        { text: "{\"a\":1}" }
      ])
      const decoded = yield* withAgent(driver, (agent) => agent.runAs(Counts, "Count."))
      expect(decoded.value).toEqual({ a: 1 })
      expect(Object.getPrototypeOf(decoded.value)).toBe(Object.prototype)
      expect(decoded.attempts).toBe(2)
      expect(seen.prompts[1]).toContain("- __proto__: is unexpected (an own __proto__ key)")
    }))

  it.live("an answer still invalid after the repairs fails with StructuredOutputError: text and issues", () =>
    Effect.gen(function*() {
      const { driver, seen } = scripted([
        { text: "I cannot answer in JSON." },
        { text: "{\"severity\":\"low\",\"labels\":[1]}" },
        { text: "never asked" }
      ])
      const error = yield* withAgent(driver, (agent) => Effect.flip(agent.runAs(Triage, "Triage.", { repairs: 1 })))
      expect(error._tag).toBe("StructuredOutputError")
      if (error._tag !== "StructuredOutputError") return
      expect(error.reason).toBe("Invalid")
      expect(error.attempts).toBe(2)
      expect(error.text).toBe("{\"severity\":\"low\",\"labels\":[1]}")
      expect(error.result.text).toBe(error.text)
      expect(error.issues.map((issue) => issue.path)).toEqual([["labels", 0], ["links"]])
      expect(error.message).toContain("does not match the schema (after 2 attempts)")
      // The first answer had no JSON: its repair turn said so.
      expect(seen.prompts[1]).toContain("did not provide the required structured output")
      expect(seen.prompts).toHaveLength(2)
    }))

  it.live("a value that is not an object travels in the result envelope", () =>
    Effect.gen(function*() {
      const { driver, seen } = scripted([{ text: "{\"result\":[1,2,3]}" }])
      const decoded = yield* withAgent(driver, (agent) => agent.runAs(Schema.Array(Schema.Number), "Count."))
      expect(decoded.value).toEqual([1, 2, 3])
      expect(seen.prompts[0]).toContain("\"required\":[\"result\"]")
    }))
})

describe("runAs refuses what it cannot do before anything runs", () => {
  it.live("a driver that cannot resume gets no repair turn by default and refuses one asked for", () =>
    Effect.gen(function*() {
      const { driver, seen } = scripted([{ text: "no json" }], { resume: false })
      const [refused, failed] = yield* withAgent(driver, (agent) =>
        Effect.all([
          Effect.flip(agent.runAs(Triage, "Triage.", { repairs: 1 })),
          Effect.flip(agent.runAs(Triage, "Triage."))
        ]))
      expect(refused).toMatchObject({ _tag: "UnsupportedCapability", capability: "resume" })
      expect(failed).toMatchObject({ _tag: "StructuredOutputError", reason: "Missing", attempts: 1 })
      expect(seen.prompts).toHaveLength(1)
    }))

  it.live("a Schema without a JSON Schema, or a bad repairs count, is InvalidTurn", () =>
    Effect.gen(function*() {
      const { driver, seen } = scripted([])
      const [bigint, negative] = yield* withAgent(driver, (agent) =>
        Effect.all([
          Effect.flip(agent.runAs(Schema.Struct({ n: Schema.BigIntFromSelf }), "n?")),
          Effect.flip(agent.runAs(Triage, "Triage.", { repairs: -1 }))
        ]))
      expect(bigint).toMatchObject({ _tag: "InvalidTurn", reason: "InvalidStructuredOutput" })
      expect(negative).toMatchObject({ _tag: "InvalidTurn", reason: "InvalidStructuredOutput" })
      expect(seen.prompts).toHaveLength(0)
    }))

  // Effect publishes `Schema.Never` as `{"not":{}}`: without the check, each of these ran every
  // attempt (the first and its repair) as a paid turn whose answer could never decode.
  // `Schema.Never`'s own type is not a `Schema<never>` under exactOptionalPropertyTypes (its
  // `annotations`): the same AST, typed as one.
  const never = Schema.make<never>(SchemaAST.neverKeyword)
  // Tuples of it, built as ASTs for the same reason: required elements, and a rest element.
  const tuple = (elements: ReadonlyArray<SchemaAST.AST>, rest: ReadonlyArray<SchemaAST.AST>) =>
    Schema.make<ReadonlyArray<string>>(
      new SchemaAST.TupleType(
        elements.map((type) => new SchemaAST.OptionalType(type, false)),
        rest.map((type) => new SchemaAST.Type(type)),
        true
      )
    )
  class Nothing extends Schema.Class<Nothing>("Nothing")({ never }) {}
  const refusing =
    <A, I>(schema: Schema.Schema<A, I>) => (agent: Agent.Agent): Effect.Effect<unknown, { readonly _tag: string }> =>
      agent.runAs(schema, "Answer.")
  const noValue = [
    ["Never", refusing(Schema.Never)],
    ["Union(Never, Never)", refusing(Schema.Union(never, never))],
    ["a required Never field", refusing(Schema.Struct({ a: Schema.String, b: Schema.Struct({ c: never }) }))],
    ["a required Never tuple element", refusing(tuple([SchemaAST.stringKeyword, SchemaAST.neverKeyword], []))],
    ["a class with a Never field", refusing(Nothing)],
    [
      "a suspended Never field",
      refusing(Schema.Struct({ a: Schema.suspend(() => never).annotations({ identifier: "Gone" }) }))
    ],
    [
      "a transformation to Never",
      refusing(
        Schema.make<never, string>(
          new SchemaAST.Transformation(
            SchemaAST.stringKeyword,
            SchemaAST.neverKeyword,
            new SchemaAST.FinalTransformation(ParseResult.succeed, ParseResult.succeed)
          )
        )
      )
    ],
    [
      "a refined Never",
      refusing(Schema.make<never>(new SchemaAST.Refinement(SchemaAST.neverKeyword, () => Option.none())))
    ]
  ] as const
  for (const structuredOutput of ["instruction", "native"] as const) {
    it.live(`a Schema no value satisfies is InvalidTurn before any turn (${structuredOutput})`, () =>
      Effect.gen(function*() {
        const { driver, seen } = scripted([], { structuredOutput })
        const errors = yield* withAgent(
          driver,
          (agent) => Effect.forEach(noValue, ([, run]) => Effect.flip(run(agent)))
        )
        expect(errors.map((error, i) => [noValue[i]![0], error._tag, (error as { reason?: string }).reason]))
          .toEqual(noValue.map(([name]) => [name, "InvalidTurn", "InvalidStructuredOutput"]))
        expect(seen.prompts).toHaveLength(0)
      }))
  }

  it.live("a thread's runAs of a Schema no value satisfies runs and commits no turn", () =>
    Effect.gen(function*() {
      const { driver, seen } = scripted([], { structuredOutput: "native" })
      const [error, record] = yield* withAgent(driver, (agent) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("never")
          const error = yield* Effect.flip(thread.runAs(Schema.Never, "Answer."))
          return [error, yield* thread.snapshot] as const
        }))
      expect(error).toMatchObject({ _tag: "InvalidTurn", reason: "InvalidStructuredOutput" })
      expect(record._tag).toBe("None")
      expect(seen.prompts).toHaveLength(0)
    }))

  it.live("a Schema some value satisfies, though it holds Never where nothing is required, runs", () =>
    Effect.gen(function*() {
      const answers = ["{\"result\":[]}", "{\"a\":\"x\"}", "{}", "{\"result\":null}"]
      const { driver, seen } = scripted(answers.map((text) => ({ text })))
      const values = yield* withAgent(driver, (agent) =>
        Effect.all([
          agent.runAs(tuple([], [SchemaAST.neverKeyword]), "1"),
          agent.runAs(Schema.Struct({ a: Schema.String, b: Schema.optional(never) }), "2"),
          agent.runAs(
            Schema.make<{}>(
              new SchemaAST.TypeLiteral([], [
                new SchemaAST.IndexSignature(SchemaAST.stringKeyword, SchemaAST.neverKeyword, true)
              ])
            ),
            "3"
          ),
          agent.runAs(Schema.make<null>(SchemaAST.Union.make([SchemaAST.null, SchemaAST.neverKeyword])), "4")
        ]))
      expect(values.map((decoded) => decoded.value)).toEqual([[], { a: "x" }, {}, null])
      expect(seen.prompts).toHaveLength(4)
    }))
})

describe("runAs with a native driver", () => {
  const native = { structuredOutput: "native" } as const

  it.live("the driver gets the JSON Schema and the prompt as it is; the provider's value is decoded", () =>
    Effect.gen(function*() {
      const { driver, seen } = scripted([{ text: "done", structured: { _tag: "Value", value: valid } }], native)
      const decoded = yield* withAgent(driver, (agent) => agent.runAs(Triage, "Triage."))
      expect(decoded.value).toEqual(valid)
      expect(seen.prompts).toEqual(["Triage."])
      expect(seen.schemas[0]).toMatchObject({ type: "object", required: ["severity", "labels", "links"] })
    }))

  it.live("a JSON Schema the driver says its provider refuses is asked for by instruction instead", () =>
    Effect.gen(function*() {
      const Counts = Schema.Record({ key: Schema.String, value: Schema.Number })
      const { driver, seen } = scripted([
        { text: "Here: {\"a\":1,\"b\":2}", structured: undefined },
        { text: "done", structured: { _tag: "Value", value: valid } }
      ], native)
      const refused: Array<Driver.JsonSchema> = []
      const refusing: Driver.Driver = {
        ...driver,
        outputSchemaRefusal: (jsonSchema) => {
          refused.push(jsonSchema)
          return jsonSchema["additionalProperties"] === false ? undefined : "an open object"
        }
      }
      const [counts, triage] = yield* withAgent(
        refusing,
        (agent) => Effect.all([agent.runAs(Counts, "Count."), agent.runAs(Triage, "Triage.")])
      )
      // Refused: no schema to the driver, the instruction in the prompt, the JSON read from the text.
      expect(counts.value).toEqual({ a: 1, b: 2 })
      expect(seen.schemas[0]).toBeUndefined()
      expect(seen.prompts[0]).toContain("\n\nJSON Schema:\n{")
      // Taken: native as before.
      expect(triage.value).toEqual(valid)
      expect(seen.prompts[1]).toBe("Triage.")
      expect(seen.schemas[1]).toMatchObject({ type: "object", additionalProperties: false })
      expect(refused.map((jsonSchema) => jsonSchema["additionalProperties"])).toEqual([{ type: "number" }, false])
    }))

  it.live("Tether validates the provider's value: an invalid one gets a repair turn without the instruction", () =>
    Effect.gen(function*() {
      const { driver, seen } = scripted([
        { text: "x", structured: { _tag: "Value", value: { ...valid, labels: "bug" } } },
        { text: "y", structured: { _tag: "Value", value: valid } }
      ], native)
      const decoded = yield* withAgent(driver, (agent) => agent.runAs(Triage, "Triage."))
      expect(decoded.attempts).toBe(2)
      expect(seen.prompts[1]).toContain("- labels: Expected ReadonlyArray<string>, actual \"bug\"")
      expect(seen.prompts[1]).not.toContain("\n\nJSON Schema:\n{")
      expect(seen.schemas[1]).toEqual(seen.schemas[0])
    }))

  it.live("an absent value is a failure, never an empty value; a provider that gave up gets no repair", () =>
    Effect.gen(function*() {
      const absent = scripted([{ text: "{}", structured: undefined }], native)
      const missing = yield* withAgent(absent.driver, (agent) => Effect.flip(agent.runAs(Triage, "T.", { repairs: 0 })))
      expect(missing).toMatchObject({ _tag: "StructuredOutputError", reason: "Missing", text: "{}" })
      const gaveUp = scripted([{ text: "", structured: { _tag: "GaveUp", detail: "max retries" }, ok: false }], native)
      const error = yield* withAgent(gaveUp.driver, (agent) => Effect.flip(agent.runAs(Triage, "T.")))
      expect(error).toMatchObject({ _tag: "StructuredOutputError", reason: "ProviderGaveUp", attempts: 1 })
      expect(error._tag === "StructuredOutputError" && error.issues[0]!.message).toBe("max retries")
      expect(gaveUp.seen.prompts).toHaveLength(1)
    }))
})

describe("thread.runAs", () => {
  it.live("each attempt is a turn of the thread: the repair turn resumes the committed checkpoint", () =>
    Effect.gen(function*() {
      const { driver, seen } = scripted([{ text: "{\"severity\":\"none\"}" }, { text: JSON.stringify(valid) }])
      const [decoded, turns] = yield* withAgent(driver, (agent) =>
        Effect.gen(function*() {
          const thread = yield* agent.thread("triage")
          const decoded = yield* thread.runAs(Triage, { input: "Triage.", id: "t-1" })
          const record = yield* thread.snapshot
          return [decoded, record._tag === "Some" ? record.value.turns : 0] as const
        }))
      expect(decoded.attempts).toBe(2)
      expect(turns).toBe(2)
      expect(seen.sessions[1]).toMatchObject({ _tag: "Resume", id: "session-1" })
    }))
})
