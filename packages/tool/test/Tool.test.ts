import { describe, expect, it } from "@effect/vitest"
import { Tool } from "@tether/tool"
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"

class Wrapped extends Data.TaggedError("Wrapped")<{ readonly cause: unknown }> {}

const forgeries = (): ReadonlyArray<readonly [string, unknown]> => {
  const real = Tool.rejection("not_found", "Choose another key.")
  const proto = Object.getPrototypeOf(real) as object
  const RealClass = proto.constructor as new(args: { code: string; message: string }) => object
  class Subclass extends RealClass {}
  const errorLookalike = Object.assign(new Error("Choose another key."), { _tag: "Rejection", code: "not_found" })
  return [
    ["a plain object with the same fields", { _tag: "Rejection", code: "not_found", message: "Choose another key." }],
    ["an Error with the same fields", errorLookalike],
    ["the internal class constructed directly", new RealClass({ code: "not_found", message: "Choose another key." })],
    ["a subclass of the internal class", new Subclass({ code: "not_found", message: "Choose another key." })],
    ["an object created from a copied prototype", Object.create(proto, Object.getOwnPropertyDescriptors(real))],
    ["an object whose prototype was set to the rejection's", Object.setPrototypeOf({ ...real }, proto)],
    ["a structured clone", structuredClone(real)],
    ["a Proxy around a real rejection", new Proxy(real as object, {})],
    ["an object claiming to be Effect's span wrapper of a lookalike", {
      [Symbol.for("effect/OriginalAnnotation")]: { _tag: "Rejection", code: "x", message: "y" }
    }],
    ["a JSON round trip", JSON.parse(JSON.stringify(real))]
  ]
}

describe("Tool.make", () => {
  it("keeps explicit false hints distinct from unspecified ones", () => {
    const tool = Tool.make("t", {
      description: "d",
      input: { a: Schema.String },
      output: Schema.String,
      annotations: { readOnly: false, openWorld: true }
    })
    expect(tool.annotations).toStrictEqual({ readOnly: false, openWorld: true })
    expect("destructive" in tool.annotations).toBe(false)
    expect(Tool.isTool(tool)).toBe(true)
    expect(Tool.isTool({ name: "t" })).toBe(false)
  })

  it("accepts struct fields or a struct schema as input", () => {
    const fromFields = Tool.make("a", { description: "d", input: { a: Schema.String }, output: Schema.String })
    const struct = Schema.Struct({ a: Schema.String })
    const fromSchema = Tool.make("b", { description: "d", input: struct, output: Schema.String })
    expect(Schema.isSchema(fromFields.inputSchema)).toBe(true)
    expect(fromSchema.inputSchema).toBe(struct)
  })
})

describe("Tool.reject", () => {
  it.effect("fails with a genuine rejection carrying code and message", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Tool.reject("not_found", "Choose another key."))
      expect(Exit.isFailure(exit)).toBe(true)
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
      expect(Tool.isRejection(error)).toBe(true)
      const found = Tool.findRejection(error)
      expect(Option.map(found, (r) => [r._tag, r.code, r.message])).toStrictEqual(
        Option.some(["Rejection", "not_found", "Choose another key."])
      )
    }))

  it.effect("a rejection value is yieldable", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Effect.gen(function*() {
        return yield* Tool.rejection("busy", "Retry later.")
      }))
      expect(Exit.isFailure(exit) && Tool.isRejection(exit.cause)).toBe(true)
    }))

  for (const [label, forged] of forgeries()) {
    it(`is not forged by ${label}`, () => {
      expect(Tool.isRejection(forged)).toBe(false)
      expect(Option.isNone(Tool.findRejection(forged))).toBe(true)
      expect(Tool.isRejection(Cause.fail(forged))).toBe(false)
      expect(Tool.isRejection(new Error("wrapper", { cause: forged }))).toBe(false)
    })
  }

  it.effect("a real rejection is recognised through three layers of wrapping", () =>
    Effect.gen(function*() {
      const real = Tool.rejection("quota", "Wait for the quota to reset.")
      // 1: mapError into a tagged error's `cause`; 2: a standard Error `cause`; 3: a defect in a
      // parallel Cause next to an unrelated failure.
      const layered = Effect.fail(real).pipe(
        Effect.mapError((cause) => new Wrapped({ cause })),
        Effect.mapError((error) => new Error("outer", { cause: error })),
        Effect.catchAll((error) => Effect.failCause(Cause.parallel(Cause.fail("unrelated"), Cause.die(error))))
      )
      const exit = yield* Effect.exit(layered)
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit)) {
        expect(Tool.isRejection(exit.cause)).toBe(true)
        expect(Option.getOrUndefined(Tool.findRejection(exit.cause))).toBe(real)
      }
    }))

  it("is recognised inside an AggregateError, a FiberFailure and an UnknownException", () => {
    const real = Tool.rejection("x", "y")
    expect(Tool.isRejection(new AggregateError([new Error("a"), real]))).toBe(true)
    const failure = Effect.runSyncExit(Effect.fail(real))
    expect(Exit.isFailure(failure) && Tool.isRejection(Cause.squash(failure.cause))).toBe(true)
    const thrown = Effect.runSyncExit(Effect.try(() => {
      throw real
    }))
    expect(Exit.isFailure(thrown) && Tool.isRejection(thrown.cause)).toBe(true)
    let fiberFailure: unknown
    try {
      Effect.runSync(Effect.fail(real))
    } catch (error) {
      fiberFailure = error
    }
    expect(Tool.isRejection(fiberFailure)).toBe(true)
  })

  it("survives cyclic cause chains and throwing getters", () => {
    const a: { cause?: unknown } = {}
    const b = { cause: a }
    a.cause = b
    expect(Tool.isRejection(a)).toBe(false)
    const hostile = new Proxy({}, {
      get() {
        throw new Error("trap")
      },
      has() {
        throw new Error("trap")
      }
    })
    expect(Tool.isRejection(hostile)).toBe(false)
    // A branch that throws does not hide a rejection in another branch.
    expect(Tool.isRejection({ cause: hostile, error: Tool.rejection("x", "y") })).toBe(true)
  })

  it.prop("never recognises plain data", [FastCheck.anything()], ([value]) => {
    expect(Tool.isRejection(value)).toBe(false)
  }, { fastCheck: { numRuns: 200 } })
})
