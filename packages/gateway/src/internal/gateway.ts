/**
 * The gateway service: one lazily started loopback listener shared by every registration,
 * token → credential lookup, per-registration call fibers, graceful close.
 *
 * @internal
 */
import type { CallToolResult, RequestId } from "@modelcontextprotocol/sdk/types.js"
import type * as Catalog from "@tether/tool/Catalog"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as FiberRef from "effect/FiberRef"
import * as FiberRefs from "effect/FiberRefs"
import * as HashMap from "effect/HashMap"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Runtime from "effect/Runtime"
import * as Scope from "effect/Scope"
import * as Tracer from "effect/Tracer"
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import * as Http from "node:http"
import type { Socket } from "node:net"
import type { Credential, CredentialOptions, Options, Redactor, Registration } from "../Gateway.js"
import { GatewayError } from "../Gateway.js"
import * as Exchange from "./exchange.js"
import * as Guard from "./guard.js"
import * as Mcp from "./mcp.js"
import * as Redact from "./redact.js"
import * as Timer from "./timer.js"

interface Limits {
  readonly maxBodyBytes: number
  readonly maxHeaderBytes: number
  readonly maxConcurrentCalls: number
  readonly handlerDeadline: Duration.Duration
  readonly maxOutputBytes: number
  readonly headersTimeout: number
  readonly requestTimeout: number
  readonly closeTimeout: Duration.Duration
}

/**
 * A timeout as Node's http server takes it: whole milliseconds (it refuses a fraction or an
 * infinite value with a RangeError), 0 for none. `Duration.infinity` is none.
 */
const serverTimeout = (millis: number): number => Number.isFinite(millis) ? Math.ceil(millis) : 0

const resolve = (options: Options): Limits => {
  const requestTimeout = Duration.toMillis(options.requestTimeout ?? "30 seconds")
  return {
    maxBodyBytes: options.maxBodyBytes ?? 1024 * 1024,
    maxHeaderBytes: options.maxHeaderBytes ?? 16 * 1024,
    maxConcurrentCalls: options.maxConcurrentCalls ?? 32,
    handlerDeadline: Duration.decode(options.handlerDeadline ?? "2 minutes"),
    maxOutputBytes: options.maxOutputBytes ?? 4 * 1024 * 1024,
    // Node refuses a header timeout above the request timeout.
    headersTimeout: serverTimeout(
      Math.min(Duration.toMillis(options.headersTimeout ?? "10 seconds"), requestTimeout)
    ),
    requestTimeout: serverTimeout(requestTimeout),
    closeTimeout: Duration.decode(options.closeTimeout ?? "5 seconds")
  }
}

/** One accepted token: the registration it belongs to and the handlers of its tool set. */
interface Entry {
  readonly digest: Buffer
  readonly owner: { open: boolean }
  readonly handlers: Mcp.Handlers
  /** Called for each authenticated `tools/list` made with this token. */
  readonly listed: () => void
}

interface Listener {
  readonly server: Http.Server
  readonly url: string
  inflight: number
  onIdle: (() => void) | undefined
}

const digestOf = (token: string): Buffer => createHash("sha256").update(token).digest()

/** Tokens drawn from the system's random source per call of `newToken` when its pool is empty. */
const tokensPerDraw = 64
/** Tokens drawn and not yet issued, with their digests (last first). */
const unissued: Array<{ readonly token: string; readonly digest: Buffer; readonly key: string }> = []

/**
 * A new token (256 random bits), its digest and the digest's map key. A run mints one before its
 * process starts, where a single `randomBytes` and `sha256` cost ~0.2 ms each (cold code after the
 * previous run's wait): tokens are drawn 64 at a time, in one call, and hashed together. Each is
 * issued once; none is valid before it is issued.
 */
const newToken = (): { readonly token: string; readonly digest: Buffer; readonly key: string } => {
  if (unissued.length === 0) {
    const bytes = randomBytes(32 * tokensPerDraw)
    for (let i = 0; i < tokensPerDraw; i++) {
      const token = bytes.toString("base64url", 32 * i, 32 * (i + 1))
      const digest = digestOf(token)
      unissued.push({ token, digest, key: digest.toString("base64") })
    }
    bytes.fill(0)
  }
  return unissued.pop()!
}

/** `[A-Z][A-Z0-9_]*` with 96 random bits. */
const newVariable = (): string => `TETHER_MCP_${randomBytes(12).toString("hex").toUpperCase()}`

