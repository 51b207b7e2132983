/**
 * External MCP sources: servers the agent's provider CLI connects to beside the hosted-tools
 * server, declared in the agent's definition and written into each driver's native MCP
 * configuration.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import type * as Driver from "./Driver.js"
// The internal module imports this one back (for `McpSourceError`): nothing here reads it while
// the modules are being evaluated, only when called.
import * as internal from "./internal/mcp.js"

/**
 * An external MCP source: the `McpServer` drivers render, plus the tool names it is known to
 * expose (optional; when given they enter the agent's name-keyed tool registry, so a clash
 * with a direct tool or another source fails construction naming both).
 *
 * @since 0.1.0
 * @category models
 */
export type Source = Driver.McpServer & { readonly tools?: ReadonlyArray<string> }

/**
 * Options shared by every constructor.
 *
 * @since 0.1.0
 * @category models
 */
export interface SourceOptions {
  /** The tool names the source is known to expose (see `Source`). */
  readonly tools?: ReadonlyArray<string> | undefined
}

/**
 * Options of the HTTP transports.
 *
 * @since 0.1.0
 * @category models
 */
export interface HttpOptions extends SourceOptions {
  /** Literal headers written into the provider's MCP configuration (never put a secret here). */
  readonly headers?: { readonly [name: string]: string } | undefined
  /**
   * Name of a host environment variable whose value the CLI sends as
   * `Authorization: Bearer <value>`. The variable is passed to the provider process; its
   * value never appears in a configuration file.
   */
  readonly bearerTokenEnv?: string | undefined
}

/**
 * An external source is invalid. Raised by `Agent.make` (wrapped in an `AgentConfigError`)
 * before any provider process starts.
 *
 * - `InvalidKey`: the key is not 1-64 letters, digits, `_` or `-`;
 * - `ReservedKey`: the key is the hosted tools' key;
 * - `DuplicateKey`: two sources share a key (compared case-insensitively), naming both;
 * - `ReservedVariable`: an environment name, `bearerTokenEnv` or a `${VAR}` reference uses the
 *   reserved `TETHER_` prefix (the hosted token's variable and the process marker live there);
 * - `InvalidVariable`: `bearerTokenEnv` or an environment name is not a valid variable name;
 * - `InvalidCommand`, `InvalidUrl`, `InvalidHeader`: the transport's fields are malformed
 *   (an URL with credentials, an `Authorization` header beside `bearerTokenEnv`...).
 *
 * @since 0.1.0
 * @category errors
 */
export class McpSourceError
  extends Schema.TaggedError<McpSourceError>("@tether/core/McpSourceError")("McpSourceError", {
    key: Schema.String,
    reason: Schema.Literal(
      "InvalidKey",
      "ReservedKey",
      "DuplicateKey",
      "ReservedVariable",
      "InvalidVariable",
      "InvalidCommand",
      "InvalidUrl",
      "InvalidHeader"
    ),
    detail: Schema.String
  })
{
  override get message(): string {
    return `MCP source ${JSON.stringify(this.key)}: ${this.reason}: ${this.detail}`
  }
}

/**
 * A source the CLI starts as a child process speaking MCP over stdio. `env` is the complete
 * set of variables the definition adds for it (literal values).
 *
 * @since 0.1.0
 * @category constructors
 */
export const stdio = (
  key: string,
  command: string,
  args?: ReadonlyArray<string>,
  env?: { readonly [name: string]: string },
  options?: SourceOptions
): Source => internal.stdio(key, command, args, env, options)

/**
 * A source reached over MCP Streamable HTTP.
 *
 * @since 0.1.0
 * @category constructors
 */
export const http = (key: string, url: string, options?: HttpOptions): Source => internal.http(key, url, options)

/**
 * A source reached over the legacy HTTP+SSE transport.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sse = (key: string, url: string, options?: HttpOptions): Source => internal.sse(key, url, options)
