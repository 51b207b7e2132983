import { describe, expect, it } from "@effect/vitest"
import type { Catalog } from "@tether/tool"
import { Tool, Toolkit } from "@tether/tool"
import { Ajv2020 } from "ajv/dist/2020.js"
import * as Arbitrary from "effect/Arbitrary"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { executorFrom } from "../src/internal/toolkit.js"
import { captureLogs, render } from "./fixtures/logs.js"
import { inputs, outputs } from "./fixtures/tools.js"

const secret = "SECRET-7f3a9c"

class HostFailure extends Schema.TaggedError<HostFailure>()("HostFailure", { detail: Schema.String }) {}
class Wrapper extends Data.TaggedError("Wrapper")<{ readonly cause: unknown }> {}
class Leaky extends Data.TaggedError("Leaky")<{ readonly token: Redacted.Redacted<string> }> {
  override get message() {
    return `token ${this.token} rejected by ${secret}`
  }
}

const Echo = Tool.make("echo", {
  description: "Echoes text.",
  input: { text: Schema.String, times: Schema.optional(Schema.NumberFromString) },
  output: Schema.Struct({ text: Schema.String, at: Schema.Date }),
  failure: HostFailure
})
const Numbers = Tool.make("numbers", {
  description: "Lists numbers.",
  input: { count: Schema.Int },
  output: Schema.Array(Schema.Number)
})
const Anything = Tool.make("anything", {
  description: "Returns whatever the test asks for.",
  input: { mode: Schema.String },
  output: Schema.Unknown
})

const kit = Toolkit.make(Echo, Numbers, Anything)

const forged = (): ReadonlyArray<readonly [string, unknown]> => {
  const real = Tool.rejection("not_found", "Choose another key.")
  const proto = Object.getPrototypeOf(real) as object
  const RealClass = proto.constructor as new(args: { code: string; message: string }) => object
  class Subclass extends RealClass {}
  return [
    ["lookalike-object", { _tag: "Rejection", code: "not_found", message: secret }],
    ["lookalike-error", Object.assign(new Error(secret), { _tag: "Rejection", code: "not_found" })],
    ["internal-class", new RealClass({ code: "not_found", message: secret })],
    ["subclass", new Subclass({ code: "not_found", message: secret })],
    ["copied-prototype", Object.create(proto, { code: { value: "not_found" }, message: { value: secret } })]
  ]
}

const behaviours: Record<string, () => Effect.Effect<unknown, unknown>> = {
  ok: () => Effect.succeed({ any: "thing", list: [1, 2] }),
  string: () => Effect.succeed("plain"),
  reject: () => Tool.reject("quota.exceeded", "Wait a minute, then retry."),
  rejectWrapped: () =>
    Tool.reject("busy", "Retry later.").pipe(
      Effect.mapError((cause) => new Wrapper({ cause })),
      Effect.mapError((cause) => new Error("outer", { cause })),
      Effect.orDie
    ),
  rejectBadCode: () => Tool.reject("bad code!", "Nope."),
  rejectLongMessage: () => Tool.reject("long", "x".repeat(4097)),
  fail: () => Effect.fail(new HostFailure({ detail: secret })),
  leak: () => Effect.fail(new Leaky({ token: Redacted.make("hunter2-token") })),
  die: () => Effect.die(new Error(secret)),
  throwString: () => {
    throw secret
  },
  throwInside: () =>
    Effect.sync(() => {
      throw { secret }
    }),
  interruptSelf: () => Effect.interrupt,
  nan: () => Effect.succeed({ value: Number.NaN }),
  infinity: () => Effect.succeed([Number.POSITIVE_INFINITY]),
  fn: () => Effect.succeed({ value: () => 1 }),
  date: () => Effect.succeed({ value: new Date(0) }),
  bigint: () => Effect.succeed({ value: 1n }),
  cycle: () => {
    const a: Record<string, unknown> = {}
    a["self"] = a
    return Effect.succeed(a)
  },
  ...Object.fromEntries(forged().map(([label, value]) => [`forged-${label}`, () => Effect.fail(value)]))
}

const handlers = kit.of({
  echo: ({ text }) =>
    text === "fail" ? Effect.fail(new HostFailure({ detail: secret })) : Effect.succeed({ text, at: new Date(0) }),
  numbers: ({ count }) =>
    count < 0 ? Effect.succeed(["not", "numbers"] as unknown as Array<number>) : Effect.succeed(
      Array.from({ length: count }, (_, i) => i)
    ),
  anything: ({ mode }) => Effect.suspend(behaviours[mode]!)
})

const executor = executorFrom(kit, handlers)