const parseJson = (body: Buffer): { readonly ok: true; readonly value: unknown } | { readonly ok: false } => {
  try {
    return { ok: true, value: JSON.parse(body.toString("utf8")) }
  } catch {
    return { ok: false }
  }
}

const isToolsCall = (body: unknown): boolean =>
  typeof body === "object" && body !== null && (body as { readonly method?: unknown }).method === "tools/call"

const outcomeCode = (outcome: Catalog.Outcome): string => outcome._tag === "Success" ? "ok" : outcome.code

const deadlineExceeded: Catalog.Outcome = {
  _tag: "Failed",
  code: "deadline_exceeded",
  message: "The tool did not finish before its deadline."
}
const invalidOutput: Catalog.Outcome = {
  _tag: "Failed",
  code: "invalid_output",
  message: "The tool produced an output that could not be returned."
}
const internalError: Catalog.Outcome = {
  _tag: "Failed",
  code: "internal_error",
  message: "The tool failed."
}

/** A request that is no tool call holds no concurrency slot. */
const noRelease = (): void => {}
const noHold = (): () => void => noRelease

/**
 * A success's size as `maxOutputBytes` means it: its JSON bytes. It goes out twice (as
 * `structuredContent` and as the text block, the same JSON for a structured output): counting
 * both halved the limit.
 */
const outputSize = (outcome: Catalog.Outcome): number => {
  if (outcome._tag !== "Success") return 0
  try {
    return Math.max(
      outcome.structuredContent === undefined ? 0 : Buffer.byteLength(JSON.stringify(outcome.structuredContent)),
      Buffer.byteLength(outcome.text)
    )
  } catch {
    return Number.POSITIVE_INFINITY
  }
}

/** Why a call fiber was interrupted, for its log line. */
interface CallState {
  interruptedBy: "deadline" | "cancel"
}

/** Adds a call's annotations to the log annotations the fiber already carries. */
const withCallAnnotations = (
  name: string,
  outcome: string,
  code: string,
  started: number
) =>
(annotations: HashMap.HashMap<string, unknown>): HashMap.HashMap<string, unknown> =>
  HashMap.set(
    HashMap.set(HashMap.set(HashMap.set(annotations, "tool", name), "outcome", outcome), "code", code),
    "durationMs",
    Math.round((performance.now() - started) * 100) / 100
  )

/**
 * One call, as a fiber of its registration. The deadline and cancellation are answered by
 * the caller (`call` below) without waiting for this fiber, so a handler that ignores
 * interruption cannot delay the answer.
 *
 * The fiber is fresh and ends with this effect, so the span is made current and the log
 * annotations are added by setting the fiber's own refs, with no step to restore them
 * (`withParentSpan`/`annotateLogs` each cost an uninterruptible region per call); one `onExit`
 * writes the log line and the span's outcome, on success and on interruption alike.
 */
const callEffect = (
  executor: Catalog.Executor,
  redactor: Redactor,
  limits: Limits,
  name: string,
  input: unknown,
  state: CallState,
  parent: Tracer.AnySpan | undefined
) =>
  // A child of the span that was current where the calling credential was minted (a run's);
  // with none, of the span current where the fiber starts.
  Effect.useSpan("Gateway.call", { parent, attributes: { "tool.name": name }, captureStackTrace: false }, (span) => {
    const started = performance.now()
    const log = (outcome: string, code: string) =>
      Effect.zipRight(
        FiberRef.update(FiberRef.currentLogAnnotations, withCallAnnotations(name, outcome, code, started)),
        Effect.logInfo("tool call")
      )
    return FiberRef.update(FiberRef.currentContext, Context.add(Tracer.ParentSpan, span)).pipe(
      // No deadline for the executor: `call` answers the deadline on its own timer and interrupts
      // this fiber, so the handler is interrupted in place and this fiber (kept in the
      // registration's calls) ends only after its finalizers: closing waits for them (bounded).
      Effect.zipRight(Effect.suspend(() => executor.execute(name, input))),
      Effect.catchAllCause((cause) => Effect.logWarning("tool execution defect", cause).pipe(Effect.as(internalError))),
      // What a handler returns goes to a CLI and its model: no live token of any registration
      // leaves in it (another agent's, saved by one tool and read back by another, would let this
      // agent's model call that agent's tools).
      Effect.map((outcome) => redactor.value(outcome)),
      Effect.map((outcome) => outputSize(outcome) > limits.maxOutputBytes ? invalidOutput : outcome),
      Effect.onExit((exit) => {
        if (Exit.isSuccess(exit)) {
          const outcome = exit.value._tag.toLowerCase()
          const code = outcomeCode(exit.value)
          span.attribute("tool.outcome", outcome)
          span.attribute("tool.code", code)
          return log(outcome, code)
        }
        if (!Cause.isInterruptedOnly(exit.cause)) return Effect.void
        const [outcome, code] = state.interruptedBy === "deadline"
          ? ["failed", "deadline_exceeded"] as const
          : ["canceled", "canceled"] as const
        span.attribute("tool.outcome", outcome)
        span.attribute("tool.code", code)
        return log(outcome, code)
      }),
      Effect.map(Mcp.toCallToolResult)
    )
  })

