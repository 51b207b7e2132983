/**
 * The live Codex driver: one `codex app-server` process (stdio JSON-RPC, Codex 0.171.0) serves
 * every turn of one thread. This module owns the correlation: request ids, the answers to the
 * server's own requests, and the routing of notifications to the running turn.
 *
 * @internal
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import type * as Approval from "@tether/core/Approval"
import * as Driver from "@tether/core/Driver"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { Config } from "../Codex.js"
import { type Materialized, sandboxMode } from "./codex.js"
import * as live from "./codexLiveParse.js"
import type { Frame } from "./codexLiveParse.js"
import type { Outputs, ParseOptions } from "./codexParse.js"
import type * as Protocol from "./codexProtocol/index.js"
import type { JsonValue } from "./codexProtocol/serde_json/JsonValue.js"
import { none, notice } from "./lines.js"
import * as StrictSchema from "./strictSchema.js"

/**
 * The app-server process for one thread: the same binary, clone files, environment and
 * `--config` overrides (sandbox level, hosted-tool allow-list) as `codex exec`, plus the model
 * as a `-c` override. They hold for the life of the process, which serves one thread under one
 * configuration: core reuses it only while they are unchanged.
 *
 * @internal
 */
export const open = (
  config: Config,
  materialize: (request: Driver.InvocationRequest) => MaterializeEffect
) =>
(request: Driver.InvocationRequest): Effect.Effect<Driver.Invocation, Driver.ProtocolError, Platform> =>
  Effect.gen(function*() {
    const { binary, env, files, overrides } = yield* materialize(request)
    const args: Array<string> = [...binary.prefix, "app-server", "--listen", "stdio://"]
    const model = request.model ?? config.model
    // `-c` values are TOML; a JSON string literal is a valid TOML basic string.
    if (model !== undefined) args.push("-c", `model=${JSON.stringify(model)}`)
    for (const override of overrides) args.push("-c", override)
    return {
      command: binary.command,
      commandSource: binary.source,
      args,
      env,
      cwd: request.workspace,
      stdin: undefined,
      files
    } satisfies Driver.Invocation
  })

type Platform = FileSystem.FileSystem | Path.Path
type MaterializeEffect = Effect.Effect<Materialized, Driver.ProtocolError, Platform>

/**
 * A request the app-server sends to the client (approvals, user input, elicitation, …).
 *
 * @internal
 */
export interface ServerRequest {
  readonly method: Protocol.ServerRequest["method"] | (string & {})
  readonly params: unknown
  /** The item of the `item/started` with the request's `itemId`, when one came first (a fileChange's diff). */
  readonly item?: unknown
}

/**
 * The answer to a server request: a result, or a JSON-RPC error.
 *
 * @internal
 */
export type ServerReply =
  | {
    readonly _tag: "Result"
    readonly result: unknown
    readonly notice?: string
    /**
     * Text delivered into the request's turn (`turn/steer`) before the result is written: Codex's
     * `decline` carries no message, so a deny message reaches the model as the same turn's input,
     * right after the rejected call's output.
     */
    readonly steer?: string
  }
  | { readonly _tag: "Error"; readonly code: number; readonly message: string }

/**
 * The one extension point for the server's requests (the approvals of [control] fill it).
 *
 * @internal
 */
export type ServerRequestHandler = (request: ServerRequest) => Effect.Effect<ServerReply>

const declined = (method: string) => `declined Codex's ${method} (no approval handler)`

/**
 * Until an approval handler is given, every request is answered at once, so the CLI never waits
 * for a reply: approvals are declined, user input and elicitations are refused, permissions are
 * not granted, dynamic tool calls fail, anything else gets a JSON-RPC error. With
 * `approvalPolicy: "never"` no approval is asked in the first place.
 *
 * @internal
 */