const run = (name: string, input: unknown, options?: Catalog.ExecuteOptions) =>
  Effect.flatMap(executor, (e) => e.execute(name, input, options))

describe("Executor.execute outcomes", () => {
  it.effect("internal_error when an input or output transformation throws", () =>
    Effect.gen(function*() {
      const Throwing = Schema.transform(Schema.String, Schema.String, {
        strict: true,
        decode: () => {
          throw new Error(secret)
        },
        encode: (s) => s
      })
      const ThrowsOnDecode = Tool.make("decode", { description: "d", input: { a: Throwing }, output: Schema.String })
      const ThrowsOnEncode = Tool.make("encode", {
        description: "d",
        input: {},
        output: Schema.transform(Schema.String, Schema.String, {
          strict: true,
          decode: (s) => s,
          encode: () => {
            throw new Error(secret)
          }
        })
      })
      const executor = yield* executorFrom(Toolkit.make(ThrowsOnDecode, ThrowsOnEncode), {
        decode: () => Effect.succeed("x"),
        encode: () => Effect.succeed("x")
      })
      for (const [name, input] of [["decode", { a: "x" }], ["encode", {}]] as const) {
        const [outcome, lines] = yield* captureLogs(executor.execute(name, input))
        expect(outcome).toStrictEqual({ _tag: "Failed", code: "internal_error", message: "The tool failed." })
        expect(render(lines)).toContain(secret)
      }
    }))

  it.effect("success: object output as structuredContent with its JSON text", () =>
    Effect.gen(function*() {
      const outcome = yield* run("echo", { text: "hi", times: "2" })
      expect(outcome).toStrictEqual({
        _tag: "Success",
        structuredContent: { text: "hi", at: "1970-01-01T00:00:00.000Z" },
        text: JSON.stringify({ text: "hi", at: "1970-01-01T00:00:00.000Z" })
      })
    }))

  it.effect("success: a non-object output is wrapped in a result envelope", () =>
    Effect.gen(function*() {
      expect(yield* run("numbers", { count: 3 })).toStrictEqual({
        _tag: "Success",
        structuredContent: { result: [0, 1, 2] },
        text: "{\"result\":[0,1,2]}"
      })
      expect(yield* run("anything", { mode: "string" })).toMatchObject({ structuredContent: { result: "plain" } })
    }))

  it.effect("rejected: the rejection's code and message, also when wrapped", () =>
    Effect.gen(function*() {
      expect(yield* run("anything", { mode: "reject" })).toStrictEqual({
        _tag: "Rejected",
        code: "quota.exceeded",
        message: "Wait a minute, then retry."
      })
      expect(yield* run("anything", { mode: "rejectWrapped" })).toStrictEqual({
        _tag: "Rejected",
        code: "busy",
        message: "Retry later."
      })
    }))

  it.effect("a rejection that breaks the code or message rules is an internal error", () =>
    Effect.gen(function*() {
      for (const mode of ["rejectBadCode", "rejectLongMessage"]) {
        const [outcome, lines] = yield* captureLogs(run("anything", { mode }))
        expect(outcome).toMatchObject({ _tag: "Failed", code: "internal_error" })
        expect(lines.some((line) => line.level === "ERROR")).toBe(true)
      }
    }))

  for (const [label] of forged()) {
    it.effect(`a forged rejection (${label}) is an internal error without its text`, () =>
      Effect.gen(function*() {
        const outcome = yield* run("anything", { mode: `forged-${label}` })
        expect(outcome).toStrictEqual({ _tag: "Failed", code: "internal_error", message: "The tool failed." })
      }))
  }

  it.effect("invalid_input names the first offending field and never a value", () =>
    Effect.gen(function*() {
      const wrongType = yield* run("echo", { text: 123456789 })
      expect(wrongType).toStrictEqual({
        _tag: "Failed",
        code: "invalid_input",
        message: "The tool input is invalid at text."
      })
      const badNested = yield* run("echo", { text: "a", times: secret })
      expect(badNested._tag === "Failed" && badNested.message).toBe("The tool input is invalid at times.")
      const excess = yield* run("echo", { text: "a", [secret]: secret.repeat(2) })
      // The offending field is the excess key itself; its value is never shown.
      expect(excess._tag === "Failed" && [excess.code, excess.message]).toStrictEqual([
        "invalid_input",
        `The tool input is invalid at ["${secret}"].`
      ])
      expect(JSON.stringify(excess)).not.toContain(secret.repeat(2))
      for (const input of [null, "text", [], 42, undefined]) {
        expect(yield* run("echo", input)).toStrictEqual({
          _tag: "Failed",
          code: "invalid_input",
          message: "The tool input is invalid."
        })
      }
    }))

  it.effect("a non-finite number anywhere in the input is invalid_input naming its field; the handler never runs", () =>
    Effect.gen(function*() {
      const Scale = Tool.make("scale", {
        description: "Scales points.",
        input: {
          factor: Schema.Number,
          points: Schema.Array(Schema.Struct({ x: Schema.Number })),
          extra: Schema.optional(Schema.Unknown)
        },
        output: Schema.Struct({ ok: Schema.Boolean })
      })
      let ran = 0
      const executor = yield* executorFrom(Toolkit.make(Scale), {
        scale: () => Effect.sync(() => (ran++, { ok: true }))
      })
      const invalidAt = (path: string) => ({
        _tag: "Failed",
        code: "invalid_input",
        message: `The tool input is invalid at ${path}.`
      })
      let deep: unknown = [Number.NaN]
      for (let i = 0; i < 10_000; i++) deep = [deep]
      // `undefined`: the path is too long to render whole (it ends with "…").
      const cases: ReadonlyArray<readonly [unknown, string | undefined]> = [
        // `1e309` is what a JSON body carries: it parses to Infinity and passes Schema.Number.
        [JSON.parse("{\"factor\":1e309,\"points\":[]}"), "factor"],
        [{ factor: Number.NaN, points: [] }, "factor"],
        [{ factor: 1, points: [{ x: 1 }, { x: Number.NEGATIVE_INFINITY }] }, "points[1].x"],
        [{ factor: 1, points: [], extra: { list: [0, [Number.POSITIVE_INFINITY]] } }, "extra.list[1][0]"],
        [{ factor: 1, points: [], extra: deep }, undefined]
      ]
      for (const [input, path] of cases) {
        const outcome = yield* executor.execute("scale", input)
        expect(outcome._tag === "Failed" && outcome.code).toBe("invalid_input")
        if (path === undefined) {
          expect(outcome._tag === "Failed" && outcome.message).toMatch(/^The tool input is invalid at extra[[\]0]+…\.$/)
        } else expect(outcome).toStrictEqual(invalidAt(path))
      }
      expect(ran).toBe(0)
      // Finite numbers, deep nesting and (from a direct caller) cycles are fine.
      const cyclic: Record<string, unknown> = { n: 1 }
      cyclic["self"] = cyclic
      let finiteDeep: unknown = [1]
      for (let i = 0; i < 10_000; i++) finiteDeep = [finiteDeep]
      for (const extra of [finiteDeep, cyclic, { max: Number.MAX_VALUE, min: -Number.MAX_VALUE }]) {
        expect(yield* executor.execute("scale", { factor: 2, points: [{ x: 1e308 }], extra })).toMatchObject({
          _tag: "Success"
        })
      }
      expect(ran).toBe(3)
    }))

  it.effect("an unknown tool is invalid_input", () =>
    Effect.gen(function*() {
      expect(yield* run("missing", {})).toStrictEqual({
        _tag: "Failed",
        code: "invalid_input",
        message: "Unknown tool."
      })
      expect(yield* run("__proto__", {})).toMatchObject({ code: "invalid_input" })
    }))

  it.effect("invalid_output for outputs that do not encode, are not JSON, or fail the published schema", () =>
    Effect.gen(function*() {
      expect(yield* run("numbers", { count: -1 })).toMatchObject({ _tag: "Failed", code: "invalid_output" })
      for (const mode of ["nan", "infinity", "fn", "date", "bigint", "cycle"]) {
        const [outcome, lines] = yield* captureLogs(run("anything", { mode }))
        expect(outcome).toStrictEqual({
          _tag: "Failed",
          code: "invalid_output",
          message: "The tool produced an output that does not match its output schema."
        })
        expect(lines.map((line) => line.level)).toContain("WARN")
      }
    }))

  it.effect("an output Effect encodes passes the published schema's check: UTF-16 lengths, multipleOf within float error", () =>
    Effect.gen(function*() {
      const Measured = Tool.make("measured", {
        description: "Returns a label and a step.",
        input: {},
        output: Schema.Struct({
          label: Schema.String.pipe(Schema.minLength(2), Schema.maxLength(2)),
          step: Schema.Number.pipe(Schema.multipleOf(0.1))
        })
      })
      const answers: Array<{ readonly label: string; readonly step: number }> = [
        { label: "😀", step: 0.3 }, // one code point, two UTF-16 units; 0.3 / 0.1 is 2.9999999999999996
        { label: "ab", step: 0.7 }
      ]
      for (const answer of answers) {
        const executor = yield* executorFrom(Toolkit.make(Measured), { measured: () => Effect.succeed(answer) })
        expect(yield* executor.execute("measured", {})).toMatchObject({ _tag: "Success", structuredContent: answer })
      }
      // What Effect refuses is still refused (three units; not a multiple).
      for (const answer of [{ label: "a😀", step: 0.1 }, { label: "ab", step: 0.15 }]) {
        const executor = yield* executorFrom(Toolkit.make(Measured), { measured: () => Effect.succeed(answer) })
        expect(yield* executor.execute("measured", {})).toMatchObject({ _tag: "Failed", code: "invalid_output" })
      }
    }))

  it.effect("a pattern with flags: an output it matches is never invalid_output, one it does not match is", () =>
    Effect.gen(function*() {
      const Code = (code: Schema.Schema<string>) =>
        Tool.make("code", { description: "Returns a code.", input: {}, output: Schema.Struct({ code }) })
      const outcome = (regex: RegExp, code: string) =>
        Effect.flatMap(
          executorFrom(Toolkit.make(Code(Schema.String.pipe(Schema.pattern(regex)))), {
            code: () => Effect.succeed({ code })
          }),
          (executor) => executor.execute("code", {})
        )
      // Published as ^[aA][bB][cC]$, as ^a$ would never be: both cases pass, another string does not.
      for (const code of ["ABC", "abc", "aBc"]) {
        expect(yield* outcome(/^abc$/i, code)).toMatchObject({ _tag: "Success", structuredContent: { code } })
      }
      expect(yield* outcome(/^abc$/i, "abd")).toMatchObject({ _tag: "Failed", code: "invalid_output" })
      // Published without a pattern: the Schema's own check still applies.
      expect(yield* outcome(/^b$/m, "a\nb")).toMatchObject({ _tag: "Success" })
      expect(yield* outcome(/^b$/m, "a\nc")).toMatchObject({ _tag: "Failed", code: "invalid_output" })
      // `g` is kept: Effect resets `lastIndex`, so a second call matches as the first did.
      for (let i = 0; i < 2; i++) expect(yield* outcome(/^ABC$/g, "ABC")).toMatchObject({ _tag: "Success" })
      // `u` is kept: the published pattern is matched with it too.
      expect(yield* outcome(/^\p{Lu}+$/u, "ÉTÉ")).toMatchObject({ _tag: "Success" })
      expect(yield* outcome(/^\p{Lu}+$/u, "été")).toMatchObject({ _tag: "Failed" })
    }))

  it.effect("internal_error for failures, defects and thrown non-Errors, with the details only in the log", () =>
    Effect.gen(function*() {
      for (const mode of ["fail", "die", "throwString", "throwInside"]) {
        const [outcome, lines] = yield* captureLogs(run("anything", { mode }))
        expect(outcome).toStrictEqual({ _tag: "Failed", code: "internal_error", message: "The tool failed." })
        expect(JSON.stringify(outcome)).not.toContain(secret)
        const logged = render(lines)
        expect(logged).toContain(secret)
        expect(lines[0]!.annotations).toMatchObject({ tool: "anything" })
      }
    }))

  it.effect("expected failures are logged as warnings, other failures as errors", () =>
    Effect.gen(function*() {
      const [, expected] = yield* captureLogs(run("echo", { text: "fail" }))
      expect(expected.map((line) => line.level)).toStrictEqual(["WARN"])
      const [, unexpected] = yield* captureLogs(run("anything", { mode: "die" }))
      expect(unexpected.map((line) => line.level)).toStrictEqual(["ERROR"])
    }))

  it.effect("redacted values in handler errors stay redacted in the log", () =>
    Effect.gen(function*() {
      const [outcome, lines] = yield* captureLogs(run("anything", { mode: "leak" }))
      expect(outcome).toMatchObject({ code: "internal_error" })
      expect(render(lines)).toContain("<redacted>")
      expect(render(lines)).not.toContain("hunter2-token")
    }))

  it.effect("canceled when the handler interrupts itself", () =>
    Effect.gen(function*() {
      expect(yield* run("anything", { mode: "interruptSelf" })).toStrictEqual({
        _tag: "Failed",
        code: "canceled",
        message: "The tool call was canceled."
      })
    }))
})

