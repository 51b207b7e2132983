/**
 * Execution: decode the input, run the handler under a deadline, encode and validate the
 * output, and turn every ending into an `Outcome`. Handler error text never reaches an
 * outcome; it goes to the host's log through Effect's logger.
 *
 * @internal
 */
import type { ValidateFunction } from "ajv/dist/2020.js"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type * as Catalog from "../Catalog.js"
import { ToolDefinitionError } from "../Tool.js"
import type * as CatalogInternal from "./catalog.js"
import * as Guard from "./guard.js"
import * as Json from "./json.js"
import * as JsonSchema from "./jsonSchema.js"
import * as Rejection from "./rejection.js"
import type { ToolData } from "./tool.js"

/** A handler as provided, with the context it runs in. @internal */
export interface HandlerEntry {
  readonly tool: ToolData
  readonly handler: (input: unknown) => Effect.Effect<unknown, unknown, unknown>
  readonly context: Context.Context<never>
}

interface Codec {
  readonly decode: (u: unknown) => Effect.Effect<unknown, ParseResult.ParseError>
  readonly encode: (u: unknown) => Effect.Effect<unknown, ParseResult.ParseError>
  /** Compiled on first use: compiling costs milliseconds per tool and many tools are never called. */
  readonly validator: () => Either.Either<ValidateFunction, JsonSchema.Problem>
  readonly isExpectedFailure: (u: unknown) => boolean
}

interface Prepared extends Codec {
  readonly name: string
  /** The input schema is `Struct({})`, whose decoding accepts any value: checked here instead. */
  readonly emptyInput: boolean
  readonly wrap: boolean
  readonly entry: HandlerEntry
}

const codecs = new WeakMap<ToolData, Codec>()

const codecOf = (definition: CatalogInternal.Definition): Codec => {
  const cached = codecs.get(definition.tool)
  if (cached !== undefined) return cached
  let validator: Either.Either<ValidateFunction, JsonSchema.Problem> | undefined
  const codec: Codec = {
    decode: Schema.decodeUnknown(definition.tool.inputSchema, { onExcessProperty: "error", errors: "first" }),
    encode: Schema.encodeUnknown(definition.tool.outputSchema, { onExcessProperty: "ignore" }),
    validator: () => validator ??= JsonSchema.compile(definition.descriptor.outputSchema ?? {}),
    isExpectedFailure: Schema.is(definition.tool.failureSchema)
  }
  codecs.set(definition.tool, codec)
  return codec
}

// Fixed model-visible texts: nothing from the input, the handler or its errors is ever added
// (only the path of the first offending input field).
const failed = (code: Catalog.FailureCode, message: string): Catalog.Outcome => ({ _tag: "Failed", code, message })
const unknownTool = failed("invalid_input", "Unknown tool.")
const invalidOutput = failed("invalid_output", "The tool produced an output that does not match its output schema.")
const internalError = failed("internal_error", "The tool failed.")
const deadlineExceeded = failed("deadline_exceeded", "The tool did not finish before its deadline.")
const canceled = failed("canceled", "The tool call was canceled.")

const maxPathLength = 256

const renderPath = (path: ReadonlyArray<PropertyKey>): string => {
  let out = ""
  for (const segment of path) {
    if (typeof segment === "number") out += `[${segment}]`
    else if (typeof segment === "string" && /^[A-Za-z_][A-Za-z0-9_]*$/.test(segment)) {
      out += out.length === 0 ? segment : `.${segment}`
    } else out += `[${JSON.stringify(String(segment))}]`
  }
  return out.length > maxPathLength ? `${out.slice(0, maxPathLength)}…` : out
}

interface IssueAt {
  readonly path: ReadonlyArray<PropertyKey>
  readonly tag: ParseResult.ParseIssue["_tag"]
}

// Walks to the first leaf issue, keeping only where it is and what kind it is: issue
// messages quote the offending values, which may be secrets.
const firstIssue = (issue: ParseResult.ParseIssue, path: ReadonlyArray<PropertyKey> = []): IssueAt => {
  switch (issue._tag) {
    case "Pointer":
      return firstIssue(
        issue.issue,
        path.concat(Array.isArray(issue.path) ? issue.path as ReadonlyArray<PropertyKey> : [issue.path as PropertyKey])
      )
    case "Composite":
      return firstIssue(Array.isArray(issue.issues) ? issue.issues[0]! : issue.issues as ParseResult.ParseIssue, path)
    case "Refinement":
    case "Transformation":
      return firstIssue(issue.issue, path)
    default:
      return { path, tag: issue._tag }
  }
}

const invalidInput = (error: ParseResult.ParseError): Catalog.Outcome => invalidInputAt(firstIssue(error.issue).path)

