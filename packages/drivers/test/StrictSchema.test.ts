import { describe, expect, it } from "@effect/vitest"
import { Catalog } from "@tether/tool"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { refusal, strict, unstrict } from "../src/internal/strictSchema.js"

interface Node {
  readonly name: string
  readonly tag?: string
  readonly children: ReadonlyArray<Node>
}
// Recursive: published as a local $ref into $defs.
const Node: Schema.Schema<Node> = Schema.Struct({
  name: Schema.String,
  tag: Schema.optionalWith(Schema.String, { exact: true }),
  children: Schema.Array(Schema.suspend(() => Node))
}).annotations({ identifier: "Node" })
const Triage = Schema.Struct({
  severity: Schema.Literal("low", "high"),
  owner: Schema.optional(Schema.String),
  reviewer: Schema.optional(Schema.NullOr(Schema.String)),
  links: Schema.Array(Schema.Struct({ url: Schema.String, note: Schema.optional(Schema.String) })),
  tree: Schema.optional(Node)
})
const published = Either.getOrThrow(Catalog.outputSchema(Triage)).jsonSchema

describe("the strict form of a published schema (Codex --output-schema)", () => {
  it("lists every property as required; an optional one becomes nullable, also under $defs", () => {
    const out = strict(published) as { readonly [key: string]: any }
    const nullable = { anyOf: [{ type: "string" }, { type: "null" }] }
    expect(out["required"]).toEqual(["severity", "owner", "reviewer", "links", "tree"])
    expect(out["properties"]["owner"]).toEqual(nullable)
    // Already nullable: left as it is.
    expect(out["properties"]["reviewer"]).toEqual(nullable)
    expect(out["properties"]["links"]["items"]["required"]).toEqual(["url", "note"])
    expect(out["properties"]["links"]["items"]["properties"]["note"]).toEqual(nullable)
    expect(out["$defs"]["Node"]["required"]).toEqual(["name", "tag", "children"])
    expect(out["$defs"]["Node"]["properties"]["tag"]).toEqual(nullable)
    // The published schema is untouched (it is frozen).
    expect(published["required"]).toEqual(["severity", "links"])
  })

  it("reads an answer back: only the nulls strict introduced are removed", () => {
    const answer = {
      severity: "low",
      owner: null,
      reviewer: null,
      links: [{ url: "u", note: null }, { url: "v", note: "n" }],
      tree: { name: "a", tag: null, children: [{ name: "b", tag: null, children: [] }] }
    }
    const value = unstrict(published, answer)
    expect(value).toEqual({
      severity: "low",
      reviewer: null,
      links: [{ url: "u" }, { url: "v", note: "n" }],
      tree: { name: "a", children: [{ name: "b", children: [] }] }
    })
    expect(Schema.decodeUnknownEither(Triage)(value)._tag).toBe("Right")
    // A null for a required property stays, for the Schema to reject.
    expect(unstrict(published, { severity: null, links: [] })).toEqual({ severity: null, links: [] })
    expect(unstrict(published, "not an object")).toBe("not an object")
  })

  // A union of structs (a tagged union among them): `strict` makes each branch's optional
  // properties required and nullable, so the reading back has to find the branch the answer is.
  const Step = Schema.Union(
    Schema.Struct({ kind: Schema.Literal("edit"), path: Schema.String, note: Schema.optional(Schema.String) }),
    Schema.Struct({ kind: Schema.Literal("done"), summary: Schema.optional(Schema.String) }),
    Schema.Struct({ count: Schema.Number, label: Schema.optional(Schema.String) })
  )
  const Plan = Schema.Struct({
    step: Step,
    steps: Schema.Array(Step),
    byFile: Schema.Record({
      key: Schema.String,
      value: Schema.Struct({ line: Schema.Number, why: Schema.optional(Schema.String) })
    }),
    pair: Schema.Tuple(Schema.String, Schema.Struct({ at: Schema.Number, by: Schema.optional(Schema.String) }))
  })
  const plan = Either.getOrThrow(Catalog.outputSchema(Plan)).jsonSchema

  it("reads the nulls of a union's branch, a record's values and a tuple's elements back", () => {
    const strictPlan = strict(plan) as { readonly [key: string]: any }
    const branches = strictPlan["properties"]["step"]["anyOf"] as ReadonlyArray<any>
    expect(branches.map((branch) => branch["required"])).toEqual([
      ["kind", "path", "note"],
      ["kind", "summary"],
      ["count", "label"]
    ])
    const answer = {
      step: { kind: "edit", path: "a.ts", note: null },
      steps: [{ kind: "done", summary: null }, { count: 2, label: null }, { kind: "edit", path: "b.ts", note: "n" }],
      byFile: { "a.ts": { line: 3, why: null }, "b.ts": { line: 4, why: "w" } },
      pair: ["x", { at: 1, by: null }]
    }
    const value = unstrict(plan, answer)
    expect(value).toEqual({
      step: { kind: "edit", path: "a.ts" },
      steps: [{ kind: "done" }, { count: 2 }, { kind: "edit", path: "b.ts", note: "n" }],
      byFile: { "a.ts": { line: 3 }, "b.ts": { line: 4, why: "w" } },
      pair: ["x", { at: 1 }]
    })
    expect(Schema.decodeUnknownEither(Plan, { onExcessProperty: "error" })(value)._tag).toBe("Right")
  })

  it("reads a union's answer as the branch it fits all the way down, nested objects and unions included", () => {
    // The two branches differ only inside `inner` (and inside a nested union's branch).
    const Change = Schema.Struct({
      change: Schema.Union(
        Schema.Struct({ inner: Schema.Struct({ a: Schema.String }) }),
        Schema.Struct({ inner: Schema.Struct({ b: Schema.String, note: Schema.optional(Schema.String) }) })
      ),
      items: Schema.Array(Schema.Union(
        Schema.Struct({ at: Schema.Struct({ line: Schema.Number }) }),
        Schema.Struct({ at: Schema.Struct({ file: Schema.String, why: Schema.optional(Schema.String) }) })
      ))
    })
    const schema = Either.getOrThrow(Catalog.outputSchema(Change)).jsonSchema
    const answer = {
      change: { inner: { b: "x", note: null } },
      items: [{ at: { line: 1 } }, { at: { file: "a.ts", why: null } }, { at: { file: "b.ts", why: "w" } }]
    }
    const value = unstrict(schema, answer)
    expect(value).toEqual({
      change: { inner: { b: "x" } },
      items: [{ at: { line: 1 } }, { at: { file: "a.ts" } }, { at: { file: "b.ts", why: "w" } }]
    })
    expect(Schema.decodeUnknownEither(Change, { onExcessProperty: "error" })(value)._tag).toBe("Right")
  })

  it("reads a recursive union's reply in time that grows with its size, not doubling per level", () => {
    // An expression tree whose operator comes after its operands, as a model writes it: a branch is
    // refused only after its subtree was read.
    type Expr =
      | { readonly left: Expr; readonly right: Expr; readonly op: "add" }
      | { readonly left: Expr; readonly right: Expr; readonly op: "mul" }
      | { readonly value: number }
    const Expr: Schema.Schema<Expr> = Schema.Union(
      Schema.Struct({ left: Schema.suspend(() => Expr), right: Schema.suspend(() => Expr), op: Schema.Literal("add") }),
      Schema.Struct({ left: Schema.suspend(() => Expr), right: Schema.suspend(() => Expr), op: Schema.Literal("mul") }),
      Schema.Struct({ value: Schema.Number })
    ).annotations({ identifier: "Expr" })
    const Out = Schema.Struct({ expr: Expr })
    const schema = Either.getOrThrow(Catalog.outputSchema(Out)).jsonSchema
    let expr: Expr = { value: 0 }
    for (let i = 1; i <= 17; i++) expr = { left: expr, right: { value: i }, op: "mul" }
    const start = performance.now()
    const value = unstrict(schema, { expr })
    const elapsed = performance.now() - start
    expect(value).toEqual({ expr })
    expect(Schema.decodeUnknownEither(Out)(value)._tag).toBe("Right")
    // 35 nodes read in about a millisecond; doubling per level took seconds (the event loop
    // blocked: the reply is read in the parser). Loose, for a loaded machine.
    expect(elapsed).toBeLessThan(1_000)
  })

  it("leaves a union's answer that fits no branch as it is, for the Schema to reject", () => {
    // `kind` is neither literal, and a null for a required property fits no branch either.
    for (const step of [{ kind: "other", summary: null }, { kind: "edit", path: null, note: null }]) {
      const answer = { step, steps: [], byFile: {}, pair: ["x", { at: 1, by: "b" }] }
      expect(unstrict(plan, answer)).toEqual(answer)
      expect(Schema.decodeUnknownEither(Plan)(unstrict(plan, answer))._tag).toBe("Left")
    }
  })

  it("follows a reference wherever the published schema put its $defs (a list's result envelope)", () => {
    // A non-object output is published as `{ result }`, its $defs under the envelope's property.
    const Items = Schema.Array(Node)
    const enveloped = Either.getOrThrow(Catalog.outputSchema(Items)).jsonSchema
    expect(JSON.stringify(enveloped)).toContain("#/properties/result/$defs/Node")
    const answer = {
      result: [{ name: "a", tag: null, children: [{ name: "b", tag: null, children: [] }] }]
    }
    expect(unstrict(enveloped, answer)).toEqual({
      result: [{ name: "a", children: [{ name: "b", children: [] }] }]
    })
  })
})

