/**
 * The router: authorization, request decoding, runs owned by the router's scope, thread handles
 * shared per key, SSE and AG-UI responses.
 *
 * @internal
 */
import type { BaseEvent, Message } from "@ag-ui/core"
import { EventEncoder } from "@ag-ui/encoder"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type * as Agent from "@tether/core/Agent"
import * as Approval from "@tether/core/Approval"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type * as AgentHttp from "../AgentHttp.js"
import * as AgUi from "./agui.js"
import * as Body from "./body.js"
import * as Failure from "./failure.js"
import type { HttpFailure } from "./failure.js"
import * as Paths from "./paths.js"
import * as Runs from "./runs.js"
import * as Threads from "./threads.js"
import * as Wire from "./wire.js"

const TurnBody = Schema.Struct({
  input: Schema.String,
  resumeOnly: Schema.optional(Schema.Boolean),
  // The client's id of this turn (printable ASCII, no space): a request sent again with it (a
  // browser resending a POST whose connection dropped) reads the turn it started, not a new one.
  id: Schema.optional(Schema.String.pipe(Schema.pattern(/^[\x21-\x7e]{1,128}$/)))
})

const AgUiBody = Schema.Struct({
  threadId: Schema.String,
  runId: Schema.String,
  // What the route reads of the client's messages (the AG-UI mapper reads the earlier calls' ids).
  messages: Schema.Array(Schema.Struct({
    role: Schema.String,
    content: Schema.optional(Schema.Unknown),
    toolCalls: Schema.optional(Schema.Array(Schema.Struct({ id: Schema.String }))),
    toolCallId: Schema.optional(Schema.String)
  })),
  // The client's own (frontend) tools: the agent's tools are the host's, so a run that offers
  // some is refused rather than run without them.
  tools: Schema.optional(Schema.Array(Schema.Unknown))
})

const InputBody = Schema.Struct({ input: Schema.String })

const ApprovalBody = Schema.Union(
  Schema.Struct({ decision: Schema.Literal("allow", "allowForSession") }),
  Schema.Struct({ decision: Schema.Literal("deny"), message: Schema.String.pipe(Schema.maxLength(4096)) })
)

const encoder = new TextEncoder()

/** A turn a request started with the client's `id`: what it asked, its run's events, its start. */
interface Started {
  readonly entry: Runs.Entry
  readonly started: Deferred.Deferred<string, HttpFailure>
  /** The fiber that completes `started` (a router closing before it ran leaves `started` open). */
  consuming: Fiber.RuntimeFiber<unknown, unknown> | undefined
  readonly input: string
  readonly resumeOnly: boolean
}

/** Why a thread could not be opened or a turn could not start, as HTTP. */
const startFailure = (error: unknown): HttpFailure | undefined => {
  switch ((error as { readonly _tag?: unknown } | undefined)?._tag) {
    case "ThreadBusy":
      return Failure.threadBusy
    case "ThreadNotFound":
      return Failure.notFound
    case "ThreadIncompatible":
    case "ThreadAlreadyExists":
      return Failure.threadIncompatible
    case "AgentClosed":
    case "ThreadClosed":
      return Failure.agentClosed
    case "TurnAlreadyCommitted":
      return Failure.turnCommitted
    default:
      return undefined
  }
}

/** The text of an AG-UI message's content: a string, or its text parts joined. */
const contentText = (content: unknown): string | undefined => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return undefined
  // A part a turn cannot carry (an image, audio, a document) is refused, never dropped.
  if (content.some((part: unknown) => (part as { readonly type?: unknown } | null)?.type !== "text")) return undefined
  const parts = content.flatMap((part: unknown) =>
    typeof part === "object" && part !== null && (part as { readonly type?: unknown }).type === "text" &&
      typeof (part as { readonly text?: unknown }).text === "string"
      ? [(part as { readonly text: string }).text]
      : []
  )
  return parts.length === 0 ? undefined : parts.join("\n")
}

/**
 * The client's messages as it sent them (each with its id and role), which a correction snapshot
 * restates; `undefined` when one has no id (the mapper then corrects a text without a snapshot).
 */
const conversationOf = (json: unknown): ReadonlyArray<Message> | undefined => {
  const messages = (json as { readonly messages?: unknown }).messages
  if (!Array.isArray(messages)) return undefined
  const complete = messages.every((message: unknown) =>
    typeof message === "object" && message !== null &&
    typeof (message as { readonly id?: unknown }).id === "string" &&
    typeof (message as { readonly role?: unknown }).role === "string"
  )
  return complete ? messages as ReadonlyArray<Message> : undefined
}

