/**
 * Quick start: an agent with two host tools (one of which rejects) drives a real coding-agent
 * CLI; its run streams to the terminal; closing it leaves no process and no clone behind.
 *
 *   npm run demo                       Claude Code from node_modules, offline (scripted model)
 *   npm run demo -- --driver codex     Codex, offline          (--driver gemini: Gemini CLI)
 *   npm run demo -- --live             your own installed, logged-in CLI and its real model
 *   npm run demo -- --web              the same kind of agent behind a web page (examples/web/)
 *
 * Offline, the CLI is the real one pinned in node_modules; only the model is scripted: a
 * loopback server speaking the provider's API (`@tether/testing`). The CLI discovers the host
 * tools over MCP from Tether's gateway, calls them, and sends their results back to the model.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as FileSystem from "@effect/platform/FileSystem"
import { Agent } from "@tether/core"
import { Gateway } from "@tether/gateway"
import { Profile } from "@tether/profile"
import { Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Path from "node:path"
import * as Model from "./support/model.js"
import * as View from "./support/view.js"

// --- The host: an issue tracker service, and two tools over it ---------------------------

interface Issue {
  readonly title: string
  readonly state: "open" | "closed"
  readonly fixedIn?: string
}

class Issues extends Context.Tag("example/Issues")<Issues, {
  readonly find: (key: string) => Effect.Effect<Issue | undefined>
  readonly canClose: Effect.Effect<boolean>
}>() {}

const IssuesLive = Layer.succeed(Issues, {
  find: (key) =>
    Effect.succeed(
      key === "ISSUE-42" ? { title: "Login fails on Safari", state: "open", fixedIn: "v2.3.1" } : undefined
    ),
  canClose: Effect.succeed(false) // this host's agents may read issues, not close them
})

// #region readme-tools
const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({
    title: Schema.String,
    state: Schema.Literal("open", "closed"),
    fixedIn: Schema.optional(Schema.String)
  }),
  revision: "lookup_issue/v1",
  annotations: { readOnly: true, idempotent: true }
})

const CloseIssue = Tool.make("close_issue", {
  description: "Close an issue that has been fixed.",
  input: { key: Schema.String },
  output: Schema.Struct({ closed: Schema.Boolean }),
  revision: "close_issue/v1",
  annotations: { destructive: false, idempotent: true }
})

const IssueTools = Toolkit.make(LookupIssue, CloseIssue)

// Handlers are a Layer: they can depend on the host's services. `Tool.reject` is the only
// failure the model sees (code + message); any other failure reaches it as a generic error.
const IssueToolsLive = IssueTools.toLayer(Effect.gen(function*() {
  const issues = yield* Issues
  return {
    lookup_issue: ({ key }) =>
      Effect.flatMap(issues.find(key), (issue) =>
        issue === undefined
          ? Tool.reject("not_found", `There is no issue ${key}; check the key.`)
          : Effect.succeed(issue)),
    close_issue: ({ key }) =>
      Effect.flatMap(issues.canClose, (allowed) =>
        allowed
          ? Effect.succeed({ closed: true })
          : Tool.reject("permission_denied", `Closing issues needs a maintainer: ask one to close ${key}.`))
  }
})).pipe(Layer.provide(IssuesLive))
// #endregion readme-tools

// --- The offline model's script (the same for every provider) -----------------------------

const script: Model.Model = ({ results }) => {
  if (results.length === 0) return Model.call("lookup_issue", { key: "ISSUE-42" }, { text: "Let me look it up." })
  if (results.length === 1) {
    return Model.call("close_issue", { key: "ISSUE-42" }, { text: "It is fixed; closing it." })
  }
  const title = /"title"\s*:\s*"([^"]*)"/.exec(results[0]!.text)?.[1] ?? "?"
  const code = /permission_denied|not_found/.exec(results[1]!.text)?.[0] ?? "an error"
  return Model.answer(
    `ISSUE-42 ("${title}") is still open although it was fixed in v2.3.1; ` +
      `I could not close it (${code}): a maintainer has to.`
  )
}

// --- The run --------------------------------------------------------------------------------

const main = Effect.gen(function*() {
  const args = { driver: Model.driverArg(), live: process.argv.includes("--live") }
  const fs = yield* FileSystem.FileSystem
  const base = yield* fs.makeTempDirectoryScoped({ prefix: "tether-quickstart-" })
  const workspace = Path.join(base, "workspace")
  const clones = Path.join(base, "clones")
  yield* fs.makeDirectory(workspace)

  // Offline: the real CLI from node_modules against the scripted model, in a clone of an empty
  // profile. Live: your own CLI and login (your native profile, cloned for this agent).
  const source = Path.join(base, "profile")
  yield* fs.makeDirectory(source)
  const cli = args.live ? Model.live(args.driver) : { driver: yield* Model.offline(args.driver, script), binary: "" }
  // The CLI's session files are kept in a store beside the clones (here, in this temp directory).
  const sessions = Path.join(base, "sessions")
  const profile = args.live
    ? Profile.cloneNative(clones, { sessions })
    : Profile.cloneFrom(source, clones, { sessions })
  View.write(
    args.live
      ? View.yellow(
        `LIVE: ${cli.binary} with your own login, against the real ${args.driver} model ` +
          "(no base-URL override; this may cost tokens).\n"
      )
      : View.dim(
        `OFFLINE: the real ${args.driver} CLI from node_modules; the model is a scripted server on 127.0.0.1 ` +
          "(--live uses your own CLI and model).\n"
      )
  )

  const prompt = "Is ISSUE-42 still open? If it has been fixed, close it."
  View.write(`${View.bold("› user")} ${prompt}\n`)

  // The agent lives in its own scope: leaving it runs the ordered close (cancel runs, stop
  // processes, remove the clone, revoke the gateway token).
  const { agent, failure } = yield* Effect.scoped(Effect.gen(function*() {
    // #region readme-agent
    const agent = yield* Agent.make({
      driver: cli.driver,
      definition: { instructions: "You triage issues with the issue tools.", skills: [], tools: IssueTools },
      workspace,
      profile
    })
    const view = View.make()
    // A failed run still ends with `RunFinished` (shown by the view), then fails with `RunError`.
    const failure = yield* agent.stream(prompt).pipe(
      Stream.runForEach(view.onEvent),
      Effect.as(undefined),
      Effect.catchTag("RunError", (error) => Effect.succeed(`${error.reason}: ${error.detail}`))
    )
    // #endregion readme-agent
    return { agent, failure }
  }))

  // Proof of cleanup, after close.
  const processes = yield* Harness.markedProcesses(agent.marker)
  const leftClones = yield* Harness.entries(clones)
  const clean = processes.length === 0 && leftClones.length === 0
  View.write(
    `${View.bold("closed")} · processes with the agent's marker: ${
      processes.length === 0 ? "none" : processes.join(", ")
    }` +
      ` · clones left: ${leftClones.length === 0 ? "none" : leftClones.join(", ")}\n` +
      (clean ? View.green("✓ nothing left behind\n") : View.red("✗ leftovers found\n"))
  )
  if (failure !== undefined) View.write(View.red(`the run failed: ${failure}\n`))
  if (!clean || failure !== undefined) process.exitCode = 1
}).pipe(
  Effect.scoped,
  Effect.provide([IssueToolsLive, Gateway.layer(), NodeContext.layer]),
  Logger.withMinimumLogLevel(LogLevel.Warning) // the gateway logs each tool call at Info
)

if (process.argv.includes("--web")) {
  // The web example's server runs when its module loads (it prints the page's URL).
  void import("./web/server.js")
} else {
  // runMain: SIGINT / SIGTERM interrupt the program, so every scope closes (the agent's ordered
  // close: processes stopped, clone removed, token revoked) before the process exits.
  NodeRuntime.runMain(main)
}
