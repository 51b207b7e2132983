/**
 * Live sessions, Codex (the warm-vs-cold figure of issue 18): a warm turn on a live
 * `codex app-server` vs a cold one-shot `codex exec` turn, the same offline turn (a plain answer
 * from the scripted Responses server, the hosted-tools MCP server declared on a real gateway
 * registration as the driver always does), both through `Codex.driver(...)` at the driver
 * level, turns interleaved in one process:
 * - cold: `prepare` → clone files → spawn (the prompt fed on stdin) → `parse` until the
 *   `Terminal` (the time to the process exit is reported beside it);
 * - warm: the second and later `turn`s of one live session (spawned and attached once, its first
 *   turn reported beside it, spawn and handshake included).
 * Ratio = warm median / cold median to the terminal (target ≤ 0.3×).
 *
 * Run: node --conditions=@tether/source --import tsx bench/liveCodex.ts [turns=5]
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Command from "@effect/platform/Command"
import type * as Driver from "@tether/core/Driver"
import { Codex } from "@tether/drivers"
import { Gateway } from "@tether/gateway"
import { LiveChannel, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

export interface LiveCodexFigures {
  readonly turns: number
  /** Cold one-shot turn: spawn → `Terminal`. */
  readonly coldMs: number
  /** Cold one-shot turn: spawn → exit. */
  readonly coldExitMs: number
  /** Spawn + attach + first turn of the live session. */
  readonly firstMs: number
  /** Second and later turns of the live session. */
  readonly warmMs: number
  readonly ratio: number
}

const median = (xs: ReadonlyArray<number>) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

const tempRoot = Effect.acquireRelease(
  Effect.sync(() => {
    const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "bench-live-codex-"))
    for (const dir of ["profile", "home", "tmp", "work"]) Fs.mkdirSync(Path.join(root, dir))
    return root
  }),
  (root) => Effect.sync(() => Fs.rmSync(root, { recursive: true, force: true }))
)

const writeFiles = (request: Driver.InvocationRequest, invocation: Driver.Invocation) =>
  Effect.sync(() => {
    for (const file of invocation.files) {
      Fs.writeFileSync(Path.join(request.profileDir, file.path), file.content, { mode: file.mode ?? 0o600 })
    }
  })

const terminalText = (outputs: ReadonlyArray<Driver.Output>) =>
  outputs.find((o): o is Driver.Terminal => o._tag === "Terminal")?.text

/** Warm and cold turns, interleaved, `turns` of each. */
export const measure = (turns = 5): Effect.Effect<LiveCodexFigures, unknown> =>
  Effect.gen(function*() {
    const server = yield* ResponsesServer.make({ script: () => ResponsesServer.text("plain answer") })
    const gateway = yield* Gateway.make()
    const registration = yield* gateway.register(yield* Toolkit.executor(Toolkit.empty))
    const token = Redacted.value(registration.token)
    const driver = Codex.driver({
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
    const requestFor = (root: string, session: Driver.SessionRequest, prompt: string): Driver.InvocationRequest => ({
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
      session,
      sandbox: undefined,
      hostEnv: { PATH: process.env["PATH"] }
    })

    const cold = (root: string) =>
      Effect.scoped(Effect.gen(function*() {
        const request = requestFor(root, { _tag: "New", id: crypto.randomUUID() }, "hello")
        const start = performance.now()
        const invocation = yield* driver.prepare(request)
        yield* writeFiles(request, invocation)
        const proc = yield* Command.start(
          Command.make(invocation.command, ...invocation.args).pipe(
            Command.workingDirectory(invocation.cwd),
            Command.env({ ...invocation.env, [registration.tokenVariable]: token }, { extendEnv: false }),
            Command.feed(invocation.stdin ?? "")
          )
        )
        yield* proc.stderr.pipe(Stream.runDrain, Effect.forkScoped)
        let terminal = 0
        const outputs = yield* driver.parse(
          proc.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.orDie),
          { hostedKey: "tether", session: request.session }
        ).pipe(
          Stream.tap((o) => Effect.sync(() => o._tag === "Terminal" && (terminal = performance.now() - start))),
          Stream.runCollect
        )
        yield* proc.exitCode
        if (terminalText([...outputs]) !== "plain answer") return yield* Effect.dieMessage("cold turn: no answer")
        return { terminal, exit: performance.now() - start }
      }))

    const liveRoot = yield* tempRoot
    const coldRoot = yield* tempRoot
    const firstStart = performance.now()
    const session: Driver.SessionRequest = { _tag: "New", id: "bench" }
    const request = requestFor(liveRoot, session, "")
    const invocation = yield* driver.live!.open(request)
    yield* writeFiles(request, invocation)
    const proc = yield* LiveChannel.spawn({
      ...invocation,
      env: { ...invocation.env, [registration.tokenVariable]: token }
    })
    const live = yield* driver.live!.attach(proc.channel, LiveChannel.context(request))
    const turn = Effect.gen(function*() {
      const outputs = yield* Stream.runCollect(live.turn({ runId: crypto.randomUUID(), prompt: "hello" }))
      if (terminalText([...outputs]) !== "plain answer") return yield* Effect.dieMessage("warm turn: no answer")
    })
    yield* turn
    const firstMs = performance.now() - firstStart

    const warm: Array<number> = []
    const coldTerminal: Array<number> = []
    const coldExit: Array<number> = []
    for (let i = 0; i < turns; i++) {
      const start = performance.now()
      yield* turn
      warm.push(performance.now() - start)
      const { exit, terminal } = yield* cold(coldRoot)
      coldTerminal.push(terminal)
      coldExit.push(exit)
    }
    yield* live.shutdown
    yield* proc.exitCode.pipe(Effect.timeout("10 seconds"))
    const warmMs = median(warm)
    const coldMs = median(coldTerminal)
    return { turns, coldMs, coldExitMs: median(coldExit), firstMs, warmMs, ratio: warmMs / coldMs }
  }).pipe(Effect.scoped, Effect.provide(NodeContext.layer))

/** The line printed when run directly. */
export const format = (f: LiveCodexFigures): string =>
  `Codex plain turn, ${f.turns} each: cold one-shot ${f.coldMs.toFixed(0)} ms to its terminal (${
    f.coldExitMs.toFixed(0)
  } ms to exit), warm live turn ${f.warmMs.toFixed(0)} ms: ${f.ratio.toFixed(3)}× (target ≤ 0.3×); ` +
  `live spawn + attach + first turn ${f.firstMs.toFixed(0)} ms`

const isMain = process.argv[1] !== undefined && import.meta.url.endsWith(Path.basename(process.argv[1]))
if (isMain) {
  Effect.runPromise(measure(Number(process.argv[2] ?? 5))).then((f) => process.stdout.write(`${format(f)}\n`))
}