/** @internal */
export const make = <Principal, R>(
  options: AgentHttp.Options<Principal, R>
): Effect.Effect<HttpRouter.HttpRouter<never, R>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const agent = options.agent
    const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024
    const idle = Duration.decode(options.heartbeat ?? "15 seconds")
    const replay = Math.max(1, options.replay ?? 1024)
    const grace = Duration.decode(options.reconnectGrace ?? "5 seconds")
    const retention = Duration.decode(options.retention ?? "30 seconds")
    // Runs, their retention and the reconnect timers belong to the router's scope.
    const fibers = yield* FiberSet.make<void, never>()
    const byRun = new Map<string, Runs.Entry>()
    const byKey = new Map<string, Runs.Entry>()
    /**
     * The turns started with a client's `id`, by key and id, from their request until their run's
     * retention ends (a turn that did not start is forgotten at once: sent again, it starts anew).
     */
    const byTurn = new Map<string, Started>()
    const readers = { idle, grace, timers: fibers }
    // Made after the runs' fibers: its close (every handle's, which cancels the turns still
    // running) comes first, so their readers get `RunFinished` before the runs' fibers end.
    const threads = yield* Threads.make<HttpFailure>({
      open: (key, mode) =>
        agent.thread(key, mode === "resumeOnly" ? { resumeOnly: true } : {}).pipe(
          Effect.catchAll((error) => {
            const failure = startFailure(error)
            return failure === undefined
              ? Effect.zipRight(Effect.logWarning("a thread could not be opened", error), Failure.internalError)
              : Effect.fail(failure)
          })
        ),
      closed: Failure.agentClosed,
      idleTimeout: Duration.decode(options.threads?.idleTimeout ?? "5 minutes"),
      max: options.threads?.max ?? 1024
    })
    // Registered after the thread handles: it runs before their close, so that the turns their
    // close cancels never wait for a reader to make room for their last events.
    const closing = yield* Deferred.make<void>()
    yield* Effect.addFinalizer(() => Deferred.succeed(closing, undefined))

    const authenticate = Effect.flatMap(
      HttpServerRequest.HttpServerRequest,
      (request) => options.authorize(request).pipe(Effect.mapError(() => Failure.unauthorized))
    )

    const allowed = (access: AgentHttp.Access<Principal>, key: string) =>
      access.threads(key) ? Effect.void : Failure.notFound

    const readJson = Body.readJson({ maxBodyBytes, fibers })

    const decode = <A, I>(schema: Schema.Schema<A, I>, value: unknown) =>
      Schema.decodeUnknown(schema)(value).pipe(Effect.mapError(() => Failure.invalidRequest))

    /** The turn on the key's shared handle, its events into `entry`; the handle is in use until the run ends. */
    const consume = (
      mode: Threads.Mode,
      turn: Agent.Turn,
      entry: Runs.Entry,
      started: Deferred.Deferred<string, HttpFailure>,
      turnKey: string | undefined
    ) =>
      threads.use(entry.key, mode, (thread) =>
        thread.stream(turn).pipe(
          Stream.runForEach((event) => {
            // Known before a reader sees the request, which it may answer at once.
            if (event._tag === "ApprovalRequested") entry.approvals.add(event.request.id)
            return Effect.zipRight(
              Runs.publish(entry, event),
              event._tag === "RunStarted"
                ? Effect.zipRight(
                  Effect.sync(() => {
                    byRun.set(event.runId, entry)
                    byKey.set(entry.key, entry)
                  }),
                  Deferred.succeed(started, event.runId)
                )
                : Effect.void
            )
          })
        )).pipe(
          Effect.catchAllCause((cause) =>
            Effect.gen(function*() {
              if (!(yield* Deferred.isDone(started))) {
                // The handle's opening failed (already said as HTTP), or the turn did not start.
                const failure = Option.flatMap(
                  Cause.failureOption(cause),
                  (error) => Option.fromNullable(error instanceof Failure.HttpFailure ? error : startFailure(error))
                )
                if (Option.isNone(failure) && !Cause.isInterruptedOnly(cause)) {
                  yield* Effect.logWarning("a turn could not start", Cause.squash(cause))
                }
                yield* Deferred.fail(started, Option.getOrElse(failure, () => Failure.internalError))
                if (turnKey !== undefined && byTurn.get(turnKey)?.entry === entry) byTurn.delete(turnKey)
              } else if (!entry.sawFinished) {
                yield* Effect.logWarning("a run's events ended without RunFinished", Cause.squash(cause))
                yield* Runs.publish(entry, undefined)
              }
              // A run that ended with RunFinished and then its RunError: the stream already told it.
            })
          ),
          Effect.ensuring(Effect.gen(function*() {
            yield* Deferred.fail(started, Failure.agentClosed)
            yield* Runs.end(entry)
            if (byKey.get(entry.key) === entry) byKey.delete(entry.key)
          })),
          Effect.zipRight(Effect.sleep(retention)),
          Effect.ensuring(Effect.sync(() => {
            for (const runId of entry.runIds) if (byRun.get(runId) === entry) byRun.delete(runId)
            if (turnKey !== undefined && byTurn.get(turnKey)?.entry === entry) byTurn.delete(turnKey)
          }))
        )

    /**
     * The reader's place of a request in `entry`, given up when the request's scope closes (once
     * its response has been written, or abandoned). Taken and its release registered as one step:
     * an interruption between the two would keep a place that nothing gives up.
     */
    const reserve = (entry: Runs.Entry) =>
      Effect.acquireRelease(Runs.reserve(entry), (reservation) => Runs.release(entry, reservation, readers))

    /**
     * Starts the turn on the key's shared handle; succeeds once the run has started. The requester
     * counts as the run's reader from the start: its response stream takes that place over, and
     * when the request ends without reading it (the client went away), the place is given up and
     * the grace starts then.
     */
    const start = (
      access: AgentHttp.Access<Principal>,
      key: string,
      input: string,
      resumeOnly: boolean,
      id: string | undefined
    ) =>
      Effect.gen(function*() {
        const entry = yield* Runs.makeEntry(key, replay, closing)
        const reservation = yield* reserve(entry)
        const started = yield* Deferred.make<string, HttpFailure>()
        const host = options.turn?.({ access, key, input }) ?? { input }
        const turn: Agent.Turn = {
          ...host,
          ...(id === undefined || host.id !== undefined ? {} : { id }),
          cancel: Deferred.await(entry.cancel)
        }
        const turnKey = id === undefined ? undefined : `${key}\n${id}`
        // Known before its fiber runs: a start that fails at once forgets it (see `consume`).
        const known: Started = { entry, started, consuming: undefined, input, resumeOnly }
        if (turnKey !== undefined) byTurn.set(turnKey, known)
        const consuming = yield* FiberSet.run(
          fibers,
          consume(resumeOnly ? "resumeOnly" : "continue", turn, entry, started, turnKey)
        )
        known.consuming = consuming
        yield* Body.awaitFrom(started, consuming).pipe(
          // The request ended before the run started. Without an id no client can find the run:
          // it is canceled. With one the request may be sent again: as for a started run, its
          // reservation's release starts the reconnect grace.
          Effect.onInterrupt(() => id === undefined ? Deferred.succeed(entry.cancel, undefined) : Effect.void)
        )
        return { entry, reservation }
      })

    const sse = (body: Stream.Stream<string>) =>
      HttpServerResponse.stream(body.pipe(Stream.map((text) => encoder.encode(text))), {
        contentType: "text/event-stream",
        headers: Wire.headers
      })

    const tetherEvents = (entry: Runs.Entry, after: number, reservation?: Runs.Reservation) =>
      sse(
        Runs.subscribe(entry, after, readers, reservation).pipe(
          Stream.map((item) => {
            switch (item._tag) {
              case "Heartbeat":
                return Wire.heartbeat
              case "Expired":
                return Wire.frame(undefined, "error", Failure.body(Failure.eventsExpired).error)
              case "Frame":
                return item.frame.event === undefined
                  ? Wire.frame(item.frame.id, "error", Failure.body(Failure.internalError).error)
                  : Wire.frame(item.frame.id, item.frame.event._tag, Wire.toWire(item.frame.event))
            }
          })
        )
      )

    const handle = <E, R2>(effect: Effect.Effect<HttpServerResponse.HttpServerResponse, HttpFailure | E, R2>) =>
      effect.pipe(
        Effect.catchAllCause((cause) => {
          const failure = Cause.failureOption(cause)
          if (Option.isSome(failure) && failure.value instanceof Failure.HttpFailure) {
            return Effect.succeed(Failure.respond(failure.value))
          }
          if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause as Cause.Cause<never>)
          return Effect.logError("request failed", cause).pipe(Effect.as(Failure.respond(Failure.internalError)))
        })
      )

    const postTurn = (access: AgentHttp.Access<Principal>, key: string) =>
      Effect.gen(function*() {
        yield* allowed(access, key)
        const body = yield* decode(TurnBody, yield* readJson)
        const resumeOnly = body.resumeOnly === true
        const known = body.id === undefined ? undefined : byTurn.get(`${key}\n${body.id}`)
        if (known !== undefined) {
          // Sent again: the turn that request started, read from its first event (as a reconnect
          // without Last-Event-ID), or why it did not start.
          if (known.input !== body.input || known.resumeOnly !== resumeOnly) return yield* Failure.turnIdReused
          // Waiting for the start, the request is the run's reader already (the grace never
          // cancels a turn a client waits for), as its first request was.
          const reservation = (yield* Deferred.isDone(known.started)) ? undefined : yield* reserve(known.entry)
          yield* known.consuming === undefined
            ? Deferred.await(known.started)
            : Body.awaitFrom(known.started, known.consuming)
          if (Runs.expired(known.entry, -1)) return yield* Failure.eventsExpired
          return tetherEvents(known.entry, -1, reservation)
        }
        const { entry, reservation } = yield* start(access, key, body.input, resumeOnly, body.id)
        return tetherEvents(entry, -1, reservation)
      })

    /** The run `run` of the thread `key`, if the caller may use that thread. */
    const findRun = (access: AgentHttp.Access<Principal>, key: string, run: string) =>
      Effect.gen(function*() {
        yield* allowed(access, key)
        const entry = byRun.get(run)
        if (entry === undefined || entry.key !== key) return yield* Failure.notFound
        return entry
      })

    const getEvents = (access: AgentHttp.Access<Principal>, key: string, run: string) =>
      Effect.gen(function*() {
        const entry = yield* findRun(access, key, run)
        const request = yield* HttpServerRequest.HttpServerRequest
        const header = request.headers["last-event-id"]
        if (header !== undefined && !/^[0-9]{1,15}$/.test(header.trim())) return yield* Failure.invalidLastEventId
        // Without Last-Event-ID the reader asks for the run from its start (`-1`: before event 0).
        const after = header === undefined ? -1 : Number(header.trim())
        if (Runs.expired(entry, after)) return yield* Failure.eventsExpired
        return tetherEvents(entry, after)
      })

    const deleteRun = (access: AgentHttp.Access<Principal>, key: string, run: string) =>
      Effect.gen(function*() {
        const entry = yield* findRun(access, key, run)
        yield* Deferred.succeed(entry.cancel, undefined)
        yield* Deferred.await(entry.finished)
        return HttpServerResponse.empty({ status: 204 })
      })

    // Input goes through the thread's handle into its running turn, which must be this run.
    const postInput = (access: AgentHttp.Access<Principal>, key: string, run: string) =>
      Effect.gen(function*() {
        const entry = yield* findRun(access, key, run)
        const body = yield* decode(InputBody, yield* readJson)
        if (entry.done || byKey.get(key) !== entry) return yield* Failure.noActiveTurn
        const delivery = yield* threads.use(entry.key, "continue", (thread) =>
          thread.send(body.input).pipe(
            Effect.catchTags({
              NoActiveTurn: () => Failure.noActiveTurn,
              AgentClosed: () => Failure.agentClosed,
              UnsupportedCapability: () => Failure.inputUnsupported,
              ProtocolError: (error) =>
                Effect.zipRight(Effect.logWarning("the provider refused a run's input", error), Failure.inputRefused)
            })
          ))
        return HttpServerResponse.unsafeJson({ delivery })
      })

    // Only the run that asked answers: another run of the thread (an ended one, kept for its
    // readers) does not know the id. The answer then goes through the thread's handle.
    const postApproval = (access: AgentHttp.Access<Principal>, key: string, run: string, id: string) =>
      Effect.gen(function*() {
        const entry = yield* findRun(access, key, run)
        const body = yield* decode(ApprovalBody, yield* readJson)
        if (!entry.approvals.has(id)) return yield* Failure.notFound
        const decision = body.decision === "deny"
          ? Approval.deny(body.message)
          : body.decision === "allow"
          ? Approval.allow
          : Approval.allowForSession
        yield* threads.use(entry.key, "continue", (thread) =>
          thread.approve(id, decision).pipe(
            Effect.catchTags({
              ApprovalNotFound: () => Failure.notFound,
              ApprovalAlreadyResolved: () => Failure.approvalResolved
            })
          ))
        return HttpServerResponse.empty({ status: 204 })
      })

    const getThread = (access: AgentHttp.Access<Principal>, key: string) =>
      Effect.gen(function*() {
        yield* allowed(access, key)
        const record = yield* threads.use(key, "continue", (thread) =>
          thread.snapshot.pipe(
            Effect.catchAll((error) =>
              Effect.zipRight(Effect.logWarning("a snapshot failed", error), Failure.internalError)
            )
          ))
        const running = byKey.get(key)
        const run = running === undefined || running.done ? undefined : running.runIds.values().next().value
        if (Option.isNone(record) && run === undefined) return yield* Failure.notFound
        return HttpServerResponse.unsafeJson({
          key,
          turns: Option.match(record, { onNone: () => 0, onSome: (r) => r.turns }),
          ...Option.match(record, {
            onNone: () => ({}),
            onSome: (r) => ({ provider: r.provider, updatedAt: r.updatedAt })
          }),
          ...(run === undefined ? {} : { run })
        })
      })

    // Everything under `/threads`, matched by `Paths` (keys of any length, a JSON error for a path
    // that matches no route or does not decode). Authentication comes first, as on every route.
    const threadRoutes = handle(Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const route = Paths.match(request.method, request.url)
      const access = yield* authenticate
      // Past the router's close its fibers' set is closed: nothing forked there would ever run.
      if (yield* Deferred.isDone(closing)) return yield* Failure.agentClosed
      switch (route._tag) {
        case "NoRoute":
          return yield* Failure.notFound
        case "Malformed":
          return yield* Failure.invalidPath
        case "Snapshot":
          return yield* getThread(access, route.key)
        case "Turn":
          return yield* postTurn(access, route.key)
        case "Events":
          return yield* getEvents(access, route.key, route.run)
        case "Cancel":
          return yield* deleteRun(access, route.key, route.run)
        case "Input":
          return yield* postInput(access, route.key, route.run)
        case "Approval":
          return yield* postApproval(access, route.key, route.run, route.id)
      }
    }))

    const postAgUi = handle(Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      // Authentication first; the thread key is in the body.
      const access = yield* authenticate
      if (yield* Deferred.isDone(closing)) return yield* Failure.agentClosed
      const json = yield* readJson
      const body = yield* decode(AgUiBody, json)
      if (body.tools !== undefined && body.tools.length > 0) return yield* Failure.clientTools
      yield* allowed(access, body.threadId)
      const last = body.messages[body.messages.length - 1]
      const input = last?.role === "user" ? contentText(last.content) : undefined
      if (input === undefined) return yield* Failure.invalidRequest
      // Made before the turn starts: nothing read of the request may fail once it runs.
      const mapper = AgUi.makeMapper({ threadId: body.threadId, runId: body.runId }, conversationOf(json))
      const { entry, reservation } = yield* start(access, body.threadId, input, false, undefined)
      const agUi = new EventEncoder(
        request.headers["accept"] === undefined ? {} : { accept: request.headers["accept"] }
      )
      const events: Stream.Stream<string> = Runs.subscribe(entry, -1, readers, reservation).pipe(
        Stream.mapConcat((item): ReadonlyArray<BaseEvent | string> =>
          item._tag === "Heartbeat"
            ? [Wire.heartbeat]
            : item._tag === "Frame" && item.frame.event !== undefined
            ? mapper.onEvent(item.frame.event)
            : []
        ),
        Stream.concat(Stream.suspend(() => Stream.fromIterable(mapper.onEnd()))),
        Stream.map((event) => typeof event === "string" ? event : agUi.encodeSSE(event))
      )
      return sse(events)
    }))

    return HttpRouter.empty.pipe(
      // A mounted app runs as the server runs the request, uninterruptibly: a client that goes
      // away must still interrupt it (as it does the routes below).
      HttpRouter.mountApp("/threads", Effect.interruptible(threadRoutes)),
      HttpRouter.post("/agui", postAgUi)
    )
  })
