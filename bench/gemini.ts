/**
 * Per-turn cost of the Gemini driver with the real CLI (@google/gemini-cli 0.61.0), offline
 * against the scripted GeminiServer. Baseline: the bare CLI spawned by hand as it runs by default
 * (its launcher re-spawns itself), a plain turn. Compared: the same with the driver's
 * `GEMINI_CLI_NO_RELAUNCH=true` (one process), `agent.run` of a plain turn, and of a turn with
 * one host tool call through the gateway. Prints medians and ratios to the baseline.
 *
 *   node --import tsx --import ./bench/compiled.mjs bench/gemini.ts [turns=2]
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Agent } from "@tether/core"
import { Gemini } from "@tether/drivers"
import { GeminiServer, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

const turns = Number(process.argv[2] ?? 2)

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

const bundle = Path.resolve("node_modules/@google/gemini-cli/bundle/gemini.js")

/** The bare CLI: a plain turn, prompt on stdin, settings with api-key auth and no MCP server. */
const bareTurn = (url: string, relaunch: boolean) =>
  Effect.promise(() => {
    const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "bench-gemini-"))
    for (const d of ["profile/.gemini", "home", "tmp", "work"]) Fs.mkdirSync(Path.join(root, d), { recursive: true })
    Fs.writeFileSync(
      Path.join(root, "profile/.gemini/settings.json"),
      JSON.stringify({
        security: { auth: { selectedType: "gemini-api-key" } },
        privacy: { usageStatisticsEnabled: false },
        telemetry: { enabled: false },
        general: { enableAutoUpdate: false, enableAutoUpdateNotification: false }
      })
    )
    return new Promise<void>((resolve) => {
      const child = spawn(
        process.execPath,
        [bundle, "-p", "", "--output-format", "stream-json", "-m", "gemini-2.5-flash", "--skip-trust"],
        {
          cwd: Path.join(root, "work"),
          env: {
            PATH: process.env["PATH"] ?? "",
            HOME: Path.join(root, "home"),
            TMPDIR: Path.join(root, "tmp"),
            GEMINI_CLI_HOME: Path.join(root, "profile"),
            GOOGLE_GEMINI_BASE_URL: url,
            GEMINI_API_KEY: "fake",
            ...(relaunch ? {} : { GEMINI_CLI_NO_RELAUNCH: "true" })
          },
          stdio: ["pipe", "ignore", "ignore"]
        }
      )
      child.stdin.end("hello")
      child.on("close", () => {
        Fs.rmSync(root, { recursive: true, force: true })
        resolve()
      })
    })
  })

const program = Effect.gen(function*() {
  const server = yield* GeminiServer.make({
    respond: GeminiServer.roundTrip(
      (request) =>
        GeminiServer.transcript(request).at(-1)?.[1].includes("TOOL") === true
          ? GeminiServer.callTool("lookup", { key: "k" })
          : GeminiServer.reply("plain"),
      () => GeminiServer.reply("after tool")
    )
  })
  const results: Array<readonly [string, number]> = []
  const measure = (name: string, effect: Effect.Effect<number, unknown>) =>
    Effect.gen(function*() {
      const samples: Array<number> = []
      for (let i = 0; i < turns; i++) samples.push(yield* effect)
      results.push([name, median(samples)])
    })
  yield* measure("bare CLI, default launcher (baseline)", timed(bareTurn(server.url, true)))
  yield* measure("bare CLI, GEMINI_CLI_NO_RELAUNCH", timed(bareTurn(server.url, false)))
  const sandbox = yield* Harness.sandbox
  yield* Effect.gen(function*() {
    const agent = yield* Agent.make({
      driver: Gemini.driver({
        model: "gemini-2.5-flash",
        env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake") }
      }),
      definition: { instructions: "", skills: [], tools: Tools },
      workspace: sandbox.workspace,
      profile: sandbox.selection
    })
    yield* measure("agent.run, plain turn", timed(agent.run("hello")))
    yield* measure("agent.run, one host tool call", timed(agent.run("TOOL please")))
  }).pipe(Effect.scoped, Effect.provide([ToolsLive, Harness.layer]))
  const base = results[0]![1]
  for (const [name, ms] of results) {
    console.log(`${name.padEnd(40)} ${ms.toFixed(0).padStart(6)} ms  x${(ms / base).toFixed(2)}`)
  }
}).pipe(Effect.scoped, Effect.provide(NodeContext.layer))

Effect.runPromise(program).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