export const declineAll: ServerRequestHandler = (request) =>
  Effect.succeed(((): ServerReply => {
    const result = (value: unknown): ServerReply => ({
      _tag: "Result",
      result: value,
      notice: declined(request.method)
    })
    switch (request.method) {
      case "item/commandExecution/requestApproval":
        return result({ decision: "decline" } satisfies Protocol.CommandExecutionRequestApprovalResponse)
      case "item/fileChange/requestApproval":
        return result({ decision: "decline" } satisfies Protocol.FileChangeRequestApprovalResponse)
      case "item/permissions/requestApproval":
        return result({ permissions: {}, scope: "turn" } satisfies Protocol.PermissionsRequestApprovalResponse)
      case "item/tool/requestUserInput":
        return result({ answers: {} } satisfies Protocol.ToolRequestUserInputResponse)
      case "mcpServer/elicitation/request":
        return result(
          { action: "decline", content: null, _meta: null } satisfies Protocol.McpServerElicitationRequestResponse
        )
      case "item/tool/call":
        return result({ contentItems: [], success: false } satisfies Protocol.DynamicToolCallResponse)
      case "applyPatchApproval":
        return result(
          {
            decision: { denied: { rejection: declined(request.method) } }
          } satisfies Protocol.ApplyPatchApprovalResponse
        )
      case "execCommandApproval":
        return result(
          {
            decision: { denied: { rejection: declined(request.method) } }
          } satisfies Protocol.ExecCommandApprovalResponse
        )
      default:
        return { _tag: "Error", code: -32601, message: `Tether does not answer ${request.method}` }
    }
  })())

const isRecord = (value: unknown): value is { readonly [key: string]: unknown } =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const optionId = (decision: unknown): string | undefined =>
  typeof decision === "string" ? decision : isRecord(decision) ? Object.keys(decision)[0] : undefined

/** What the model reads, as input of the turn, after a call the host denied. @internal */
export const denyNote = (message: string) => `The host denied that action: ${message}`

/**
 * The approvals of an agent that has them: command executions and file changes are asked of the
 * host (`LiveContext.approve`) and answered `accept`, `acceptForSession` (when offered, else
 * `accept`) or `decline`. Codex tells the model only that the call was "rejected by user": the
 * deny message is steered into the same turn first (`ServerReply.steer`), so the model reads it
 * with the rejection. Every other request is answered as `declineAll` does.
 *
 * @internal
 */
export const approvalsHandler = (
  approve: (ask: Driver.ApprovalAsk) => Effect.Effect<Approval.Decision>
): ServerRequestHandler =>
(request) => {
  const params = isRecord(request.params) ? request.params : {}
  const str = (value: unknown) => typeof value === "string" ? value : undefined
  const callId = str(params["itemId"])
  const decide = (ask: Driver.ApprovalAsk, offered: ReadonlyArray<unknown> | undefined) =>
    Effect.map(approve(ask), (decision): ServerReply => ({
      _tag: "Result",
      ...(decision._tag === "Deny" ? { steer: denyNote(decision.message) } : {}),
      result: {
        decision: decision._tag === "Deny"
          ? "decline"
          : decision._tag === "AllowForSession" &&
              (offered === undefined || offered.some((option) => option === "acceptForSession"))
          ? "acceptForSession"
          : "accept"
      }
    }))
  switch (request.method) {
    case "item/commandExecution/requestApproval": {
      const offered = Array.isArray(params["availableDecisions"]) ? params["availableDecisions"] : undefined
      const command = str(params["command"])
      const cwd = str(params["cwd"])
      const options = offered?.flatMap((decision) => {
        const id = optionId(decision)
        return id === undefined ? [] : [{ id }]
      })
      return decide({
        toolName: "commandExecution",
        kind: "command",
        input: params,
        ...(callId === undefined ? {} : { callId }),
        ...(command === undefined ? {} : { command }),
        ...(cwd === undefined ? {} : { cwd }),
        ...(options === undefined ? {} : { options })
      }, offered)
    }
    case "item/fileChange/requestApproval": {
      // The change itself is in the preceding `item/started` fileChange item.
      const changes = isRecord(request.item) && Array.isArray(request.item["changes"])
        ? request.item["changes"].filter(isRecord)
        : []
      const paths = changes.flatMap((change) => typeof change["path"] === "string" ? [change["path"]] : [])
      const diffs = changes.flatMap((change) => typeof change["diff"] === "string" ? [change["diff"]] : [])
      return decide({
        toolName: "fileChange",
        kind: "fileChange",
        input: { ...params, changes },
        ...(callId === undefined ? {} : { callId }),
        ...(paths.length === 0 ? {} : { paths }),
        ...(diffs.length === 0 ? {} : { diff: diffs.join("\n") })
      }, undefined)
    }
    default:
      return declineAll(request)
  }
}

