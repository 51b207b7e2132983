/**
 * The process-local, authenticated loopback MCP Streamable HTTP gateway that serves each
 * agent's host tools to its provider CLI.
 *
 * @since 0.1.0
 */
import type * as Catalog from "@tether/tool/Catalog"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type * as Tracer from "effect/Tracer"
import * as internal from "./internal/gateway.js"
import * as redact from "./internal/redact.js"

/**
 * The gateway could not serve a registration (the listener failed to start).
 *
 * @since 0.1.0
 * @category errors
 */
export class GatewayError extends Schema.TaggedError<GatewayError>("@tether/gateway/GatewayError")("GatewayError", {
  reason: Schema.Literal("ListenFailed"),
  detail: Schema.String
}) {
  override get message(): string {
    return `gateway ${this.reason}: ${this.detail}`
  }
}

/**
 * One agent's registration. Its token is accepted until the registration's scope closes;
 * from then on it gets 401 and its in-flight calls are answered with a JSON-RPC error.
 *
 * @since 0.1.0
 * @category models
 */
export interface Registration {
  /** `http://127.0.0.1:<port>/mcp` */
  readonly url: string
  /** 32 random bytes, base64url. Never logged, never in argv, files, events or results. */
  readonly token: Redacted.Redacted<string>
  /** Random per registration, `[A-Z][A-Z0-9_]*`, ≥ 64 random bits: carries the token into the CLI. */
  readonly tokenVariable: string
  /**
   * Mints a credential of this registration: a fresh token, for one provider process (or one
   * turn), that lists and calls only `options.tools` (intersected with the catalog; default: the
   * whole catalog). It is accepted until `revoke` or until its scope closes, whichever comes
   * first, and never after the registration closed; either ends the calls made with it: those
   * still running are canceled (answered so, their handlers interrupted), and one whose request
   * was read just before is answered as canceled without running. Until its scope closes its
   * value stays known to `Gateway.redactor`, so output produced while it was live is still
   * scrubbed after an early `revoke`. A long-lived process acquires one in the scope of the process and
   * revokes it when the process ends.
   *
   * @since 0.2.0
   */
  readonly credential: (options?: CredentialOptions) => Effect.Effect<Credential, never, Scope.Scope>
}

/**
 * What a credential may do.
 *
 * @since 0.2.0
 * @category models
 */
export interface CredentialOptions {
  /** The tool names it lists and calls (names outside the catalog are ignored). Default: the catalog. */
  readonly tools?: ReadonlyArray<string>
  /**
   * Argument keys the client adds to every tool call on its own (Gemini CLI 0.61 adds
   * `wait_for_previous` to every tool schema and sends it back). They are removed from a call's
   * arguments before the input is decoded, unless the tool's own input schema declares the key,
   * so a handler never sees them and strict decoding still refuses every other unknown key.
   */
  readonly injectedArguments?: ReadonlyArray<string>
  /**
   * The span each call made with the credential is traced under (`Gateway.call` is its child),
   * read at each call; when absent or it returns `undefined`, the span current when the credential
   * was minted. A process that serves several runs (a live thread's) names the running one.
   */
  readonly parent?: () => Tracer.AnySpan | undefined
}

/**
 * A token and the tool names it may list and call.
 *
 * @since 0.1.0
 * @category models
 */
export interface Credential {
  readonly token: Redacted.Redacted<string>
  readonly tools: ReadonlyArray<string>
  /**
   * Completes once the gateway has answered a valid `tools/list` request made with this token
   * with the tools (the client's MCP connection to the hosted tools is up); a refused one, or a
   * `tools/list` sent as a notification, does not complete it. Never fails. A live driver waits on it before the
   * first turn, because an agent given a wrong token drops the server without a word.
   */
  readonly listed: Effect.Effect<void>
  /**
   * Stops accepting the token (401 from then on) and cancels the calls made with it that are
   * still running; idempotent. Closing the scope also does.
   */
  readonly revoke: Effect.Effect<void>
}

/**
 * Replaces the values of the gateway's tokens by {@link redactionMarker}: every token whose
 * scope is open (registrations and credentials, accepted or revoked early). A provider CLI hands
 * its environment to everything it spawns, so a model can make a shell print its token: core
 * passes everything it emits or persists through this. Every character of every occurrence is
 * replaced, also where two occurrences overlap: the marker is written over each, left to right.
 *
 * @since 0.2.0
 * @category models
 */