describe("what OpenAI's strict structured outputs refuse (Codex: sent by instruction instead)", () => {
  const refusalOf = <A, I>(schema: Schema.Schema<A, I>) =>
    refusal(strict(Either.getOrThrow(Catalog.outputSchema(schema)).jsonSchema))

  it("takes closed objects, nullable optionals, literals, arrays of structs, unions and recursion", () => {
    expect(refusalOf(Triage)).toBeUndefined()
    expect(refusalOf(Node)).toBeUndefined()
    expect(refusalOf(Schema.Array(Schema.String))).toBeUndefined()
    expect(refusalOf(Schema.NonEmptyArray(Schema.Number))).toBeUndefined()
    expect(refusalOf(Schema.Literal("a", "b"))).toBeUndefined()
    expect(refusalOf(Schema.Union(Schema.TaggedStruct("A", { a: Schema.String }), Schema.TaggedStruct("B", {}))))
      .toBeUndefined()
    expect(refusalOf(Schema.Record({ key: Schema.Literal("x", "y"), value: Schema.Number }))).toBeUndefined()
  })

  it("refuses open objects, untyped nodes, tuples and keywords outside its subset, naming where", () => {
    const refused: ReadonlyArray<readonly [string, string | undefined]> = [
      ["record", refusalOf(Schema.Record({ key: Schema.String, value: Schema.Number }))],
      [
        "record field",
        refusalOf(Schema.Struct({ counts: Schema.Record({ key: Schema.String, value: Schema.Number }) }))
      ],
      [
        "index signature",
        refusalOf(Schema.Struct({ a: Schema.String }, Schema.Record({ key: Schema.String, value: Schema.String })))
      ],
      ["unknown", refusalOf(Schema.Struct({ data: Schema.Unknown }))],
      ["unknown root", refusalOf(Schema.Unknown)],
      ["object", refusalOf(Schema.Struct({ data: Schema.Object }))],
      ["empty struct", refusalOf(Schema.Struct({ data: Schema.Struct({}) }))],
      ["tuple", refusalOf(Schema.Tuple(Schema.String, Schema.Number))],
      ["map", refusalOf(Schema.Struct({ m: Schema.Map({ key: Schema.String, value: Schema.Number }) }))],
      ["two patterns", refusalOf(Schema.Struct({ s: Schema.String.pipe(Schema.pattern(/a/), Schema.pattern(/b/)) }))]
    ]
    expect(refused.map(([name, why]) => [name, why?.split(" ")[0]])).toEqual([
      ["record", "#"],
      ["record field", "#/properties/counts"],
      ["index signature", "#"],
      ["unknown", "#/properties/data"],
      ["unknown root", "#/properties/result"],
      ["object", "#/properties/data/anyOf/0"],
      ["empty struct", "#/properties/data/anyOf/0"],
      ["tuple", "#/properties/result"],
      ["map", "#/properties/m/items"],
      ["two patterns", "#/properties/s"]
    ])
    expect(refused[0]![1]).toContain("additionalProperties: false")
    expect(refused[3]![1]).toContain("accepts any value")
    expect(refused[7]![1]).toContain("without one item schema")
    expect(refused[9]![1]).toContain("`allOf`")
  })

  it("refuses a root that is not an object schema, and a boolean schema", () => {
    expect(refusal({ anyOf: [{ type: "object", additionalProperties: false, properties: {}, required: [] }] }))
      .toBe("the root is not an object schema")
    expect(refusal({ type: "object", properties: { a: true }, required: ["a"], additionalProperties: false }))
      .toBe("#/properties/a is a boolean schema")
    // What only a definition holds (a recursive Schema's) is read there too.
    expect(
      refusal({
        type: "object",
        properties: { a: { $ref: "#/$defs/Open" } },
        required: ["a"],
        additionalProperties: false,
        $defs: { Open: { type: "object", properties: {}, required: [], additionalProperties: { type: "string" } } }
      })?.split(" ")[0]
    ).toBe("#/$defs/Open")
  })
})
