import { describe, expect, it } from "@effect/vitest"
import { Catalog, Tool, Toolkit } from "@tether/tool"
import { Ajv2020 } from "ajv/dist/2020.js"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Schema from "effect/Schema"
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as Path from "node:path"
import * as Refinements from "../src/internal/refinements.js"
import { executorFrom } from "../src/internal/toolkit.js"
import { fingerprintFixture } from "./fixtures/fingerprint.js"
import { build, type Spec, specArbitrary, specsArbitrary } from "./fixtures/tools.js"

const base = { description: "A tool.", input: { key: Schema.String }, output: Schema.String }

const catalogOf = (...tools: ReadonlyArray<Tool.Any>) =>
  Effect.runSync(Effect.either(Toolkit.catalog(Toolkit.make(...tools))))

const errorOf = (...tools: ReadonlyArray<Tool.Any>) => {
  const result = catalogOf(...tools)
  if (Either.isRight(result)) return expect.unreachable("the toolkit was expected to be invalid")
  return result.left
}

const fingerprintOf = (tools: ReadonlyArray<Tool.Any>): string => {
  const result = catalogOf(...tools)
  if (Either.isLeft(result)) return expect.unreachable(result.left.message)
  return result.right.fingerprint
}

describe("definition validation", () => {
  const invalidNames = ["", "has space", "x".repeat(129), "ünïcode", "slash/name", "colon:name"]
  for (const name of invalidNames) {
    it(`rejects the name ${JSON.stringify(name.slice(0, 20))}`, () => {
      const error = errorOf(Tool.make(name, base))
      expect(error._tag).toBe("ToolDefinitionError")
      expect(error.reason).toBe("InvalidName")
      expect(error.tool.length).toBeLessThanOrEqual(65)
    })
  }

  it("accepts a name of 128 allowed characters", () => {
    expect(Either.isRight(catalogOf(Tool.make("a.B-9_".repeat(21) + "xx", base)))).toBe(true)
  })

  for (const description of ["", "   \n"]) {
    it(`rejects the empty description ${JSON.stringify(description)}`, () => {
      const error = errorOf(Tool.make("t", { ...base, description }))
      expect([error.reason, error.tool]).toStrictEqual(["EmptyDescription", "t"])
      expect(error.message).toContain("\"t\"")
    })
  }

  it("rejects an empty title and an empty revision", () => {
    expect(errorOf(Tool.make("t", { ...base, title: " " })).reason).toBe("InvalidTitle")
    expect(errorOf(Tool.make("t", { ...base, revision: "" })).reason).toBe("InvalidRevision")
  })

  it("rejects duplicate names within a toolkit and across merged toolkits", () => {
    const a = Tool.make("same", base)
    const b = Tool.make("same", { ...base, description: "Another." })
    expect([errorOf(a, b).reason, errorOf(a, b).tool]).toStrictEqual(["DuplicateName", "same"])
    const merged = Toolkit.merge(Toolkit.make(a), Toolkit.make(Tool.make("other", base)), Toolkit.make(b))
    const result = Effect.runSync(Effect.either(Toolkit.catalog(merged)))
    expect(Either.isLeft(result) && result.left.reason).toBe("DuplicateName")
  })

  it("rejects inputs that do not encode as a JSON object", () => {
    for (
      const input of [
        Schema.String,
        Schema.Array(Schema.String),
        Schema.Union(Schema.Struct({ a: Schema.String }), Schema.Null)
      ]
    ) {
      const error = errorOf(Tool.make("t", { ...base, input }))
      expect([error.reason, error.tool]).toStrictEqual(["NonObjectInput", "t"])
    }
    expect(errorOf(Tool.make("t", { ...base, inputSchemaJson: { type: "array" } })).reason).toBe("NonObjectInput")
  })

  it("rejects schemas that cannot be expressed or do not compile", () => {
    const cases: ReadonlyArray<Tool.Any> = [
      Tool.make("t", { ...base, input: { big: Schema.BigIntFromSelf } }),
      Tool.make("t", { ...base, output: Schema.instanceOf(Map) }),
      Tool.make("t", { ...base, inputSchemaJson: { type: "object", properties: { a: { type: "strng" } } } }),
      Tool.make("t", { ...base, outputSchemaJson: { type: "object", properties: { a: { $ref: "#/$defs/missing" } } } }),
      Tool.make("t", {
        ...base,
        outputSchemaJson: { $schema: "http://json-schema.org/draft-07/schema#", type: "object" }
      }),
      Tool.make("t", { ...base, outputSchemaJson: { type: "object", const: () => 1 } as never }),
      Tool.make("t", { ...base, output: "not a schema" as never })
    ]
    for (const tool of cases) {
      const error = errorOf(tool)
      expect([error.reason, error.tool]).toStrictEqual(["InvalidSchema", "t"])
    }
  })

  it("publishes a case-insensitive pattern as one that matches alike, and leaves out one other flags change", () => {
    const caseless = Schema.String.pipe(Schema.pattern(/^abc$/i))
    const Leaf = Schema.Struct({ code: caseless }).annotations({ identifier: "Leaf" })
    class Coded extends Schema.Class<Coded>("Coded")({ code: caseless }) {}
    const spelled = "^[aA][bB][cC]$"
    const published = (tool: Tool.Any, side: "inputSchema" | "outputSchema") => {
      const result = catalogOf(tool)
      if (Either.isLeft(result)) return expect.unreachable(result.left.message)
      return JSON.stringify(result.right.descriptors[0]![side])
    }
    // Wherever the pattern is published (a property, a union in an array, a record's keys, a
    // recursive schema, a class, a transformation's encoded side).
    const cases: ReadonlyArray<readonly [Tool.Any, "inputSchema" | "outputSchema"]> = [
      [Tool.make("t", { ...base, input: { code: caseless } }), "inputSchema"],
      [
        Tool.make("t", {
          ...base,
          output: Schema.Struct({ list: Schema.Array(Schema.Union(Schema.Number, caseless)) })
        }),
        "outputSchema"
      ],
      [Tool.make("t", { ...base, output: Schema.Record({ key: caseless, value: Schema.String }) }), "outputSchema"],
      [Tool.make("t", { ...base, input: { leaf: Schema.suspend(() => Leaf) } }), "inputSchema"],
      [Tool.make("t", { ...base, output: Schema.Tuple(Schema.String, Coded) }), "outputSchema"],
      [
        Tool.make("t", { ...base, output: Schema.compose(caseless, Schema.NumberFromString, { strict: false }) }),
        "outputSchema"
      ]
    ]
    for (const [tool, side] of cases) {
      const text = published(tool, side)
      expect(text).toContain(JSON.stringify(spelled))
      expect(text).not.toContain("\"^abc$\"")
    }
    // Effect's ULID accepts lower case; its pattern's classes hold upper case only.
    expect(published(Tool.make("t", { ...base, input: { id: Schema.ULID } }), "inputSchema")).toContain(
      JSON.stringify("^[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}$")
    )
    // Other flags, a case-insensitive back-reference, or a source that is no pattern under `u`
    // (validators compile with it; `[\w-.]` is a syntax error there): no pattern is published.
    for (
      const regex of [
        /^a$/m,
        /^a.b$/s,
        /ab/y,
        new RegExp("^[\\p{L}--[a-z]]$", "v"),
        /^(a)\1$/i,
        /^a$/im,
        /^[\w-.]+$/,
        /^[\w-.]+$/i
      ]
    ) {
      const schema = JSON.parse(
        published(
          Tool.make("t", { ...base, input: { text: Schema.String.pipe(Schema.pattern(regex)) } }),
          "inputSchema"
        )
      )
      expect(schema.properties.text).toMatchObject({ type: "string" })
      expect(schema.properties.text).not.toHaveProperty("pattern")
    }
    const described = Catalog.outputSchema(Schema.Array(caseless))
    expect(Either.isRight(described) && JSON.stringify(described.right.jsonSchema)).toContain(JSON.stringify(spelled))
  })

  it.prop(
    "a case-insensitive pattern's published form matches exactly the strings the pattern matches",
    [
      FastCheck.constantFrom(
        "^abc$",
        "^[a-f0-9]+$",
        "^[^a-z]*$",
        "(?:ab|Cd)+\\d{2,3}",
        "^[\\w.-]+@x\\.com$",
        "^[0-7][0-9A-HJKMNP-TV-Z]{3}$",
        "k+s",
        "^[j-t]+$",
        "(?<=a)b",
        "(?<first>q)z",
        "^[\\s\\d]x$",
        "\\bk"
      ),
      FastCheck.boolean(),
      FastCheck.array(
        FastCheck.constantFrom(
          "a",
          "A",
          "b",
          "B",
          "c",
          "C",
          "d",
          "k",
          "K",
          "s",
          "S",
          "q",
          "z",
          "x",
          "3",
          "@",
          ".",
          " ",
          "\u212A",
          "\u017F",
          "é",
          "É"
        ),
        { maxLength: 8 }
      )
    ],
    ([source, unicode, chars]) => {
      const rewritten = Refinements.caseless(source, unicode)
      // With `u`, word escapes take in the characters folded onto k and s: left unpublished.
      if (rewritten === undefined) return unicode && /\\[wWbB]/.test(source)
      const text = chars.join("")
      const original = new RegExp(source, unicode ? "iu" : "i")
      // Validators compile a published pattern with `u`.
      return new RegExp(rewritten, "u").test(text) === original.test(text)
    },
    { fastCheck: { numRuns: 2000 } }
  )

  it("publishes tuples, and outputs' lengths and fractional multiples, in a form Draft-07 clients read alike", () => {
    // The MCP SDK's client (Gemini CLI's too) validates with a Draft-07 Ajv: it ignores
    // `prefixItems` and applies `items` to every element, counts code points and divides exactly.
    const shapes = Schema.Struct({
      pair: Schema.Tuple(Schema.Number, Schema.Number),
      entry: Schema.Tuple([Schema.String], Schema.Number),
      initials: Schema.String.pipe(Schema.minLength(3)),
      tenths: Schema.Number.pipe(Schema.multipleOf(0.1)),
      even: Schema.Number.pipe(Schema.multipleOf(2)),
      fixed: Schema.Literal("items")
    })
    const result = catalogOf(Tool.make("t", { ...base, input: shapes.fields, output: shapes }))
    if (Either.isLeft(result)) return expect.unreachable(result.left.message)
    const { inputSchema, outputSchema } = result.right.descriptors[0]!
    const input = (inputSchema as { properties: Record<string, object> }).properties
    const output = (outputSchema as { properties: Record<string, object> }).properties
    for (const properties of [input, output]) {
      expect(properties["pair"]).toEqual({
        type: "array",
        prefixItems: [{ type: "number" }, { type: "number" }],
        minItems: 2,
        maxItems: 2
      })
      expect(properties["entry"]).toEqual({ type: "array", prefixItems: [{ type: "string" }], minItems: 1 })
      expect(properties["even"]).toMatchObject({ multipleOf: 2 })
      expect(properties["fixed"]).toEqual({ type: "string", enum: ["items"] })
    }
    // An input says what Effect checks (the model reads it); an output what a client can check alike.
    expect(input["initials"]).toMatchObject({ minLength: 3 })
    expect(input["tenths"]).toMatchObject({ multipleOf: 0.1 })
    expect(output["initials"]).toMatchObject({ minLength: 2 })
    expect(output["tenths"]).not.toHaveProperty("multipleOf")
  })

  it("keeps patterns whose flags do not change what they match, and patterns that are not published", () => {
    const caseless = Schema.String.pipe(Schema.pattern(/^abc$/i))
    const kept: ReadonlyArray<readonly [Schema.Schema.AnyNoContext, string | undefined]> = [
      // `g`: Effect resets `lastIndex` before each test; `d`: indices only; `u`: how validators match.
      [Schema.String.pipe(Schema.pattern(/^abc$/g)), "^abc$"],
      [Schema.String.pipe(Schema.pattern(/^abc$/d)), "^abc$"],
      [Schema.String.pipe(Schema.pattern(/^\p{Lu}+$/u)), "^\\p{Lu}+$"],
      // Its classes hold both cases already: published as it is.
      [Schema.UUID, "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"],
      // Written by hand, the JSON Schema pattern is published as written.
      [caseless.annotations({ jsonSchema: { pattern: "^[aA][bB][cC]$" } }), "^[aA][bB][cC]$"],
      // On the decoded side of a transformation, it is not published.
      [Schema.compose(Schema.String, caseless), undefined]
    ]
    for (const [schema, pattern] of kept) {
      const result = catalogOf(Tool.make("t", { ...base, input: { value: schema } }))
      if (Either.isLeft(result)) return expect.unreachable(result.left.message)
      const published = result.right.descriptors[0]!.inputSchema as { properties: { value: { pattern?: string } } }
      expect(published.properties.value.pattern).toBe(pattern)
    }
  })

  it("rejects any reference in an override that is not local, and fetches nothing", () => {
    const fetches: Array<unknown> = []
    const original = globalThis.fetch
    globalThis.fetch = ((...args: Array<unknown>) => {
      fetches.push(args)
      return original(...(args as Parameters<typeof fetch>))
    }) as typeof fetch
    try {
      const refs = [
        { type: "object", properties: { a: { $ref: "https://example.invalid/schema.json" } } },
        { type: "object", properties: { a: { $ref: "other.json#/a" } } },
        { type: "object", $defs: { x: { $dynamicRef: "https://example.invalid/x" } } },
        { type: "object", properties: { a: { items: [{ $ref: "file:///etc/passwd" }] } } }
      ]
      for (const override of refs) {
        const input = errorOf(Tool.make("t", { ...base, inputSchemaJson: override }))
        const output = errorOf(Tool.make("t", { ...base, outputSchemaJson: override }))
        expect([input.reason, output.reason]).toStrictEqual(["NonLocalRef", "NonLocalRef"])
      }
      const local = { type: "object", $defs: { k: { type: "string" } }, properties: { key: { $ref: "#/$defs/k" } } }
      expect(Either.isRight(catalogOf(Tool.make("t", { ...base, inputSchemaJson: local })))).toBe(true)
    } finally {
      globalThis.fetch = original
    }
    expect(fetches).toStrictEqual([])
  })

  it("rejects contradictory and non-boolean annotations", () => {
    const contradictory = errorOf(Tool.make("t", { ...base, annotations: { readOnly: true, destructive: true } }))
    expect([contradictory.reason, contradictory.tool]).toStrictEqual(["ContradictoryAnnotations", "t"])
    expect(Either.isRight(catalogOf(Tool.make("t", { ...base, annotations: { readOnly: true, destructive: false } }))))
      .toBe(true)
    expect(errorOf(Tool.make("t", { ...base, annotations: { idempotent: "yes" as never } })).reason).toBe(
      "InvalidAnnotations"
    )
  })
})

