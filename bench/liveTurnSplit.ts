/**
 * Where a warm live thread turn's time goes, per CLI: Tether's part and the CLI's, with the real
 * CLIs offline (scripted model servers), through the public API. The CLI is started through a
 * small relay (written into a temporary directory, given as the driver's `binary`) that passes
 * its stdin and stdout through and stamps each line with the wall clock; the bench stamps the
 * turn's call, its events and its return on the same clock. Per warm turn (after `warmup` turns):
 * - Tether before the CLI: the call → the first line Tether writes to the CLI;
 * - the CLI: that line → the last line the CLI writes before `RunFinished`, split at the request
 *   reaching the scripted model server (the model answers at once);
 * - Tether after the CLI: that last line → `RunFinished` (the checkpoint commit, the session's
 *   save included), then `RunFinished` → the turn's return.
 * Medians over the turns; each line's trip through the relay adds a pipe hop (a fraction of a
 * millisecond) to the CLI's part. Not part of `npm run bench`: it explains P9, it has no target.
 *
 * Run: node --import tsx --import ./bench/compiled.mjs bench/liveTurnSplit.ts [turns=12] [warmup=2]
 */
import { Agent } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import { AnthropicServer, Harness, ResponsesServer } from "@tether/testing"
import * as GeminiServer from "@tether/testing/GeminiServer"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Logger from "effect/Logger"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as NodePath from "node:path"
import * as Binary from "../packages/drivers/src/internal/binary.js"
import * as ClaudeInternal from "../packages/drivers/src/internal/claude.js"
import * as CodexInternal from "../packages/drivers/src/internal/codex.js"
import * as GeminiInternal from "../packages/drivers/src/internal/gemini.js"
import * as Offline from "./offline.js"
import { median } from "./stats.js"

/** The wall clock, in milliseconds, as the relay stamps it. */
const wall = () => performance.timeOrigin + performance.now()

/** A relay to `binary` that appends `<wall ms> <in|out>` per stdio line to `log`. */
const relay = (dir: string, name: string, binary: Binary.Binary, log: string): string => {
  const file = NodePath.join(dir, `${name}.mjs`)
  Fs.writeFileSync(
    file,
    `#!${process.execPath}
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
const log = Fs.openSync(${JSON.stringify(log)}, "a")
const stamp = (side, data) => {
  const now = (performance.timeOrigin + performance.now()).toFixed(2)
  for (const line of data.toString().split("\\n")) if (line !== "") Fs.writeSync(log, now + " " + side + "\\n")
}
const child = spawn(${JSON.stringify(binary.command)}, [...${
      JSON.stringify(binary.prefix)
    }, ...process.argv.slice(2)], {
  stdio: ["pipe", "pipe", "inherit"]
})
process.stdin.on("data", (data) => { stamp("in", data); child.stdin.write(data) })
process.stdin.on("end", () => child.stdin.end())
child.stdout.on("data", (data) => { stamp("out", data); process.stdout.write(data) })
child.on("exit", (code, signal) => signal === null ? process.exit(code ?? 1) : process.kill(process.pid, signal))
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(signal, () => child.kill(signal))
`,
    { mode: 0o700 }
  )
  return file
}

export interface Split {
  readonly driver: string
  readonly turns: number
  readonly wholeMs: number
  readonly beforeCliMs: number
  readonly cliBeforeModelMs: number
  readonly cliAfterModelMs: number
  readonly afterCliMs: number
  readonly returnMs: number
}

