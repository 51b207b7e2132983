/** @internal */
import { sha256 } from "./hash.js"

/**
 * JSON with object keys sorted at every depth and `undefined` members left out, so equal
 * values always render to equal text whatever their key order.
 *
 * @internal
 */
export const canonicalJson = (value: unknown): string => {
  if (value === null || typeof value !== "object") {
    return value === undefined ? "null" : JSON.stringify(value)
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  const entries = Object.keys(value)
    .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
    .sort()
    .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`)
  return `{${entries.join(",")}}`
}

/**
 * Everything that decides whether a provider session can be resumed by this agent
 * (DESIGN.md §10). Ephemeral details (loopback URL and port, token, variable name, random
 * clone directory, linked auth) are deliberately absent.
 *
 * @internal
 */
export interface CompatibilityInput {
  readonly driver: string
  /** The driver's session-relevant configuration (never secrets). */
  readonly driverConfig: unknown
  readonly model: string | undefined
  /** The resolved (real) workspace path. */
  readonly workspace: string
  readonly instructions: string
  /** The definition's skills as frozen data (names, descriptions, content digests). */
  readonly skills: ReadonlyArray<unknown>
  readonly mcp: ReadonlyArray<unknown>
  readonly catalogFingerprint: string
  readonly policy: unknown
  readonly profileIdentity: string
  readonly profileFingerprint: string
  readonly identity: { readonly id: string; readonly tenant: string | undefined } | undefined
}

/**
 * SHA-256 (hex) over the domain-separated canonical JSON of the input.
 *
 * @internal
 */
export const compatibilityFingerprint = (input: CompatibilityInput): string =>
  sha256("tether/compatibility/v1\u0000", canonicalJson(input))

/** The names under which each part of the input is digested (what a host reads in a restart). */
const componentNames: { readonly [K in keyof CompatibilityInput]: string } = {
  driver: "driver",
  driverConfig: "driverConfig",
  model: "model",
  workspace: "workspace",
  instructions: "instructions",
  skills: "skills",
  mcp: "mcp",
  catalogFingerprint: "tools",
  policy: "policy",
  profileIdentity: "profile",
  profileFingerprint: "profileSettings",
  identity: "identity"
}

/**
 * One digest per part of the fingerprint (name → SHA-256 hex prefix), stored beside it in every
 * checkpoint so that an incompatible record names the parts that changed, never their values.
 *
 * @internal
 */
export const compatibilityComponents = (input: CompatibilityInput): { readonly [name: string]: string } => {
  const out: Record<string, string> = {}
  for (const key of Object.keys(componentNames) as Array<keyof CompatibilityInput>) {
    const name = componentNames[key]
    out[name] = sha256(`tether/compatibility-component/v1\u0000${name}\u0000`, canonicalJson(input[key])).slice(0, 32)
  }
  return out
}

/**
 * The names of the components whose digests differ between a record and the agent, sorted. A
 * record without digests names only `fingerprint`.
 *
 * @internal
 */
export const differingComponents = (
  recorded: { readonly [name: string]: string } | undefined,
  current: { readonly [name: string]: string }
): ReadonlyArray<string> => {
  if (recorded === undefined) return ["fingerprint"]
  const names = new Set([...Object.keys(recorded), ...Object.keys(current)])
  return Array.from(names).filter((name) => recorded[name] !== current[name]).sort()
}