describe("descriptors", () => {
  it("infers inline JSON Schemas of the encoded side", () => {
    const Input = Schema.Struct({ count: Schema.NumberFromString, at: Schema.optional(Schema.Date) }).annotations({
      identifier: "LookupInput"
    })
    const result = catalogOf(Tool.make("t", { ...base, input: Input }))
    if (Either.isLeft(result)) return expect.unreachable(result.left.message)
    const [descriptor] = result.right.descriptors
    expect(descriptor!.inputSchema).toMatchObject({
      type: "object",
      required: ["count"],
      properties: { count: { type: "string" }, at: { type: "string" } },
      additionalProperties: false
    })
    expect(descriptor!.inputSchema).not.toHaveProperty("$ref")
    expect(descriptor!.inputSchema).not.toHaveProperty("$defs")
  })

  it("publishes Schema.Int with the safe-integer bounds it checks, unless tighter ones are stated", () => {
    const safe = Number.MAX_SAFE_INTEGER
    const Tree = Schema.Struct({
      size: Schema.Int,
      children: Schema.Array(Schema.suspend((): Schema.Schema<Tree> => Tree))
    }).annotations({ identifier: "Tree" })
    interface Tree {
      readonly size: number
      readonly children: ReadonlyArray<Tree>
    }
    class Sized extends Schema.Class<Sized>("Sized")({ size: Schema.Int }) {}
    const bounded = { type: "integer", minimum: -safe, maximum: safe }
    const cases: ReadonlyArray<readonly [Schema.Schema.AnyNoContext, object]> = [
      [Schema.Int, bounded],
      [Schema.Number.pipe(Schema.int()), bounded],
      [Schema.Int.pipe(Schema.between(0, 10)), { type: "integer", minimum: 0, maximum: 10 }],
      [Schema.Number.pipe(Schema.between(0, 10), Schema.int()), { type: "integer", minimum: 0, maximum: 10 }],
      [Schema.Int.pipe(Schema.positive()), { type: "integer", exclusiveMinimum: 0, maximum: safe }],
      [Schema.NonNegativeInt, { type: "integer", minimum: 0, maximum: safe }],
      [Schema.Int.pipe(Schema.lessThan(5)), { type: "integer", minimum: -safe, exclusiveMaximum: 5 }],
      // A looser bound gives way to the safe one.
      [Schema.Int.pipe(Schema.greaterThanOrEqualTo(-1e20)), bounded],
      [Schema.NullOr(Schema.Int), { anyOf: [bounded, { type: "null" }] }],
      [Schema.Array(Schema.Int), { type: "array", items: bounded }],
      [Schema.Record({ key: Schema.String, value: Schema.Int }), { additionalProperties: bounded }],
      [Schema.Tuple(Schema.String, Schema.Int), { prefixItems: [{ type: "string" }, bounded] }],
      [Sized, { properties: { size: bounded } }],
      [Schema.Struct({ tree: Tree }), { $defs: { Tree: { properties: { size: bounded } } } }]
    ]
    const ajv = new Ajv2020({ strict: true, addUsedSchema: false })
    for (const [schema, expected] of cases) {
      const result = catalogOf(Tool.make("t", { ...base, input: { value: schema } }))
      if (Either.isLeft(result)) return expect.unreachable(result.left.message)
      const published = result.right.descriptors[0]!.inputSchema
      const value = (published as { readonly properties: { readonly value: unknown } }).properties.value
      expect(published["$defs"] === undefined ? value : published).toMatchObject(expected)
      const validate = ajv.compile(published)
      expect([validate({ value: 2 ** 53 }), validate({ value: -(2 ** 53) }), validate({ value: 1e20 })]).toStrictEqual(
        [false, false, false]
      )
    }
    // Tighter bounds are not widened: nothing but the stated bounds is published.
    const between = catalogOf(Tool.make("t", { ...base, input: { value: Schema.Int.pipe(Schema.between(0, 10)) } }))
    if (Either.isLeft(between)) return expect.unreachable(between.left.message)
    expect(JSON.stringify(between.right.descriptors[0]!.inputSchema)).not.toContain(String(safe))
    // Only Effect's int check is bounded: an `integer` written in an annotation, or a number
    // encoded as a string, is published as it is.
    const unbounded = catalogOf(Tool.make("t", {
      ...base,
      input: {
        annotated: Schema.Number.annotations({ jsonSchema: { type: "integer" } }),
        text: Schema.NumberFromString.pipe(Schema.int()),
        plain: Schema.Number
      }
    }))
    if (Either.isLeft(unbounded)) return expect.unreachable(unbounded.left.message)
    expect(unbounded.right.descriptors[0]!.inputSchema).toMatchObject({
      properties: { annotated: { type: "integer" }, text: { type: "string" }, plain: { type: "number" } }
    })
    expect(JSON.stringify(unbounded.right.descriptors[0]!.inputSchema)).not.toContain(String(safe))
  })

  it("publishes object outputs as they are and wraps other outputs in a result envelope", () => {
    const result = catalogOf(
      Tool.make("object", { ...base, output: Schema.Struct({ a: Schema.String }) }),
      Tool.make("list", { ...base, output: Schema.Array(Schema.Number) })
    )
    if (Either.isLeft(result)) return expect.unreachable(result.left.message)
    const [list, object] = result.right.descriptors
    expect(object!.outputSchema).toMatchObject({ type: "object", properties: { a: { type: "string" } } })
    expect(list!.outputSchema).toStrictEqual({
      type: "object",
      properties: { result: { type: "array", items: { type: "number" } } },
      required: ["result"],
      additionalProperties: false
    })
  })

  it("Catalog.outputSchema publishes a Schema as a tool's output is published, frozen", () => {
    const Output = Schema.Struct({ n: Schema.NumberFromString, tags: Schema.optional(Schema.Array(Schema.String)) })
    const tool = catalogOf(
      Tool.make("t", { ...base, output: Output }),
      Tool.make("u", { ...base, output: Schema.Number })
    )
    if (Either.isLeft(tool)) return expect.unreachable(tool.left.message)
    const object = Either.getOrThrow(Catalog.outputSchema(Output))
    expect(object).toStrictEqual({ jsonSchema: tool.right.descriptors[0]!.outputSchema, envelope: false })
    const number = Either.getOrThrow(Catalog.outputSchema(Schema.Number))
    expect(number).toStrictEqual({ jsonSchema: tool.right.descriptors[1]!.outputSchema, envelope: true })
    expect(Object.isFrozen(object.jsonSchema["properties"])).toBe(true)
    const bigint = Catalog.outputSchema(Schema.Struct({ n: Schema.BigIntFromSelf }))
    expect(Either.isLeft(bigint) && bigint.left).toContain("bigint")
  })

  it("keeps explicit false hints and omits unspecified ones", () => {
    const result = catalogOf(
      Tool.make("t", { ...base, annotations: { readOnly: false, destructive: false, openWorld: true } })
    )
    if (Either.isLeft(result)) return expect.unreachable(result.left.message)
    expect(result.right.descriptors[0]!.annotations).toStrictEqual({
      readOnlyHint: false,
      destructiveHint: false,
      openWorldHint: true
    })
  })

  it("is frozen, sorted by name, plain data and detached from the overrides it was given", () => {
    const override = { type: "object", properties: { key: { type: "string" } }, required: ["key"] }
    const result = catalogOf(
      Tool.make("zeta", base),
      Tool.make("alpha", { ...base, title: "Alpha", revision: "alpha/v1", inputSchemaJson: override })
    )
    if (Either.isLeft(result)) return expect.unreachable(result.left.message)
    const catalog = result.right
    override.properties.key.type = "number"
    expect(catalog.descriptors.map((d) => d.name)).toStrictEqual(["alpha", "zeta"])
    expect(catalog.descriptors[0]!.inputSchema).toMatchObject({ properties: { key: { type: "string" } } })
    expect(catalog.descriptors[0]!.revision).toBe("alpha/v1")
    expect(Object.isFrozen(catalog)).toBe(true)
    expect(Object.isFrozen(catalog.descriptors)).toBe(true)
    expect(Object.isFrozen(catalog.descriptors[0]!.inputSchema["properties"])).toBe(true)
    expect(JSON.parse(JSON.stringify(catalog))).toStrictEqual(
      JSON.parse(JSON.stringify(catalog, (_, value) => typeof value === "function" ? "fn" : value))
    )
    expect(catalog.fingerprint).toMatch(/^[0-9a-f]{64}$/)
  })

  it("is computed once per toolkit", () => {
    const toolkit = Toolkit.make(Tool.make("t", base))
    expect(Effect.runSync(Toolkit.catalog(toolkit))).toBe(Effect.runSync(Toolkit.catalog(toolkit)))
  })
})

