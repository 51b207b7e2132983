/**
 * Tool policy: one turn may use fewer tools than the agent has. A turn's `toolPolicy`
 * (`allow` / `deny`) narrows the effective tools to `definition.tools ∩ policy` for that turn
 * only: the gateway lists and accepts only those (under a narrower credential for the turn),
 * and the driver passes the same allow-list to the CLI. The definition never changes: the next
 * turn without a policy sees every tool again. Here a scripted model even tries to call a tool
 * the turn does not have: the call is refused and the handler never runs.
 *
 *   node --conditions=@tether/source --import tsx examples/tool-policy.ts [--driver claude|codex|gemini]
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Agent } from "@tether/core"
import { Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Schema from "effect/Schema"
import * as Model from "./support/model.js"
import * as View from "./support/view.js"

const issueTool = (name: string, description: string) =>
  Tool.make(name, {
    description,
    input: { key: Schema.String },
    output: Schema.Struct({ key: Schema.String, done: Schema.Boolean }),
    revision: `${name}/v1`
  })
const Tools = Toolkit.make(
  issueTool("lookup_issue", "Look up an issue."),
  issueTool("close_issue", "Close an issue."),
  issueTool("delete_issue", "Delete an issue.")
)
const ran: Array<string> = []
const handler = (name: string) => ({ key }: { readonly key: string }) =>
  Effect.sync(() => {
    ran.push(name)
    return { key, done: true }
  })
const ToolsLive = Tools.toLayer({
  lookup_issue: handler("lookup_issue"),
  close_issue: handler("close_issue"),
  delete_issue: handler("delete_issue")
})

// The scripted model notes which host tools each request offers; on "[misbehave]" it calls
// `delete_issue` whether it is offered or not.
const offered: Array<ReadonlyArray<string>> = []
const refusals: Array<string> = []
const script: Model.Model = ({ prompt, results, offered: tools }) => {
  if (results.length === 0) {
    offered.push(
      tools.flatMap((name) => {
        const bare = /(lookup|close|delete)_issue$/.exec(name)?.[0]
        return bare === undefined ? [] : [bare]
      }).sort()
    )
    return prompt.includes("[misbehave]")
      ? Model.call("delete_issue", { key: "ISSUE-1" })
      : Model.answer("Done.")
  }
  refusals.push(results[0]!.text)
  return Model.answer("That tool is not available to me in this turn.")
}

const program = Effect.gen(function*() {
  const sandbox = yield* Harness.sandbox
  const agent = yield* Agent.make({
    // For Codex, a model name it has no metadata for, so it lists the MCP tools in every request
    // (what this example observes) rather than deferring them behind its `tool_search` tool.
    driver: yield* Model.offline(Model.driverArg(), script, { codexModel: "offline-model" }),
    definition: { instructions: "You manage issues.", skills: [], tools: Tools },
    workspace: sandbox.workspace,
    profile: sandbox.selection
  })
  const readOnly = yield* agent.run({ input: "Triage ISSUE-1.", toolPolicy: { allow: ["lookup_issue"] } })
  const noDelete = yield* agent.run({ input: "Close ISSUE-1.", toolPolicy: { deny: ["delete_issue"] } })
  const everything = yield* agent.run("Anything goes.")
  const misbehaving = yield* agent.run({
    input: "[misbehave] Delete ISSUE-1.",
    toolPolicy: { allow: ["lookup_issue"] }
  })
  for (
    const [label, result] of [["allow lookup", readOnly], ["deny delete", noDelete], ["no policy", everything]] as const
  ) {
    View.write(`${View.bold(label.padEnd(13))} effective tools: ${result.effectiveTools.join(", ")}\n`)
  }
  View.write(
    `${View.bold("misbehaving".padEnd(13))} the model called delete_issue; it got: ${
      refusals[0]?.replace(/\s+/g, " ")
    }\n`
  )

  const check = View.checks()
  check.claim("allow: the CLI was offered lookup_issue alone", offered[0]?.join() === "lookup_issue")
  check.claim(
    "deny: the CLI was offered close_issue and lookup_issue",
    offered[1]?.join() === "close_issue,lookup_issue"
  )
  check.claim("no policy: every tool again", offered[2]?.length === 3 && everything.effectiveTools.length === 3)
  check.claim("Result.effectiveTools records each turn's set", readOnly.effectiveTools.join() === "lookup_issue")
  check.claim("a call outside the turn's tools is refused; no handler ran", refusals.length === 1 && ran.length === 0)
  check.conclude(`tool policy: per-turn tool sets; ${misbehaving.text}`)
}).pipe(
  Effect.scoped,
  Effect.provide([ToolsLive, Harness.layer]),
  Logger.withMinimumLogLevel(LogLevel.Warning)
)

// runMain: SIGINT / SIGTERM interrupt the program, so every scope closes (the agent's ordered
// close: processes stopped, clone removed, token revoked) before the process exits.
NodeRuntime.runMain(program)