/** @internal */
export interface SessionOptions extends ParseOptions {
  readonly onServerRequest?: ServerRequestHandler
  /** `thread/start|resume|fork`'s `approvalPolicy` (default `"never"`: nothing is asked). */
  readonly approvalPolicy?: "never" | "untrusted"
  /**
   * `thread/start|resume|fork`'s `sandbox`: a resumed thread keeps the sandbox it last ran with
   * unless told, whatever the process's `sandbox_mode` says. Absent: the process's configuration.
   */
  readonly sandbox?: NonNullable<Protocol.ThreadStartParams["sandbox"]>
}

/** What a turn's queue holds: frames, outputs made by the session, and the end of the process. */
type Item =
  | Frame
  | { readonly _tag: "Emit"; readonly outputs: ReadonlyArray<Driver.Output> }
  | { readonly _tag: "Exited" }

const exited: Item = { _tag: "Exited" }

interface Pending {
  readonly method: string
  readonly deferred: Deferred.Deferred<unknown, Driver.ProtocolError>
}

interface ActiveTurn {
  readonly state: live.TurnState
  readonly queue: Queue.Queue<Item>
  /** The turn's id, from the `turn/start` answer (fails when `turn/start` was rejected). */
  readonly id: Deferred.Deferred<string, Driver.ProtocolError>
  /** `turn/completed` was read, `turn/start` failed, or the process ended. */
  readonly done: Deferred.Deferred<void>
  /** Nobody reads its queue any more (its terminal was read, or its stream was dropped before). */
  detached: boolean
  /** Its stream was dropped before its terminal: it is interrupted as soon as it has an id. */
  abandoned: boolean
}

const providerError = (detail: string) => new Driver.ProtocolError({ reason: "ProviderError", detail })

const noActiveTurn = new Driver.ProtocolError({ reason: "NoActiveTurn", detail: "no Codex turn is running to steer" })

const gone = (what: string) =>
  providerError(`the Codex app-server exited (stdout closed) ${what}; see its stderr for the cause`)

/** One queued item of a turn as outputs. */
const outputsOf = (
  item: Item,
  turn: live.TurnState,
  context: Driver.ParseContext,
  options: ParseOptions
): Outputs | Driver.ProtocolError => {
  switch (item._tag) {
    case "Exited":
      return gone("during the turn")
    case "Emit":
      return item.outputs
    case "Notification":
      return live.onNotification(item.method, item.params, turn, context, options)
    case "Malformed":
      return notice("warning", "malformed", item.reason, item.raw)
    case "Failure":
      return notice("error", "error", item.message, item.raw)
    case "Response":
    case "Request":
      return none
  }
}

/**
 * Attaches to a spawned app-server: `initialize` + `initialized`, then `thread/start` (New),
 * `thread/resume` (Resume) or `thread/fork` (Fork) with `approvalPolicy` (`"never"` unless
 * `options.approvalPolicy` says otherwise). The reader of
 * the process's stdout and the answers to the server's requests live in the current scope.
 *
 * @internal
 */
