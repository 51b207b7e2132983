/**
 * Approvals: the host decides each built-in tool call of the CLI. The agent's `approvals.handler`
 * answers every request (here: a shell command that only touches files inside the workspace is
 * allowed, anything else denied, and the model is told why); without a handler the run emits
 * `ApprovalRequested` and the host answers with `agent.approve(id, decision)`. A turn's
 * `builtinTools` narrows what the CLI offers at all. Claude Code only (one-shot approver tool).
 *
 *   node --conditions=@tether/source --import tsx examples/approvals.ts
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Agent, Approval } from "@tether/core"
import { Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Model from "./support/model.js"
import * as View from "./support/view.js"

// The scripted model runs the command after "RUN:" with Bash, then reports what it got back.
const script: Model.Model = ({ prompt, results }) => {
  if (results.length > 0) return Model.answer(`The tool said: ${results[0]!.text}`)
  const command = /RUN: (.*)$/m.exec(prompt)?.[1]
  return command === undefined ? Model.answer("Nothing to run.") : Model.call("Bash", { command })
}

const program = Effect.gen(function*() {
  const sandbox = yield* Harness.sandbox
  // `touch` of one path that resolves under the workspace (not `..` out of it, not a sibling
  // whose name merely starts with the workspace's).
  const inside = (command: string) => {
    const target = /^touch ([\w./-]+)$/.exec(command)?.[1]
    return target !== undefined && Path.resolve(sandbox.workspace, target).startsWith(sandbox.workspace + Path.sep)
  }
  // #region approvals
  const agent = yield* Agent.make({
    driver: yield* Model.offline("claude", script),
    definition: { instructions: "You run commands.", tools: Toolkit.empty },
    workspace: sandbox.workspace,
    profile: sandbox.selection,
    approvals: {
      handler: (request) =>
        Effect.succeed(
          request.kind === "command" && request.command !== undefined && inside(request.command)
            ? Approval.allow
            : Approval.deny("Only `touch` inside the workspace may run here.")
        ),
      deadline: "30 seconds" // unanswered by then: `fallback` (deny by default)
    }
  })
  const allowed = yield* agent.run(`RUN: touch ${sandbox.workspace}/notes.txt`)
  const denied = yield* agent.run("RUN: rm -rf /tmp/anything")
  // This turn's CLI is not offered Bash at all: nothing is asked.
  const noShell = yield* agent.run({ input: "RUN: touch x", builtinTools: { deny: ["Bash"] } })
  // #endregion approvals

  const asked = (result: typeof allowed) =>
    result.transcript.flatMap((entry) => entry._tag === "Approval" ? [entry] : [])
  for (const [label, result] of [["allowed", allowed], ["denied", denied], ["no shell", noShell]] as const) {
    const approval = asked(result)[0]
    View.write(
      `${View.bold(label.padEnd(9))} ${
        approval === undefined
          ? "nothing asked"
          : `${approval.request.toolName} ${approval.request.command}: ${approval.decision?._tag} by ${approval.by}`
      } → ${result.text}\n`
    )
  }
  const check = View.checks()
  check.claim("the allowed command ran", Fs.existsSync(`${sandbox.workspace}/notes.txt`))
  check.claim(
    "the denied command did not run; the model got the deny message",
    asked(denied)[0]?.decision?._tag === "Deny" && denied.text.includes("Only `touch` inside the workspace")
  )
  check.claim(
    "each answer came from the handler",
    [...asked(allowed), ...asked(denied)].every((a) => a.by === "handler")
  )
  check.claim("a denied built-in is not even asked about", asked(noShell).length === 0)
  check.claim(
    "a `touch` out of the workspace is not inside it",
    [`${sandbox.workspace}/../x`, `${sandbox.workspace}-x`, "/tmp/x"].every((path) => !inside(`touch ${path}`))
  )
  check.conclude("approvals: the host decided every built-in tool call")
}).pipe(
  Effect.scoped,
  Effect.provide(Harness.layer),
  Logger.withMinimumLogLevel(LogLevel.Warning)
)

// runMain: SIGINT / SIGTERM interrupt the program, so every scope closes (the agent's ordered
// close: processes stopped, clone removed, token revoked) before the process exits.
NodeRuntime.runMain(program)
