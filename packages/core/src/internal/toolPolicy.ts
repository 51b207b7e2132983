/** @internal */
import type * as ToolPolicy from "../ToolPolicy.js"

/**
 * `tools ∩ allow \ deny`, sorted. Names the definition does not have are ignored: a policy
 * can only narrow the definition, never widen it.
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