const measureDriver = (
  name: string,
  make: (binary: string) => Driver.Driver,
  binary: Binary.Binary,
  model: { readonly requested: () => number },
  turns: number,
  warmup: number
) =>
  Effect.gen(function*() {
    const dir = Fs.mkdtempSync(NodePath.join(Os.tmpdir(), "tether-split-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true })))
    const log = NodePath.join(dir, "stdio.log")
    const sandbox = yield* Harness.sandbox
    const agent = yield* Agent.make({
      driver: make(relay(dir, name, binary, log)),
      definition: { instructions: "", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection
    })
    const thread = yield* agent.thread("split")
    const rows: Array<Omit<Split, "driver" | "turns">> = []
    for (let i = 0; i < warmup + turns; i++) {
      const called = wall()
      let finished = 0
      yield* thread.stream(`question ${i}`).pipe(
        Stream.runForEach((event) => Effect.sync(() => event._tag === "RunFinished" && (finished = wall())))
      )
      const returned = wall()
      if (i < warmup) continue
      const lines = Fs.readFileSync(log, "utf8").split("\n").filter((line) => line !== "").map((line) => {
        const [at, side] = line.split(" ")
        return { at: Number(at), side }
      }).filter((line) => line.at >= called && line.at <= finished)
      const first = lines.find((line) => line.side === "in")
      let last: (typeof lines)[number] | undefined
      for (const line of lines) if (line.side === "out") last = line
      const requested = model.requested()
      if (first === undefined || last === undefined || requested < first.at || requested > last.at) {
        return yield* Effect.dieMessage(`${name}: turn ${i} has no stdio lines or model request inside it`)
      }
      rows.push({
        wholeMs: returned - called,
        beforeCliMs: first.at - called,
        cliBeforeModelMs: requested - first.at,
        cliAfterModelMs: last.at - requested,
        afterCliMs: finished - last.at,
        returnMs: returned - finished
      })
    }
    const of = (key: keyof Omit<Split, "driver" | "turns">) => median(rows.map((row) => row[key]))
    return {
      driver: name,
      turns,
      wholeMs: of("wholeMs"),
      beforeCliMs: of("beforeCliMs"),
      cliBeforeModelMs: of("cliBeforeModelMs"),
      cliAfterModelMs: of("cliAfterModelMs"),
      afterCliMs: of("afterCliMs"),
      returnMs: of("returnMs")
    } satisfies Split
  }).pipe(Effect.scoped)

/** Measures Claude Code, Codex and Gemini CLI one after the other. */
export const measure = (turns = 12, warmup = 2): Effect.Effect<ReadonlyArray<Split>, unknown> =>
  Effect.gen(function*() {
    let requested = 0
    const stamp = () => (requested = wall())
    const model = { requested: () => requested }
    const anthropic = yield* AnthropicServer.make({ respond: () => (stamp(), AnthropicServer.reply("fine")) })
    const responses = yield* ResponsesServer.make({ script: () => (stamp(), ResponsesServer.text("fine")) })
    const gemini = yield* GeminiServer.make({ respond: () => (stamp(), GeminiServer.reply("fine")) })
    const clis = [
      ["claude", (binary: string) => Offline.claude(anthropic.url, binary), ClaudeInternal.binarySpec],
      ["codex", (binary: string) => Offline.codex(responses.baseUrl, binary), CodexInternal.binarySpec],
      ["gemini", (binary: string) => Offline.gemini(gemini.url, binary), GeminiInternal.binarySpec]
    ] as const
    return yield* Effect.forEach(
      clis,
      ([name, make, spec]) => measureDriver(name, make, Binary.resolve(spec, undefined), model, turns, warmup)
    )
  }).pipe(
    Effect.scoped,
    Effect.provide(Harness.layer),
    Effect.provide(Logger.replace(Logger.defaultLogger, Logger.none))
  )

export const format = (rows: ReadonlyArray<Split>): string =>
  [
    "warm live thread turn, medians (ms): whole | Tether before the CLI | CLI before the model request | CLI after it | Tether after the CLI (commit) | RunFinished → return",
    ...rows.map((r) =>
      `${r.driver.padEnd(7)} ${r.wholeMs.toFixed(1).padStart(6)} | ${r.beforeCliMs.toFixed(2).padStart(5)} | ${
        r.cliBeforeModelMs.toFixed(1).padStart(5)
      } | ${r.cliAfterModelMs.toFixed(1).padStart(5)} | ${r.afterCliMs.toFixed(2).padStart(5)} | ${
        r.returnMs.toFixed(2)
      }   (${r.turns} turns)`
    )
  ].join("\n")

const isMain = process.argv[1] !== undefined && import.meta.url.endsWith(NodePath.basename(process.argv[1]))
if (isMain) {
  Effect.runPromise(measure(Number(process.argv[2] ?? 12), Number(process.argv[3] ?? 2))).then((rows) =>
    process.stdout.write(`${format(rows)}\n`)
  )
}
