/** @internal */
import type * as Driver from "@tether/core/Driver"
import * as Duration from "effect/Duration"
import * as Redacted from "effect/Redacted"

/**
 * A duration as the whole milliseconds a CLI's timeout variable takes (at least 1: the CLIs read
 * 0 as "unset"), or `undefined` for an infinite one.
 *
 * @internal
 */
export const timeoutMillis = (duration: Duration.DurationInput): string | undefined => {
  const millis = Duration.toMillis(Duration.decode(duration))
  return Number.isFinite(millis) ? String(Math.max(1, Math.ceil(millis))) : undefined
}

/** Host variables every provider process gets (when the host has them). @internal */
export const baseAllowList: ReadonlyArray<string> = ["PATH", "LANG", "LC_ALL", "TZ"]

/** What a driver's config says about the environment. @internal */
export interface EnvConfig {
  readonly env?: { readonly [name: string]: string | Redacted.Redacted<string> }
  readonly passEnv?: ReadonlyArray<string>
}

const variableReference = /\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}/g

/**
 * The variables MCP sources reference (`bearerTokenEnv`, `${VAR}` / `${env:VAR}` in commands,
 * arguments, env values, URLs and headers): CLIs expand them from their own environment.
 *
 * @internal
 */
export const referencedVariables = (servers: ReadonlyArray<Driver.McpServer>): ReadonlyArray<string> =>
  servers.flatMap((server) => {
    const texts = server._tag === "stdio"
      ? [server.command, ...server.args, ...Object.values(server.env)]
      : [server.url, ...Object.values(server.headers)]
    const named = server._tag !== "stdio" && server.bearerTokenEnv !== undefined ? [server.bearerTokenEnv] : []
    return [...named, ...texts.flatMap((text) => Array.from(text.matchAll(variableReference), (m) => m[1]!))]
  })

/**
 * A provider process's environment, built from nothing: the allow-listed host variables, the
 * variables the MCP sources reference, the configured values (secrets unwrapped only here, at
 * the syscall boundary), then the provider's own variables, which win. The hosted token variable
 * is never taken from anywhere: core sets it.
 *
 * @internal
 */
export const buildEnv = (
  config: EnvConfig,
  request: Driver.InvocationRequest,
  provider: { readonly [name: string]: string },
  remove: ReadonlyArray<string> = []
): { [name: string]: string } => {
  const env: { [name: string]: string } = {}
  for (const name of [...baseAllowList, ...(config.passEnv ?? []), ...referencedVariables(request.mcp)]) {
    const value = request.hostEnv[name]
    if (value !== undefined) env[name] = value
  }
  for (const [name, value] of Object.entries(config.env ?? {})) {
    env[name] = Redacted.isRedacted(value) ? Redacted.value(value) : value
  }
  Object.assign(env, provider)
  for (const name of remove) delete env[name]
  delete env[request.hosted.tokenVariable]
  if (request.approvals !== undefined) delete env[request.approvals.tokenVariable]
  return env
}
