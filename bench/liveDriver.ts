/**
 * Live sessions at the driver level, per CLI — a warm turn on a live process vs a cold one-shot
 * turn, the same offline turn (a plain answer from the scripted model; the hosted-tools server
 * declared on a real gateway registration, with one tool, as the drivers always do), turns
 * interleaved in one process after one warm-up of each:
 * - cold: `driver.prepare` → clone files → spawn (`LiveChannel`) → the prompt on stdin, stdin
 *   closed → `driver.parse` of stdout; timed from the spawn to the `Terminal` (the exit beside it);
 * - warm: `driver.live.open` → spawn once → `live.attach` (its first turn reported beside it,
 *   spawn and handshake included); each later `session.turn` timed from the call to its `Terminal`.
 * Each process runs on its own gateway credential, as core gives it. Ratio = warm median / cold
 * median. The public-API figure (P9) is bench/liveThreads.ts; this one leaves core out.
 *
 * Run: node --import tsx --import ./bench/compiled.mjs bench/liveDriver.ts [turns=5] [claude|codex|gemini…]
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import type * as Driver from "@tether/core/Driver"
import { Claude, Codex, Gemini } from "@tether/drivers"
import { Gateway } from "@tether/gateway"
import { AnthropicServer, GeminiServer, LiveChannel, ResponsesServer } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

export interface LiveDriverFigures {
  readonly provider: string
  readonly turns: number
  /** One-shot: spawn → `Terminal`. */
  readonly coldMs: number
  /** One-shot: spawn → exit. */
  readonly coldExitMs: number
  /** Live: spawn + attach + the first turn. */
  readonly firstMs: number
  /** Live, turns after the first: `turn()` → `Terminal`. */
  readonly warmMs: number
  readonly ratio: number
  /** The target for the ratio. */
  readonly target: number
}

/** What differs per CLI: its driver on a scripted model server, and the clone's layout. */
interface Provider {
  readonly name: string
  readonly target: number
  /** Directories of the clone root to create (`profile`, `home`, `tmp`, `work` at least). */
  readonly dirs: ReadonlyArray<string>
  readonly driver: Effect.Effect<Driver.Driver, unknown, Scope.Scope>
}

const bin = (name: string) => Path.resolve(import.meta.dirname, "../node_modules/.bin", name)

const providers: { readonly [key: string]: Provider } = {
  claude: {
    name: "Claude Code",
    target: 0.1,
    dirs: ["profile", "home", "tmp", "work"],
    driver: Effect.map(
      AnthropicServer.make({ respond: () => AnthropicServer.reply("plain answer") }),
      (server) =>
        Claude.driver({
          binary: bin("claude"),
          env: {
            ANTHROPIC_BASE_URL: server.url,
            ANTHROPIC_API_KEY: Redacted.make("sk-ant-bench"),
            CLAUDE_CODE_MAX_RETRIES: "0"
          }
        })
    )
  },
  codex: {
    name: "Codex",
    target: 0.3,
    dirs: ["profile", "home", "tmp", "work"],
    driver: Effect.map(
      ResponsesServer.make({ script: () => ResponsesServer.text("plain answer") }),
      (server) =>
        Codex.driver({
          model: "fake-model",
          modelProvider: {
            id: "fake",
            baseUrl: server.baseUrl,
            apiKey: Redacted.make("sk-fake-codex"),
            requestMaxRetries: 0,
            streamMaxRetries: 0
          },
          settings: Codex.offlineSettings
        })
    )
  },
  gemini: {
    name: "Gemini CLI",
    target: 0.3,
    dirs: ["profile/.gemini", "home", "tmp", "work"],
    driver: Effect.map(
      GeminiServer.make({ respond: () => GeminiServer.reply("plain answer") }),
      (server) =>
        Gemini.driver({
          model: "gemini-2.5-flash",
          env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
        })
    )
  }
}

const Echo = Tool.make("echo", {
  description: "Echo the text back.",
  input: { text: Schema.String },
  output: Schema.Struct({ text: Schema.String }),
  revision: "echo/v1"
})
const Tools = Toolkit.make(Echo)

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const tempRoot = (dirs: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "bench-live-driver-"))
      for (const dir of dirs) Fs.mkdirSync(Path.join(root, dir), { recursive: true })
      return root
    }),
    (root) => Effect.sync(() => Fs.rmSync(root, { recursive: true, force: true }))
  )

const writeFiles = (request: Driver.InvocationRequest, invocation: Driver.Invocation) =>
  Effect.sync(() => {
    for (const file of invocation.files) {
      const target = Path.join(request.profileDir, file.path)
      Fs.mkdirSync(Path.dirname(target), { recursive: true })
      Fs.writeFileSync(target, file.content, { mode: file.mode ?? 0o600 })
    }
  })

const isTerminal = (output: Driver.Output): output is Driver.Terminal => output._tag === "Terminal"

const expectAnswer = (what: string, outputs: ReadonlyArray<Driver.Output>) => {
  const terminal = outputs.find(isTerminal)
  return terminal?.ok === true && terminal.text === "plain answer"
    ? Effect.void
    : Effect.dieMessage(`${what}: unexpected turn ${JSON.stringify(terminal ?? outputs.at(-1))}`)
}