export const attach = (
  channel: Driver.Channel,
  context: Driver.ParseContext,
  options: SessionOptions = {}
): Effect.Effect<Driver.LiveSession, Driver.ProtocolError, Scope.Scope> =>
  Effect.gen(function*() {
    const onServerRequest = options.onServerRequest ?? declineAll
    const answering = yield* FiberSet.make()
    const pending = new Map<Protocol.RequestId, Pending>()
    let nextId = 1
    let closed = false
    let active: ActiveTurn | undefined
    let thread = ""

    const write = (message: object) => channel.write(JSON.stringify(message))

    const send = (method: string, params: unknown) =>
      Effect.gen(function*() {
        if (closed) return yield* Effect.fail(gone(`before ${method}`))
        const id = nextId++
        const deferred = yield* Deferred.make<unknown, Driver.ProtocolError>()
        pending.set(id, { method, deferred })
        yield* write({ id, method, params }).pipe(Effect.tapError(() => Effect.sync(() => pending.delete(id))))
        return deferred
      })

    const request = <A>(method: string, params: unknown): Effect.Effect<A, Driver.ProtocolError> =>
      send(method, params).pipe(Effect.flatMap(Deferred.await), Effect.map((result) => result as A))

    const interruptTurn = (turnId: string) =>
      send("turn/interrupt", { threadId: thread, turnId } satisfies Protocol.TurnInterruptParams)

    const emit = (outputs: ReadonlyArray<Driver.Output>) =>
      active === undefined || active.detached ? Effect.void : Queue.offer(active.queue, { _tag: "Emit", outputs })

    // Delivered while Codex waits for the answer: the turn is still running, so the text is read in
    // the turn's next model request. A refusal (the turn ended meanwhile) is reported, not fatal.
    const steerInto = (params: unknown, text: string) => {
      const turnId = isRecord(params) && typeof params["turnId"] === "string" ? params["turnId"] : undefined
      if (turnId === undefined) return Effect.void
      return request<Protocol.TurnSteerResponse>(
        "turn/steer",
        {
          threadId: thread,
          expectedTurnId: turnId,
          input: [{ type: "text", text, text_elements: [] }]
        } satisfies Protocol.TurnSteerParams
      ).pipe(
        Effect.catchAll((error) =>
          emit([notice("warning", "approval", `the deny message was not delivered: ${error.detail}`, params)])
        ),
        Effect.asVoid
      )
    }
    // Answered on their own fibers: an approval handler may wait for a person, the reader never does.
    // The started fileChange items by id: a fileChange approval request carries only the id.
    const fileItems = new Map<string, unknown>()
    const answer = (id: Protocol.RequestId, method: string, params: unknown) =>
      FiberSet.run(
        answering,
        Effect.gen(function*() {
          const itemId = isRecord(params) && typeof params["itemId"] === "string" ? params["itemId"] : undefined
          const item = itemId === undefined ? undefined : fileItems.get(itemId)
          if (itemId !== undefined) fileItems.delete(itemId)
          const reply = yield* onServerRequest({ method, params, ...(item === undefined ? {} : { item }) })
          // Reported before the answer: once answered, the turn may end at once.
          if (reply._tag === "Error") {
            yield* emit([notice("warning", "server_request", reply.message, { method, params })])
            yield* write({ id, error: { code: reply.code, message: reply.message } })
          } else {
            if (reply.notice !== undefined) {
              yield* emit([notice("warning", "approval", reply.notice, { method, params })])
            }
            if (reply.steer !== undefined) yield* steerInto(params, reply.steer)
            yield* write({ id, result: reply.result })
          }
        }).pipe(Effect.ignore)
      )

    const onTurnStarted = (turn: ActiveTurn, result: unknown) => {
      const turnId = live.turnIdOf(result)
      if (turnId === undefined) {
        const error = new Driver.ProtocolError({ reason: "MalformedOutput", detail: "turn/start answered no turn id" })
        return Effect.zipRight(Deferred.fail(turn.id, error), Deferred.succeed(turn.done, undefined))
      }
      // Set before any later line is read, so this turn's notifications are told from an earlier one's.
      turn.state.turnId = turnId
      return Effect.zipRight(
        Deferred.succeed(turn.id, turnId),
        turn.abandoned ? Effect.ignore(interruptTurn(turnId)) : Effect.void
      )
    }

    const onFrame = (frame: Frame): Effect.Effect<unknown> => {
      switch (frame._tag) {
        case "Response":
        case "Failure": {
          const entry = frame.id === undefined ? undefined : pending.get(frame.id)
          if (entry === undefined) return frame._tag === "Failure" ? queue(frame) : Effect.void
          pending.delete(frame.id!)
          if (frame._tag === "Failure") {
            return Deferred.fail(entry.deferred, live.failureOf(entry.method, frame.message, context.session))
          }
          return Effect.zipRight(
            entry.method === "turn/start" && active !== undefined ? onTurnStarted(active, frame.result) : Effect.void,
            Deferred.succeed(entry.deferred, frame.result)
          )
        }
        case "Request":
          return answer(frame.id, frame.method, frame.params)
        case "Notification": {
          if (frame.method === "item/started" && isRecord(frame.params)) {
            const item = frame.params["item"]
            if (isRecord(item) && item["type"] === "fileChange" && typeof item["id"] === "string") {
              fileItems.set(item["id"], item)
              if (fileItems.size > 64) fileItems.delete(fileItems.keys().next().value as string)
            }
          }
          const turn = active
          if (turn === undefined) return Effect.void
          const completes = frame.method === "turn/completed" &&
            (turn.state.turnId === undefined || live.turnIdOf(frame.params) === turn.state.turnId)
          return Effect.zipRight(queue(frame), completes ? Deferred.succeed(turn.done, undefined) : Effect.void)
        }
        case "Malformed":
          return queue(frame)
      }
    }

    const queue = (item: Item) =>
      active === undefined || active.detached ? Effect.void : Queue.offer(active.queue, item)

    const onEnd = Effect.suspend(() => {
      closed = true
      const waiting = [...pending.values()]
      pending.clear()
      return Effect.forEach(waiting, (entry) => Deferred.fail(entry.deferred, gone(`before answering ${entry.method}`)))
        .pipe(
          Effect.zipRight(
            active === undefined ? Effect.void : Effect.all([
              queue(exited),
              Deferred.fail(active.id, gone("before the turn started")),
              Deferred.succeed(active.done, undefined)
            ])
          )
        )
    })

    yield* channel.lines.pipe(
      Stream.runForEach((line) => {
        const frame = live.decode(line)
        return frame === undefined ? Effect.void : onFrame(frame)
      }),
      Effect.zipRight(onEnd),
      Effect.forkScoped
    )

    yield* request<Protocol.InitializeResponse>(
      "initialize",
      {
        clientInfo: { name: "tether", title: "Tether", version: "0.1.0" },
        capabilities: {
          experimentalApi: false,
          requestAttestation: false,
          // Per-turn noise nobody reads.
          optOutNotificationMethods: ["account/rateLimits/updated", "thread/readState/changed"]
        }
      } satisfies Protocol.InitializeParams
    )
    yield* write({ method: "initialized" })

    const session = context.session
    const approvalPolicy = options.approvalPolicy ?? "never"
    const sandbox = options.sandbox === undefined ? {} : { sandbox: options.sandbox }
    const answered = session._tag === "New"
      ? yield* request<Protocol.ThreadStartResponse>(
        "thread/start",
        {
          approvalPolicy,
          ...sandbox
        } satisfies Protocol.ThreadStartParams
      )
      : session._tag === "Resume"
      ? yield* request<Protocol.ThreadResumeResponse>(
        "thread/resume",
        {
          threadId: session.id,
          approvalPolicy,
          ...sandbox,
          excludeTurns: true
        } satisfies Protocol.ThreadResumeParams
      )
      : yield* request<Protocol.ThreadForkResponse>(
        "thread/fork",
        {
          threadId: session.from,
          approvalPolicy,
          ...sandbox,
          excludeTurns: true
        } satisfies Protocol.ThreadForkParams
      )
    const started = live.threadOf(answered)
    if (started === undefined) {
      return yield* Effect.fail(
        new Driver.ProtocolError({ reason: "MalformedOutput", detail: "Codex answered without a thread" })
      )
    }
    if (session._tag === "Resume" && started.id !== session.id) {
      return yield* Effect.fail(
        new Driver.ProtocolError({
          reason: "ResumeRejected",
          detail: `Codex resumed thread ${started.id} instead of ${session.id}`
        })
      )
    }
    thread = started.id
    let announced = false

    const turn = (input: Driver.LiveTurn): Stream.Stream<Driver.Output, Driver.ProtocolError> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        // A turn whose stream was dropped before its terminal was interrupted: wait until it ended.
        if (active !== undefined) yield* Deferred.await(active.done)
        if (closed) return yield* Effect.fail(gone("between turns"))
        const current: ActiveTurn = {
          state: live.makeTurn(thread),
          queue: yield* Queue.unbounded<Item>(),
          id: yield* Deferred.make<string, Driver.ProtocolError>(),
          done: yield* Deferred.make<void>(),
          detached: false,
          abandoned: false
        }
        active = current
        // A `runAs` attempt: its JSON Schema goes with this turn only, as the model's strict
        // format (Codex does not validate the reply: core does), and the turn's terminal reports
        // the value read back from the final message.
        const schema = input.outputSchema
        const turnContext: Driver.ParseContext = schema === undefined ? context : { ...context, outputSchema: schema }
        let finished = false
        let failure: Driver.ProtocolError | undefined
        yield* Effect.addFinalizer(() =>
          Effect.suspend(() => {
            current.detached = true
            if (finished) return Effect.void
            current.abandoned = true
            // Without an id yet, the `turn/start` answer interrupts it (`onTurnStarted`).
            return Effect.flatMap(Deferred.poll(current.id), (polled) =>
              Option.isNone(polled) ? Effect.void : polled.value.pipe(
                Effect.flatMap(interruptTurn),
                Effect.catchAll(() => Deferred.succeed(current.done, undefined))
              ))
          })
        )
        yield* request<Protocol.TurnStartResponse>(
          "turn/start",
          {
            threadId: thread,
            input: [{ type: "text", text: input.prompt, text_elements: [] }],
            ...(schema === undefined ? {} : { outputSchema: StrictSchema.strict(schema) as JsonValue })
          } satisfies Protocol.TurnStartParams
        ).pipe(
          Effect.zipRight(Deferred.await(current.id)),
          Effect.tapError(() =>
            Effect.sync(() => (finished = true)).pipe(Effect.zipRight(Deferred.succeed(current.done, undefined)))
          )
        )
        const prefix: Array<Driver.Output> = announced
          ? []
          : [{ _tag: "SessionStarted", sessionId: thread, model: started.model }]
        announced = true
        const pull = Effect.gen(function*() {
          if (failure !== undefined) return yield* Effect.fail(Option.some(failure))
          if (finished) return yield* Effect.fail(Option.none())
          const items = yield* Queue.takeBetween(current.queue, 1, Number.MAX_SAFE_INTEGER)
          const out: Array<Driver.Output> = []
          const take = (output: Driver.Output) => {
            out.push(output)
            if (output._tag === "Terminal") finished = true
          }
          for (const item of items) {
            const outputs = outputsOf(item, current.state, turnContext, options)
            if (outputs instanceof Driver.ProtocolError) {
              // The outputs before the failure are emitted first; the next pull fails.
              failure = outputs
              break
            }
            if (Array.isArray(outputs)) { for (const output of outputs as ReadonlyArray<Driver.Output>) take(output) }
            else take(outputs as Driver.Output)
            if (finished) break
          }
          if (finished || failure !== undefined) current.detached = true
          return Chunk.unsafeFromArray(out)
        })
        return Stream.concat(Stream.fromIterable(prefix), Stream.repeatEffectChunkOption(pull))
      }))

    /** The turn that is running now, if any. */
    const running = Effect.suspend(() => {
      const current = active
      if (current === undefined || current.abandoned) return Effect.succeed(undefined)
      return Effect.map(Deferred.isDone(current.done), (done) => done ? undefined : current)
    })

    return {
      turn,
      steer: (text: string) =>
        Effect.gen(function*() {
          const current = yield* running
          if (current === undefined) return yield* Effect.fail(noActiveTurn)
          const turnId = yield* Deferred.await(current.id)
          yield* request<Protocol.TurnSteerResponse>(
            "turn/steer",
            {
              threadId: thread,
              expectedTurnId: turnId,
              input: [{ type: "text", text, text_elements: [] }]
            } satisfies Protocol.TurnSteerParams
          ).pipe(
            // The turn ended meanwhile: Codex 0.171 refuses with "no active turn to steer", often
            // before its `turn/completed` is read.
            Effect.catchAll((error) =>
              Effect.flatMap(
                Deferred.isDone(current.done),
                (done) => Effect.fail(done || error.detail.includes("no active turn") ? noActiveTurn : error)
              )
            )
          )
          return { _tag: "Injected" } satisfies Driver.Delivery
        }),
      interrupt: Effect.gen(function*() {
        const current = yield* running
        if (current === undefined) return
        const turnId = yield* Effect.option(Deferred.await(current.id))
        if (Option.isNone(turnId)) return
        yield* request<Protocol.TurnInterruptResponse>(
          "turn/interrupt",
          {
            threadId: thread,
            turnId: turnId.value
          } satisfies Protocol.TurnInterruptParams
        ).pipe(
          // The turn may have ended meanwhile: then nothing is left to interrupt.
          Effect.catchAll((error) =>
            Effect.flatMap(Deferred.isDone(current.done), (done) => done ? Effect.void : error)
          )
        )
      }),
      shutdown: channel.closeInput
    } satisfies Driver.LiveSession
  })

/**
 * The live protocol of `Codex.driver(config)`.
 *
 * @internal
 */
export const make = (options: {
  readonly config: Config
  readonly materialize: (request: Driver.InvocationRequest) => MaterializeEffect
  readonly maxReconnects: number
}): Driver.Live => ({
  open: open(options.config, options.materialize),
  attach: (channel, context) => {
    const approve = context.approve
    const level = context.request.sandbox
    return attach(channel, context, {
      maxReconnects: options.maxReconnects,
      ...(level === undefined ? {} : { sandbox: sandboxMode[level] }),
      // An agent with approvals: every command that is not known to be safe is asked.
      ...(approve === undefined ? {} : { approvalPolicy: "untrusted", onServerRequest: approvalsHandler(approve) })
    })
  }
})
