/**
 * Structured output over an agent's or a thread's turns: the JSON Schema derived from the
 * Schema, the instruction and repair prompts, the extraction of the JSON value from an answer's
 * text, Tether's own validation, and the attempts loop (`streamAs`; `runAs` drains it).
 *
 * A run learns that it is a structured-output attempt from its turn object (`turnKey`): the
 * turn travels unchanged through the thread's lease, planning and retry to the agent's run,
 * which hands the JSON Schema to a native driver and records what the provider returned.
 *
 * @internal
 */
import * as Catalog from "@tether/tool/Catalog"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as AST from "effect/SchemaAST"
import * as Stream from "effect/Stream"
import type * as Agent from "../Agent.js"
import { InvalidTurn, RunError, UnsupportedCapability } from "../AgentError.js"
import type * as Driver from "../Driver.js"
import type * as Event from "../Event.js"
import type { Result } from "../Result.js"
import { type Decoded, Issue, type Options, StructuredOutputError } from "../StructuredOutput.js"

/** The key of a turn object's structured-output attempt. @internal */
export const turnKey: unique symbol = Symbol.for("@tether/core/internal/structuredOutputAttempt")

/** What one attempt hands to its run, and what the run leaves in it. @internal */
export interface Attempt {
  /** The JSON Schema a native driver sends (absent for an instruction driver). */
  readonly outputSchema: Driver.JsonSchema | undefined
  /** An agent's repair turn: the provider session it resumes. */
  readonly resume: string | undefined
  /**
   * Attempt 2 and later: part of the host's turn, whose `id` it carries (a thread's record keeps
   * it, so a second delivery of the host's turn is `TurnAlreadyCommitted`).
   */
  readonly repair: boolean
  /** An agent's attempt: completed once its provider process is gone (or was never spawned). */
  readonly reaped: Deferred.Deferred<void>
  /** What the provider returned natively, set by the run before its `RunFinished`. */
  received: Driver.StructuredOutput | undefined
}

/** A turn carrying its attempt. @internal */
export type AttemptTurn = Agent.Turn & { readonly [turnKey]?: Attempt }

/** The attempt a turn carries, if it is one. @internal */
export const attemptOf = (input: Agent.Input): Attempt | undefined =>
  typeof input === "string" ? undefined : (input as AttemptTurn)[turnKey]

/** Where the turns of `streamAs` run. @internal */
export interface Runner<E> {
  readonly driver: string
  readonly capabilities: Driver.Capabilities
  /** The driver's `outputSchemaRefusal`: a JSON Schema it refuses is asked for by instruction. */
  readonly outputSchemaRefusal: ((jsonSchema: Driver.JsonSchema) => string | undefined) | undefined
  readonly stream: (turn: Agent.Turn) => Stream.Stream<Event.Event, E>
  /**
   * `true` for an agent: a repair turn names the session it resumes (and waits for the previous
   * attempt's CLI to be gone); `false` for a thread, whose next turn resumes its checkpoint.
   */
  readonly resumesItself: boolean
  /**
   * An agent's: called with the session of a conversation no repair turn continues (decoded, or
   * given up on), and the `reaped` of its last attempt. Its entries are removed from the clone
   * once that process is gone, as a plain run's are; nothing waits for it.
   */
  readonly discard?: (session: string, reaped: Deferred.Deferred<void>) => Effect.Effect<void>
}

/** The instruction an instruction driver's turn carries. @internal */
export const instruction = (jsonSchema: Driver.JsonSchema): string =>
  "Give your final answer as one JSON value that matches the JSON Schema below, and nothing else: " +
  "no prose before or after it, no code fence.\n\nJSON Schema:\n" + JSON.stringify(jsonSchema)

const pathText = (path: ReadonlyArray<string | number>, envelope: boolean): string => {
  const full = envelope ? ["result", ...path] : path
  return full.length === 0 ? "the value" : full.map((key) => typeof key === "number" ? `[${key}]` : key).join(".")
}

