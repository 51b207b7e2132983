/**
 * P8 — Tether vs the raw CLI for the same offline Claude Code turn (a plain answer, no tools),
 * against the scripted Anthropic server, turns interleaved in one process:
 * - Tether: `agent.run` of the same prompt on one agent with no tools (`Toolkit.empty`): it
 *   includes the clone materialization, the spawn, parsing into typed events and the result.
 * - raw, Tether's invocation (the target's baseline): the pinned `claude` spawned by hand with
 *   exactly the arguments, environment, working directory and execution profile Tether's own
 *   process was given (read from `/proc` at its first run), but its own session id and a live
 *   credential of the same MCP declaration (the run's own is revoked with the run); the prompt on
 *   stdin, stdout read line by line; the turn ends at its `result` record (what a raw integration
 *   waits for). The time to the process exit is reported beside it. The difference is Tether's
 *   own time and nothing of the CLI's configuration;
 * - raw with MCP: the driver's flags and environment in a profile of its own (an empty
 *   directory but the MCP declaration), the hosted-tools server declared;
 * - raw: the same without the MCP declaration: the difference is the CLI's own start-up of the
 *   MCP server it is given.
 * The four run in rounds of one turn each, in an order that rotates every round. Ratio = the
 * median over rounds of Tether time / raw-with-Tether's-invocation time to the `result` record
 * within the round (target ≤ 1.03×); the others are reported beside it.
 *
 * Run: node --import tsx --import ./bench/compiled.mjs bench/turn.ts [turns=5]
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Agent } from "@tether/core"
import { Claude } from "@tether/drivers"
import { Gateway } from "@tether/gateway"
import { AnthropicServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Readline from "node:readline"

export interface TurnFigures {
  readonly turns: number
  readonly tetherMs: number
  /** Raw CLI given Tether's invocation (arguments, environment, directories), spawn → `result` record. */
  readonly rawTetherMs: number
  /** Raw CLI with the hosted-tools MCP server declared in a profile of its own, spawn → `result` record. */
  readonly rawMcpMs: number
  /** Raw CLI without the declaration, spawn → `result` record. */
  readonly rawMs: number
  /** Raw CLI without the declaration, spawn → process exit. */
  readonly rawExitMs: number
  /** Median over rounds of Tether / raw with Tether's invocation (the target's ratio). */
  readonly ratio: number
  /** Median over rounds of Tether / raw with the same MCP declaration in its own profile. */
  readonly ratioMcp: number
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

/** A live credential of the hosted-tools declaration, for the raw variants. */
interface Hosted {
  readonly url: string
  readonly variable: string
  readonly token: string
}

/** How a process was started: its arguments (without the program), environment and directory. */
export interface Invocation {
  readonly args: ReadonlyArray<string>
  readonly env: { readonly [name: string]: string }
  readonly cwd: string
}

/** The invocation of a running process, as Linux shows it under `/proc`. */
const invocationOf = (pid: number): Invocation => {
  const entries = (file: string) => Fs.readFileSync(`/proc/${pid}/${file}`, "utf8").split("\0").filter((s) => s !== "")
  return {
    args: entries("cmdline").slice(1),
    env: Object.fromEntries(
      entries("environ").map((line) => {
        const at = line.indexOf("=")
        return [line.slice(0, at), line.slice(at + 1)]
      })
    ),
    cwd: Fs.readlinkSync(`/proc/${pid}/cwd`)
  }
}