/** One provider's figures: `turns` measured turns of each kind. */
export const measureProvider = (key: string, turns = 5): Effect.Effect<LiveDriverFigures, unknown> => {
  const provider = providers[key]
  if (provider === undefined) return Effect.dieMessage(`unknown provider ${key}`)
  return Effect.gen(function*() {
    const driver = yield* provider.driver
    const gateway = yield* Gateway.Gateway
    const executor = yield* Toolkit.executor(Tools).pipe(
      Effect.provide(Tools.toLayer({ echo: ({ text }) => Effect.succeed({ text }) }))
    )
    const registration = yield* gateway.register(executor)
    const mint = registration.credential({ tools: ["echo"], injectedArguments: driver.injectedArguments ?? [] })
    const requestIn = (root: string, session: Driver.SessionRequest, prompt: string): Driver.InvocationRequest => ({
      runId: crypto.randomUUID(),
      prompt,
      model: undefined,
      profileDir: Path.join(root, "profile"),
      siblings: { home: Path.join(root, "home"), tmp: Path.join(root, "tmp") },
      workspace: Path.join(root, "work"),
      hosted: { key: "tether", url: registration.url, tokenVariable: registration.tokenVariable, tools: ["echo"] },
      instructions: "",
      skills: [],
      mcp: [],
      session,
      sandbox: undefined,
      hostEnv: { PATH: process.env["PATH"] }
    })
    const spawn = (invocation: Driver.Invocation, token: Redacted.Redacted<string>) =>
      LiveChannel.spawn({
        ...invocation,
        env: { ...invocation.env, [registration.tokenVariable]: Redacted.value(token) }
      })

    const coldRoot = yield* tempRoot(provider.dirs)
    /** One one-shot turn: [ms to the terminal, ms to the exit]. */
    const coldTurn = Effect.scoped(Effect.gen(function*() {
      const request = requestIn(coldRoot, { _tag: "New", id: crypto.randomUUID() }, "hello")
      const credential = yield* mint
      const invocation = yield* driver.prepare(request)
      yield* writeFiles(request, invocation)
      const start = performance.now()
      const proc = yield* spawn(invocation, credential.token)
      if (invocation.stdin !== undefined) yield* proc.channel.write(invocation.stdin.replace(/\n$/, ""))
      yield* proc.channel.closeInput
      const outputs = yield* driver.parse(proc.channel.lines, { hostedKey: "tether", session: request.session }).pipe(
        Stream.takeUntil(isTerminal),
        Stream.runCollect
      )
      const toTerminal = performance.now() - start
      yield* expectAnswer("cold turn", Array.from(outputs))
      yield* proc.exitCode
      return [toTerminal, performance.now() - start] as const
    }))

    const liveRoot = yield* tempRoot(provider.dirs)
    const opened = requestIn(liveRoot, { _tag: "New", id: crypto.randomUUID() }, "")
    const credential = yield* mint
    const invocation = yield* driver.live!.open(opened)
    yield* writeFiles(opened, invocation)
    const spawned = performance.now()
    const proc = yield* spawn(invocation, credential.token)
    const session = yield* driver.live!.attach(
      proc.channel,
      LiveChannel.context(opened, { hostedToken: credential.token, hostedToolsListed: credential.listed })
    )
    const warmTurn = Effect.gen(function*() {
      const start = performance.now()
      const outputs = yield* Stream.runCollect(session.turn({ runId: crypto.randomUUID(), prompt: "hello" }))
      const ms = performance.now() - start
      yield* expectAnswer("warm turn", Array.from(outputs))
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
    yield* proc.exitCode.pipe(Effect.timeout("10 seconds"), Effect.ignore)
    const coldMs = median(cold)
    const warmMs = median(warm)
    return {
      provider: provider.name,
      turns,
      coldMs,
      coldExitMs: median(coldExit),
      firstMs,
      warmMs,
      ratio: warmMs / coldMs,
      target: provider.target
    }
  }).pipe(Effect.scoped, Effect.provide(Layer.merge(Gateway.layer(), NodeContext.layer)))
}

/** The line printed per provider. */
export const format = (f: LiveDriverFigures): string =>
  `${f.provider}, same offline plain turn, ${f.turns} each: cold one-shot ${f.coldMs.toFixed(0)} ms to its terminal ` +
  `(${f.coldExitMs.toFixed(0)} ms to exit), warm live turn ${f.warmMs.toFixed(1)} ms: ${f.ratio.toFixed(3)}× ` +
  `(target ≤ ${f.target.toFixed(2)}×); the live process's first turn ${f.firstMs.toFixed(0)} ms from spawn`

const isMain = process.argv[1] !== undefined && import.meta.url.endsWith(Path.basename(process.argv[1]))
if (isMain) {
  const turns = Number(process.argv[2] ?? 5)
  const keys = process.argv.length > 3 ? process.argv.slice(3) : Object.keys(providers)
  Effect.runPromise(
    Effect.forEach(
      keys,
      (key) =>
        Effect.flatMap(measureProvider(key, turns), (f) => Effect.sync(() => process.stdout.write(`${format(f)}\n`))),
      {
        discard: true
      }
    )
  ).catch((error: unknown) => {
    console.error(error)
    process.exitCode = 1
  })
}
