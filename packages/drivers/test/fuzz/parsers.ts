/**
 * The parser fuzz harness: generated runs of provider lines (recorded transcripts with lines
 * mutated, replaced, inserted or deleted; hostile values planted in recorded records; random
 * text and JSON; huge and deeply nested lines) and the checks every run must pass:
 * - no defect: the run ends, or fails with the parser's typed error, and nothing else;
 * - every output is well formed;
 * - a line that is not a JSON object yields only what the protocol promises for it (a `Notice`);
 * - each line is parsed within a fixed budget (far above the linear cost of the largest line).
 *
 * A parser is a `Subject`: anything that turns a stream of lines into a stream of outputs.
 *
 * @internal
 */
import * as Driver from "@tether/core/Driver"
import { Usage } from "@tether/core/Result"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"

/** A line-protocol parser under fuzz. */
export interface Subject<O = unknown> {
  readonly name: string
  /** Recorded transcripts of the real protocol, one array of lines per recording: the seeds. */
  readonly transcripts: ReadonlyArray<ReadonlyArray<string>>
  /** One fresh run over `lines`. */
  readonly parse: (lines: Stream.Stream<string>) => Stream.Stream<O, unknown>
  /** Whether a run may end with this failure (the parser's typed error). */
  readonly isFailure: (error: unknown) => boolean
  /** Whether an output is well formed. */
  readonly isOutput: (output: unknown) => boolean
  /** Whether these are acceptable outputs for a line that is not the protocol (not a JSON object). */
  readonly isForeign: (outputs: ReadonlyArray<O>) => boolean
}

/** The recorded transcripts of `test/fixtures/<dir>`: every `*.jsonl` file, blank lines dropped. */
export const recorded = (dir: string): ReadonlyArray<ReadonlyArray<string>> => {
  const root = Path.join(import.meta.dirname, "..", "fixtures", dir)
  return Fs.readdirSync(root).filter((file) => file.endsWith(".jsonl")).sort().map((file) =>
    Fs.readFileSync(Path.join(root, file), "utf8").split("\n").filter((line) => line.trim() !== "")
  )
}

const optionalString = Schema.UndefinedOr(Schema.String)

const finiteUsage = (u: unknown): u is Usage =>
  u instanceof Usage &&
  [u.inputTokens, u.outputTokens, u.cachedInputTokens, u.reasoningTokens, u.costUsd].every((n) =>
    n === undefined || Number.isFinite(n)
  )

const UsageValue = Schema.declare(finiteUsage)

/** `Driver.Output` as a schema: what a well-formed output is. */
export const DriverOutput = Schema.Union(
  Schema.Struct({ _tag: Schema.Literal("SessionStarted"), sessionId: Schema.String, model: optionalString }),
  Schema.Struct({ _tag: Schema.Literal("TextDelta", "ReasoningDelta"), text: Schema.String }),
  Schema.Struct({ _tag: Schema.Literal("Message"), role: Schema.Literal("assistant", "user"), text: Schema.String }),
  Schema.Struct({
    _tag: Schema.Literal("ToolCall"),
    phase: Schema.Literal("start", "end"),
    callId: Schema.String,
    name: Schema.String,
    source: Schema.Literal("host", "mcp", "builtin"),
    input: Schema.optional(Schema.Unknown),
    output: Schema.optional(Schema.Unknown),
    isError: Schema.optional(Schema.Boolean)
  }),
  Schema.Struct({ _tag: Schema.Literal("Usage"), usage: UsageValue }),
  Schema.Struct({
    _tag: Schema.Literal("Notice"),
    level: Schema.Literal("info", "warning", "error"),
    kind: Schema.String,
    message: Schema.String,
    raw: Schema.optional(Schema.Unknown)
  }),
  Schema.Struct({
    _tag: Schema.Literal("Terminal"),
    ok: Schema.Boolean,
    text: optionalString,
    usage: Schema.UndefinedOr(UsageValue),
    model: optionalString,
    session: optionalString,
    error: optionalString,
    raw: Schema.Unknown
  })
)

const isDriverOutput = Schema.is(DriverOutput)

const newSession: Driver.ParseContext = {
  hostedKey: "tether",
  session: { _tag: "New", id: "00000000-0000-4000-8000-000000000000" }
}

// One run in four resumes a session (most recorded transcripts then end at once, rejected).
const contexts: ReadonlyArray<Driver.ParseContext> = [
  newSession,
  newSession,
  newSession,
  { hostedKey: "tether", session: { _tag: "Resume", id: "11111111-1111-4111-8111-111111111111" } }
]

