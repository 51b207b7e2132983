/**
 * The process-local, authenticated loopback MCP Streamable HTTP gateway that serves each
 * agent's host tools to its provider CLI.
 *
 * @since 0.1.0
 */
import type * as Catalog from "@tether/tool/Catalog"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as internal from "./internal/gateway.js"

/**
 * The gateway could not serve a registration (the listener failed to start).
 *
 * @since 0.1.0
 * @category errors
 */
export class GatewayError extends Schema.TaggedError<GatewayError>()("GatewayError", {
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
   * A narrower credential for one turn: a fresh token that lists and calls only `tools`
   * (the intersection with the catalog). Revoked when its scope closes. The registration's
   * own token keeps the full catalog.
   */
  readonly restrict: (tools: ReadonlyArray<string>) => Effect.Effect<Credential, never, Scope.Scope>
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
}

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
  /** Tool calls running at once across all registrations; beyond it 503 with `Retry-After`. Default 32. */
  readonly maxConcurrentCalls?: number
  /** A call still running at this deadline is answered `deadline_exceeded` and interrupted. Default 2 minutes. */
  readonly handlerDeadline?: Duration.DurationInput
  /** A success larger than this (JSON bytes) is answered `invalid_output`. Default 4 MiB. */
  readonly maxOutputBytes?: number
  /** Time allowed to receive the header block (408 after it). Default 10 seconds. */
  readonly headersTimeout?: Duration.DurationInput
  /** Time allowed to receive the whole request, body included (408 after it). Default 30 seconds. */
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
}>() {}

/**
 * Builds a gateway in the current scope. The listener (numeric `127.0.0.1`, port 0) starts on
 * the first registration and closes gracefully when the last registration closes or when
 * this scope closes: in-flight calls are answered with a JSON-RPC error, then connections are
 * refused and no handle keeps the event loop alive.
 *
 * Each call is logged through the Effect logger as one `tool call` line annotated with
 * `tool`, `outcome`, `code` and `durationMs` (never a token, header or argument value), inside
 * a `Gateway.call` span with the attributes `tool.name`, `tool.outcome` and `tool.code` (nothing
 * else). That span is a child of the span that was current where the calling token was minted
 * (`register` or `restrict`): core mints each run's credential inside the run's span.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (options?: Options) => Effect.Effect<Gateway["Type"], never, Scope.Scope> = internal.make

/**
 * The gateway as a scoped Layer (see `make`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options?: Options): Layer.Layer<Gateway> => Layer.scoped(Gateway, make(options))
