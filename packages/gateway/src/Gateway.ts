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
import type * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"

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
  readonly maxBodyBytes?: number
  readonly maxHeaderBytes?: number
  readonly maxConcurrentCalls?: number
  readonly handlerDeadline?: Duration.DurationInput
  readonly maxOutputBytes?: number
  readonly headersTimeout?: Duration.DurationInput
  readonly requestTimeout?: Duration.DurationInput
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Gateway extends Context.Tag("@tether/gateway/Gateway")<Gateway, {
  /** Registers an executor; the listener starts lazily on the first registration. */
  readonly register: (executor: Catalog.Executor) => Effect.Effect<Registration, GatewayError, Scope.Scope>
}>() {}