/**
 * Removes the injected keys a tool's input schema does not declare; the same object when there
 * is nothing to remove.
 */
const withoutInjected = (
  injected: ReadonlyArray<string>,
  declared: ReadonlySet<string>,
  input: unknown
): unknown => {
  if (injected.length === 0 || typeof input !== "object" || input === null || Array.isArray(input)) return input
  const record = input as { readonly [key: string]: unknown }
  const drop = injected.filter((key) => !declared.has(key) && Object.hasOwn(record, key))
  if (drop.length === 0) return input
  const out: { [key: string]: unknown } = {}
  for (const key of Object.keys(record)) if (!drop.includes(key)) out[key] = record[key]
  return out
}

const declaredKeys = (schema: unknown): ReadonlySet<string> => {
  const properties = typeof schema === "object" && schema !== null
    ? (schema as { readonly properties?: unknown }).properties
    : undefined
  return new Set(typeof properties === "object" && properties !== null ? Object.keys(properties) : [])
}

/**
 * Whether a credential has listed the tools, and the wait for it: its Deferred (about a
 * kilobyte) is made only when someone waits before the listing, as a live session does; most
 * credentials are never waited on.
 */
class Listed {
  private listed = false
  private deferred: Deferred.Deferred<void> | undefined = undefined
  done(): void {
    this.listed = true
    if (this.deferred !== undefined) Deferred.unsafeDone(this.deferred, Exit.void)
  }
  readonly await: Effect.Effect<void> = Effect.suspend(() => {
    if (this.listed) return Effect.void
    this.deferred ??= Deferred.unsafeMake<void>(FiberId.none)
    return Deferred.await(this.deferred)
  })
}

/** @internal */
export const make = (options: Options = {}): Effect.Effect<
  {
    readonly register: (executor: Catalog.Executor) => Effect.Effect<Registration, GatewayError, Scope.Scope>
    readonly redactor: Redactor
  },
  never,
  Scope.Scope