const shuffle = <A>(items: ReadonlyArray<A>, seed: number): Array<A> => {
  const out = [...items]
  let state = seed
  for (let i = out.length - 1; i > 0; i--) {
    state = (state * 1103515245 + 12345) % 2147483648
    const j = state % (i + 1)
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out
}

const reorderKeys = (u: unknown, seed: number): unknown => {
  if (Array.isArray(u)) return u.map((item) => reorderKeys(item, seed))
  if (typeof u !== "object" || u === null) return u
  return Object.fromEntries(shuffle(Object.entries(u), seed).map(([k, v]) => [k, reorderKeys(v, seed + 1)]))
}

const mutations: ReadonlyArray<readonly [string, (spec: Spec) => Spec]> = [
  ["name", (s) => ({ ...s, name: `${s.name}x` })],
  ["description", (s) => ({ ...s, description: `${s.description}.` })],
  ["title", (s) => ({ ...s, title: s.title === undefined ? "Title" : undefined })],
  ["revision", (s) => ({ ...s, revision: s.revision === undefined ? "r/v1" : `${s.revision}2` })],
  ["input schema", (s) => ({ ...s, input: (s.input + 1) % 3 })],
  ["output schema", (s) => ({ ...s, output: (s.output + 1) % 4 })],
  ["readOnly hint", (s) => ({
    ...s,
    annotations: { ...s.annotations, readOnly: s.annotations.readOnly === undefined ? false : undefined! }
  })],
  ["openWorld hint", (s) => ({
    ...s,
    annotations: { ...s.annotations, openWorld: s.annotations.openWorld === false ? true : false }
  })]
]

describe("fingerprint", () => {
  it.prop("is invariant under tool order", [specsArbitrary(), FastCheck.nat()], ([specs, seed]) => {
    expect(fingerprintOf(shuffle(specs, seed).map(build))).toBe(fingerprintOf(specs.map(build)))
  }, { fastCheck: { numRuns: 40 } })

  it.prop("is invariant under object key order of overrides", [FastCheck.nat()], ([seed]) => {
    const override = {
      type: "object",
      title: "Input",
      properties: { b: { type: "string", minLength: 1 }, a: { type: "integer", minimum: 0 } },
      required: ["a", "b"],
      additionalProperties: false
    }
    const make = (schema: unknown) =>
      Tool.make("t", {
        ...base,
        inputSchemaJson: schema as Tool.Any["inputSchemaJson"],
        annotations: reorderKeys({ readOnly: true, idempotent: false }, seed) as Tool.Annotations
      })
    expect(fingerprintOf([make(reorderKeys(override, seed))])).toBe(fingerprintOf([make(override)]))
  }, { fastCheck: { numRuns: 30 } })

  for (const [field, mutate] of mutations) {
    it.prop(`changes when the ${field} changes`, [specsArbitrary(4), FastCheck.nat()], ([specs, index]) => {
      const at = index % specs.length
      const changed = specs.map((spec, i) => (i === at ? mutate(spec) : spec))
      if (new Set(changed.map((s) => s.name)).size !== changed.length) return
      expect(fingerprintOf(changed.map(build))).not.toBe(fingerprintOf(specs.map(build)))
    }, { fastCheck: { numRuns: 25 } })
  }

  it.prop("is unchanged when only handler code changes", [specArbitrary()], ([spec]) => {
    const toolkit = Toolkit.make(build(spec))
    const handlers = (label: string) =>
      ({ [spec.name]: () => Effect.die(label) }) as unknown as Toolkit.HandlersFrom<typeof toolkit.tools, never>
    const a = Effect.runSync(executorFrom(toolkit, handlers("a")))
    const b = Effect.runSync(executorFrom(Toolkit.make(build(spec)), handlers("b")))
    expect(a.catalog.fingerprint).toBe(b.catalog.fingerprint)
  }, { fastCheck: { numRuns: 20 } })

  // A catalog's descriptors are written natively (`JSON.stringify`) when their keys are in
  // canonical order; copies of them take the key-by-key path. Both must hash the same text.
  it.prop("is the same whether the descriptors are written natively or key by key", [specsArbitrary()], ([specs]) => {
    const catalog = Effect.runSync(Toolkit.catalog(Toolkit.make(...specs.map(build))))
    const copies = JSON.parse(JSON.stringify(catalog.descriptors)) as ReadonlyArray<Catalog.Descriptor>
    expect(Catalog.fingerprint(copies)).toBe(catalog.fingerprint)
  }, { fastCheck: { numRuns: 30 } })

  it("is SHA-256 over the domain tag and the canonical JSON of the descriptors sorted by name", () => {
    // More tools than the fingerprint hashes at a time, and a reference written independently.
    const canonical = (u: unknown): string =>
      u === null || typeof u !== "object"
        ? JSON.stringify(u)
        : Array.isArray(u)
        ? `[${u.map(canonical).join(",")}]`
        : `{${
          Object.keys(u).sort().map((key) => `${JSON.stringify(key)}:${canonical((u as Record<string, unknown>)[key])}`)
            .join(",")
        }}`
    const tools = Array.from({ length: 150 }, (_, i) => Tool.make(`tool_${(i * 37) % 150}`, base))
    const catalog = Effect.runSync(Toolkit.catalog(Toolkit.make(...tools)))
    const copies = (JSON.parse(JSON.stringify(catalog.descriptors)) as Array<Catalog.Descriptor>)
      .sort((a, b) => a.name < b.name ? -1 : 1)
    const expected = createHash("sha256").update(`tether.tool.catalog.v1\n${canonical(copies)}`).digest("hex")
    expect(catalog.fingerprint).toBe(expected)
    expect(Catalog.fingerprint(copies)).toBe(expected)
    // The catalog's own list is hashed from the bytes kept for it in one piece; any other list of
    // its descriptors from each descriptor's bytes (views into that piece).
    expect(Catalog.fingerprint(catalog.descriptors)).toBe(expected)
    expect(Catalog.fingerprint(catalog.descriptors.slice(3, 40))).toBe(
      createHash("sha256").update(`tether.tool.catalog.v1\n${canonical(copies.slice(3, 40))}`).digest("hex")
    )
    // Descriptors given out of order are sorted first (a catalog's are in order already).
    expect(Catalog.fingerprint([...copies].reverse())).toBe(expected)
    expect(Catalog.fingerprint([...catalog.descriptors].reverse())).toBe(expected)
    // What is hashed is each descriptor's own content: an object that only inherits a catalog
    // descriptor's members is not that descriptor.
    const inheriting = catalog.descriptors.map((d) => Object.create(d) as Catalog.Descriptor)
    expect(Catalog.fingerprint(inheriting)).not.toBe(expected)
  })

  it("is the same for keys JSON.stringify would not write in sorted order", () => {
    // Integer-like keys enumerate first and numerically; `__proto__` must stay an own key.
    const properties = JSON.parse(
      "{\"b\":{\"type\":\"string\"},\"10\":{\"type\":\"string\"},\"9\":{\"type\":\"string\"}," +
        "\"__proto__\":{\"type\":\"string\"},\"é\":{\"type\":\"string\"},\"A\":{\"type\":\"string\"}}"
    ) as Record<string, unknown>
    const tool = Tool.make("t", {
      ...base,
      // Characters of two, three and four UTF-8 bytes: the kept bytes are cut by byte, not by character.
      description: "café — ✓ 𝄞",
      inputSchemaJson: { type: "object", properties, additionalProperties: false } as Tool.Any["inputSchemaJson"]
    })
    const catalog = Effect.runSync(Toolkit.catalog(Toolkit.make(tool)))
    const copies = JSON.parse(JSON.stringify(catalog.descriptors)) as ReadonlyArray<Catalog.Descriptor>
    expect(Object.keys((catalog.descriptors[0]!.inputSchema as { properties: object }).properties)).toHaveLength(6)
    expect(Catalog.fingerprint(copies)).toBe(catalog.fingerprint)
    const other = Tool.make("u", { ...base, description: "naïve" })
    const both = Effect.runSync(Toolkit.catalog(Toolkit.make(tool, other)))
    const bothCopies = JSON.parse(JSON.stringify(both.descriptors)) as ReadonlyArray<Catalog.Descriptor>
    expect(Catalog.fingerprint(bothCopies)).toBe(both.fingerprint)
    expect(Catalog.fingerprint([...both.descriptors])).toBe(both.fingerprint)
    expect(Catalog.fingerprint([both.descriptors[1]!])).toBe(
      Catalog.fingerprint(JSON.parse(JSON.stringify([both.descriptors[1]])) as ReadonlyArray<Catalog.Descriptor>)
    )
  })

  it("is the same in another process", () => {
    const script = Path.join(import.meta.dirname, "fixtures", "fingerprint.ts")
    const output = execFileSync(process.execPath, ["--conditions=@tether/source", "--import", "tsx", script], {
      encoding: "utf8",
      cwd: Path.join(import.meta.dirname, "..")
    })
    expect(output.trim()).toBe(Effect.runSync(Toolkit.catalog(fingerprintFixture())).fingerprint)
  }, 60_000)
})