describe("Executor.execute properties", () => {
  const hasNonFinite = (u: unknown): boolean =>
    (typeof u === "number" && !Number.isFinite(u)) ||
    (typeof u === "object" && u !== null && Object.values(u).some(hasNonFinite))

  // An independent validator (not the executor's) checks what was published against what was sent.
  const ajv = new Ajv2020({ strict: false, validateFormats: false, addUsedSchema: false })

  outputs.forEach((output, index) => {
    const schema = output as Schema.Schema<unknown>
    let current: unknown
    let validate: ((u: unknown) => boolean) | undefined
    const Out = Tool.make("out", { description: "Out.", input: {}, output: schema })
    const outExecutor = Effect.runSync(
      Effect.cached(executorFrom(Toolkit.make(Out), { out: () => Effect.sync(() => current) }))
    )
    it.effect.prop(
      `the encoded output validates against the published output schema (output ${index})`,
      // Non-finite numbers have no JSON form: they are `invalid_output`, tested above.
      [Arbitrary.make(schema as Schema.Schema<unknown, unknown, never>).filter((x) => !hasNonFinite(x))],
      ([value]) =>
        Effect.gen(function*() {
          const executor = yield* outExecutor
          validate ??= ajv.compile(executor.catalog.descriptors[0]!.outputSchema!)
          current = value
          const outcome = yield* executor.execute("out", {})
          expect(outcome._tag).toBe("Success")
          if (outcome._tag !== "Success") return
          expect(validate(outcome.structuredContent)).toBe(true)
          expect(JSON.parse(outcome.text)).toStrictEqual(outcome.structuredContent)
        }),
      { fastCheck: { numRuns: 40 } }
    )
  })

  // `NumberFromString` encodes -0 as "0": a loss of Effect's codec, not of execution.
  const hasNegativeZero = (u: unknown): boolean =>
    Object.is(u, -0) || (typeof u === "object" && u !== null && Object.values(u).some(hasNegativeZero))

  inputs.forEach((input, index) => {
    it.effect.prop(
      `decode(encode(x)) round-trips through execution (input ${index})`,
      [Arbitrary.make(input as Schema.Schema<unknown, unknown, never>).filter((x) => !hasNegativeZero(x))],
      ([value]) =>
        Effect.gen(function*() {
          const schema = input as Schema.Schema<unknown, unknown, never>
          const Round = Tool.make("round", { description: "Round trip.", input: schema, output: schema })
          const seen: Array<unknown> = []
          const executor = yield* executorFrom(Toolkit.make(Round), {
            round: (decoded) => Effect.sync(() => seen.push(decoded)).pipe(Effect.as(decoded))
          })
          const encoded = yield* Schema.encode(schema)(value)
          const outcome = yield* executor.execute("round", JSON.parse(JSON.stringify(encoded)))
          expect(seen).toStrictEqual([value])
          expect(outcome).toMatchObject({ _tag: "Success", structuredContent: encoded })
          if (outcome._tag === "Success") {
            expect(yield* Schema.decodeUnknown(schema)(outcome.structuredContent)).toStrictEqual(value)
          }
        }),
      { fastCheck: { numRuns: 25 } }
    )
  })

  const Count = Tool.make("count", {
    description: "Takes a count.",
    input: { count: Schema.Int },
    output: Schema.Struct({ ok: Schema.Boolean })
  })
  const countExecutor = Effect.runSync(
    Effect.cached(executorFrom(Toolkit.make(Count), { count: () => Effect.succeed({ ok: true }) }))
  )
  let countInput: ((u: unknown) => boolean) | undefined
  it.effect.prop(
    "the published input schema of a Schema.Int accepts exactly the numbers its decoder accepts",
    [
      FastCheck.oneof(
        FastCheck.integer(),
        FastCheck.maxSafeInteger(),
        FastCheck.double({ noNaN: true, noDefaultInfinity: true }),
        FastCheck.constantFrom(2 ** 53, -(2 ** 53), 1e20, -1e20, Number.MAX_VALUE, 0.5)
      )
    ],
    ([count]) =>
      Effect.gen(function*() {
        const executor = yield* countExecutor
        countInput ??= ajv.compile(executor.catalog.descriptors[0]!.inputSchema)
        const outcome = yield* executor.execute("count", { count })
        expect(outcome).toMatchObject(Number.isSafeInteger(count) ? { _tag: "Success" } : { code: "invalid_input" })
        expect(countInput({ count })).toBe(outcome._tag === "Success")
      }),
    { fastCheck: { numRuns: 100 } }
  )

  it.effect.prop(
    "invalid_input messages never contain the values sent",
    [FastCheck.string({ minLength: 6 })],
    ([value]) =>
      Effect.gen(function*() {
        expect(yield* run("numbers", { count: value })).toStrictEqual({
          _tag: "Failed",
          code: "invalid_input",
          message: "The tool input is invalid at count."
        })
      }),
    { fastCheck: { numRuns: 50 } }
  )
})
