/**
 * External MCP sources: constructors (frozen copies) and the per-source checks.
 *
 * @internal
 */
import type * as Mcp from "../Mcp.js"
import { McpSourceError } from "../Mcp.js"

/** @internal */
export const reservedVariablePrefix = "TETHER_"

const keyPattern = /^[A-Za-z0-9_-]{1,64}$/
const variablePattern = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/
const headerNamePattern = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/
// `$VAR`, `${VAR}` (Claude, Gemini, shells) and `${env:VAR}` (Cursor) references.
const reservedReference = /\$\{?\s*(?:env:)?\s*TETHER_/i

/** @internal */
export const isReservedVariable = (name: string): boolean => name.toUpperCase().startsWith(reservedVariablePrefix)

const record = (value: { readonly [name: string]: string } | undefined): { readonly [name: string]: string } =>
  Object.freeze({ ...value })

const toolsOf = (options: Mcp.SourceOptions | undefined) =>
  options?.tools === undefined ? {} : { tools: Object.freeze([...options.tools]) }

/** @internal */
export const stdio = (
  key: string,
  command: string,
  args: ReadonlyArray<string> = [],
  env: { readonly [name: string]: string } = {},
  options?: Mcp.SourceOptions
): Mcp.Source =>
  Object.freeze({
    _tag: "stdio" as const,
    key,
    command,
    args: Object.freeze([...args]),
    env: record(env),
    ...toolsOf(options)
  })

const remote = (_tag: "http" | "sse") => (key: string, url: string, options?: Mcp.HttpOptions): Mcp.Source =>
  Object.freeze({
    _tag,
    key,
    url,
    headers: record(options?.headers),
    bearerTokenEnv: options?.bearerTokenEnv,
    ...toolsOf(options)
  })

/** @internal */
export const http = remote("http")

/** @internal */
export const sse = remote("sse")

const fail = (key: string, reason: McpSourceError["reason"], detail: string) =>
  new McpSourceError({ key: String(key).slice(0, 80), reason, detail })

const isStringRecord = (u: unknown): u is Record<string, string> =>
  u !== null && typeof u === "object" && !Array.isArray(u) &&
  Object.values(u as Record<string, unknown>).every((v) => typeof v === "string")

type Reserved = (name: string) => boolean

const checkVariableName = (
  key: string,
  name: string,
  what: string,
  reserved: Reserved
): McpSourceError | undefined => {
  if (!variablePattern.test(name)) {
    return fail(key, "InvalidVariable", `${what} ${JSON.stringify(name)} is not a valid variable name`)
  }
  if (isReservedVariable(name) || reserved(name)) {
    return fail(key, "ReservedVariable", `${what} ${name} uses the reserved prefix ${reservedVariablePrefix}`)
  }
  return undefined
}

const checkReferences = (key: string, values: ReadonlyArray<string>, what: string): McpSourceError | undefined =>
  values.some((value) => reservedReference.test(value))
    ? fail(key, "ReservedVariable", `${what} references a variable with the reserved prefix ${reservedVariablePrefix}`)
    : undefined

const checkStdio = (
  source: Extract<Mcp.Source, { _tag: "stdio" }>,
  reserved: Reserved
): McpSourceError | undefined => {
  const { key } = source
  if (typeof source.command !== "string" || source.command.trim() === "" || source.command.includes("\0")) {
    return fail(key, "InvalidCommand", "command must be a non-empty string")
  }
  if (!Array.isArray(source.args) || source.args.some((arg) => typeof arg !== "string" || arg.includes("\0"))) {
    return fail(key, "InvalidCommand", "args must be strings")
  }
  if (!isStringRecord(source.env)) return fail(key, "InvalidVariable", "env must map names to strings")
  for (const name of Object.keys(source.env)) {
    const invalid = checkVariableName(key, name, "env variable", reserved)
    if (invalid !== undefined) return invalid
  }
  return checkReferences(key, [source.command, ...source.args, ...Object.values(source.env)], "the command")
}

const checkRemote = (
  source: Extract<Mcp.Source, { _tag: "http" | "sse" }>,
  reserved: Reserved
): McpSourceError | undefined => {
  const { key } = source
  let url: URL
  try {
    url = new URL(source.url)
  } catch {
    return fail(key, "InvalidUrl", "url is not an absolute URL")
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return fail(key, "InvalidUrl", "url must be http(s)")
  if (url.username !== "" || url.password !== "") {
    return fail(key, "InvalidUrl", "url must not carry credentials (use bearerTokenEnv)")
  }
  if (!isStringRecord(source.headers)) return fail(key, "InvalidHeader", "headers must map names to strings")
  for (const [name, value] of Object.entries(source.headers)) {
    if (!headerNamePattern.test(name)) return fail(key, "InvalidHeader", `${JSON.stringify(name)} is not a header name`)
    if (/[\r\n\0]/.test(value)) return fail(key, "InvalidHeader", `the value of ${name} contains a line break`)
    if (source.bearerTokenEnv !== undefined && name.toLowerCase() === "authorization") {
      return fail(key, "InvalidHeader", "an Authorization header cannot be combined with bearerTokenEnv")
    }
  }
  if (source.bearerTokenEnv !== undefined) {
    if (typeof source.bearerTokenEnv !== "string") {
      return fail(key, "InvalidVariable", "bearerTokenEnv must be a string")
    }
    const invalid = checkVariableName(key, source.bearerTokenEnv, "bearerTokenEnv", reserved)
    if (invalid !== undefined) return invalid
  }
  return checkReferences(key, [source.url, ...Object.values(source.headers)], "the url or a header")
}

/**
 * `reserved` adds names to refuse beside the `TETHER_` prefix (e.g. the gateway's token
 * variable rule).
 *
 * @internal
 */
export const validate = (
  source: Mcp.Source,
  hostedKey: string,
  reserved: Reserved = () => false
): McpSourceError | undefined => {
  if (source === null || typeof source !== "object") return fail("?", "InvalidKey", "a source must be an object")
  const { key } = source
  if (typeof key !== "string" || !keyPattern.test(key)) {
    return fail(String(key), "InvalidKey", "a key is 1-64 letters, digits, `_` or `-`")
  }
  if (key.toLowerCase() === hostedKey.toLowerCase()) {
    return fail(key, "ReservedKey", `${JSON.stringify(hostedKey)} is the hosted tools' key`)
  }
  if (key.toLowerCase() === `${hostedKey.toLowerCase()}_approval`) {
    return fail(key, "ReservedKey", `${JSON.stringify(`${hostedKey}_approval`)} is the approver tool's key`)
  }
  // CLIs name a tool `mcp_<key>_<tool>` (Gemini) or `mcp__<key>__<tool>` (Claude Code): under a key
  // that starts with the hosted key and `_`, a source's tools would be named as hosted tools.
  if (key.toLowerCase().startsWith(`${hostedKey.toLowerCase()}_`)) {
    return fail(
      key,
      "ReservedKey",
      `keys starting with ${
        JSON.stringify(`${hostedKey}_`)
      } are reserved: a CLI would name their tools as the hosted tools`
    )
  }
  if (source.tools !== undefined) {
    if (!Array.isArray(source.tools) || source.tools.some((name) => typeof name !== "string" || name === "")) {
      return fail(key, "InvalidKey", "tools must be non-empty tool names")
    }
  }
  switch (source._tag) {
    case "stdio":
      return checkStdio(source, reserved)
    case "http":
    case "sse":
      return checkRemote(source, reserved)
    default:
      return fail(key, "InvalidKey", `unknown transport ${JSON.stringify((source as { _tag: unknown })._tag)}`)
  }
}
