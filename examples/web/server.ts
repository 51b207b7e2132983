/**
 * A browser chats with an agent: one static page (`examples/web/index.html`: no build step, no
 * framework) served beside `AgentHttp.router`, which streams each turn as Server-Sent Events.
 * The page shows the text as it streams, each tool call with its input and its output or
 * rejection, and errors; a message typed while a turn runs steers it.
 *
 *   npm run demo -- --web                  the real Claude Code CLI, offline (scripted model)
 *   node --conditions=@tether/source --import tsx examples/web/server.ts [--port 8080] [--driver codex|gemini] [--live]
 *
 * Authentication is the host's: here a random token per start, handed to the page in the URL's
 * fragment (never sent to the server as part of the URL) and sent back as a bearer token. The
 * token lets the page use threads whose key starts with `web-`. Ctrl-C closes the router
 * (canceling running turns), the server and the agent, then checks that nothing is left.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as HttpRouter from "@effect/platform/HttpRouter"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Agent } from "@tether/core"
import { AgentHttp } from "@tether/http"
import { Profile } from "@tether/profile"
import { Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Schema from "effect/Schema"
import { randomBytes, timingSafeEqual } from "node:crypto"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Path from "node:path"
import * as Model from "../support/model.js"
import * as View from "../support/view.js"

// --- The host's tools: an issue tracker the agent may read but not change -------------------

const issues: { readonly [key: string]: { readonly title: string; readonly state: "open" | "closed" } } = {
  "ISSUE-42": { title: "Login fails on Safari", state: "open" },
  "ISSUE-7": { title: "Dark mode flickers", state: "closed" }
}

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String, state: Schema.Literal("open", "closed") }),
  revision: "lookup_issue/v1",
  annotations: { readOnly: true, idempotent: true }
})
const CloseIssue = Tool.make("close_issue", {
  description: "Close an issue that has been fixed.",
  input: { key: Schema.String },
  output: Schema.Struct({ closed: Schema.Boolean }),
  revision: "close_issue/v1"
})
const IssueTools = Toolkit.make(LookupIssue, CloseIssue)
const IssueToolsLive = IssueTools.toLayer({
  lookup_issue: ({ key }) => {
    const issue = issues[key]
    return issue === undefined ? Tool.reject("not_found", `There is no issue ${key}.`) : Effect.succeed(issue)
  },
  close_issue: ({ key }) =>
    Tool.reject("permission_denied", `Closing issues needs a maintainer: ask one to close ${key}.`)
})

// --- The offline model: looks the issue up, tries to close an open one, then answers --------

const script: Model.Model = ({ prompt, results }) => {
  const key = /ISSUE-\d+/.exec(prompt)?.[0] ?? "ISSUE-42"
  if (results.length === 0) return Model.call("lookup_issue", { key }, { text: `Let me look ${key} up.` })
  const found = /"title"\s*:\s*"([^"]*)"[^}]*"state"\s*:\s*"(\w+)"/.exec(results[0]!.text)
  if (found === null) return Model.answer(`I could not find ${key}; check the key.`)
  if (found[2] === "open" && results.length === 1) {
    return Model.call("close_issue", { key }, { text: "It is still open; let me try to close it." })
  }
  const refused = results.length > 1 && /permission_denied/.test(results[1]!.text)
  return Model.answer(
    `${key} ("${found[1]}") is ${found[2]}.` +
      (refused ? " I could not close it (permission_denied): a maintainer has to." : "")
  )
}

// --- The server -------------------------------------------------------------------------------

const argument = (name: string): string | undefined => {
  const at = process.argv.indexOf(name)
  return at === -1 ? undefined : process.argv[at + 1]
}

const page = Fs.readFileSync(Path.join(import.meta.dirname, "index.html"), "utf8")
const pageHeaders = {
  "content-security-policy":
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff"
}

const left = { marker: "", clones: "" }

const main = Effect.gen(function*() {
  const live = process.argv.includes("--live")
  const driverName = Model.driverArg()
  const sandbox = yield* Harness.sandbox
  const cli = live ? Model.live(driverName) : { driver: yield* Model.offline(driverName, script), binary: "" }
  const agent = yield* Agent.make({
    driver: cli.driver,
    definition: { instructions: "You triage issues with the issue tools.", skills: [], tools: IssueTools },
    workspace: sandbox.workspace,
    profile: live ? Profile.cloneNative(sandbox.root) : sandbox.selection,
    // Served streams lose nothing: a slow browser slows the CLI down instead of losing text deltas.
    events: { blocking: true }
  })
  left.marker = agent.marker
  left.clones = sandbox.root

  // A random token per start; compared in constant time.
  const token = randomBytes(18).toString("base64url")
  const expected = Buffer.from(`Bearer ${token}`)
  const authorize = (request: HttpServerRequest.HttpServerRequest) => {
    const presented = Buffer.from(request.headers["authorization"] ?? "")
    return presented.length === expected.length && timingSafeEqual(presented, expected)
      ? Effect.succeed({ principal: "browser", threads: (key: string) => key.startsWith("web-") })
      : Effect.fail(new AgentHttp.Unauthorized())
  }

  // The server first, the router inside its lifetime: closing cancels running turns before the
  // server waits for its connections.
  const port = Number(argument("--port") ?? 0)
  const server = yield* NodeHttpServer.make(() => Http.createServer(), { host: "127.0.0.1", port })
  const api = yield* AgentHttp.router({ agent, authorize })
  yield* server.serve(HttpRouter.empty.pipe(
    HttpRouter.get(
      "/",
      Effect.succeed(HttpServerResponse.text(page, { contentType: "text/html; charset=utf-8", headers: pageHeaders }))
    ),
    HttpRouter.mount("/api", api)
  ))
  const address = server.address
  const url = `http://127.0.0.1:${address._tag === "TcpAddress" ? address.port : port}/#token=${token}`
  View.write(
    live
      ? View.yellow(`LIVE: ${cli.binary} with your own login, against the real ${driverName} model.\n`)
      : View.dim(
        `OFFLINE: the real ${driverName} CLI from node_modules; the model is a scripted server on 127.0.0.1.\n`
      )
  )
  View.write(`${View.bold("open")} ${url}\n${View.dim("Ctrl-C stops the server.")}\n`)
  return yield* Effect.never
}).pipe(
  Effect.scoped,
  // After the scope: the router, the server and the agent are closed. Nothing may be left.
  Effect.onExit(() =>
    Effect.gen(function*() {
      if (left.marker === "") return
      const processes = yield* Harness.markedProcesses(left.marker)
      const clones = yield* Harness.entries(left.clones)
      const clean = processes.length === 0 && clones.length === 0
      View.write(
        `${View.bold("closed")} · processes with the agent's marker: ${
          processes.length === 0 ? "none" : processes.join(", ")
        } · clones left: ${clones.length === 0 ? "none" : clones.join(", ")}\n` +
          (clean ? View.green("✓ nothing left behind\n") : View.red("✗ leftovers found\n"))
      )
      if (!clean) process.exitCode = 1
    })
  ),
  Effect.provide([IssueToolsLive, Harness.layer]),
  Logger.withMinimumLogLevel(LogLevel.Warning)
)

NodeRuntime.runMain(main)