/**
 * A driver's `parse` as a subject, one line to plug in: its recorded transcripts are
 * `test/fixtures/<fixtures>/*.jsonl`. One run in four resumes a session, the others are new.
 */
export const driver = (
  name: string,
  parse: Driver.Driver["parse"],
  fixtures: string
): Subject<Driver.Output> => {
  let n = 0
  return {
    name,
    transcripts: recorded(fixtures),
    parse: (lines) => parse(lines, contexts[n++ % contexts.length]!),
    isFailure: (error) => error instanceof Driver.ProtocolError,
    isOutput: isDriverOutput,
    isForeign: (outputs) => outputs.every((output) => output._tag === "Notice")
  }
}

// ---------------------------------------------------------------------------------------------
// Generation

/** How large generated values get. */
export interface Sizes {
  /** Deepest nesting of a generated array or object. */
  readonly depth: number
  /** Longest repetition in a generated string (a line is at most a few times this). */
  readonly repeat: number
}

/**
 * JSON text fragments no well-behaved CLI prints, as text because `JSON.stringify` cannot write
 * some of them (`1e309`, ten thousand levels of nesting).
 */
const hostile = (sizes: Sizes): FastCheck.Arbitrary<string> =>
  FastCheck.oneof(
    FastCheck.constantFrom(
      `{"toString":1}`,
      `{"toString":{},"valueOf":[]}`,
      `{"__proto__":{"toString":1}}`,
      `{"constructor":{"prototype":{"toString":1}}}`,
      `"__proto__"`,
      `1e309`,
      `-1e309`,
      `-0`,
      `1e-400`,
      `123456789012345678901234567890`,
      `"\\ud800"`,
      `"\\u0000"`,
      `[]`,
      `{}`,
      `""`,
      `null`,
      `true`,
      `0`,
      `-1`,
      `[{"toString":1}]`
    ),
    FastCheck.integer({ min: 1, max: sizes.depth }).map((d) => "[".repeat(d) + "]".repeat(d)),
    FastCheck.integer({ min: 1, max: sizes.depth }).map((d) => `{"a":`.repeat(d) + "1" + "}".repeat(d)),
    // Long runs of one unit, between a prefix and a suffix (a suffix a pattern cannot match makes
    // a backtracking pattern try every split).
    FastCheck.tuple(
      FastCheck.constantFrom("", "mcp__", "mcp__tether__", "mcp_", "x"),
      FastCheck.constantFrom("_", "a", "__", "\\n", "é", "\\\\", " ", "😀"),
      FastCheck.integer({ min: 1, max: sizes.repeat }),
      FastCheck.constantFrom("", "", "\\n", "\\u2028", "x")
    ).map(([prefix, unit, n, suffix]) => `"${prefix}${unit.repeat(n)}${suffix}"`),
    FastCheck.json({ maxDepth: 3 })
  )

/** Keys and short scalar values of the recorded records: the vocabulary of mutations. */
interface Vocabulary {
  readonly keys: ReadonlyArray<string>
  readonly values: ReadonlyArray<string>
}

const vocabularyOf = (lines: ReadonlyArray<string>): Vocabulary => {
  const keys = new Set<string>()
  const values = new Set<string>()
  for (const line of lines) {
    let record: unknown
    try {
      record = JSON.parse(line)
    } catch {
      continue
    }
    const stack: Array<unknown> = [record]
    while (stack.length > 0) {
      const value = stack.pop()
      if (typeof value === "string" && value.length <= 64) values.add(JSON.stringify(value))
      else if (typeof value === "number" || typeof value === "boolean") values.add(JSON.stringify(value))
      else if (Array.isArray(value)) stack.push(...value)
      else if (typeof value === "object" && value !== null) {
        for (const [key, member] of Object.entries(value)) {
          keys.add(key)
          stack.push(member)
        }
      }
    }
  }
  return { keys: [...keys].sort(), values: [...values].sort() }
}

/** A planted value: a hostile fragment, a word of the protocol, or random JSON. */
const valueArb = (vocabulary: Vocabulary, sizes: Sizes): FastCheck.Arbitrary<string> =>
  FastCheck.oneof(
    { arbitrary: hostile(sizes), weight: 3 },
    { arbitrary: FastCheck.constantFrom(...vocabulary.values), weight: 2 },
    { arbitrary: FastCheck.json({ maxDepth: 2 }), weight: 1 }
  )

