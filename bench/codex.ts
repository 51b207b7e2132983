/**
 * Per-turn cost of the Codex driver with the real CLI (@openai/codex 0.171.0), offline against
 * the scripted Responses server. Baseline: the bare native binary spawned by hand on a reused
 * profile (plain turn, no MCP server), from spawn to its `turn.completed` record. Compared: `agent.run` of a plain turn with the native binary (what the driver
 * resolves by default), the same with the npm Node launcher `node_modules/.bin/codex`, and a
 * turn with one host tool call through the gateway. Prints medians and ratios to the baseline.
 *
 *   node --import tsx --import ./bench/compiled.mjs bench/codex.ts [turns=5]
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Agent } from "@tether/core"
import { Codex } from "@tether/drivers"
import { Harness, ResponsesServer } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Toml from "smol-toml"
import * as Binary from "../packages/drivers/src/internal/binary.js"
import { binarySpec as codexBinary } from "../packages/drivers/src/internal/codex.js"

const turns = Number(process.argv[2] ?? 5)

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

// What the driver resolves by default (the platform package's native binary).
const native = Binary.resolve(codexBinary, undefined).command
const launcher = Path.resolve("node_modules/.bin/codex")

const provider = (baseUrl: string) => ({
  id: "fake",
  baseUrl,
  apiKey: Redacted.make("sk-fake"),
  requestMaxRetries: 0,
  streamMaxRetries: 0
})

/** A profile for the bare CLI, reused by every bare turn (as an agent reuses its clone). */
const bareProfile = (baseUrl: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "bench-codex-"))
      for (const d of ["profile", "home", "tmp", "work"]) Fs.mkdirSync(Path.join(root, d))
      const p = provider(baseUrl)
      Fs.writeFileSync(
        Path.join(root, "profile", "config.toml"),
        Toml.stringify({
          ...Codex.offlineSettings,
          model: "fake-model",
          model_provider: "fake",
          model_providers: {
            fake: {
              name: "fake",
              base_url: p.baseUrl,
              wire_api: "responses",
              env_key: Codex.apiKeyVariable,
              request_max_retries: 0,
              stream_max_retries: 0
            }
          }
        })
      )
      return root
    }),
    (root) => Effect.sync(() => Fs.rmSync(root, { recursive: true, force: true }))
  )

/** The bare native CLI, a plain turn, no MCP server: ms to the terminal record and to exit. */
const bareTurn = (root: string) =>
  Effect.promise(() =>
    new Promise<{ readonly terminal: number; readonly exit: number }>((resolve) => {
      const start = performance.now()
      let terminal = 0
      // The prompt on stdin, as the driver sends it.
      const child = spawn(native, ["exec", "--json", "--skip-git-repo-check", "--", "-"], {
        cwd: Path.join(root, "work"),
        env: {
          PATH: process.env["PATH"],
          HOME: Path.join(root, "home"),
          CODEX_HOME: Path.join(root, "profile"),
          TMPDIR: Path.join(root, "tmp"),
          [Codex.apiKeyVariable]: "sk-fake"
        },
        stdio: ["pipe", "pipe", "ignore"]
      })
      child.stdin.end("hello")
      child.stdout.on("data", (chunk: Buffer) => {
        if (terminal === 0 && chunk.toString("utf8").includes("\"turn.completed\"")) {
          terminal = performance.now() - start
        }
      })
      child.on("close", () => resolve({ terminal, exit: performance.now() - start }))
    })
  )

const program = Effect.gen(function*() {
  const server = yield* ResponsesServer.make({
    script: (request) => {
      if (ResponsesServer.lastFunctionCallOutput(request) !== undefined) return ResponsesServer.text("tool answer")
      return ResponsesServer.userTexts(request).some((t) => t.includes("[tool]"))
        ? ResponsesServer.mcpTool("tether", "lookup", { key: "k" })
        : ResponsesServer.text("plain answer")
    }
  })
  const agentWith = (binary: string) =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      return yield* Agent.make({
        driver: Codex.driver({
          binary,
          model: "fake-model",
          modelProvider: provider(server.baseUrl),
          settings: Codex.offlineSettings
        }),
        definition: { instructions: "", skills: [], tools: Tools },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
    })
  const nativeAgent = yield* agentWith(native)
  const launcherAgent = yield* agentWith(launcher)
  const root = yield* bareProfile(server.baseUrl)
  yield* bareTurn(root) // first run of a profile: Codex sets it up (skills, state databases)
  const bare: Array<number> = []
  const bareExit: Array<number> = []
  const plain: Array<number> = []
  const viaLauncher: Array<number> = []
  const tool: Array<number> = []
  for (let i = 0; i < turns; i++) {
    const turn = yield* bareTurn(root)
    bare.push(turn.terminal)
    bareExit.push(turn.exit)
    plain.push(yield* timed(nativeAgent.run("hello")))
    viaLauncher.push(yield* timed(launcherAgent.run("hello")))
    tool.push(yield* timed(nativeAgent.run("call it [tool]")))
  }
  const base = median(bare)
  const line = (name: string, xs: ReadonlyArray<number>) =>
    console.log(
      `${name.padEnd(46)} median ${median(xs).toFixed(0).padStart(5)} ms  ratio ${(median(xs) / base).toFixed(2)}`
    )
  console.log(`Codex 0.171.0, ${turns} turns each, ${Os.cpus().length} cores`)
  line("bare native CLI, spawn → terminal (baseline)", bare)
  line("bare native CLI, spawn → exit", bareExit)
  line("agent.run plain turn, native binary", plain)
  line("agent.run plain turn, Node launcher", viaLauncher)
  line("agent.run turn with one host tool, native", tool)
  console.log(`launcher − native: ${(median(viaLauncher) - median(plain)).toFixed(0)} ms per turn`)
}).pipe(Effect.scoped, Effect.provide([ToolsLive, Harness.layer, NodeContext.layer]))

Effect.runPromise(program).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
