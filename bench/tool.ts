/**
 * @tether/tool overhead, measured in one process:
 * - execution: `executor.execute` (decode, handler, encode, JSON check, output validation, outcome)
 *   against calling the same handler directly with an already decoded input (the baseline), for a
 *   small and a nested schema, with and without a deadline; the same Schema work done by hand
 *   (decode, handler, encode, JSON text) separates Schema's cost from the executor's;
 * - catalog: validating a toolkit of 10 / 100 / 1,000 / 10,000 tools into its catalog, and the
 *   fingerprint alone over those descriptors, with the growth factor between sizes.
 * Rounds are interleaved and the median round is reported. Bounded to a few seconds.
 *
 * Run: node --import tsx --import ./bench/compiled.mjs bench/tool.ts
 */
import { Catalog, Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { executorFrom } from "../packages/tool/src/internal/toolkit.js"

export interface Row {
  readonly group: "execute" | "catalog" | "fingerprint"
  readonly name: string
  /** Microseconds per operation (median round). */
  readonly micros: number
  /** Against the row's baseline: the direct handler call, or the previous size. */
  readonly ratio: number
  readonly baseline: string
}

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

// --- execution -------------------------------------------------------------------------

const Small = Tool.make("small", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String, state: Schema.String })
})

const Item = Schema.Struct({ sku: Schema.String, quantity: Schema.Int, price: Schema.NumberFromString })
const Order = Schema.Struct({
  customer: Schema.Struct({ id: Schema.Int, name: Schema.String, tags: Schema.Array(Schema.String) }),
  items: Schema.Array(Item),
  note: Schema.optional(Schema.String)
})
const Nested = Tool.make("nested", {
  description: "Prices an order.",
  input: { order: Order },
  output: Schema.Struct({ order: Order, total: Schema.Number })
})

const smallHandler = ({ key }: { readonly key: string }) => Effect.succeed({ title: `Issue ${key}`, state: "open" })
const nestedHandler = ({ order }: { readonly order: typeof Order.Type }) =>
  Effect.succeed({ order, total: order.items.reduce((sum, item) => sum + item.quantity * item.price, 0) })

const smallInput = { key: "ISSUE-42" }
const nestedInput = {
  order: {
    customer: { id: 7, name: "Ada", tags: ["vip", "eu"] },
    items: Array.from({ length: 10 }, (_, i) => ({ sku: `SKU-${i}`, quantity: i + 1, price: `${(i + 1) * 1.5}` }))
  }
}

const loop = <A, E>(iterations: number, once: () => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const started = performance.now()
    for (let i = 0; i < iterations; i++) yield* once()
    return ((performance.now() - started) * 1000) / iterations
  })

const measureExecution = Effect.gen(function*() {
  const kit = Toolkit.make(Small, Nested)
  const executor = yield* executorFrom(kit, { small: smallHandler, nested: nestedHandler })
  const decodedNested = Schema.decodeUnknownSync(Nested.inputSchema)(nestedInput)
  // By hand: the Schema work alone (decode, handler, encode, JSON text), no executor.
  const byHand = <I, IE, O, OE>(
    input: Schema.Schema<I, IE>,
    output: Schema.Schema<O, OE>,
    handler: (i: I) => Effect.Effect<O>
  ) => {
    const decode = Schema.decodeUnknown(input, { onExcessProperty: "error" })
    const encode = Schema.encode(output)
    return (u: unknown) =>
      decode(u).pipe(
        Effect.flatMap(handler),
        Effect.flatMap(encode),
        Effect.map((o) => JSON.stringify(o)),
        Effect.orDie
      )
  }
  const smallByHand = byHand(Small.inputSchema, Small.outputSchema, smallHandler)
  const nestedByHand = byHand(Nested.inputSchema, Nested.outputSchema, nestedHandler)
  const cases: ReadonlyArray<{
    readonly name: string
    readonly direct: () => Effect.Effect<unknown>
    readonly byHand: () => Effect.Effect<unknown>
    readonly input: unknown
  }> = [
    { name: "small", direct: () => smallHandler(smallInput), byHand: () => smallByHand(smallInput), input: smallInput },
    {
      name: "nested",
      direct: () => nestedHandler(decodedNested),
      byHand: () => nestedByHand(nestedInput),
      input: nestedInput
    }
  ]
  const iterations = 1_000
  const rounds = 5
  const rows: Array<Row> = []
  for (const c of cases) {
    // Warm up JIT and the lazily compiled output validator.
    yield* loop(iterations, c.direct)
    yield* loop(iterations, () => executor.execute(c.name, c.input))
    const direct: Array<number> = []
    const manual: Array<number> = []
    const execute: Array<number> = []
    const withDeadline: Array<number> = []
    for (let round = 0; round < rounds; round++) {
      direct.push(yield* loop(iterations, c.direct))
      manual.push(yield* loop(iterations, c.byHand))
      execute.push(yield* loop(iterations, () => executor.execute(c.name, c.input)))
      withDeadline.push(yield* loop(iterations, () => executor.execute(c.name, c.input, { deadline: "2 minutes" })))
    }
    const base = median(direct)
    rows.push({ group: "execute", name: `${c.name}: direct handler call`, micros: base, ratio: 1, baseline: "itself" })
    rows.push({
      group: "execute",
      name: `${c.name}: decode + handler + encode by hand`,
      micros: median(manual),
      ratio: median(manual) / base,
      baseline: "direct handler call"
    })
    rows.push({
      group: "execute",
      name: `${c.name}: execute`,
      micros: median(execute),
      ratio: median(execute) / base,
      baseline: "direct handler call"
    })
    rows.push({
      group: "execute",
      name: `${c.name}: execute with deadline`,
      micros: median(withDeadline),
      ratio: median(withDeadline) / base,
      baseline: "direct handler call"
    })
  }
  return rows
})

