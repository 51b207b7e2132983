/**
 * Live sessions at the driver level — a warm turn on a live process vs a cold one-shot turn, the
 * same offline turn (a plain answer from the scripted model, the hosted-tools server declared on
 * a real gateway registration), turns interleaved in one process after one warm-up of each:
 * - cold: `driver.prepare` → spawn (`LiveChannel`) → the prompt line, stdin closed → `driver.parse`
 *   of stdout; timed from the spawn to the `Terminal` (the exit is reported beside it);
 * - warm: `driver.live.open` → spawn once → `live.attach`; each later `session.turn` timed from
 *   the call to its `Terminal`.
 * Ratio = warm median / cold median (the P9 target for Claude: ≤ 0.1×).
 *
 * Run: node --conditions=@tether/source --import tsx bench/live.ts [turns=5]
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import type * as Driver from "@tether/core/Driver"
import { Claude } from "@tether/drivers"
import { Gateway } from "@tether/gateway"
import { AnthropicServer, LiveChannel } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

export interface LiveFigures {
  readonly provider: string
  readonly turns: number
  /** One-shot: spawn → `Terminal`. */
  readonly coldMs: number
  /** One-shot: spawn → exit. */
  readonly coldExitMs: number
  /** Live, turns after the first: `turn()` → `Terminal`. */
  readonly warmMs: number
  /** Live, the first turn on a fresh process: spawn → `Terminal`. */
  readonly firstMs: number
  readonly ratio: number
}

const claude = Path.resolve(import.meta.dirname, "../node_modules/.bin/claude")

const median = (xs: ReadonlyArray<number>) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

/** A temp `{profile,home,tmp,work}` root, removed with the scope. */
const tempRoot = Effect.acquireRelease(
  Effect.sync(() => {
    const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "bench-live-"))
    for (const d of ["profile", "home", "tmp", "work"]) Fs.mkdirSync(Path.join(root, d))
    return root
  }),
  (root) => Effect.sync(() => Fs.rmSync(root, { recursive: true, force: true }))
)

const isTerminal = (output: Driver.Output): output is Driver.Terminal => output._tag === "Terminal"

const expectAnswer = (outputs: ReadonlyArray<Driver.Output>) => {
  const terminal = outputs.find(isTerminal)
  return terminal?.ok === true && terminal.text === "plain answer"
    ? Effect.void
    : Effect.dieMessage(`unexpected turn: ${JSON.stringify(terminal ?? outputs.at(-1))}`)
}

/** The Claude section: `turns` (default 5) measured turns of each. */
export const measureClaude = (turns = 5): Effect.Effect<LiveFigures, unknown> =>
  Effect.gen(function*() {
    const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.reply("plain answer") })
    const gateway = yield* Gateway.Gateway
    const registration = yield* gateway.register(yield* Toolkit.executor(Toolkit.empty))
    const driver = Claude.driver({
      binary: claude,
      env: {
        ANTHROPIC_BASE_URL: server.url,
        ANTHROPIC_API_KEY: Redacted.make("sk-ant-bench"),
        CLAUDE_CODE_MAX_RETRIES: "0"
      }
    })
    const token = { [registration.tokenVariable]: Redacted.value(registration.token) }
    const requestIn = (root: string, prompt: string): Driver.InvocationRequest => ({
      runId: crypto.randomUUID(),
      prompt,
      model: undefined,
      profileDir: Path.join(root, "profile"),
      siblings: { home: Path.join(root, "home"), tmp: Path.join(root, "tmp") },
      workspace: Path.join(root, "work"),
      hosted: { key: "tether", url: registration.url, tokenVariable: registration.tokenVariable, tools: [] },
      instructions: "",
      skills: [],
      mcp: [],
      session: { _tag: "New", id: crypto.randomUUID() },
      sandbox: undefined,
      hostEnv: { PATH: process.env["PATH"] }
    })
    const materialize = (root: string, invocation: Driver.Invocation) =>
      Effect.sync(() => {
        for (const file of invocation.files) {
          Fs.writeFileSync(Path.join(root, "profile", file.path), file.content, { mode: file.mode ?? 0o600 })
        }
      })

    const coldRoot = yield* tempRoot
    /** One one-shot turn: [ms to the terminal, ms to the exit]. */
    const coldTurn = Effect.scoped(Effect.gen(function*() {
      const request = requestIn(coldRoot, "hello")
      const invocation = yield* driver.prepare(request)
      yield* materialize(coldRoot, invocation)
      const start = performance.now()
      const proc = yield* LiveChannel.spawn({ ...invocation, env: { ...invocation.env, ...token } })
      yield* proc.channel.write(invocation.stdin!.trimEnd())
      yield* proc.channel.closeInput
      const outputs = yield* driver.parse(proc.channel.lines, { hostedKey: "tether", session: request.session }).pipe(
        Stream.takeUntil(isTerminal),
        Stream.runCollect
      )
      const toTerminal = performance.now() - start
      yield* expectAnswer(Array.from(outputs))
      yield* proc.exitCode
      return [toTerminal, performance.now() - start] as const
    }))

    const liveRoot = yield* tempRoot
    const opened = requestIn(liveRoot, "")
    const invocation = yield* driver.live!.open(opened)
    yield* materialize(liveRoot, invocation)
    const spawned = performance.now()
    const proc = yield* LiveChannel.spawn({ ...invocation, env: { ...invocation.env, ...token } })
    const session = yield* driver.live!.attach(proc.channel, LiveChannel.context(opened))
    const warmTurn = Effect.gen(function*() {
      const start = performance.now()
      const outputs = yield* Stream.runCollect(session.turn({ runId: crypto.randomUUID(), prompt: "hello" }))
      const ms = performance.now() - start
      yield* expectAnswer(Array.from(outputs))
      return ms
    })

    yield* warmTurn
    const firstMs = performance.now() - spawned
    yield* coldTurn
    const cold: Array<number> = []
    const coldExit: Array<number> = []
    const warm: Array<number> = []
    for (let i = 0; i < turns; i++) {
      const [toTerminal, toExit] = yield* coldTurn
      cold.push(toTerminal)
      coldExit.push(toExit)
      warm.push(yield* warmTurn)
    }
    yield* session.shutdown
    const coldMs = median(cold)
    const warmMs = median(warm)
    return {
      provider: "Claude Code",
      turns,
      coldMs,
      coldExitMs: median(coldExit),
      warmMs,
      firstMs,
      ratio: warmMs / coldMs
    }
  }).pipe(Effect.scoped, Effect.provide(Layer.merge(Gateway.layer(), NodeContext.layer)))

/** The line printed per provider. */
export const format = (f: LiveFigures): string =>
  `${f.provider}, same offline plain turn, ${f.turns} each: cold one-shot ${f.coldMs.toFixed(0)} ms to its terminal ` +
  `(${f.coldExitMs.toFixed(0)} ms to exit), warm live turn ${f.warmMs.toFixed(1)} ms: ${f.ratio.toFixed(3)}× ` +
  `(target ≤ 0.10×); the live process's first turn ${f.firstMs.toFixed(0)} ms from spawn`

const isMain = process.argv[1] !== undefined && import.meta.url.endsWith(Path.basename(process.argv[1]))
if (isMain) {
  Effect.runPromise(measureClaude(Number(process.argv[2] ?? 5))).then(
    (f) => process.stdout.write(`${format(f)}\n`),
    (error: unknown) => {
      console.error(error)
      process.exitCode = 1
    }
  )
}
