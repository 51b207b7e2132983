/**
 * A hosted tool whose catalog name holds a `.` (Claude Code and CodeBuddy Code name it
 * `mcp__tether__issue_lookup`), the calls its handler saw, and a second tool the CLIs would name
 * alike.
 */
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

const lookup = (name: string, description: string) =>
  Tool.make(name, {
    description,
    input: { key: Schema.String },
    output: Schema.Struct({ title: Schema.String }),
    revision: `${name}/v1`
  })

export const DottedLookup = lookup("issue.lookup", "Look up one issue by key.")
export const Dotted = Toolkit.make(DottedLookup)
/** The keys `issue.lookup` was called with (cleared by each test that reads it). */
export const dottedCalls: Array<string> = []
export const DottedLive = Dotted.toLayer({
  "issue.lookup": ({ key }) => Effect.sync(() => (dottedCalls.push(key), { title: `Title of ${key}` }))
})

/** `issue.lookup` and `issue_lookup`: one name to Claude Code. */
export const Clashing = Toolkit.make(DottedLookup, lookup("issue_lookup", "Look up one issue by key, again."))
export const ClashingLive = Clashing.toLayer({
  "issue.lookup": ({ key }) => Effect.succeed({ title: key }),
  issue_lookup: ({ key }) => Effect.succeed({ title: key })
})
