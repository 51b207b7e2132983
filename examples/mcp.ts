/**
 * External MCP sources beside the host's tools: the definition declares an existing MCP server
 * (here a small stdio server from `@tether/testing`; `Mcp.http` / `Mcp.sse` for remote ones) and
 * the driver writes it into the CLI's MCP configuration in the execution clone, next to the
 * hosted tools. Host and MCP tools share one name-keyed registry; `ToolCall` events say which
 * is which (`source: "host" | "mcp"`).
 *
 *   node --conditions=@tether/source --import tsx examples/mcp.ts [--driver claude|codex]
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Agent } from "@tether/core"
import type * as Event from "@tether/core/Event"
import { Harness, McpStdioServer } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Model from "./support/model.js"
import * as View from "./support/view.js"

const Lookup = Tool.make("lookup_order", {
  description: "Look up an order.",
  input: { id: Schema.String },
  output: Schema.Struct({ id: Schema.String, total: Schema.Number }),
  revision: "lookup_order/v1"
})
const Tools = Toolkit.make(Lookup)
const ToolsLive = Tools.toLayer({ lookup_order: ({ id }) => Effect.succeed({ id, total: 42 }) })

const script: Model.Model = ({ results }) => {
  switch (results.length) {
    case 0:
      return Model.call("lookup_order", { id: "A-17" })
    case 1:
      return Model.call(McpStdioServer.toolName, { text: "A-17" }, { server: "stamps" })
    default:
      return Model.answer(`Order A-17 totals 42; stamped ${/STAMP:[^"\s]*/.exec(results[1]!.text)?.[0] ?? "?"}.`)
  }
}

/** Live processes of the stamp server whose working directory lies under `dir`. */
const stampServers = (dir: string) =>
  Effect.sync(() =>
    Fs.readdirSync("/proc").filter((pid) => {
      try {
        return /^[0-9]+$/.test(pid) && Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(McpStdioServer.path) &&
          Fs.readlinkSync(`/proc/${pid}/cwd`).startsWith(dir)
      } catch {
        return false
      }
    })
  )

const program = Effect.gen(function*() {
  const sandbox = yield* Harness.sandbox
  const driver = yield* Model.offline(Model.driverArg(), script)
  const { agent, events } = yield* Effect.scoped(Effect.gen(function*() {
    const agent = yield* Agent.make({
      driver,
      definition: {
        instructions: "You handle orders.",
        skills: [],
        tools: Tools,
        mcp: [McpStdioServer.source("stamps", { suffix: "example" })]
      },
      workspace: sandbox.workspace,
      profile: sandbox.selection
    })
    const view = View.make()
    const events = Chunk.toReadonlyArray(
      yield* agent.stream("Look up order A-17 and stamp it.").pipe(Stream.tap(view.onEvent), Stream.runCollect)
    )
    return { agent, events }
  }))
  const finished = events.at(-1)
  const calls = events.filter((e): e is Event.ToolCall => e._tag === "ToolCall" && e.phase === "end")

  const check = View.checks()
  check.claim(
    "the host tool and the MCP source's tool were both called",
    calls.map((c) => `${c.name}:${c.source}`).join() === `lookup_order:host,${McpStdioServer.toolName}:mcp`
  )
  check.claim(
    "the MCP source's answer reached the model",
    finished?._tag === "RunFinished" && finished.result.text.includes(McpStdioServer.stamp("A-17", "example"))
  )
  check.claim(
    "after close no process of the agent is left, the MCP server included",
    (yield* Harness.markedProcesses(agent.marker)).length === 0 && (yield* stampServers(sandbox.base)).length === 0
  )
  check.conclude("external MCP: a stdio MCP server beside the host's tools")
}).pipe(
  Effect.scoped,
  Effect.provide([ToolsLive, Harness.layer]),
  Logger.withMinimumLogLevel(LogLevel.Warning)
)

// runMain: SIGINT / SIGTERM interrupt the program, so every scope closes (the agent's ordered
// close: processes stopped, clone removed, token revoked) before the process exits.
NodeRuntime.runMain(program)
