/** @internal */
import type * as ToolPolicy from "../ToolPolicy.js"

/**
 * The names a policy mentions that the definition does not have, sorted. A turn with any is
 * refused (`InvalidTurn`): a misspelled `deny` must never silently leave a tool allowed.
 *
 * @internal
 */
export const unknownNames = (
  tools: ReadonlyArray<string>,
  policy: ToolPolicy.ToolPolicy
): ReadonlyArray<string> => {
  const known = new Set(tools)
  return [...new Set([...(policy.allow ?? []), ...(policy.deny ?? [])])].filter((name) => !known.has(name)).sort()
}

/**
 * `tools ∩ allow \ deny`, sorted.
 *
 * @internal
 */
export const effective = (
  tools: ReadonlyArray<string>,
  policy: ToolPolicy.ToolPolicy | undefined
): ReadonlyArray<string> => {
  if (policy === undefined) return [...tools].sort()
  const allow = policy.allow === undefined ? undefined : new Set(policy.allow)
  const deny = new Set(policy.deny ?? [])
  return tools.filter((name) => (allow === undefined || allow.has(name)) && !deny.has(name)).sort()
}