/** The input of a repair turn. @internal */
export const repairInput = (
  failure: { readonly reason: "Missing" | "Invalid"; readonly issues: ReadonlyArray<Issue> },
  published: Catalog.OutputSchema,
  native: boolean
): string => {
  const said = failure.reason === "Missing"
    ? "Your previous answer did not provide the required structured output."
    : "Your previous answer does not match the required JSON Schema:\n" +
      failure.issues.slice(0, 20).map((issue) => `- ${pathText(issue.path, published.envelope)}: ${issue.message}`)
        .join("\n")
  const again = "Answer again with the whole corrected value."
  return native ? `${said}\n${again}` : `${said}\n${again} ${instruction(published.jsonSchema)}`
}

type Parsed = { readonly value: unknown }

const tryParse = (text: string): Parsed | undefined => {
  try {
    return { value: JSON.parse(text) }
  } catch {
    return undefined
  }
}

/** The index of the bracket closing the one at `start`, `-1` when it is not closed. */
const closing = (text: string, start: number): number => {
  const open: Array<string> = []
  let inString = false
  for (let i = start; i < text.length; i++) {
    const c = text[i]
    if (inString) {
      if (c === "\\") i++
      else if (c === "\"") inString = false
      continue
    }
    if (c === "\"") inString = true
    else if (c === "{" || c === "[") open.push(c)
    else if (c === "}" || c === "]") {
      if (open.pop() !== (c === "}" ? "{" : "[")) return -1
      if (open.length === 0) return i
    }
  }
  return -1
}

// Characters scanned by candidates that do not close into JSON, in multiples of the text's length,
// before the scan gives up: bounds the work on a long answer full of unclosed brackets, however
// many cheap ones (a link's `[text]`) come first.
const maxFailedScans = 64