const invalidInputAt = (at: ReadonlyArray<PropertyKey>): Catalog.Outcome => {
  const path = renderPath(at)
  return failed(
    "invalid_input",
    path.length === 0 ? "The tool input is invalid." : `The tool input is invalid at ${path}.`
  )
}

// Log lines carry the tool and the outcome code; annotating only the (rare) log effects keeps
// the success path free of per-call annotation work.
const logged = (
  tool: string | undefined,
  outcome: Catalog.Outcome,
  log: Effect.Effect<void>
): Effect.Effect<Catalog.Outcome> =>
  Effect.as(
    Effect.annotateLogs(log, {
      ...(tool !== undefined ? { tool } : {}),
      code: outcome._tag === "Success" ? "ok" : outcome.code
    }),
    outcome
  )

const onOutput = (prepared: Prepared, value: unknown): Effect.Effect<Catalog.Outcome> =>
  Effect.matchEffect(prepared.encode(value), {
    onFailure: (error) => {
      const at = firstIssue(error.issue)
      return logged(
        prepared.name,
        invalidOutput,
        Effect.logWarning("tool output does not encode with its output schema").pipe(
          Effect.annotateLogs({ issue: at.tag, path: renderPath(at.path) })
        )
      )
    },
    onSuccess: (encoded) => {
      const json = Json.toJson(prepared.wrap ? { result: encoded } : encoded)
      if (Either.isLeft(json)) {
        return logged(
          prepared.name,
          invalidOutput,
          Effect.logWarning("tool output is not plain JSON").pipe(Effect.annotateLogs({ detail: json.left }))
        )
      }
      const structuredContent = json.right
      const validator = prepared.validator()
      if (Either.isLeft(validator)) {
        return logged(
          prepared.name,
          invalidOutput,
          Effect.logError("tool output schema does not compile").pipe(
            Effect.annotateLogs({ detail: validator.left.detail })
          )
        )
      }
      const validate = validator.right
      if (!validate(structuredContent)) {
        const error = validate.errors?.[0]
        return logged(
          prepared.name,
          invalidOutput,
          Effect.logWarning("tool output does not validate against its published output schema").pipe(
            Effect.annotateLogs({ keyword: error?.keyword ?? "unknown", path: error?.instancePath ?? "" })
          )
        )
      }
      return Effect.succeed<Catalog.Outcome>({
        _tag: "Success",
        structuredContent: structuredContent as { readonly [key: string]: unknown },
        text: JSON.stringify(structuredContent)
      })
    }
  })

const onFailure = (prepared: Prepared, cause: Cause.Cause<unknown>): Effect.Effect<Catalog.Outcome> => {
  const rejection = Rejection.find(cause)
  if (Option.isSome(rejection)) {
    return Rejection.isWellFormed(rejection.value)
      ? Effect.succeed<Catalog.Outcome>({
        _tag: "Rejected",
        code: rejection.value.code,
        message: rejection.value.message
      })
      : logged(
        prepared.name,
        internalError,
        Effect.logError("tool handler rejected with a code or message that breaks the rejection rules")
      )
  }
  if (Cause.isInterruptedOnly(cause)) {
    return logged(prepared.name, canceled, Effect.logDebug("tool handler was interrupted"))
  }
  const failures = Cause.failures(cause)
  const expected = Cause.defects(cause).length === 0 && failures.length > 0 &&
    [...failures].every(prepared.isExpectedFailure)
  return logged(
    prepared.name,
    internalError,
    expected
      ? Effect.logWarning("tool handler failed", cause)
      : Effect.logError("tool handler failed unexpectedly", cause)
  )
}

// Arguments are always a JSON object (MCP); a tool without parameters accepts no key.
const shapeProblem = (prepared: Prepared, input: unknown): Catalog.Outcome | undefined => {
  if (typeof input !== "object" || input === null || Array.isArray(input)) return invalidInputAt([])
  if (prepared.emptyInput) {
    const [key] = Object.keys(input)
    if (key !== undefined) return invalidInputAt([key])
  }
  // JSON has no NaN or ±Infinity, yet `1e309` parses to Infinity and passes `Schema.Number`; a
  // `__proto__` key would become the decoded record's prototype: either, anywhere in the input,
  // is invalid input, for every tool.
  let refused: ReadonlyArray<PropertyKey> | undefined
  try {
    refused = Json.firstRefused(input)
  } catch {
    // A getter or a Proxy trap threw while reading the input: the decoder meets it too, and its
    // failure is handled there.
    return undefined
  }
  return refused === undefined ? undefined : invalidInputAt(refused)
}

