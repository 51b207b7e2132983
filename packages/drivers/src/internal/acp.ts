/**
 * Tether's ACP client: a live session with an agent that speaks the Agent Client Protocol
 * (Gemini CLI's `--acp`, and any other ACP agent), over the `Driver.Channel` core gives it.
 * JSON-RPC (ids, correlation, requests from the agent, errors) is the official SDK's
 * (`@agentclientprotocol/sdk`), connected through its message-level `Stream` interface.
 *
 * - `initialize` declares no file-system and no terminal capability and checks the agent's:
 *   `mcpCapabilities.http` when the hosted tools are offered, `loadSession` for a resume.
 * - `session/new {cwd, mcpServers}` (or `session/load` for a resume) declares the hosted tools as
 *   an HTTP MCP server whose `Authorization` header carries the session's token. The frame
 *   holding it goes to the channel as a `SecretFrame`: the token stays `Redacted` up to the
 *   write, and nothing keeps the frame with it.
 * - An agent handed a wrong token drops the server without a word: before the first turn the
 *   session waits (bounded) until the gateway has seen that token list the hosted tools, and
 *   fails with `HostedToolsUnavailable` otherwise.
 * - Each turn is one `session/prompt`; its `session/update` notifications map to outputs
 *   (`acpMap.ts`) and its result to the `Terminal` (`end_turn` is success; `cancelled` is not).
 *   `interrupt` is `session/cancel` (the process stays warm). ACP cannot steer: a second prompt
 *   cancels the first, so there is no `steer`.
 * - `session/new` also declares the definition's MCP sources when the driver asks it to
 *   (`Options.sources`; Gemini CLI reads them from its settings instead); a source's bearer
 *   variable is read from the host environment and travels as a secret like the hosted token.
 * - `session/request_permission`: a hosted tool's or a declared MCP source's is allowed (the
 *   host offered the tool); any other goes to core's approvals (`LiveContext.approve`) when the
 *   agent has them, read as an approval request (`acpApproval.ts`, named by the driver's
 *   naming), else to `Options.permission` (every driver passes `denyPermission`). The decision
 *   is mapped onto the offered options (`acpApproval.ts`). Every ACP driver (Gemini's live
 *   sessions and `Acp.driver`) takes this one path.
 *
 * @internal
 */
import * as Acp from "@agentclientprotocol/sdk"
import * as Driver from "@tether/core/Driver"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberSet from "effect/FiberSet"
import * as Mailbox from "effect/Mailbox"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { randomBytes } from "node:crypto"
import * as AcpApproval from "./acpApproval.js"
import * as AcpMap from "./acpMap.js"
import { notice } from "./lines.js"

/**
 * Decides a `session/request_permission` of an agent without approvals (core's, through
 * `LiveContext.approve`, decide when the agent has them). @internal
 */
export type Permission = (request: Acp.RequestPermissionRequest) => Effect.Effect<AcpApproval.Decision>

/** The decision without approvals: the agent's tool call is refused. @internal */
export const denyPermission: Permission = () => Effect.succeed(AcpApproval.denied)

/** @internal */
export interface Options {
  /** How the agent's tool calls map back to tool names and sources. */
  readonly naming: AcpMap.Naming
  /** Bound on `initialize` plus session creation. */
  readonly startTimeout: Duration.DurationInput
  /** Bound on the wait for the hosted tools' `tools/list` after session creation. */
  readonly hostedToolsTimeout: Duration.DurationInput
  /** How long a cancelled or abandoned prompt may take to end before the next turn gives up. */
  readonly cancelTimeout: Duration.DurationInput
  readonly permission: Permission
  /** Declare the request's MCP sources in `session/new` (an agent with no configuration of its own). */
  readonly sources: boolean
  /**
   * How secret header values reach the agent: `inline` puts them in `session/new`;
   * `environment` sends `Bearer ${VAR}` references the agent expands from its own environment
   * (claude-agent-acp hands the headers to Claude Code on its command line, readable by any local
   * user): the hosted token in {@link sessionTokenVariable}, a source's in its `bearerTokenEnv`.
   * Default `inline`.
   */
  readonly headerSecrets?: HeaderSecrets
}

/** How secret MCP header values reach the agent. @internal */
export type HeaderSecrets = "inline" | "environment"

/**
 * The variable of the agent's environment that holds the session's hosted token (its credential
 * for `session/new`), beside `tokenVariable` (the process's own). Core's live process and the turn
 * runner set it; the same rule is in core's `live.ts`.
 *
 * @internal
 */
export const sessionTokenVariable = (tokenVariable: string): string => `${tokenVariable}_S`