/** One raw turn of `invocation` (the prompt on stdin); resolves with [ms to the result record, ms to exit]. */
export const timeTurn = (invocation: Invocation): Promise<readonly [number, number]> => {
  const start = performance.now()
  return new Promise((resolve, reject) => {
    const child = spawn(claude, [...invocation.args], {
      cwd: invocation.cwd,
      env: invocation.env,
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

/** The driver's flags and environment in the raw profile `root`, with `hosted` declared or not; a new session. */
export const rawInvocation = (url: string, root: string, hosted?: Hosted): Invocation => {
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
  return {
    args: [
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
    ],
    env: {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      HOME: Path.join(root, "home"),
      CLAUDE_CONFIG_DIR: Path.join(root, "profile"),
      CLAUDE_CODE_TMPDIR: Path.join(root, "tmp"),
      ANTHROPIC_BASE_URL: url,
      ANTHROPIC_API_KEY: "sk-ant-bench",
      CLAUDE_CODE_MAX_RETRIES: "0",
      // As the driver: the CLI waits for its MCP servers before the first model request.
      MCP_CONNECTION_NONBLOCKING: "0",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_AUTOUPDATER: "1",
      DISABLE_TELEMETRY: "1",
      DISABLE_ERROR_REPORTING: "1",
      ...(hosted === undefined ? {} : { [hosted.variable]: hosted.token })
    },
    cwd: Path.join(root, "work")
  }
}

/**
 * Tether's invocation `seen` made runnable by hand: its MCP declaration (the file Tether wrote,
 * naming the run's revoked credential) copied with the live `hosted` credential instead, a new
 * session id, and no marker variable (the agent's close must not count this process as its own).
 */
const rawTetherInvocation = (seen: Invocation, root: string, hosted: Hosted): Invocation => {
  const args = [...seen.args]
  const mcpAt = args.indexOf("--mcp-config") + 1
  const declared = JSON.parse(Fs.readFileSync(args[mcpAt]!, "utf8")) as {
    readonly mcpServers: { readonly [key: string]: { readonly headers?: { readonly [name: string]: string } } }
  }
  const runVariable = /\$\{(\w+)\}/.exec(JSON.stringify(declared))?.[1]
  const servers = Object.fromEntries(
    Object.entries(declared.mcpServers).map(([key, server]) => [key, {
      ...server,
      url: hosted.url,
      headers: { Authorization: `Bearer \${${hosted.variable}}` }
    }])
  )
  args[mcpAt] = Path.join(root, "profile", "mcp-tether.json")
  Fs.writeFileSync(args[mcpAt], JSON.stringify({ ...declared, mcpServers: servers }))
  return {
    args,
    env: {
      ...Object.fromEntries(
        Object.entries(seen.env).filter(([name]) => name !== runVariable && name !== "TETHER_AGENT_MARKER")
      ),
      [hosted.variable]: hosted.token
    },
    cwd: seen.cwd
  }
}

const withNewSession = (invocation: Invocation): Invocation => {
  const args = [...invocation.args]
  args[args.indexOf("--session-id") + 1] = crypto.randomUUID()
  return { ...invocation, args }
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
    // Tether's warm-up turn: its process's invocation is read while it runs.
    let seen: Invocation | undefined
    yield* agent.stream("hello").pipe(Stream.runForEach((event) =>
      Effect.sync(() => {
        if (event._tag === "ProcessStarted" && seen === undefined) seen = invocationOf(event.pid)
      })
    ))
    if (seen === undefined) return yield* Effect.dieMessage("the warm-up turn started no process")
    const asTether = rawTetherInvocation(seen, root, hosted)
    yield* Effect.promise(() => timeTurn(withNewSession(asTether)))
    yield* Effect.promise(() => timeTurn(rawInvocation(server.url, root)))
    yield* Effect.promise(() => timeTurn(rawInvocation(server.url, root, hosted)))
    const rawTether: Array<number> = []
    const rawMcp: Array<number> = []
    const raw: Array<number> = []
    const rawExit: Array<number> = []
    const tether: Array<number> = []
    const ratios: Array<number> = []
    const ratiosMcp: Array<number> = []
    const ratiosNoMcp: Array<number> = []
    for (let i = 0; i < turns; i++) {
      const round = { rawTether: 0, raw: 0, rawMcp: 0, tether: 0 }
      const runRawTether = Effect.promise(() => timeTurn(withNewSession(asTether))).pipe(
        Effect.tap(([toResult]) => Effect.sync(() => round.rawTether = toResult))
      )
      const runRaw = Effect.promise(() => timeTurn(rawInvocation(server.url, root))).pipe(
        Effect.tap(([toResult, toExit]) =>
          Effect.sync(() => {
            round.raw = toResult
            rawExit.push(toExit)
          })
        )
      )
      const runRawMcp = Effect.promise(() => timeTurn(rawInvocation(server.url, root, hosted))).pipe(
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
      const order = [runRawTether, runRaw, runRawMcp, runTether]
      for (let k = 0; k < order.length; k++) yield* order[(i + k) % order.length]!
      rawTether.push(round.rawTether)
      raw.push(round.raw)
      rawMcp.push(round.rawMcp)
      tether.push(round.tether)
      ratios.push(round.tether / round.rawTether)
      ratiosMcp.push(round.tether / round.rawMcp)
      ratiosNoMcp.push(round.tether / round.raw)
    }
    return {
      turns,
      tetherMs: median(tether),
      rawTetherMs: median(rawTether),
      rawMcpMs: median(rawMcp),
      rawMs: median(raw),
      rawExitMs: median(rawExit),
      ratio: median(ratios),
      ratioMcp: median(ratiosMcp),
      ratioNoMcp: median(ratiosNoMcp)
    }
  }).pipe(Effect.scoped, Effect.provide([Harness.layer, NodeContext.layer]))

/** The line printed when run directly. */
export const format = (f: TurnFigures): string =>
  `Claude Code plain turn, ${f.turns} rounds: agent.run ${f.tetherMs.toFixed(0)} ms; the raw CLI given Tether's ` +
  `invocation ${f.rawTetherMs.toFixed(0)} ms to its result record: ${f.ratio.toFixed(3)}× (target ≤ 1.03×); ` +
  `raw CLI with the same MCP declaration in its own profile ${f.rawMcpMs.toFixed(0)} ms: ${f.ratioMcp.toFixed(3)}×; ` +
  `without it ${f.rawMs.toFixed(0)} ms (${f.rawExitMs.toFixed(0)} ms to exit): ${f.ratioNoMcp.toFixed(3)}× ` +
  `(medians of per-round ratios)`

const isMain = process.argv[1] !== undefined && import.meta.url.endsWith(Path.basename(process.argv[1]))
if (isMain) {
  Effect.runPromise(measure(Number(process.argv[2] ?? 5))).then((f) => process.stdout.write(`${format(f)}\n`))
}