const provideEntryContext = <A, E>(entry: HandlerEntry, effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  entry.context === emptyContext ? effect : Effect.provide(effect, entry.context)

const run = (prepared: Prepared, input: unknown): Effect.Effect<Catalog.Outcome> => {
  const problem = shapeProblem(prepared, input)
  return problem !== undefined
    ? logged(prepared.name, problem, Effect.logDebug("tool input is invalid"))
    : Effect.catchAllCause(
      Effect.suspend(() => decodeAndRun(prepared, input)),
      // A schema transformation that throws (or needs a service that is absent) is a defect
      // outside the handler: still an outcome, never a failure of `execute`.
      (cause) =>
        logged(prepared.name, internalError, Effect.logError("tool input or output codec failed unexpectedly", cause))
    )
}

const decodeAndRun = (prepared: Prepared, input: unknown): Effect.Effect<Catalog.Outcome> =>
  Effect.matchEffect(prepared.decode(input), {
    onFailure: (error) => logged(prepared.name, invalidInput(error), Effect.logDebug("tool input is invalid")),
    onSuccess: (decoded) =>
      Effect.flatMap(
        Effect.exit(
          provideEntryContext(
            prepared.entry,
            // Each call has a scope of its own (provided inside the entry's context, so it wins
            // over the Layer's), closed when the call ends however it ends.
            Effect.scoped(
              Effect.suspend(() => prepared.entry.handler(decoded)) as Effect.Effect<unknown, unknown, Scope.Scope>
            )
          )
        ),
        Exit.match({
          onFailure: (cause) => onFailure(prepared, cause),
          onSuccess: (value) => onOutput(prepared, value)
        })
      )
  })

const execute = (
  prepared: Prepared,
  input: unknown,
  options: Catalog.ExecuteOptions | undefined
): Effect.Effect<Catalog.Outcome> => {
  const signal = options?.signal
  if (signal?.aborted === true) return Effect.succeed(canceled)
  const decoded = options?.deadline === undefined
    ? Option.none()
    : Option.some(Duration.decodeUnknown(options.deadline))
  if (Option.isSome(decoded) && Option.isNone(decoded.value)) {
    return logged(prepared.name, internalError, Effect.logError("tool execution was given an invalid deadline"))
  }
  const deadline = Option.isSome(decoded) && Option.isSome(decoded.value) && Duration.isFinite(decoded.value.value)
    ? decoded.value.value
    : undefined
  // Without a deadline or a signal nothing can end the call early except the caller's own
  // interruption, which interrupts the handler in place (and waits for its finalizers): no
  // extra fiber is needed.
  if (deadline === undefined && signal === undefined) return run(prepared, input)
  return Guard.guard(run(prepared, input), { deadline, signal }).pipe(
    Effect.flatMap((ending): Effect.Effect<Catalog.Outcome> => {
      switch (ending._tag) {
        case "Exit":
          // `run` never fails; an interrupted run (from outside the handler) is a cancellation.
          return Exit.isSuccess(ending.exit) ? Effect.succeed(ending.exit.value) : Effect.succeed(canceled)
        case "Deadline":
          return logged(prepared.name, deadlineExceeded, Effect.logWarning("tool handler exceeded its deadline"))
        case "Aborted":
          return logged(prepared.name, canceled, Effect.logDebug("tool call was canceled"))
      }
    })
  )
}

/**
 * Binds validated definitions to their handlers.
 *
 * @internal
 */
export const make = (
  built: CatalogInternal.Built,
  entries: ReadonlyMap<string, HandlerEntry>
): Either.Either<Catalog.Executor, ToolDefinitionError> =>
  Either.gen(function*() {
    const table = new Map<string, Prepared>()
    for (const [name, definition] of built.definitions) {
      const entry = entries.get(name)
      if (entry === undefined) {
        return yield* Either.left(
          new ToolDefinitionError({
            tool: name,
            reason: "MissingHandler",
            detail: "no handler was provided for this tool"
          })
        )
      }
      if (entry.tool !== definition.tool) {
        return yield* Either.left(
          new ToolDefinitionError({
            tool: name,
            reason: "HandlerMismatch",
            detail: "the handler provided under this name belongs to another definition of the tool"
          })
        )
      }
      const codec = codecOf(definition)
      table.set(name, {
        ...codec,
        name,
        emptyInput: JsonSchema.isEmptyStruct(definition.tool.inputSchema.ast),
        wrap: definition.wrap,
        entry
      })
    }
    const executor: Catalog.Executor = {
      catalog: built.catalog,
      execute: (name, input, options) =>
        Effect.suspend(() => {
          const prepared = typeof name === "string" ? table.get(name) : undefined
          return prepared === undefined
            ? logged(undefined, unknownTool, Effect.logDebug("call of an unknown tool"))
            : execute(prepared, input, options)
        })
    }
    return Object.freeze(executor)
  })

/** @internal */
export const emptyContext: Context.Context<never> = Context.empty()