type Op =
  | { readonly kind: "set"; readonly at: number; readonly key: string; readonly value: string }
  | { readonly kind: "delete"; readonly at: number }

const opArb = (vocabulary: Vocabulary, sizes: Sizes): FastCheck.Arbitrary<Op> =>
  FastCheck.oneof(
    {
      arbitrary: FastCheck.record({
        kind: FastCheck.constant("set" as const),
        at: FastCheck.nat(),
        key: FastCheck.constantFrom(...vocabulary.keys),
        value: valueArb(vocabulary, sizes)
      }),
      weight: 4
    },
    { arbitrary: FastCheck.record({ kind: FastCheck.constant("delete" as const), at: FastCheck.nat() }), weight: 1 }
  )

const marker = (n: number) => `@@fuzz-${n}@@`

/**
 * Applies structural mutations to a recorded record: each picks one object or array of the
 * record (by index, depth first) and sets a key (an index in an array) to a planted value, or
 * deletes one of its members. A line that is not a JSON object is returned unchanged.
 */
const mutate = (line: string, ops: ReadonlyArray<Op>): string => {
  // Only records of recorded size: a generated line may be too deep for `JSON.stringify`.
  if (line.length > 65_536) return line
  let record: unknown
  try {
    record = JSON.parse(line)
  } catch {
    return line
  }
  if (typeof record !== "object" || record === null) return line
  const planted: Array<string> = []
  for (const op of ops) {
    const containers: Array<Record<string, unknown> | Array<unknown>> = []
    const stack: Array<unknown> = [record]
    while (stack.length > 0) {
      const value = stack.pop()
      if (typeof value === "object" && value !== null) {
        containers.push(value as Record<string, unknown>)
        stack.push(...Object.values(value))
      }
    }
    const target = containers[op.at % containers.length]!
    const members = Object.keys(target)
    if (op.kind === "delete") {
      if (members.length === 0) continue
      const key = members[op.at % members.length]!
      if (Array.isArray(target)) target.splice(Number(key), 1)
      else delete target[key]
      continue
    }
    planted.push(op.value)
    const value = marker(planted.length - 1)
    if (Array.isArray(target)) target[op.at % (target.length + 1)] = value
    else {
      // Half the time an existing member is overwritten, otherwise a key of the protocol is set.
      const key = members.length > 0 && op.at % 2 === 0 ? members[(op.at >> 1) % members.length]! : op.key
      Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
    }
  }
  let text: string
  try {
    text = JSON.stringify(record)
  } catch {
    return line
  }
  planted.forEach((fragment, i) => {
    text = text.replace(JSON.stringify(marker(i)), () => fragment)
  })
  return text
}

/** Mutations of a line's text: truncation, a splice of foreign text, a duplicated slice. */
const textual = (line: string, kind: "truncate" | "splice" | "duplicate", at: number, insert: string): string => {
  const position = at % (line.length + 1)
  switch (kind) {
    case "truncate":
      return line.slice(0, position)
    case "splice":
      return line.slice(0, position) + insert + line.slice(position)
    case "duplicate":
      return line + line.slice(position)
  }
}

type Edit = {
  readonly at: number
  readonly action: "replace" | "insert" | "delete"
  readonly line: (seed: string) => string
}

/**
 * A generated run: one recorded transcript with a few lines edited. A new line is a mutation of
 * a recorded line (or of the line it replaces), a textual mutation, random text or JSON, or a
 * hostile fragment as a whole line.
 */
