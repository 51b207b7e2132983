/**
 * P8 — Tether vs the raw CLI for the same offline Claude Code turn (a plain answer, no tools),
 * against the scripted Anthropic server, turns interleaved in one process:
 * - raw: the pinned `claude` spawned by hand with the driver's flags and environment, the prompt
 *   on stdin, stdout read line by line; the turn ends at its `result` record (what a raw
 *   integration waits for). The time to the process exit is reported beside it;
 * - Tether: `agent.run` of the same prompt on one agent with no tools (`Toolkit.empty`): it
 *   includes the clone materialization, the spawn, parsing into typed events and the result.
 * - raw with MCP: the raw CLI with the same MCP declaration Tether writes (the hosted-tools
 *   server on the gateway, here a registration with no tools): the raw CLI with the same
 *   configuration as Tether's.
 * The three run in rounds of one turn each, in an order that rotates every round. Ratio = the
 * median over rounds of Tether time / raw-with-MCP time to the `result` record within the round
 * (target ≤ 1.03×, against the raw CLI with the same configuration); the same against the raw
 * CLI without the declaration is reported beside it: their difference is the CLI's own start-up
 * of the MCP server it is given.
 *
 * Run: node --conditions=@tether/source --import tsx bench/turn.ts [turns=5]
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Agent } from "@tether/core"
import { Claude } from "@tether/drivers"
import { Gateway } from "@tether/gateway"
import { AnthropicServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Readline from "node:readline"

export interface TurnFigures {
  readonly turns: number
  /** Raw CLI, spawn → `result` record. */
  readonly rawMs: number
  /** Raw CLI, spawn → process exit. */
  readonly rawExitMs: number
  readonly tetherMs: number
  /** Raw CLI with the hosted-tools MCP server declared, spawn → `result` record. */
  readonly rawMcpMs: number
  /** Median over rounds of Tether / raw with the same MCP declaration (the target's ratio). */
  readonly ratio: number
  /** Median over rounds of Tether / raw without the MCP declaration. */
  readonly ratioNoMcp: number
}

const claude = Path.resolve(import.meta.dirname, "../node_modules/.bin/claude")

const median = (xs: ReadonlyArray<number>) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

/** A profile for the raw CLI, reused by every raw turn (as an agent reuses its clone). */
const rawProfile = Effect.acquireRelease(
  Effect.sync(() => {
    const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "bench-turn-"))
    for (const d of ["profile", "home", "tmp", "work"]) Fs.mkdirSync(Path.join(root, d))
    Fs.writeFileSync(Path.join(root, "profile", "mcp.json"), "{\"mcpServers\":{}}")
    return root
  }),
  (root) => Effect.sync(() => Fs.rmSync(root, { recursive: true, force: true }))
)

/** The hosted-tools declaration as the Claude driver writes it, for the raw MCP variant. */
interface Hosted {
  readonly url: string
  readonly variable: string
  readonly token: string
}

/** One raw turn (a new session); resolves with [ms to the result record, ms to exit]. */
const rawTurn = (url: string, root: string, hosted?: Hosted): Promise<readonly [number, number]> => {
  const mcpFile = Path.join(root, "profile", hosted === undefined ? "mcp.json" : "mcp-hosted.json")
  if (hosted !== undefined) {
    Fs.writeFileSync(
      mcpFile,
      JSON.stringify({
        mcpServers: {
          tether: { type: "http", url: hosted.url, headers: { Authorization: `Bearer \${${hosted.variable}}` } }
        }
      })
    )
  }
  const start = performance.now()
  return new Promise((resolve, reject) => {
    const child = spawn(claude, [
      "-p",
      "--input-format",
      "stream-json",
      "--output-format",
      "stream-json",
      "--verbose",
      "--include-partial-messages",
      "--strict-mcp-config",
      "--mcp-config",
      mcpFile,
      "--session-id",
      crypto.randomUUID()
    ], {
      cwd: Path.join(root, "work"),
      env: {
        PATH: process.env["PATH"],
        HOME: Path.join(root, "home"),
        CLAUDE_CONFIG_DIR: Path.join(root, "profile"),
        CLAUDE_CODE_TMPDIR: Path.join(root, "tmp"),
        ANTHROPIC_BASE_URL: url,
        ANTHROPIC_API_KEY: "sk-ant-bench",
        CLAUDE_CODE_MAX_RETRIES: "0",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        DISABLE_AUTOUPDATER: "1",
        DISABLE_TELEMETRY: "1",
        DISABLE_ERROR_REPORTING: "1",
        ...(hosted === undefined ? {} : { [hosted.variable]: hosted.token })
      },
      stdio: ["pipe", "pipe", "pipe"],
      detached: true
    })
    child.stderr.resume()
    let resultAt: number | undefined
    Readline.createInterface({ input: child.stdout }).on("line", (line) => {
      if (resultAt === undefined && line.startsWith("{\"type\":\"result\"")) {
        const record = JSON.parse(line) as { readonly is_error?: boolean }
        if (record.is_error === true) reject(new Error(`raw turn failed: ${line.slice(0, 200)}`))
        resultAt = performance.now() - start
      }
    })
    child.on("error", reject)
    child.on("close", () => {
      if (resultAt === undefined) reject(new Error("raw turn ended without a result record"))
      else resolve([resultAt, performance.now() - start])
    })
    child.stdin.end(Claude.promptLine("hello"))
  })
}