// A closing fence starts a line: a JSON string (no raw newline in it) may hold "```" but never
// ends a block.
const fence = /```[^\n`]*\n([\s\S]*?)\n[ \t]*```/g

/**
 * The JSON value of an answer's text: the whole text, else the last fenced code block that is
 * JSON, else the last JSON object or array embedded in the text (outermost ones). @internal
 */
export const extractJson = (text: string): Option.Option<unknown> => {
  const whole = tryParse(text.trim())
  if (whole !== undefined) return Option.some(whole.value)
  let found: Parsed | undefined
  for (const match of text.matchAll(fence)) found = tryParse(match[1]!.trim()) ?? found
  if (found !== undefined) return Option.some(found.value)
  let budget = maxFailedScans * text.length
  for (let i = 0; i < text.length && budget > 0; i++) {
    const c = text[i]
    if (c !== "{" && c !== "[") continue
    const end = closing(text, i)
    const parsed = end === -1 ? undefined : tryParse(text.slice(i, end + 1))
    if (parsed === undefined) {
      budget -= (end === -1 ? text.length : end + 1) - i
      continue
    }
    found = parsed
    i = end
  }
  return found === undefined ? Option.none() : Option.some(found.value)
}

const issuesOf = (error: ParseResult.ParseError): ReadonlyArray<Issue> =>
  ParseResult.ArrayFormatter.formatErrorSync(error).map((issue) =>
    new Issue({
      path: issue.path.map((key) => typeof key === "number" ? key : String(key)),
      message: issue.message
    })
  )

type Failure = { readonly reason: "Missing" | "Invalid"; readonly issues: ReadonlyArray<Issue> }

const isRecord = (u: unknown): u is { readonly [key: string]: unknown } =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * Decodes a JSON value of the published schema (unwrapping the `{ result }` envelope); excess
 * properties are an error, as the published schema says; so is what `Catalog.firstRefused`
 * finds. @internal
 */
export const decode = <A, I>(
  schema: Schema.Schema<A, I>,
  published: Catalog.OutputSchema
) => {
  const decoder = Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "error" })
  return (value: unknown): Either.Either<A, Failure> => {
    if (published.envelope) {
      if (!isRecord(value) || !Object.hasOwn(value, "result") || Object.keys(value).length !== 1) {
        return Either.left({
          reason: "Invalid",
          issues: [new Issue({ path: [], message: "Expected an object with the single property \"result\"" })]
        })
      }
      value = value["result"]
    }
    // What no tool's input may hold either (the gateway's rule): a number JSON cannot hold (`1e999`
    // parses to Infinity, which `Schema.Number` accepts), or an own `__proto__` key (which Effect's
    // decoder would write back as the decoded record's prototype).
    const refused = Catalog.firstRefused(value)
    if (refused !== undefined) {
      const path = refused.map((key) => typeof key === "number" ? key : String(key))
      return Either.left({
        reason: "Invalid",
        issues: [
          new Issue({
            path,
            message: path.at(-1) === "__proto__"
              ? "is unexpected (an own __proto__ key)"
              : "Expected a finite number (JSON has no other)"
          })
        ]
      })
    }
    return Either.mapLeft(decoder(value), (error) => ({ reason: "Invalid" as const, issues: issuesOf(error) }))
  }
}

const missing = (native: boolean): Failure => ({
  reason: "Missing",
  issues: [
    new Issue({
      path: [],
      message: native ? "the provider returned no structured output" : "the answer holds no JSON value"
    })
  ]
})

const invalidTurn = (detail: string) => new InvalidTurn({ reason: "InvalidStructuredOutput", detail })

/**
 * Whether no value decodes with the Schema: `Schema.Never` (so `Schema.Literal()` and a union of
 * nevers), or a required field or tuple element that is, at any depth. Every attempt of such a
 * call would be a paid turn whose answer cannot decode. Conservative: `false` for anything it
 * cannot tell (refinements that contradict each other, a recursive Schema seen again).
 */
const uninhabited = (ast: AST.AST, seen: Set<AST.AST> = new Set()): boolean => {
  switch (ast._tag) {
    case "NeverKeyword":
      return true
    case "Union":
      return ast.types.every((member) => uninhabited(member, seen))
    case "TypeLiteral":
      return ast.propertySignatures.some((property) => !property.isOptional && uninhabited(property.type, seen))
    case "TupleType":
      // Elements after a rest element have no JSON Schema: such a tuple is refused anyway.
      return ast.elements.some((element) => !element.isOptional && uninhabited(element.type, seen))
    case "Refinement":
      return uninhabited(ast.from, seen)
    case "Transformation":
      return uninhabited(ast.from, seen) || uninhabited(ast.to, seen)
    case "Suspend": {
      if (seen.has(ast)) return false
      seen.add(ast)
      return uninhabited(ast.f(), seen)
    }
    default:
      return false
  }
}

/**
 * The events of every attempt, then the `Decoded` value; fails with `StructuredOutputError` when
 * the last attempt's answer does not decode. @internal
 */
export const streamAs = <A, I, E>(
  runner: Runner<E>,
  schema: Schema.Schema<A, I>,
  input: Agent.Input,
  options: Options = {}
): Stream.Stream<
  Event.Event | Decoded<A>,
  E | InvalidTurn | UnsupportedCapability | StructuredOutputError
> =>
  Stream.unwrap(Effect.gen(function*() {
    if (uninhabited(schema.ast)) {
      return yield* invalidTurn(
        "the Schema accepts no value (Schema.Never, at its root or in a required field or tuple element)"
      )
    }
    const derived = Catalog.outputSchema(schema as Schema.Schema<A, I, never>)
    if (Either.isLeft(derived)) {
      return yield* invalidTurn(`the Schema cannot be expressed as JSON Schema: ${derived.left}`)
    }
    const published = derived.right
    const canResume = runner.capabilities.resume
    const repairs = options.repairs ?? (canResume ? 1 : 0)
    if (!Number.isSafeInteger(repairs) || repairs < 0) {
      return yield* invalidTurn(`repairs must be a non-negative integer, not ${String(repairs)}`)
    }
    if (repairs > 0 && !canResume) {
      return yield* new UnsupportedCapability({
        driver: runner.driver,
        capability: "resume",
        detail: "a structured-output repair turn continues the provider session, and this driver cannot " +
          "resume one: ask for `repairs: 0`"
      })
    }
    // A native driver whose provider would refuse this JSON Schema gets it as an instruction.
    const native = runner.capabilities.structuredOutput === "native" &&
      runner.outputSchemaRefusal?.(published.jsonSchema) === undefined
    const toValue = decode(schema, published)
    const base: Agent.Turn = typeof input === "string" ? { input } : input
    // The conversation's last attempt (a repair turn continues its predecessor's session): its
    // session, once known, and the `reaped` of its process. However the attempts end (decoded,
    // given up on, failed, or left by the consumer, even between an attempt and its judgement or
    // before a repair turn started), no repair turn follows the last one: its session is discarded.
    const conversation: { session: string | undefined; reaped: Deferred.Deferred<void> | undefined } = {
      session: undefined,
      reaped: undefined
    }
    const discardConversation = Effect.suspend(() =>
      runner.discard === undefined || conversation.session === undefined || conversation.reaped === undefined
        ? Effect.void
        : runner.discard(conversation.session, conversation.reaped)
    )

    const attemptStream = (
      number: number,
      turnInput: string,
      resume: string | undefined
    ): Stream.Stream<Event.Event | Decoded<A>, E | StructuredOutputError> =>
      Stream.unwrap(Effect.gen(function*() {
        const attempt: Attempt = {
          outputSchema: native ? published.jsonSchema : undefined,
          resume,
          repair: number > 1,
          reaped: yield* Deferred.make<void>(),
          received: undefined
        }
        conversation.session = resume
        conversation.reaped = attempt.reaped
        const turn: AttemptTurn = {
          ...base,
          input: turnInput,
          [turnKey]: attempt
        }
        let result: Result | undefined
        const events = runner.stream(turn).pipe(
          Stream.map((event): Event.Event | Decoded<A> => {
            if (event._tag === "RunFinished") {
              result = event.result
              if (event.result.session !== undefined) conversation.session = event.result.session
            }
            return event
          }),
          Stream.catchAll((error): Stream.Stream<never, E | StructuredOutputError> => {
            const received = attempt.received
            if (received?._tag === "GaveUp" && error instanceof RunError) {
              const partial = error.result
              return Stream.fail(
                new StructuredOutputError({
                  reason: "ProviderGaveUp",
                  text: partial.text,
                  issues: [new Issue({ path: [], message: received.detail })],
                  attempts: number,
                  result: partial
                })
              )
            }
            return Stream.fail(error)
          })
        )
        const judged = Stream.unwrap(Effect.suspend(() => {
          if (result === undefined) return Effect.dieMessage("a structured-output turn ended without its result")
          const last = result
          const value: Option.Option<unknown> = native
            ? (attempt.received?._tag === "Value" ? Option.some(attempt.received.value) : Option.none())
            : extractJson(last.text)
          const outcome = Option.match(value, {
            onNone: () => Either.left(missing(native)),
            onSome: toValue
          })
          const session = last.session
          if (Either.isRight(outcome)) {
            const decoded: Decoded<A> = { _tag: "Decoded", value: outcome.right, result: last, attempts: number }
            return Effect.succeed(Stream.make(decoded))
          }
          const failure = outcome.left
          if (number <= repairs && (!runner.resumesItself || session !== undefined)) {
            const next = attemptStream(number + 1, repairInput(failure, published, native), session)
            // An agent's repair turn resumes the session once the previous CLI is gone (it may
            // still be writing it after its terminal record).
            return runner.resumesItself ? Effect.as(Deferred.await(attempt.reaped), next) : Effect.succeed(next)
          }
          return Effect.succeed(
            Stream.fail(
              new StructuredOutputError({
                reason: failure.reason,
                text: last.text,
                issues: failure.issues,
                attempts: number,
                result: last
              })
            )
          )
        }))
        return Stream.concat(events, judged)
      }))

    const first = native ? base.input : `${base.input}\n\n${instruction(published.jsonSchema)}`
    return attemptStream(1, first, undefined).pipe(Stream.ensuring(discardConversation))
  }))

/** `streamAs` drained: the `Decoded` value. @internal */
export const runAs = <A, I, E>(
  runner: Runner<E>,
  schema: Schema.Schema<A, I>,
  input: Agent.Input,
  options?: Options
): Effect.Effect<Decoded<A>, E | InvalidTurn | UnsupportedCapability | StructuredOutputError> =>
  Effect.suspend(() => {
    let decoded: Decoded<A> | undefined
    return streamAs(runner, schema, input, options).pipe(
      Stream.runForEachChunk((chunk) =>
        Effect.sync(() => {
          for (const item of chunk) if (item._tag === "Decoded") decoded = item
        })
      ),
      Effect.flatMap(() =>
        decoded === undefined
          ? Effect.dieMessage("a structured-output turn ended without its value")
          : Effect.succeed(decoded)
      )
    )
  })
