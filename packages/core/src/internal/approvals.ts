/**
 * The agent's approvals: every request a run's provider makes is answered exactly once, by the
 * first of the handler, the host (`approve`), the deadline, or a cancel / close (deny). The one
 * that wins publishes `ApprovalResolved` (through the run's sink) before the provider gets the
 * decision; every later answer fails `ApprovalAlreadyResolved`.
 *
 * Mechanism-neutral: a one-shot approver tool on the gateway and a live session's approval
 * requests both call `ask` and hand the decision back to the provider their own way.
 *
 * @internal
 */
import type * as Catalog from "@tether/tool/Catalog"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import { ApprovalAlreadyResolved, ApprovalNotFound } from "../AgentError.js"
import * as Approval from "../Approval.js"
import type * as Driver from "../Driver.js"
import * as Event from "../Event.js"
import { TranscriptApproval, type TranscriptEntry } from "../Result.js"
import * as Emitter from "./emitter.js"
import * as Tracing from "./tracing.js"

/** Where a run publishes its approvals (events and transcript). @internal */
export interface Sink {
  readonly requested: (request: Approval.ApprovalRequest) => Effect.Effect<void>
  readonly resolved: (
    request: Approval.ApprovalRequest,
    decision: Approval.Decision,
    by: Approval.DecidedBy
  ) => Effect.Effect<void>
}

interface Entry {
  readonly request: Approval.ApprovalRequest
  readonly threadKey: string | undefined
  readonly sink: Sink
  readonly deferred: Deferred.Deferred<Approval.Decision>
  by: Approval.DecidedBy | undefined
}

/** @internal */
export interface Broker {
  /** Asks for a decision on behalf of run `runId`; never fails (a cancel answers deny). */
  readonly ask: (
    runId: string,
    threadKey: string | undefined,
    ask: Driver.ApprovalAsk,
    sink: Sink
  ) => Effect.Effect<Approval.Decision>
  /** The host's answer; `threadKey` restricts it to that thread's runs. */
  readonly approve: (
    id: string,
    decision: Approval.Decision,
    threadKey?: string
  ) => Effect.Effect<void, ApprovalNotFound | ApprovalAlreadyResolved>
  /** Answers deny to every request of `runId` still pending (the run is ending). */
  readonly settleRun: (runId: string) => Effect.Effect<void>
  /** From now on, requests cut short are answered by `close`. */
  readonly closing: Effect.Effect<void>
  /** Requests waiting for an answer. */
  readonly pending: () => ReadonlyArray<Approval.ApprovalRequest>
}

/** How many answered ids are remembered to tell `ApprovalAlreadyResolved` from `ApprovalNotFound`. */
const remembered = 4096

/** @internal */
export const defaultDeadline = Duration.seconds(60)

const isDecision = Schema.is(Approval.Decision)

const notADecision = Approval.deny("The approval answer was not a decision; the action was not run.")

/**
 * The decision an answer is, read by its shape (a plain `{ _tag: "Allow" }` type-checks as a
 * `Decision`, so it is one): `Allow` and `AllowForSession` with nothing else, `Deny` with a string
 * `message`; anything else is {@link notADecision}.
 */
const decisionOf = (answer: unknown): Approval.Decision => {
  if (isDecision(answer)) return answer
  if (typeof answer !== "object" || answer === null || Array.isArray(answer)) return notADecision
  const fields = answer as { readonly [key: string]: unknown }
  const keys = Object.keys(fields)
  switch (fields["_tag"]) {
    case "Allow":
      return keys.length === 1 ? Approval.allow : notADecision
    case "AllowForSession":
      return keys.length === 1 ? Approval.allowForSession : notADecision
    case "Deny":
      return typeof fields["message"] === "string" && keys.length === 2
        ? Approval.deny(fields["message"])
        : notADecision
    default:
      return notADecision
  }
}