// --- catalog and fingerprint -----------------------------------------------------------

const makeTool = (i: number): Tool.Any => {
  const common = {
    description: `Tool number ${i}.`,
    output: i % 3 === 0 ? Schema.Array(Schema.Number) : Schema.Struct({ title: Schema.String }),
    revision: `tool_${i}/v1`,
    annotations: { readOnly: i % 2 === 0, idempotent: true }
  }
  return i % 2 === 0
    ? Tool.make(`tool_${i}`, { ...common, input: { key: Schema.String } })
    : Tool.make(`tool_${i}`, { ...common, input: { order: Order } })
}

const makeTools = (count: number): Array<Tool.Any> => Array.from({ length: count }, (_, i) => makeTool(i))

const time = (f: () => void): number => {
  const started = performance.now()
  f()
  return (performance.now() - started) * 1000
}

const measureCatalog = () => {
  const rows: Array<Row> = []
  let previousCatalog: number | undefined
  let previousFingerprint: number | undefined
  for (const size of [10, 100, 1_000, 10_000]) {
    const rounds = size >= 10_000 ? 1 : size >= 1_000 ? 3 : 7
    const catalogTimes: Array<number> = []
    const fingerprintTimes: Array<number> = []
    let descriptors: ReadonlyArray<Catalog.Descriptor> = []
    for (let round = 0; round < rounds; round++) {
      // Fresh tool objects each round: `Toolkit.catalog` is cached per toolkit.
      const toolkit = Toolkit.make(...makeTools(size))
      catalogTimes.push(time(() => {
        descriptors = Effect.runSync(Toolkit.catalog(toolkit)).descriptors
      }))
      // Computed again each time (the digest is not cached; the hash runs over the catalog's
      // canonical bytes, kept since it was built): several calls per round, so one garbage
      // collection of the catalog just built does not stand for the fingerprint's cost.
      for (let call = 0; call < 5; call++) fingerprintTimes.push(time(() => Catalog.fingerprint(descriptors)))
    }
    const catalogMicros = median(catalogTimes)
    const fingerprintMicros = median(fingerprintTimes)
    rows.push({
      group: "catalog",
      name: `catalog of ${size.toLocaleString("en")} tools`,
      micros: catalogMicros,
      ratio: previousCatalog === undefined ? 1 : catalogMicros / previousCatalog,
      baseline: previousCatalog === undefined ? "itself" : "previous size (10x fewer tools)"
    })
    rows.push({
      group: "fingerprint",
      name: `fingerprint of ${size.toLocaleString("en")} tools`,
      micros: fingerprintMicros,
      ratio: previousFingerprint === undefined ? 1 : fingerprintMicros / previousFingerprint,
      baseline: previousFingerprint === undefined ? "itself" : "previous size (10x fewer tools)"
    })
    previousCatalog = catalogMicros
    previousFingerprint = fingerprintMicros
  }
  return rows
}

/** Runs every measurement; the rows are ready for `format`. */
export const run = async (): Promise<Array<Row>> => {
  const execution = await Effect.runPromise(measureExecution)
  return [...execution, ...measureCatalog()]
}

const formatMicros = (micros: number): string =>
  micros >= 1_000_000
    ? `${(micros / 1_000_000).toFixed(2)} s`
    : micros >= 1_000
    ? `${(micros / 1_000).toFixed(2)} ms`
    : `${micros.toFixed(2)} µs`

/** A fixed-width table of the rows. */
export const format = (rows: ReadonlyArray<Row>): string => {
  const header = ["measurement", "per op", "ratio", "against"]
  const lines = rows.map((row) => [row.name, formatMicros(row.micros), `${row.ratio.toFixed(2)}x`, row.baseline])
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((line) => line[i]!.length)))
  const render = (cells: ReadonlyArray<string>) => cells.map((cell, i) => cell.padEnd(widths[i]!)).join("  ")
  return [render(header), render(widths.map((w) => "-".repeat(w))), ...lines.map(render)].join("\n")
}

if (process.argv[1] === import.meta.filename) {
  run().then((rows) => console.log(format(rows)), (error: unknown) => {
    console.error(error)
    process.exitCode = 1
  })
}