> =>
  Effect.gen(function*() {
    const limits = resolve(options)
    const validator = Mcp.makeValidator()
    const lock = yield* Effect.makeSemaphore(1)
    const tokens = new Map<string, Entry>()
    // The values of every token whose scope is open (accepted or revoked early): what the
    // redactor replaces. Kept apart from `tokens`, which holds only what is accepted.
    const known = new Redact.Tokens()
    const redactor = Redact.make(known)
    // Per open registration: answer its pending calls and interrupt their fibers.
    const live = new Set<Effect.Effect<void>>()
    const state: { listener: Listener | undefined; registrations: number; calls: number } = {
      listener: undefined,
      registrations: 0,
      calls: 0
    }

    /** The accepted token's map key and entry, or `undefined`. */
    const authenticate = (token: string | undefined): { readonly key: string; readonly entry: Entry } | undefined => {
      if (token === undefined) return undefined
      const digest = digestOf(token)
      const key = digest.toString("base64")
      const entry = tokens.get(key)
      return entry !== undefined && entry.owner.open && timingSafeEqual(entry.digest, digest)
        ? { key, entry }
        : undefined
    }

    /** Whether an accepted token is still accepted (not revoked, its registration open). */
    const stillAccepted = (accepted: { readonly key: string; readonly entry: Entry }): boolean =>
      tokens.get(accepted.key) === accepted.entry && accepted.entry.owner.open

    const onRequest = (listener: Listener, authority: string, origin: string) =>
    (
      req: Http.IncomingMessage,
      res: Http.ServerResponse,
      connection: Exchange.Connection,
      expectsContinue: boolean
    ): void => {
      // A refusal already closes this connection: a request pipelined after it could never be
      // answered, so it is not dispatched (no handler runs, nothing is counted).
      if (connection.closing) return
      listener.inflight++
      const exchange = Exchange.open(connection, res, () => {
        listener.inflight--
        if (listener.inflight === 0) listener.onIdle?.()
      })
      // Refusals that leave a body unread close the connection (see `Guard.refuse`). One of a
      // request without a body leaves it open: every MCP client's GET for a server stream is
      // refused (405), and closing there made a client that pools its connections (Claude Code's)
      // now and then send its next request, another server's initialize, on the closing socket.
      const refuseAndClose = (refusal: Guard.Refusal) => {
        if (!Guard.hasBody(req)) return Guard.refuse(res, refusal)
        connection.closing = true
        Guard.refuse(res, refusal, true)
      }
      const shape = Guard.checkShape(req, authority, origin)
      if (shape._tag === "Refused") return refuseAndClose(shape.refusal)
      const accepted = authenticate(Guard.presentedToken(shape.authorization))
      if (accepted === undefined) return refuseAndClose("unauthorized")
      if (Guard.declaresTooLarge(req, limits.maxBodyBytes)) return refuseAndClose("too_large")
      // Only a request that passed every check before its body is invited to send it.
      if (expectsContinue) res.writeContinue()
      Guard.readBody(req, limits.maxBodyBytes, (raw) => {
        const parsed = parseJson(raw)
        if (!parsed.ok) return Guard.refuse(res, "parse_error")
        if (Array.isArray(parsed.value)) return Guard.refuse(res, "batch")
        // Re-check: the registration may have closed (or the credential been revoked) while the
        // body was being read.
        if (!stillAccepted(accepted)) return Guard.refuse(res, "unauthorized")
        const entry = accepted.entry
        let hold = noHold
        if (isToolsCall(parsed.value)) {
          if (state.calls >= limits.maxConcurrentCalls) return Guard.refuse(res, "busy")
          state.calls++
          // Returned once the exchange has ended and the call's handler has too: a handler outlives
          // its answer when the client goes away or the deadline answers (its finalizers still
          // run), and a slot given back with the answer would let such handlers pile up past the
          // bound. A handler that ends first returns it as soon as the answer is flushed, so a
          // client that sends its next call right after reading an answer never meets a stale slot.
          let holders = 1
          const release = () => {
            if (--holders === 0) state.calls--
          }
          exchange.onEnd(release)
          hold = () => {
            if (holders === 0) return noRelease
            holders++
            return release
          }
        }
        // `listed` completes only once a valid `tools/list` request is answered with the tools.
        Mcp.serve(entry.handlers, req, res, parsed.value, validator, exchange.onEnd, entry.listed, hold).catch(() =>
          Guard.refuse(res, "bad_request")
        )
      }, refuseAndClose)
    }

    const start = Effect.async<Listener, GatewayError>((resume) => {
      const responses = new WeakMap<Socket, Http.ServerResponse>()
      const server = Http.createServer({
        maxHeaderSize: limits.maxHeaderBytes,
        // The Host rule is ours (exactly one, exact value, fixed body), not Node's bare 400.
        requireHostHeader: false,
        headersTimeout: limits.headersTimeout,
        requestTimeout: limits.requestTimeout,
        // A quarter of the shortest timeout in force (0 is none), within 50 ms – 1 s.
        connectionsCheckingInterval: Math.max(
          50,
          Math.min(1000, Math.floor((limits.headersTimeout || limits.requestTimeout || Infinity) / 4))
        )
      })
      // Node keeps only the first `maxHeadersCount` (2000) headers in `rawHeaders` and drops the
      // rest without a word: a second Host or an Origin past them would never reach the shape
      // checks. No count limit; the header block stays bounded by `maxHeaderSize` (431).
      server.maxHeadersCount = 0
      const listener: Listener = { server, url: "", inflight: 0, onIdle: undefined }
      const connectionOf = Exchange.connections()
      server.on("clientError", (error: NodeJS.ErrnoException, socket: Socket) => {
        const refusal: Guard.Refusal = error.code === "HPE_HEADER_OVERFLOW"
          ? "header_too_large"
          : error.code === "ERR_HTTP_REQUEST_TIMEOUT"
          ? "timeout"
          : "bad_request"
        const res = responses.get(socket)
        if (socket.writable && (res === undefined || !res.headersSent) && error.code !== "ECONNRESET") {
          socket.end(Guard.rawRefusal(refusal))
        }
        socket.destroySoon()
      })
      const onError = (error: Error) => {
        resume(Effect.fail(new GatewayError({ reason: "ListenFailed", detail: error.message })))
      }
      server.once("error", onError)
      server.listen({ host: "127.0.0.1", port: 0, exclusive: true }, () => {
        server.off("error", onError)
        // After listening, server errors (e.g. a transient accept failure such as EMFILE) must
        // not become an uncaught exception in the host; the listener keeps serving.
        server.on("error", () => {})
        const address = server.address()
        if (address === null || typeof address === "string" || address.address !== "127.0.0.1") {
          server.close()
          return resume(Effect.fail(new GatewayError({ reason: "ListenFailed", detail: "not bound to 127.0.0.1" })))
        }
        const authority = `127.0.0.1:${address.port}`
        const handle = onRequest(listener, authority, `http://${authority}`)
        // The socket's response in progress; once it is flushed it no longer guards the socket,
        // so a next request on the kept-alive connection that fails to parse is refused like a
        // first one (431, 408, 400) rather than dropped without an answer.
        const track = (req: Http.IncomingMessage, res: Http.ServerResponse) => {
          responses.set(req.socket, res)
          res.once("finish", () => {
            if (responses.get(req.socket) === res) responses.delete(req.socket)
          })
        }
        server.on("request", (req: Http.IncomingMessage, res: Http.ServerResponse) => {
          track(req, res)
          handle(req, res, connectionOf(req.socket), false)
        })
        // With a listener, Node no longer answers `100 Continue` by itself before the checks.
        server.on("checkContinue", (req: Http.IncomingMessage, res: Http.ServerResponse) => {
          track(req, res)
          handle(req, res, connectionOf(req.socket), true)
        })
        ;(listener as { url: string }).url = `http://${authority}/mcp`
        resume(Effect.succeed(listener))
      })
    })

    // Graceful: stop accepting, let in-flight responses finish (bounded), then drop every socket.
    const stop = (listener: Listener) =>
      Effect.async<void>((resume) => {
        // Node ≥ 19 also closes the idle keep-alive connections here.
        listener.server.close(() => resume(Effect.void))
        listener.onIdle = () => listener.server.closeAllConnections()
        if (listener.inflight === 0) listener.onIdle()
      }).pipe(
        Effect.interruptible,
        Effect.timeout(limits.closeTimeout),
        Effect.ignore,
        Effect.ensuring(Effect.sync(() => listener.server.closeAllConnections()))
      )

    const acquireListenerLocked = lock.withPermits(1)(Effect.gen(function*() {
      if (state.listener === undefined) state.listener = yield* start
      state.registrations++
      return state.listener
    }))
    // Without the lock while a listener is up: `state.listener` is set only once a listener
    // listens, and a release clears it in the same synchronous step that finds no registration
    // left, so a registration counted here always holds a listener that stays up.
    const acquireListener = Effect.suspend(() => {
      const listener = state.listener
      if (listener === undefined) return acquireListenerLocked
      state.registrations++
      return Effect.succeed(listener)
    })

    const releaseListener = lock.withPermits(1)(Effect.gen(function*() {
      state.registrations--
      const listener = state.listener
      if (state.registrations === 0 && listener !== undefined) {
        state.listener = undefined
        yield* stop(listener)
      }
    }))

    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        tokens.clear()
        known.clear()
        // Every registration still open answers its pending calls at once; the wait for their
        // handlers is bounded as a registration's own close bounds it (a handler may ignore
        // interruption: an acquire that hangs), so the listener below always stops.
        yield* Effect.forEach([...live], (abort) => abort, { concurrency: "unbounded", discard: true }).pipe(
          Effect.disconnect,
          // A finalizer runs uninterruptibly: without this the timeout could not cut the wait.
          Effect.interruptible,
          Effect.timeout(limits.closeTimeout),
          Effect.ignore
        )
        const listener = state.listener
        state.listener = undefined
        if (listener !== undefined) yield* stop(listener)
      })
    )

    const register = (executor: Catalog.Executor) =>
      Effect.gen(function*() {
        const listener = yield* Effect.acquireRelease(acquireListener, () => releaseListener)
        // The calls' fibers, forked from this fiber's runtime, so that closing can be bounded even
        // if a handler ignores interruption: every pending call is answered first, then the
        // fibers are interrupted. A model that saw a token (a shell printed the environment) can
        // pass it as an argument, and a handler's failure may quote its input: the host's log
        // never gets it, through loggers wrapped once here, not per call. Nor is a call's log
        // line an event of its span (Effect's tracer logger would record it with the cause, whose
        // text may quote the call's arguments): `Gateway.call` carries only the tool's name and
        // outcome.
        const runFork = yield* Effect.fiberIdWith((fiberId) =>
          Effect.map(Effect.runtime<never>(), (runtime) =>
            Runtime.runFork(Runtime.make({
              context: runtime.context,
              runtimeFlags: runtime.runtimeFlags,
              fiberRefs: FiberRefs.updateAs(runtime.fiberRefs, {
                fiberId,
                fiberRef: FiberRef.currentLoggers,
                value: redactor.loggers(
                  Redact.withoutSpanEvents(FiberRefs.getOrDefault(runtime.fiberRefs, FiberRef.currentLoggers))
                )
              })
            })))
        )
        const calls = new Set<Fiber.RuntimeFiber<CallToolResult>>()
        const pending = new Set<() => void>()
        const owner = { open: true }
        const cancelPending = () => {
          for (const cancel of [...pending]) cancel()
        }
        const interruptCalls = Effect.suspend(() => Fiber.interruptAll([...calls]))
        const abort = Effect.sync(cancelPending).pipe(Effect.zipRight(Effect.disconnect(interruptCalls)))
        // In close order: the registration's tokens stop being accepted (the credentials'
        // finalizers, added later, run first), its pending calls are answered, then their fibers
        // interrupted (bounded).
        yield* Effect.addFinalizer(() =>
          Effect.suspend(() => {
            owner.open = false
            live.delete(abort)
            cancelPending()
            // A finalizer runs uninterruptibly: `interruptible` lets the timeout cut the wait.
            return interruptCalls.pipe(
              Effect.disconnect,
              Effect.interruptible,
              Effect.timeout(limits.closeTimeout),
              Effect.ignore
            )
          })
        )
        live.add(abort)
        const run = (effect: Effect.Effect<CallToolResult>): Fiber.RuntimeFiber<CallToolResult> => {
          const fiber = runFork(effect)
          calls.add(fiber)
          fiber.addObserver(() => calls.delete(fiber))
          return fiber
        }

        /**
         * Runs one call. It is answered, and its fiber interrupted, at the first of: its fiber's
         * end, the deadline, `signal` (the exchange ended), the registration's close, or the
         * cancel `track` is given (the client's `notifications/cancelled`); `track` returns what
         * forgets that cancel, called however the call ends.
         */
        const call = (
          name: string,
          input: unknown,
          signal: AbortSignal,
          parent: Tracer.AnySpan | undefined,
          track: ((cancel: () => void) => () => void) | undefined,
          hold: () => () => void
        ): Promise<CallToolResult> =>
          new Promise((resolve, reject) => {
            // Closed, or the credential revoked, after this call's request was authenticated (the
            // SDK's server reaches the call some ticks after the last check): no handler runs.
            if (!owner.open || track === undefined) return reject(Mcp.canceledError())
            const state: CallState = { interruptedBy: "cancel" }
            const fiber = run(callEffect(executor, redactor, limits, name, input, state, parent))
            // The concurrency slot is the handler's until it has ended, finalizers included.
            fiber.addObserver(hold())
            let settled = false
            const settle = (answer: () => void, interrupt: boolean) => {
              if (settled) return
              settled = true
              stopDeadline()
              signal.removeEventListener("abort", cancel)
              pending.delete(cancel)
              untrack()
              answer()
              if (interrupt) fiber.unsafeInterruptAsFork(FiberId.none)
            }
            const cancel = () => settle(() => reject(Mcp.canceledError()), true)
            const stopDeadline = Timer.after(limits.handlerDeadline, () => {
              state.interruptedBy = "deadline"
              settle(() => resolve(Mcp.toCallToolResult(deadlineExceeded)), true)
            })
            pending.add(cancel)
            const untrack = track(cancel)
            signal.addEventListener("abort", cancel, { once: true })
            fiber.addObserver((exit) =>
              settle(() => Exit.isSuccess(exit) ? resolve(exit.value) : reject(Mcp.canceledError()), false)
            )
          })

        const declared = new Map(executor.catalog.descriptors.map((d) => [d.name, declaredKeys(d.inputSchema)]))
        /**
         * A credential's handlers, and `revoke`: from then on a call made with it is answered as
         * canceled without running, and its calls in flight are canceled (their handlers
         * interrupted), as the registration's close does to all of its calls.
         */
        const handlersFor = (
          names: ReadonlySet<string>,
          injected: ReadonlyArray<string>,
          parent: () => Tracer.AnySpan | undefined
        ): { readonly handlers: Mcp.Handlers; readonly revoke: () => void } => {
          // This credential's calls in flight by JSON-RPC request id. In stateless mode a
          // client's `notifications/cancelled` reaches a fresh SDK server that never saw the call,
          // so it is routed here: only a cancel made with this same credential reaches these.
          // Clients sharing one credential may reuse an id: an id holds each call made with it.
          const inFlight = new Map<RequestId, Set<() => void>>()
          let revoked = false
          const track = (id: RequestId) =>
            revoked ? undefined : (cancel: () => void) => {
              const calls = inFlight.get(id) ?? new Set()
              inFlight.set(id, calls.add(cancel))
              return () => {
                calls.delete(cancel)
                if (calls.size === 0 && inFlight.get(id) === calls) inFlight.delete(id)
              }
            }
          const handlers: Mcp.Handlers = {
            tools: Mcp.toMcpTools(executor.catalog.descriptors.filter((d) => names.has(d.name))),
            has: (name) => names.has(name),
            call: injected.length === 0
              ? (name, input, id, signal, hold) => call(name, input, signal, parent(), track(id), hold)
              : (name, input, id, signal, hold) =>
                call(name, withoutInjected(injected, declared.get(name)!, input), signal, parent(), track(id), hold),
            cancel: (id) => {
              for (const cancel of [...(inFlight.get(id) ?? [])]) cancel()
            }
          }
          const revoke = () => {
            revoked = true
            for (const calls of [...inFlight.values()]) for (const cancel of [...calls]) cancel()
          }
          return { handlers, revoke }
        }

        // The credential's calls are traced under `current`'s span, else the span current at minting.
        const issue = (
          names: ReadonlySet<string>,
          injected: ReadonlyArray<string>,
          current?: () => Tracer.AnySpan | undefined
        ) =>
          Effect.acquireRelease(
            Effect.map(Effect.serviceOption(Tracer.ParentSpan), (minted) => {
              const atMinting = Option.getOrUndefined(minted)
              const parent = current === undefined ? () => atMinting : () => current() ?? atMinting
              const { digest, key, token } = newToken()
              const listed = new Listed()
              const { handlers, revoke } = handlersFor(names, injected, parent)
              tokens.set(key, { digest, owner, handlers, listed: () => listed.done() })
              known.add(token)
              return {
                token: Redacted.make(token),
                key,
                listed: listed.await,
                revoke: () => {
                  tokens.delete(key)
                  revoke()
                }
              }
            }),
            ({ revoke, token }) =>
              Effect.sync(() => {
                revoke()
                known.delete(Redacted.value(token))
              })
          )

        const all = new Set(executor.catalog.descriptors.map((d) => d.name))
        const { token } = yield* issue(all, [])
        const credential = (options?: CredentialOptions): Effect.Effect<Credential, never, Scope.Scope> => {
          const allowed = options?.tools === undefined
            ? all
            : new Set(options.tools.filter((name) => all.has(name)))
          const injected = Object.freeze([...(options?.injectedArguments ?? [])])
          return issue(allowed, injected, options?.parent).pipe(
            Effect.map(({ listed, revoke, token }): Credential => ({
              token,
              tools: Object.freeze([...allowed].sort()),
              listed,
              revoke: Effect.sync(revoke)
            }))
          )
        }
        const registration: Registration = {
          url: listener.url,
          token,
          tokenVariable: newVariable(),
          credential
        }
        return Object.freeze(registration)
      }).pipe(Effect.withSpan("Gateway.register", { captureStackTrace: false }))

    return { register, redactor }
  })