export interface Redactor {
  readonly text: (text: string) => string
  /** Length-preserving (the marker is as long as a token), so a file can be rewritten in place. */
  readonly bytes: (bytes: Uint8Array) => Uint8Array
  /** Strings inside plain objects and arrays (keys too); the same reference when nothing changed. */
  readonly value: <A>(value: A) => A
  /**
   * How many characters at the end of `text` are the beginning of a token (0 when none): a
   * streamed chunk holds them back until the next chunk shows whether a token follows.
   */
  readonly heldBack: (text: string) => number
  /**
   * `text` as a bounded window cut out of a longer output: whole tokens are replaced, and so is
   * a token cut by either edge (from 8 characters on).
   */
  readonly window: (text: string) => string
  /**
   * Runs `effect` with every logger wrapped: log messages, annotations and causes are scrubbed
   * before they reach the host's loggers (a cause holding a token is logged as its scrubbed text).
   */
  readonly logs: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/**
 * What a redacted token reads as: 43 ASCII characters, the length of a token.
 *
 * @since 0.2.0
 * @category constants
 */
export const redactionMarker: string = redact.marker

/**
 * Gateway limits; every one has the SECURITY.md default.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Request body limit; a larger declared or chunked body gets 413. Default 1 MiB. */
  readonly maxBodyBytes?: number
  /** Header block limit; a larger block gets 431. Default 16 KiB. */
  readonly maxHeaderBytes?: number
  /**
   * Tool calls running at once across all registrations; beyond it 503 with `Retry-After`. Default 32.
   * A call's slot is returned once its exchange has ended, however it ends (answer flushed,
   * response or connection closed), and its handler has too (an interrupted handler's finalizers
   * count: the bound is on handlers running, not on answers pending); a call whose connection is
   * gone is canceled. So is a call the client
   * cancels (`notifications/cancelled` naming its request id, made with the same token): its
   * handler is interrupted and it is answered with the JSON-RPC error `canceled`. A cancel naming
   * no call in flight of that token changes nothing.
   */
  readonly maxConcurrentCalls?: number
  /**
   * A call still running at this deadline is answered `deadline_exceeded` and interrupted. Default
   * 2 minutes. `Duration.infinity`: no deadline; any finite one is honoured, also beyond the
   * 24.8 days a single Node timer can wait.
   */
  readonly handlerDeadline?: Duration.DurationInput
  /** A success larger than this (JSON bytes) is answered `invalid_output`. Default 4 MiB. */
  readonly maxOutputBytes?: number
  /**
   * Time allowed to receive the header block (408 after it); never more than `requestTimeout`.
   * Default 10 seconds. `Duration.infinity`: no limit of its own.
   */
  readonly headersTimeout?: Duration.DurationInput
  /**
   * Time allowed to receive the whole request, body included (408 after it). Default 30 seconds.
   * `Duration.infinity`: no limit (a slow client is then bounded only by `headersTimeout`).
   */
  readonly requestTimeout?: Duration.DurationInput
  /** How long closing the listener waits for in-flight responses before dropping sockets. Default 5 seconds. */
  readonly closeTimeout?: Duration.DurationInput
}

/**
 * The gateway service. One loopback listener per layer, shared by every registration, each
 * selected by its bearer token.
 *
 * @since 0.1.0
 * @category tags
 */
export class Gateway extends Context.Tag("@tether/gateway/Gateway")<Gateway, {
  /** Registers an executor; the listener starts lazily on the first registration. */
  readonly register: (executor: Catalog.Executor) => Effect.Effect<Registration, GatewayError, Scope.Scope>
  /** Scrubs the values of the gateway's live tokens (see {@link Redactor}). */
  readonly redactor: Redactor
}>() {}

/**
 * Builds a gateway in the current scope. The listener (numeric `127.0.0.1`, port 0) starts on
 * the first registration and closes gracefully when the last registration closes or when
 * this scope closes: in-flight calls are answered with a JSON-RPC error, then connections are
 * refused and no handle keeps the event loop alive.
 *
 * JSON-RPC errors carry fixed texts only: a `tools/call` whose params fail validation is
 * `-32602 Invalid params`, never the SDK's validation issues. A request pipelined after one the
 * gateway refused and answered with `Connection: close` is not dispatched.
 *
 * Each call is logged through the Effect logger as one `tool call` line annotated with
 * `tool`, `outcome`, `code` and `durationMs` (never a token, header or argument value), inside
 * a `Gateway.call` span with the attributes `tool.name`, `tool.outcome` and `tool.code` (nothing
 * else). That span is a child of the span that was current where the calling credential was
 * minted (`register` or `credential`): core mints each process's credential inside its run's
 * span. A request with `Expect: 100-continue` is answered `100 Continue` only after its shape,
 * its credential and its declared size passed; a refused credential gets 401 with
 * `WWW-Authenticate: Bearer error="invalid_token"`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (options?: Options) => Effect.Effect<Gateway["Type"], never, Scope.Scope> = internal.make

/**
 * The gateway as a scoped Layer (see `make`).
 *
 * @example
 * ```ts
 * import * as NodeContext from "@effect/platform-node/NodeContext"
 * import { Gateway } from "@tether/gateway"
 * import { Layer } from "effect"
 *
 * // One gateway per host process serves the tools of every agent made in its context.
 * const AgentContext = Layer.merge(Gateway.layer({ maxConcurrentCalls: 16 }), NodeContext.layer)
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options?: Options): Layer.Layer<Gateway> => Layer.scoped(Gateway, make(options))

/**
 * The gateway as a scoped Layer whose limits come from `Config` (e.g. the environment); an
 * omitted limit keeps its SECURITY.md default. Fails with the `ConfigError` when a value is
 * missing or invalid.
 *
 * @example
 * ```ts
 * import { Gateway } from "@tether/gateway"
 * import { Config } from "effect"
 *
 * const GatewayLive = Gateway.layerConfig({
 *   maxConcurrentCalls: Config.integer("TETHER_MAX_CONCURRENT_CALLS").pipe(Config.withDefault(32)),
 *   handlerDeadline: Config.duration("TETHER_HANDLER_DEADLINE").pipe(Config.withDefault("2 minutes"))
 * })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (options: Config.Config.Wrap<Options>): Layer.Layer<Gateway, ConfigError.ConfigError> =>
  Layer.unwrapEffect(Effect.map(Config.unwrap(options), layer))
