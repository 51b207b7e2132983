/**
 * Per-turn cost of the Claude driver with the real CLI (node_modules/.bin/claude), offline
 * against the scripted Anthropic server. Baseline: the bare CLI spawned by hand with the
 * driver's own invocation (no gateway tools). Compared: `agent.run` of a plain turn, and of a
 * turn with one host tool call through the gateway. Prints medians and ratios to the baseline.
 *
 *   node --import tsx --import ./bench/compiled.mjs bench/claude.ts [turns=3]
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Agent } from "@tether/core"
import { Claude } from "@tether/drivers"
import { AnthropicServer, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { rawInvocation, timeTurn } from "./turn.js"

const turns = Number(process.argv[2] ?? 3)

const Lookup = Tool.make("lookup", {
  description: "Look up a key.",
  input: { key: Schema.String },
  output: Schema.Struct({ value: Schema.String }),
  revision: "lookup/v1"
})
const Tools = Toolkit.make(Lookup)
const ToolsLive = Tools.toLayer({ lookup: ({ key }) => Effect.succeed({ value: `value of ${key}` }) })

const median = (xs: ReadonlyArray<number>) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const start = performance.now()
    yield* effect
    return performance.now() - start
  })

/** The bare CLI: a plain turn with the driver's argv and env in a fresh profile, no MCP server declared. */
const bareTurn = (url: string) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "bench-claude-"))
      for (const d of ["profile", "home", "tmp", "work"]) Fs.mkdirSync(Path.join(root, d))
      Fs.writeFileSync(Path.join(root, "profile", "mcp.json"), "{\"mcpServers\":{}}")
      return root
    }),
    (root) => Effect.promise(() => timeTurn(rawInvocation(url, root))),
    (root) => Effect.sync(() => Fs.rmSync(root, { recursive: true, force: true }))
  )

const program = Effect.gen(function*() {
  const server = yield* AnthropicServer.make({
    respond: AnthropicServer.roundTrip(
      (request) =>
        AnthropicServer.transcript(request).at(-1)?.[1].includes("[tool]")
          ? AnthropicServer.callTool("lookup", { key: "k" })
          : AnthropicServer.reply("plain answer"),
      () => AnthropicServer.reply("tool answer")
    )
  })
  const sandbox = yield* Harness.sandbox
  const agent = yield* Agent.make({
    driver: Claude.driver({
      env: {
        ANTHROPIC_BASE_URL: server.url,
        ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
        CLAUDE_CODE_MAX_RETRIES: "0"
      }
    }),
    definition: { instructions: "", skills: [], tools: Tools },
    workspace: sandbox.workspace,
    profile: sandbox.selection
  })
  yield* bareTurn(server.url) // warm the binary's page cache
  const bare: Array<number> = []
  const plain: Array<number> = []
  const tool: Array<number> = []
  for (let i = 0; i < turns; i++) {
    bare.push(yield* timed(bareTurn(server.url)))
    plain.push(yield* timed(agent.run("hello")))
    tool.push(yield* timed(agent.run("call it [tool]")))
  }
  const base = median(bare)
  const line = (name: string, xs: ReadonlyArray<number>) =>
    console.log(
      `${name.padEnd(34)} median ${median(xs).toFixed(0).padStart(5)} ms  ratio ${(median(xs) / base).toFixed(2)}`
    )
  console.log(`Claude Code 2.1.197, ${turns} turns each, ${Os.cpus().length} cores`)
  line("bare CLI turn (baseline)", bare)
  line("agent.run plain turn", plain)
  line("agent.run turn with one host tool", tool)
}).pipe(Effect.scoped, Effect.provide([ToolsLive, Harness.layer, NodeContext.layer]))

Effect.runPromise(program).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