/** How long a loaded session's agent must send no update before its replay counts as ended. */
const replayQuietMillis = 200

/** The answer to a turn's `session/prompt`: its result, or the agent's error answer. */
type Answer =
  | { readonly _tag: "Result"; readonly result: unknown }
  | { readonly _tag: "Error"; readonly error: { readonly [key: string]: unknown } }

/** A JSON-RPC error answer as the wire carried it. */
const errorFields = (error: Acp.RequestError): { readonly [key: string]: unknown } => ({
  code: error.code,
  message: error.message,
  ...(error.data === undefined ? {} : { data: error.data })
})

const providerError = (detail: string) => new Driver.ProtocolError({ reason: "ProviderError", detail })

/** What a rejected SDK request says (a JSON-RPC error, or the connection closing). */
const describe = (error: unknown): string =>
  error instanceof Acp.RequestError
    ? AcpMap.errorText(errorFields(error))
    : error instanceof Error
    ? error.message
    : "unknown failure"

/**
 * Attaches to an ACP agent's process: handshake, session creation or load, the hosted-tools
 * check, then the live session. Everything it starts lives in the scope.
 *
 * @internal
 */
export const attach = (
  options: Options,
  channel: Driver.Channel,
  context: Driver.LiveContext
): Effect.Effect<Driver.LiveSession, Driver.ProtocolError, Scope.Scope> =>
  Effect.gen(function*() {
    const request = context.request
    const run = yield* FiberSet.makeRuntimePromise<never, unknown, unknown>()
    const naming = AcpMap.hostedNaming(options.naming, request.hosted.tools)
    const mapper = AcpMap.makeMapper(context.hostedKey, naming)
    /** Where the running turn's outputs go; `undefined` between turns (their updates are dropped). */
    let current: Mailbox.Mailbox<Driver.Output, Driver.ProtocolError> | undefined = undefined
    const deliver = (outputs: Driver.Output | ReadonlyArray<Driver.Output>): void => {
      if (current === undefined) return
      if (!Array.isArray(outputs)) current.unsafeOffer(outputs as Driver.Output)
      else if (outputs.length > 0) current.unsafeOfferAll(outputs)
    }

    // Inline, the token goes into `session/new` as a placeholder; only the channel's write puts it in.
    const placeholder = `tether-secret-${randomBytes(18).toString("base64url")}`
    // As it must appear inside a JSON string (a gateway token needs no escaping; any value works).
    const jsonText = (value: string) => Redacted.make(JSON.stringify(value).slice(1, -1))
    const secrets: Array<Driver.SecretFrame["secrets"][number]> = [{
      placeholder,
      value: jsonText(Redacted.value(context.hostedToken))
    }]
    const frameOf = (message: Acp.AnyMessage): string | Driver.SecretFrame => {
      const text = JSON.stringify(message)
      return secrets.some((secret) => text.includes(secret.placeholder)) ? { _tag: "SecretFrame", text, secrets } : text
    }

    // stdout → the SDK. `session/update` notifications are mapped here, in line order, before
    // any later line reaches the SDK: a prompt's result can never overtake its last updates
    // (the SDK dispatches notifications asynchronously).
    let inbound!: ReadableStreamDefaultController<Acp.AnyMessage>
    let inboundOpen = true
    /** Set when stdout ended: from then on every pending request fails with "connection closed". */
    let outputEnded = false
    const readable = new ReadableStream<Acp.AnyMessage>({
      start: (controller) => {
        inbound = controller
      },
      // The SDK cancels its reader when the connection closes: later lines have nowhere to go.
      cancel: () => {
        inboundOpen = false
      }
    })
    /** When the last `session/update` arrived (a load's replay has ended once they stop). */
    let lastUpdate = 0
    const on: AcpMap.LineHandlers<void> = {
      blank: () => undefined,
      foreign: deliver,
      chunk: (sessionId, text) => {
        lastUpdate = Date.now()
        deliver(mapper.messageChunk(sessionId, text))
      },
      update: (params) => {
        lastUpdate = Date.now()
        deliver(mapper.update(params))
      },
      message: (message) => {
        if (inboundOpen) inbound.enqueue(message as Acp.AnyMessage)
      }
    }
    const onLine = (line: string): void => AcpMap.classify(line, on)
    const ended = yield* Deferred.make<void>()
    yield* channel.lines.pipe(
      Stream.runForEachChunk((chunk) =>
        Effect.sync(() => {
          for (const line of chunk) onLine(line)
        })
      ),
      Effect.ensuring(Effect.zipRight(
        Effect.sync(() => {
          outputEnded = true
          if (inboundOpen) {
            inboundOpen = false
            inbound.close()
          }
        }),
        Deferred.done(ended, Exit.void)
      )),
      Effect.forkScoped
    )
    const writable = new WritableStream<Acp.AnyMessage>({
      write: (message) => run(channel.write(frameOf(message)))
    })

    // The hosted tools are the host's own, offered under the turn's policy and enforced by the
    // gateway, and the definition's MCP sources are the host's choice too: an agent asking
    // permission for one of their tools (claude-agent-acp and codex-acp ask for every MCP tool)
    // is allowed. Built-in tools, and MCP servers of the agent's own configuration, are the
    // approvals' to decide.
    const declared = (name: string) =>
      options.sources && request.mcp.some((server) => name.startsWith(`mcp__${server.key}__`))
    // Everything else goes to core's approvals when the agent has them (`LiveContext.approve`:
    // the handler or the host decides), named as the driver names the agent's tool calls.
    const approve = context.approve
    const decide = (params: Acp.RequestPermissionRequest): Effect.Effect<AcpApproval.Decision> => {
      const call = params.toolCall
      // A call is the host's only when it is one of the process's hosted tools (`hostedNaming`): a
      // server of the agent's own configuration named like the hosted key (`tether__x`) is not.
      const identity = mapper.identity(call.toolCallId) ??
        naming(
          AcpMap.infoOf(call as unknown as { readonly [key: string]: unknown }, call.toolCallId),
          context.hostedKey
        )
      if (identity.source === "host" || (identity.source === "mcp" && declared(identity.name))) {
        return Effect.succeed(AcpApproval.allowHosted)
      }
      if (approve === undefined) return options.permission(params)
      const ask = { ...AcpApproval.askOf(params), toolName: identity.name }
      return ask.kind === "fileChange" ? Effect.map(approve(ask), AcpApproval.onceForFileChange) : approve(ask)
    }
    const connection = Acp.client({ name: "tether" })
      .onRequest("session/request_permission", ({ params }) =>
        run(Effect.map(decide(params), (decision) => {
          const answer = AcpApproval.outcomeOf(decision, params.options)
          const title = params.toolCall.title ?? params.toolCall.toolCallId
          const outcome = answer.outcome.outcome === "selected" ? answer.outcome.optionId : "cancelled"
          deliver([
            notice(
              decision._tag === "Deny" ? "warning" : "info",
              "acp.permission",
              `the agent asked permission for "${title}": ${decision._tag} (answered ${outcome})`,
              { request: params, ask: AcpApproval.askOf(params), decision }
            ),
            // A refused call the agent reports nowhere else (Gemini CLI) is still a failed call.
            ...(decision._tag === "Deny" ? mapper.refused(params.toolCall, decision.message) : [])
          ])
          return answer
        })))
      .connect({ readable, writable })
    yield* Effect.addFinalizer(() => Effect.sync(() => connection.close()))

    const gone = () => providerError("the agent's process ended (its output closed)")
    const call = <A>(
      what: string,
      send: () => Promise<A>,
      reason: Driver.ProtocolError["reason"] = "ProviderError"
    ): Effect.Effect<A, Driver.ProtocolError> =>
      Effect.tryPromise({ try: send, catch: (error) => failed(what, error, reason) })
    /** A request that failed: the connection's end once stdout ended, else what the agent said. */
    const failed = (what: string, error: unknown, reason: Driver.ProtocolError["reason"] = "ProviderError") =>
      outputEnded
        ? new Driver.ProtocolError({ reason: "ProviderError", detail: `${what} failed: ${gone().detail}` })
        : new Driver.ProtocolError({ reason, detail: `${what} failed: ${describe(error)}` })
    const untilEnded = Effect.zipRight(Deferred.await(ended), Effect.fail(gone()))

    const hostedTools = request.hosted.tools.length > 0
    /** The definition's MCP sources as ACP declares them; a bearer variable's value is a secret. */
    const sourcesOf = (capabilities: Acp.AgentCapabilities) =>
      Effect.forEach(request.mcp, (server): Effect.Effect<Acp.McpServer, Driver.ProtocolError> => {
        if (server.key === request.hosted.key) {
          return Effect.fail(providerError(`the MCP source key "${server.key}" is reserved for the hosted tools`))
        }
        if (server._tag === "stdio") {
          return Effect.succeed({
            name: server.key,
            command: server.command,
            args: [...server.args],
            env: Object.entries(server.env).map(([name, value]) => ({ name, value }))
          })
        }
        if (capabilities.mcpCapabilities?.[server._tag] !== true) {
          return Effect.fail(
            providerError(`the agent cannot connect to MCP source "${server.key}" over ${server._tag}`)
          )
        }
        const headers = Object.entries(server.headers).map(([name, value]) => ({ name, value }))
        if (server.bearerTokenEnv !== undefined) {
          const value = request.hostEnv[server.bearerTokenEnv]
          if (value === undefined) {
            return Effect.fail(
              providerError(`MCP source "${server.key}": the host has no variable ${server.bearerTokenEnv}`)
            )
          }
          if (options.headerSecrets === "environment") {
            // The agent's environment has the variable (a referenced variable: `Env.buildEnv`).
            headers.push({ name: "Authorization", value: `Bearer \${${server.bearerTokenEnv}}` })
            return Effect.succeed({ type: server._tag, name: server.key, url: server.url, headers })
          }
          const secret = `tether-secret-${randomBytes(18).toString("base64url")}`
          secrets.push({ placeholder: secret, value: jsonText(value) })
          headers.push({ name: "Authorization", value: `Bearer ${secret}` })
        }
        return Effect.succeed({ type: server._tag, name: server.key, url: server.url, headers })
      })
    const handshake = Effect.gen(function*() {
      const init = yield* call("initialize", () =>
        connection.agent.request("initialize", {
          protocolVersion: Acp.PROTOCOL_VERSION,
          clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false }
        }))
      // The SDK does not check an answer's shape: a `null` result would be read as an object.
      if (typeof init !== "object" || init === null) {
        return yield* Effect.fail(providerError("the agent answered initialize without a result object"))
      }
      if (init.protocolVersion !== Acp.PROTOCOL_VERSION) {
        return yield* Effect.fail(providerError(`the agent speaks ACP version ${init.protocolVersion}, not 1`))
      }
      const capabilities = init.agentCapabilities ?? {}
      if (hostedTools && capabilities.mcpCapabilities?.http !== true) {
        return yield* Effect.fail(
          new Driver.ProtocolError({
            reason: "HostedToolsUnavailable",
            detail: "the agent does not declare MCP servers over HTTP (mcpCapabilities.http)"
          })
        )
      }
      const mcpServers: Array<Acp.McpServer> = options.sources ? yield* sourcesOf(capabilities) : []
      if (hostedTools) {
        mcpServers.push({
          type: "http",
          name: request.hosted.key,
          url: request.hosted.url,
          headers: [{
            name: "Authorization",
            value: options.headerSecrets === "environment"
              ? `Bearer \${${sessionTokenVariable(request.hosted.tokenVariable)}}`
              : `Bearer ${placeholder}`
          }]
        })
      }
      const session = context.session
      switch (session._tag) {
        case "New": {
          const created = yield* call(
            "session/new",
            () => connection.agent.request("session/new", { cwd: request.workspace, mcpServers })
          )
          if (typeof created !== "object" || created === null || typeof created.sessionId !== "string") {
            return yield* Effect.fail(providerError("the agent answered session/new without a session id"))
          }
          return { sessionId: created.sessionId, result: created as unknown }
        }
        case "Resume": {
          if (capabilities.loadSession !== true) {
            return yield* Effect.fail(
              new Driver.ProtocolError({
                reason: "ResumeRejected",
                detail: "the agent cannot load a session (no loadSession capability)"
              })
            )
          }
          const loaded = yield* call(
            "session/load",
            () =>
              connection.agent.request("session/load", { sessionId: session.id, cwd: request.workspace, mcpServers }),
            "ResumeRejected"
          )
          return { sessionId: session.id, result: loaded as unknown }
        }
        case "Fork":
          return yield* Effect.fail(providerError("ACP cannot fork a session"))
      }
    })
    const opened = yield* handshake.pipe(
      Effect.raceFirst(untilEnded),
      Effect.timeoutFail({
        duration: options.startTimeout,
        onTimeout: () => providerError("the agent did not create its session in time")
      })
    )
    mapper.session = opened.sessionId
    mapper.model = AcpMap.currentModel(opened.result) ?? request.model
    if (context.session._tag === "Resume") {
      // A load replays the session's history as updates, which no turn may take for its own. ACP
      // has them sent before the load's answer; Gemini CLI sends them after it (its replay is not
      // awaited), so the first turn would get the whole history, its text included. No turn is
      // current yet (its updates are dropped) until the agent has been quiet for a while.
      const loadedAt = Date.now()
      yield* Effect.suspend(() => {
        const now = Date.now()
        return now - Math.max(loadedAt, lastUpdate) >= replayQuietMillis ? Effect.void : Effect.fail("replaying")
      }).pipe(
        Effect.retry(Schedule.spaced(Duration.millis(replayQuietMillis / 4))),
        Effect.timeout(options.startTimeout),
        Effect.ignore
      )
    }
    if (hostedTools) {
      yield* context.hostedToolsListed.pipe(
        Effect.raceFirst(untilEnded),
        Effect.timeoutFail({
          duration: options.hostedToolsTimeout,
          onTimeout: () =>
            new Driver.ProtocolError({
              reason: "HostedToolsUnavailable",
              detail: `the agent did not list the hosted tools (MCP server "${request.hosted.key}") with its credential`
            })
        })
      )
    }

    let started = false
    /** The running or last prompt: done once the agent answered it (or the connection closed). */
    let prompt: Deferred.Deferred<void> | undefined = undefined
    const cancel = call(
      "session/cancel",
      () => connection.agent.notify("session/cancel", { sessionId: opened.sessionId })
    )
    const running = Effect.map(
      Effect.suspend(() => prompt === undefined ? Effect.succeed(true) : Deferred.isDone(prompt)),
      (done) => !done
    )

    const turn = (turn: Driver.LiveTurn): Stream.Stream<Driver.Output, Driver.ProtocolError> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        if (yield* Deferred.isDone(ended)) return yield* Effect.fail(gone())
        // A previous prompt the consumer stopped reading was cancelled: its late updates must
        // not land in this turn, so it has to be over first.
        const previous = prompt
        if (previous !== undefined) {
          yield* Deferred.await(previous).pipe(
            Effect.timeoutFail({
              duration: options.cancelTimeout,
              onTimeout: () => providerError("the agent did not end the previous, cancelled prompt")
            })
          )
        }
        const mailbox = yield* Mailbox.make<Driver.Output, Driver.ProtocolError>()
        mapper.begin()
        const first: Array<Driver.Output> = []
        if (!started) {
          started = true
          first.push({ _tag: "SessionStarted", sessionId: opened.sessionId, model: mapper.model })
        }
        first.push({ _tag: "Message", role: "user", text: turn.prompt })
        mailbox.unsafeOfferAll(first)
        current = mailbox
        const settled = yield* Deferred.make<void>()
        prompt = settled
        const finish = (exit: Exit.Exit<Answer, Driver.ProtocolError>) =>
          Effect.sync(() => {
            if (current !== mailbox) return
            current = undefined
            if (Exit.isSuccess(exit)) {
              const answer = exit.value
              mailbox.unsafeOfferAll(
                answer._tag === "Result"
                  ? mapper.finish(answer.result)
                  : mapper.failed(AcpMap.promptError(answer.error), { error: answer.error })
              )
              mailbox.unsafeDone(Exit.void)
            } else {
              mailbox.unsafeDone(exit.pipe(Exit.asVoid))
            }
          })
        // The prompt belongs to the session, not to this stream: a consumer that stops early
        // cancels it (below) and the next turn waits for its answer. The agent's error answer
        // (a model endpoint refusing the key, a limit) fails the turn as a provider's failure; a
        // connection gone is the session's end.
        void run(
          Effect.tryPromise({
            try: () =>
              connection.agent.request("session/prompt", {
                sessionId: opened.sessionId,
                prompt: [{ type: "text", text: turn.prompt }]
              }),
            catch: (error) => error
          }).pipe(
            Effect.map((result): Answer => ({ _tag: "Result", result })),
            Effect.catchAll((error) =>
              error instanceof Acp.RequestError && !outputEnded
                ? Effect.succeed<Answer>({ _tag: "Error", error: errorFields(error) })
                : Effect.fail(failed("session/prompt", error))
            ),
            Effect.exit,
            Effect.flatMap(finish),
            // The session's scope closed under the turn: its reader must not wait forever.
            Effect.onInterrupt(() => finish(Exit.fail(providerError("the live session closed during the turn")))),
            Effect.ensuring(Deferred.done(settled, Exit.void))
          )
        ).catch(() => undefined)
        yield* Effect.addFinalizer(() =>
          Effect.suspend(() => {
            if (current !== mailbox) return Effect.void
            current = undefined
            return Effect.ignore(cancel)
          })
        )
        return Mailbox.toStream(mailbox)
      }))

    return {
      turn,
      // `session/cancel` is a notification: the agent acknowledges it by answering the prompt
      // (core bounds the wait and shuts down an agent that never does).
      interrupt: Effect.flatMap(
        running,
        (busy) => busy ? Effect.zipRight(cancel, Effect.suspend(() => Deferred.await(prompt!))) : Effect.void
      ),
      shutdown: Effect.zipRight(channel.closeInput, Effect.sync(() => connection.close()))
    } satisfies Driver.LiveSession
  })