/** Measures `turns` (default 5) of each, interleaved, after one warm-up of each. */
export const measure = (turns = 5): Effect.Effect<TurnFigures, unknown> =>
  Effect.gen(function*() {
    const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.reply("plain answer") })
    const sandbox = yield* Harness.sandbox
    const root = yield* rawProfile
    const agent = yield* Agent.make({
      driver: Claude.driver({
        binary: claude,
        env: {
          ANTHROPIC_BASE_URL: server.url,
          ANTHROPIC_API_KEY: Redacted.make("sk-ant-bench"),
          CLAUDE_CODE_MAX_RETRIES: "0"
        }
      }),
      definition: { instructions: "", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection
    })
    const registration = yield* Effect.flatMap(
      Gateway.Gateway,
      (gateway) => Effect.flatMap(Toolkit.executor(Toolkit.empty), (executor) => gateway.register(executor))
    )
    const hosted: Hosted = {
      url: registration.url,
      variable: registration.tokenVariable,
      token: Redacted.value(registration.token)
    }
    yield* Effect.promise(() => rawTurn(server.url, root))
    yield* Effect.promise(() => rawTurn(server.url, root, hosted))
    yield* agent.run("hello")
    const rawMcp: Array<number> = []
    const raw: Array<number> = []
    const rawExit: Array<number> = []
    const tether: Array<number> = []
    const ratios: Array<number> = []
    const ratiosNoMcp: Array<number> = []
    for (let i = 0; i < turns; i++) {
      const round = { raw: 0, rawMcp: 0, tether: 0 }
      const runRaw = Effect.promise(() => rawTurn(server.url, root)).pipe(Effect.tap(([toResult, toExit]) =>
        Effect.sync(() => {
          round.raw = toResult
          rawExit.push(toExit)
        })
      ))
      const runRawMcp = Effect.promise(() =>
        rawTurn(server.url, root, hosted)
      ).pipe(
        Effect.tap(([toResult]) => Effect.sync(() => round.rawMcp = toResult))
      )
      const runTether = Effect.gen(function*() {
        const start = performance.now()
        const result = yield* agent.run("hello")
        round.tether = performance.now() - start
        if (result.text !== "plain answer") {
          return yield* Effect.dieMessage(`unexpected answer ${result.text}`)
        }
      })
      // The order rotates, so a load swing or an order effect weighs on every variant alike.
      const order = [runRaw, runRawMcp, runTether]
      for (let k = 0; k < order.length; k++) yield* order[(i + k) % order.length]!
      raw.push(round.raw)
      rawMcp.push(round.rawMcp)
      tether.push(round.tether)
      ratios.push(round.tether / round.rawMcp)
      ratiosNoMcp.push(round.tether / round.raw)
    }
    return {
      turns,
      rawMs: median(raw),
      rawExitMs: median(rawExit),
      tetherMs: median(tether),
      rawMcpMs: median(rawMcp),
      ratio: median(ratios),
      ratioNoMcp: median(ratiosNoMcp)
    }
  }).pipe(Effect.scoped, Effect.provide([Harness.layer, NodeContext.layer]))

/** The line printed when run directly. */
export const format = (f: TurnFigures): string =>
  `Claude Code plain turn, ${f.turns} rounds: agent.run ${f.tetherMs.toFixed(0)} ms; raw CLI with the same MCP ` +
  `declaration ${f.rawMcpMs.toFixed(0)} ms to its result record: ${f.ratio.toFixed(3)}× (target ≤ 1.03×); ` +
  `raw CLI without it ${f.rawMs.toFixed(0)} ms (${f.rawExitMs.toFixed(0)} ms to exit): ${
    f.ratioNoMcp.toFixed(3)
  }× (medians of per-round ratios)`

const isMain = process.argv[1] !== undefined && import.meta.url.endsWith(Path.basename(process.argv[1]))
if (isMain) {
  Effect.runPromise(measure(Number(process.argv[2] ?? 5))).then((f) => process.stdout.write(`${format(f)}\n`))
}