export const runArb = (subject: Subject<unknown>, sizes: Sizes): FastCheck.Arbitrary<ReadonlyArray<string>> => {
  const lines = subject.transcripts.flat()
  const vocabulary = vocabularyOf(lines)
  const seedLine = FastCheck.constantFrom(...lines)
  const newLine: FastCheck.Arbitrary<(replaced: string) => string> = FastCheck.oneof(
    {
      arbitrary: FastCheck.tuple(
        FastCheck.option(seedLine, { nil: undefined }),
        FastCheck.array(opArb(vocabulary, sizes), { minLength: 1, maxLength: 3 })
      ).map(([seed, ops]) => (replaced: string) => mutate(seed ?? replaced, ops)),
      weight: 6
    },
    {
      arbitrary: FastCheck.tuple(
        seedLine,
        FastCheck.constantFrom("truncate" as const, "splice" as const, "duplicate" as const),
        FastCheck.nat(),
        FastCheck.oneof(
          FastCheck.string({ maxLength: 8 }),
          FastCheck.constantFrom("\n", "\r", "\u0000", "\ufffd", "\"", "}")
        )
      ).map(([seed, kind, at, insert]) => () => textual(seed, kind, at, insert)),
      weight: 2
    },
    {
      arbitrary: FastCheck.oneof(
        FastCheck.string({ maxLength: 64 }),
        FastCheck.fullUnicodeString({ maxLength: 64 }),
        FastCheck.json({ maxDepth: 3 }),
        hostile(sizes)
      ).map((text) => () => text),
      weight: 2
    }
  )
  const edit: FastCheck.Arbitrary<Edit> = FastCheck.record({
    at: FastCheck.nat(),
    action: FastCheck.constantFrom("replace" as const, "replace" as const, "insert" as const, "delete" as const),
    line: newLine
  })
  return FastCheck.tuple(
    FastCheck.nat({ max: subject.transcripts.length - 1 }),
    FastCheck.array(edit, { minLength: 1, maxLength: 4 })
  ).map(([index, edits]) => {
    const run = [...subject.transcripts[index]!]
    for (const { action, at, line } of edits) {
      const position = at % (run.length + (action === "insert" ? 1 : 0) || 1)
      if (action === "insert") run.splice(position, 0, line(run[position] ?? "{}"))
      else if (run.length === 0) run.push(line("{}"))
      else if (action === "replace") run[position] = line(run[position]!)
      else run.splice(position, 1)
    }
    return run
  })
}

// ---------------------------------------------------------------------------------------------
// Checking

/** What one checked run found. */
export interface Checked {
  readonly problems: ReadonlyArray<string>
  readonly lines: number
  readonly outputs: number
  readonly failed: boolean
  readonly slowestMs: number
  readonly bytes: number
}

const preview = (line: string): string => JSON.stringify(line.length > 160 ? `${line.slice(0, 160)}…` : line)

const isJsonObject = (line: string): boolean => {
  try {
    const value: unknown = JSON.parse(line)
    return typeof value === "object" && value !== null && !Array.isArray(value)
  } catch {
    return false
  }
}

/**
 * Parses `lines` as one run, a line per chunk, and checks it. Outputs are attributed to the
 * line whose chunk produced them (the parser emits a chunk's outputs before it pulls the next).
 */
export const check = <O>(subject: Subject<O>, lines: ReadonlyArray<string>, budgetMs: number): Effect.Effect<Checked> =>
  Effect.gen(function*() {
    const pulled: Array<number> = []
    const perLine: Array<Array<O>> = lines.map(() => [])
    const input = Stream.fromIterable(lines).pipe(
      Stream.rechunk(1),
      Stream.tap(() => Effect.sync(() => pulled.push(performance.now())))
    )
    const exit = yield* subject.parse(input).pipe(
      Stream.runForEach((output) => Effect.sync(() => perLine[pulled.length - 1]!.push(output))),
      Effect.exit
    )
    const ended = performance.now()
    const problems: Array<string> = []
    let failed = false
    if (Exit.isFailure(exit)) {
      const failures = [...Cause.failures(exit.cause)]
      if (!Cause.isFailType(exit.cause) || !failures.every(subject.isFailure)) {
        problems.push(`the run ended with a defect or an unexpected failure: ${Cause.pretty(exit.cause).slice(0, 600)}`)
      }
      failed = true
    }
    let slowestMs = 0
    let outputs = 0
    for (let i = 0; i < pulled.length; i++) {
      const ms = (i + 1 < pulled.length ? pulled[i + 1]! : ended) - pulled[i]!
      slowestMs = Math.max(slowestMs, ms)
      if (ms > budgetMs) problems.push(`line ${i} took ${ms.toFixed(0)} ms (budget ${budgetMs}): ${preview(lines[i]!)}`)
      const out = perLine[i]!
      outputs += out.length
      const bad = out.find((output) => !subject.isOutput(output))
      if (bad !== undefined) problems.push(`line ${i} gave a malformed output: ${preview(lines[i]!)}`)
      // The line a failure ended the run on may be a protocol line the parser refused.
      const last = failed && i === pulled.length - 1
      if (!last && !isJsonObject(lines[i]!) && !subject.isForeign(out)) {
        problems.push(`line ${i} is not a JSON object and gave other outputs than notices: ${preview(lines[i]!)}`)
      }
    }
    return {
      problems,
      lines: pulled.length,
      outputs,
      failed,
      slowestMs,
      bytes: lines.reduce((n, line) => n + line.length, 0)
    }
  })