/** What is wrong with an agent's `approvals` option, if anything (no I/O). @internal */
export const validate = (options: Approval.Options<unknown> | undefined): string | undefined => {
  if (options === undefined) return undefined
  if (typeof options !== "object" || options === null) return "approvals must be an object"
  if (options.handler !== undefined && typeof options.handler !== "function") {
    return "approvals.handler must be a function"
  }
  if (options.fallback !== undefined && !isDecision(options.fallback)) {
    return "approvals.fallback must be a Decision (Approval.allow, Approval.allowForSession or Approval.deny(message))"
  }
  if (options.deadline !== undefined) {
    const deadline = Option.getOrUndefined(Duration.decodeUnknown(options.deadline))
    if (deadline === undefined || Duration.lessThanOrEqualTo(deadline, Duration.zero)) {
      return "approvals.deadline must be a positive duration"
    }
  }
  return undefined
}

/** @internal */
export const make = (
  options: Approval.Options<never>,
  services: Context.Context<never> = Context.empty()
): Broker => {
  const deadline = Duration.decode(options.deadline ?? defaultDeadline)
  const fallback = options.fallback ?? Approval.timedOutDecision
  const handler = options.handler
  const entries = new Map<string, Entry>()
  const answered = new Map<string, { readonly by: Approval.DecidedBy; readonly threadKey: string | undefined }>()
  let closing = false

  // The check and the claim happen in one synchronous step: exactly one caller wins. An answer
  // that is not a decision (a JavaScript handler or caller answering `{ _tag: "deny" }`, say) is a
  // deny: the mappers to each CLI's answer allow whatever is not `Deny`.
  const resolve = (entry: Entry, given: Approval.Decision, by: Approval.DecidedBy): Effect.Effect<boolean> =>
    Effect.suspend(() => {
      if (entry.by !== undefined) return Effect.succeed(false)
      const decision = decisionOf(given)
      entry.by = by
      const id = entry.request.id
      entries.delete(id)
      answered.set(id, { by, threadKey: entry.threadKey })
      if (answered.size > remembered) answered.delete(answered.keys().next().value as string)
      return entry.sink.resolved(entry.request, decision, by).pipe(
        Effect.ensuring(Deferred.succeed(entry.deferred, decision)),
        Effect.as(true)
      )
    })

  const cutShort = (entry: Entry) =>
    Effect.suspend(() => resolve(entry, Approval.canceledDecision, closing ? "close" : "cancel"))

  const viaHandler = (
    entry: Entry,
    run: (request: Approval.ApprovalRequest) => Effect.Effect<Approval.Decision>
  ): Effect.Effect<unknown> =>
    // A handler that throws while building its Effect dies too: suspended, it answers deny as well.
    Effect.suspend(() => run(entry.request)).pipe(
      Effect.provide(services),
      Effect.catchAllCause((cause) =>
        Effect.logError(`the approvals handler died on approval ${entry.request.id}`, cause).pipe(
          // Not an event of the run's span (Effect's tracer logger would record the cause's text,
          // which may quote the request's input: docs/tracing.md keeps tool arguments off spans).
          Tracing.offSpan,
          Effect.as(Approval.deny("The approval handler failed; the action was not run."))
        )
      ),
      Effect.flatMap((decision) => resolve(entry, decision, "handler"))
    )

  const ask: Broker["ask"] = (runId, threadKey, fields, sink) =>
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const { options: offered, paths, ...rest } = fields
        const request = new Approval.ApprovalRequest({
          ...rest,
          id: randomUUID(),
          runId,
          ...(paths === undefined ? {} : { paths: [...paths] }),
          ...(offered === undefined ? {} : { options: offered.map((option) => new Approval.OfferedOption(option)) })
        })
        const entry: Entry = {
          request,
          threadKey,
          sink,
          deferred: yield* Deferred.make<Approval.Decision>(),
          by: undefined
        }
        entries.set(request.id, entry)
        const wait = Effect.gen(function*() {
          yield* sink.requested(request)
          const racers: Array<Effect.Effect<unknown>> = [
            Deferred.await(entry.deferred),
            Effect.sleep(deadline).pipe(Effect.zipRight(resolve(entry, fallback, "deadline")))
          ]
          if (handler !== undefined) racers.push(viaHandler(entry, handler))
          // Whoever claims first wins; the others are interrupted (a slow handler included).
          yield* Effect.raceAll(racers.map((racer) => Effect.zipRight(racer, Deferred.await(entry.deferred))))
          return yield* Deferred.await(entry.deferred)
        })
        return yield* restore(wait).pipe(Effect.onInterrupt(() => cutShort(entry)))
      })
    )

  const approve: Broker["approve"] = (id, decision, threadKey) =>
    Effect.suspend((): Effect.Effect<void, ApprovalNotFound | ApprovalAlreadyResolved> => {
      const entry = entries.get(id)
      if (entry === undefined || (threadKey !== undefined && entry.threadKey !== threadKey)) {
        const done = answered.get(id)
        return done !== undefined && (threadKey === undefined || done.threadKey === threadKey)
          ? Effect.fail(new ApprovalAlreadyResolved({ id, by: done.by }))
          : Effect.fail(new ApprovalNotFound({ id }))
      }
      return resolve(entry, decision, "host").pipe(
        Effect.flatMap((won) =>
          won ? Effect.void : Effect.fail(new ApprovalAlreadyResolved({ id, by: entry.by ?? "host" }))
        )
      )
    })

  const settleRun: Broker["settleRun"] = (runId) =>
    Effect.suspend(() =>
      Effect.forEach(
        Array.from(entries.values()).filter((entry) => entry.request.runId === runId),
        cutShort,
        { discard: true }
      )
    )

  return {
    ask,
    approve,
    settleRun,
    closing: Effect.sync(() => {
      closing = true
    }),
    pending: () => Array.from(entries.values(), (entry) => entry.request)
  }
}

/**
 * The gateway executor of a driver's approver tool for one run: each call is one approval
 * request of the run, answered by the broker; the decision goes back in the driver's format.
 *
 * @internal
 */
export const approverExecutor = (
  tool: Driver.ApproverTool,
  ask: (fields: Driver.ApprovalAsk) => Effect.Effect<Approval.Decision>
): Catalog.Executor => {
  const descriptor: Catalog.Descriptor = Object.freeze({
    name: tool.name,
    title: undefined,
    description: tool.description,
    inputSchema: tool.inputSchema,
    annotations: {},
    revision: undefined
  })
  return {
    catalog: Object.freeze({ descriptors: Object.freeze([descriptor]), fingerprint: "" }),
    execute: (name, input) => {
      if (name !== tool.name) {
        return Effect.succeed({ _tag: "Failed", code: "invalid_input", message: "Unknown tool." } as const)
      }
      const fields = tool.ask(input)
      if (typeof fields === "string") {
        return Effect.succeed({ _tag: "Failed", code: "invalid_input", message: "Not an approval request." } as const)
      }
      return Effect.map(ask(fields), (decision) => {
        const answer = tool.answer(decision, input)
        // Text alone: Claude Code reads the decision from a single text block.
        return { _tag: "Success", text: JSON.stringify(answer) } as const
      })
    }
  }
}

/**
 * A run's sink: each request is an `ApprovalRequested` event and a transcript entry; its answer an
 * `ApprovalResolved` event and the same entry completed with the decision and who made it.
 *
 * @internal
 */
export const sink = (
  emitter: Emitter.Emitter,
  transcript: Array<TranscriptEntry>,
  entries: Map<string, number>
): Sink => ({
  requested: (request) =>
    Effect.suspend(() => {
      entries.set(request.id, transcript.length)
      transcript.push(new TranscriptApproval({ request }, true))
      return emitter.emit([Emitter.critical((base) => new Event.ApprovalRequested({ ...base, request }, true))])
    }),
  resolved: (request, decision, by) =>
    Effect.suspend(() => {
      const index = entries.get(request.id)
      if (index !== undefined) {
        const previous = transcript[index] as TranscriptApproval
        transcript[index] = new TranscriptApproval({ request: previous.request, decision, by }, true)
      }
      return emitter.emit([
        Emitter.critical((base) => new Event.ApprovalResolved({ ...base, approvalId: request.id, decision, by }, true))
      ])
    })
})
