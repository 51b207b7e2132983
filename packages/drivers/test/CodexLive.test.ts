/**
 * The live Codex driver with the real binary (`@openai/codex` 0.171.0, the native binary of the
 * platform package) offline: `codex app-server` spawned from `Codex.driver(...).live.open` behind
 * a `LiveChannel`, the scripted Responses server as the model, and a real gateway registration
 * serving the host tools. Each test writes the invocation's files into a temp clone as core does.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Codex } from "@tether/drivers"
import { Gateway } from "@tether/gateway"
import { LiveChannel, ResponsesServer } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Chunk from "effect/Chunk"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as FsPromises from "node:fs/promises"
import * as Path from "node:path"
import { baseRequest, runTurn, tempRoot } from "./ClaudeHarness.js"
import type { Root } from "./ClaudeHarness.js"

const Echo = Tool.make("echo", {
  description: "Echo text.",
  input: { text: Schema.String },
  output: Schema.String,
  revision: "echo/v1"
})
const SlowEcho = Tool.make("slow_echo", {
  description: "Echo text after a pause.",
  input: { text: Schema.String, ms: Schema.Number },
  output: Schema.String,
  revision: "slow_echo/v1"
})
const Tools = Toolkit.make(Echo, SlowEcho)
const ToolsLive = Tools.toLayer({
  echo: ({ text }) => Effect.succeed(`ECHO:${text}`),
  slow_echo: ({ ms, text }) => Effect.sleep(Duration.millis(ms)).pipe(Effect.as(`SLOW:${text}`))
})

const driverFor = (server: ResponsesServer.ResponsesServer, settings: Codex.TomlTable = {}) =>
  Codex.driver({
    model: "fake-model",
    modelProvider: {
      id: "fake",
      baseUrl: server.baseUrl,
      apiKey: Redacted.make("sk-fake-codex"),
      requestMaxRetries: 0,
      streamMaxRetries: 0
    },
    settings: { ...Codex.offlineSettings, ...settings }
  })

/** The scripted model: `[tool]` calls echo, `[slow tool]` calls slow_echo, `[slow model]` answers late. */
const script: ResponsesServer.Script = (request) => {
  const outputs = ResponsesServer.functionCallOutputs(request).map((output) => output.text)
  const last = ResponsesServer.userTexts(request).at(-1) ?? ""
  if (last.includes("STEER-7f3a")) {
    return ResponsesServer.text(`steered after ${outputs.some((o) => o.includes("SLOW:zzz")) ? "the tool" : "nothing"}`)
  }
  if (ResponsesServer.lastFunctionCallOutput(request) !== undefined) {
    return ResponsesServer.text(`FINAL ${outputs.at(-1)?.includes("ECHO:warm") ? "echoed" : "missing"}`)
  }
  if (last.includes("[tool]")) return ResponsesServer.mcpTool("tether", "echo", { text: "warm" })
  if (last.includes("[slow tool]")) return ResponsesServer.mcpTool("tether", "slow_echo", { text: "zzz", ms: 2500 })
  if (last.includes("[very slow tool]")) {
    return ResponsesServer.mcpTool("tether", "slow_echo", { text: "zzz", ms: 60_000 })
  }
  if (last.includes("[slow model]")) return ResponsesServer.delayed(60_000, ResponsesServer.text("too late"))
  if (last.includes("[think]")) {
    return ResponsesServer.text(`answer ${request.index}`, { reasoning: "weighing the word" })
  }
  return ResponsesServer.text(`answer ${request.index}`)
}

const prompts = (request: ResponsesServer.RecordedRequest) =>
  ResponsesServer.userTexts(request).filter((t) => !t.startsWith("<environment_context>"))
const terminalOf = (outputs: ReadonlyArray<Driver.Output>) =>
  outputs.find((o): o is Driver.Terminal => o._tag === "Terminal")
const tagsOf = (outputs: ReadonlyArray<Driver.Output>) =>
  outputs.map((o) => o._tag).filter((tag) => tag !== "TextDelta")
const writtenMethods = (proc: LiveChannel.LiveProcess) =>
  proc.frames.filter((f) => f.dir === "in").map((f) => (JSON.parse(f.line) as { method?: string }).method)
const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Codex processes whose working directory lies under `dir` (grandchildren included). */
const codexProcessesUnder = (dir: string) =>
  Effect.promise(async () => {
    const found: Array<number> = []
    for (const entry of await FsPromises.readdir("/proc")) {
      if (!/^[0-9]+$/.test(entry)) continue
      try {
        const exe = await FsPromises.readlink(`/proc/${entry}/exe`)
        const cwd = await FsPromises.readlink(`/proc/${entry}/cwd`)
        if (exe.includes("codex") && cwd.startsWith(dir)) found.push(Number(entry))
      } catch {
        // gone or not ours
      }
    }
    return found
  })

/** Polls `check` until it holds (20 s at most: the test fails rather than hangs). */
const eventually = (what: string, check: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 20_000
    while (!(yield* check)) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.sleep("25 millis")
    }
  })

interface Setup {
  readonly root: Root
  readonly server: ResponsesServer.ResponsesServer
  readonly driver: Driver.Driver
  readonly registration: Gateway.Registration
  readonly request: (overrides?: Partial<Driver.InvocationRequest>) => Driver.InvocationRequest
}

const setup = (settings: Codex.TomlTable = {}) =>
  Effect.gen(function*() {
    const root = yield* tempRoot
    const server = yield* ResponsesServer.make({ script })
    const gateway = yield* Gateway.make()
    const registration = yield* gateway.register(yield* Toolkit.executor(Tools))
    const request = (overrides: Partial<Driver.InvocationRequest> = {}) =>
      baseRequest(root, registration.url, {
        prompt: "",
        hosted: {
          key: "tether",
          url: registration.url,
          tokenVariable: registration.tokenVariable,
          tools: ["echo", "slow_echo"]
        },
        ...overrides
      })
    return { root, server, driver: driverFor(server, settings), registration, request } satisfies Setup
  })

/** Opens, materializes and spawns a live process, as core does. */
const spawnLive = (
  s: Setup,
  session: Driver.SessionRequest,
  token = Redacted.value(s.registration.token),
  sandbox?: Driver.SandboxLevel
) =>
  Effect.gen(function*() {
    const request = s.request({ session, sandbox })
    const invocation = yield* s.driver.live!.open(request)
    for (const file of invocation.files) {
      Fs.writeFileSync(Path.join(request.profileDir, file.path), file.content, { mode: file.mode ?? 0o600 })
    }
    return yield* LiveChannel.spawn({
      ...invocation,
      env: { ...invocation.env, [s.registration.tokenVariable]: token }
    })
  })

/** A spawned process with its session attached. */
const start = (
  s: Setup,
  session: Driver.SessionRequest,
  token = Redacted.value(s.registration.token),
  sandbox?: Driver.SandboxLevel
) =>
  Effect.gen(function*() {
    const proc = yield* spawnLive(s, session, token, sandbox)
    const live = yield* s.driver.live!.attach(proc.channel, LiveChannel.context(s.request({ session })))
    return { proc, live }
  })

const turn = (live: Driver.LiveSession, prompt: string) =>
  live.turn({ runId: crypto.randomUUID(), prompt }).pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray))

/** A turn consumed on its own fiber; `outputs` fills as they arrive. */
const background = (live: Driver.LiveSession, prompt: string) =>
  Effect.gen(function*() {
    const outputs: Array<Driver.Output> = []
    const fiber = yield* live.turn({ runId: crypto.randomUUID(), prompt }).pipe(
      Stream.runForEach((output) => Effect.sync(() => outputs.push(output))),
      Effect.either,
      Effect.fork
    )
    return { outputs, fiber }
  })

const timings: Array<[string, number]> = []
const timed = <A, E, R>(name: string, effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const started = performance.now()
    const value = yield* effect
    timings.push([name, performance.now() - started])
    return value
  })

const withTools = <A, E>(effect: Effect.Effect<A, E, any>) =>
  effect.pipe(Effect.scoped, Effect.provide(ToolsLive), Effect.provide(NodeContext.layer)) as Effect.Effect<A, E>

describe("Codex live driver with the real app-server (driver level)", () => {
  it.live("three turns on one process; a host tool call on a warm turn; turn 3's request carries turns 1-2", () =>
    withTools(Effect.gen(function*() {
      const s = yield* setup()
      const { live, proc } = yield* timed("spawn + attach", start(s, { _tag: "New", id: "thread-a" }))
      const first = yield* timed("turn 1 (first)", turn(live, "first: remember BANANA"))
      const second = yield* timed("turn 2 (warm, host tool)", turn(live, "second: [tool] please"))
      const third = yield* timed("turn 3 (warm)", turn(live, "third: [think] what word?"))

      const thread = (first[0] as Extract<Driver.Output, { _tag: "SessionStarted" }>).sessionId
      expect(first[0]).toEqual({ _tag: "SessionStarted", sessionId: thread, model: "fake-model" })
      expect(thread).toMatch(/^[0-9a-f-]{36}$/)
      // The same outputs as the one-shot parser gives for a plain turn, plus the text's deltas.
      expect(tagsOf(first)).toEqual(["SessionStarted", "Notice", "Message", "Usage", "Terminal"])
      expect(first.filter((o) => o._tag === "TextDelta").map((o) => (o as { text: string }).text).join(""))
        .toBe("answer 0")
      expect(terminalOf(first)).toMatchObject({ ok: true, text: "answer 0", session: thread })
      expect(tagsOf(second)).toEqual(["Notice", "ToolCall", "ToolCall", "Message", "Usage", "Terminal"])
      expect(second.filter((o) => o._tag === "ToolCall")).toEqual([
        expect.objectContaining({ phase: "start", name: "echo", source: "host", input: { text: "warm" } }),
        expect.objectContaining({ phase: "end", name: "echo", source: "host", output: { result: "ECHO:warm" } })
      ])
      expect(terminalOf(second)).toMatchObject({ ok: true, text: "FINAL echoed" })
      expect(terminalOf(third)).toMatchObject({ ok: true, text: "answer 3", session: thread })
      expect(third.filter((o) => o._tag === "ReasoningDelta")).toEqual([
        { _tag: "ReasoningDelta", text: "weighing the word" }
      ])
      // Usage is the thread's running total, as `exec --json` reports it: 4 requests of 10 in, 5 out.
      expect(terminalOf(third)?.usage).toMatchObject({ inputTokens: 40, outputTokens: 20 })

      const requests = yield* s.server.requests
      expect(requests).toHaveLength(4)
      expect(prompts(requests[3]!)).toEqual([
        "first: remember BANANA",
        "second: [tool] please",
        "third: [think] what word?"
      ])
      expect(ResponsesServer.assistantTexts(requests[3]!)).toEqual(["answer 0", "FINAL echoed"])
      expect(ResponsesServer.functionCallOutputs(requests[3]!).map((o) => o.text.includes("ECHO:warm"))).toEqual([true])
      // One process: initialized once, three turns written to it, still running.
      expect(writtenMethods(proc)).toEqual([
        "initialize",
        "initialized",
        "thread/start",
        "turn/start",
        "turn/start",
        "turn/start"
      ])
      expect(alive(proc.pid)).toBe(true)

      // The one-shot driver maps the same turn to the same outputs (deltas and ids aside).
      const oneShotRoot = yield* tempRoot
      const oneShot = yield* runTurn(
        s.driver,
        baseRequest(oneShotRoot, s.registration.url, {
          prompt: "second: [tool] please",
          hosted: s.request().hosted
        }),
        Redacted.value(s.registration.token)
      )
      const comparable = (outputs: ReadonlyArray<Driver.Output>) =>
        outputs.flatMap((o): Array<unknown> => {
          switch (o._tag) {
            case "ToolCall": {
              const { callId: _, ...rest } = o
              return [rest]
            }
            case "Message":
            case "Notice":
              return [{ _tag: o._tag, text: "text" in o ? o.text : o.message }]
            case "Terminal":
              return [{ _tag: o._tag, ok: o.ok, text: o.text, error: o.error }]
            default:
              return []
          }
        })
      expect(comparable(second)).toEqual(comparable(oneShot.outputs))

      if (process.env["RECORD_CODEX_LIVE"] !== undefined) {
        // The app-server's stdout (parser tests, fuzz seeds) and every frame both ways (replays).
        const dir = Path.join(import.meta.dirname, "fixtures", "codex-live")
        const stdout = proc.frames.filter((frame) => frame.dir === "out").map((frame) => frame.line)
        Fs.writeFileSync(Path.join(dir, "session.jsonl"), stdout.join("\n") + "\n")
        Fs.writeFileSync(Path.join(dir, "session.frames.json"), JSON.stringify(proc.frames, null, 1) + "\n")
      }
    })))

  it.live("interrupt during a slow model reply and during a slow host tool: ok:false, the next turn on the same process", () =>
    withTools(Effect.gen(function*() {
      const s = yield* setup()
      const { live, proc } = yield* start(s, { _tag: "New", id: "thread-b" })

      const slowModel = yield* background(live, "[slow model] take your time")
      yield* eventually("the model request", Effect.map(s.server.requests, (r) => r.length === 1))
      yield* timed("interrupt (slow model) → terminal", Effect.zipRight(live.interrupt, Fiber.join(slowModel.fiber)))
      expect(Either.isRight(yield* Fiber.join(slowModel.fiber))).toBe(true)
      expect(terminalOf(slowModel.outputs)).toMatchObject({ ok: false, error: "the turn was interrupted" })

      const slowTool = yield* background(live, "[very slow tool] please")
      yield* eventually("the tool call", Effect.sync(() => slowTool.outputs.some((o) => o._tag === "ToolCall")))
      yield* timed("interrupt (slow tool) → terminal", Effect.zipRight(live.interrupt, Fiber.join(slowTool.fiber)))
      expect(terminalOf(slowTool.outputs)).toMatchObject({ ok: false, error: "the turn was interrupted" })
      expect(slowTool.outputs.filter((o) => o._tag === "ToolCall")).toEqual([
        expect.objectContaining({ phase: "start", name: "slow_echo", source: "host" })
      ])

      // A consumer that stops reading (its fiber interrupted) interrupts the turn as well.
      const dropped = yield* background(live, "[slow model] dropped")
      yield* eventually("the third model request", Effect.map(s.server.requests, (r) => r.length === 3))
      yield* Fiber.interrupt(dropped.fiber)

      const after = yield* timed("turn after interrupts", turn(live, "after the interrupts"))
      expect(terminalOf(after)).toMatchObject({ ok: true })
      expect(alive(proc.pid)).toBe(true)
      expect(writtenMethods(proc).filter((m) => m === "initialize")).toHaveLength(1)
      const requests = yield* s.server.requests
      // No sandbox level asked: the profile's default (read-only) holds.
      expect(ResponsesServer.userTexts(requests[0]!).join("")).not.toContain(`access="write"><path>${s.root.work}`)
      // Codex tells the model about the aborted turns.
      expect(ResponsesServer.userTexts(requests.at(-1)!).filter((t) => t.includes("<turn_aborted>"))).toHaveLength(3)
      expect(writtenMethods(proc).filter((m) => m === "turn/interrupt")).toHaveLength(3)
      // Interrupting with no turn running does nothing.
      yield* live.interrupt
    })))

  it.live("steer during a running host tool call reaches the model in the same turn", () =>
    withTools(Effect.gen(function*() {
      const s = yield* setup()
      const { live } = yield* start(s, { _tag: "New", id: "thread-c" }, undefined, "workspaceWrite")
      const running = yield* background(live, "[slow tool] and listen")
      yield* eventually("the tool call", Effect.sync(() => running.outputs.some((o) => o._tag === "ToolCall")))
      const delivery = yield* live.steer!("STEER-7f3a: also mention this")
      expect(delivery).toEqual({ _tag: "Injected" })
      expect(Either.isRight(yield* Fiber.join(running.fiber))).toBe(true)
      expect(running.outputs.filter((o) => o._tag === "Terminal")).toHaveLength(1)
      expect(terminalOf(running.outputs)).toMatchObject({ ok: true, text: "steered after the tool" })
      const requests = yield* s.server.requests
      expect(requests).toHaveLength(2)
      expect(prompts(requests[1]!)).toEqual(["[slow tool] and listen", "STEER-7f3a: also mention this"])
      // The turn's sandbox level reached the process: the workspace is writable.
      const context = ResponsesServer.userTexts(requests[0]!).find((t) => t.startsWith("<environment_context>"))
      expect(context).toContain(`<entry access="write"><path>${s.root.work}</path></entry>`)
      // No turn running: steering fails `NoActiveTurn` (core answers it without calling steer when
      // it knows no turn runs, and passes it on when the provider's turn ended first).
      const idle = yield* Effect.either(live.steer!("late"))
      expect(Either.isLeft(idle) && idle.left.reason).toBe("NoActiveTurn")
    })))

  it.live("resume and fork in new processes carry the earlier turns; shutdown leaves nothing; an unknown thread is ResumeRejected", () =>
    withTools(Effect.gen(function*() {
      const s = yield* setup()
      const first = yield* start(s, { _tag: "New", id: "thread-d" })
      const one = yield* turn(first.live, "first question")
      const thread = terminalOf(one)!.session!
      yield* first.live.shutdown
      expect(yield* first.proc.exitCode.pipe(Effect.timeout("10 seconds"))).toBe(0)
      expect(yield* codexProcessesUnder(s.root.root)).toEqual([])

      const resumed = yield* start(s, { _tag: "Resume", id: thread })
      const two = yield* timed("resumed turn (new process)", turn(resumed.live, "second question"))
      expect(two[0]).toEqual({ _tag: "SessionStarted", sessionId: thread, model: "fake-model" })
      expect(terminalOf(two)).toMatchObject({ ok: true, text: "answer 1", session: thread })
      expect(writtenMethods(resumed.proc)).toContain("thread/resume")
      let requests = yield* s.server.requests
      expect(prompts(requests[1]!)).toEqual(["first question", "second question"])
      expect(ResponsesServer.assistantTexts(requests[1]!)).toEqual(["answer 0"])
      yield* resumed.live.shutdown
      expect(yield* resumed.proc.exitCode.pipe(Effect.timeout("10 seconds"))).toBe(0)

      const forked = yield* start(s, { _tag: "Fork", from: thread, id: "unused" })
      const three = yield* turn(forked.live, "forked question")
      expect(terminalOf(three)?.session).not.toBe(thread)
      expect(three[0]).toMatchObject({ _tag: "SessionStarted", sessionId: terminalOf(three)?.session })
      requests = yield* s.server.requests
      expect(prompts(requests[2]!)).toEqual(["first question", "second question", "forked question"])
      yield* forked.live.shutdown
      expect(yield* forked.proc.exitCode.pipe(Effect.timeout("10 seconds"))).toBe(0)

      const unknown = yield* Effect.either(start(s, { _tag: "Resume", id: "0199a213-81c0-7800-8aa1-bbab2a035a53" }))
      expect(Either.isLeft(unknown) && unknown.left).toMatchObject({ _tag: "ProtocolError", reason: "ResumeRejected" })
      expect(yield* s.server.requests).toHaveLength(3)
    })))

  it.live("a killed app-server fails the running turn with a ProtocolError (partial outputs kept), and nothing hangs", () =>
    withTools(Effect.gen(function*() {
      const s = yield* setup()
      const { live, proc } = yield* start(s, { _tag: "New", id: "thread-e" })
      const running = yield* background(live, "[slow model] never mind")
      yield* eventually("the model request", Effect.map(s.server.requests, (r) => r.length === 1))
      yield* proc.kill
      const result = yield* Fiber.join(running.fiber).pipe(Effect.timeout("10 seconds"))
      expect(Either.isLeft(result) && result.left).toMatchObject({ _tag: "ProtocolError", reason: "ProviderError" })
      expect(Either.isLeft(result) && result.left.detail).toContain("exited")
      expect(running.outputs[0]).toMatchObject({ _tag: "SessionStarted" })
      expect(terminalOf(running.outputs)).toBeUndefined()
      const next = yield* Effect.either(turn(live, "anyone?")).pipe(Effect.timeout("10 seconds"))
      expect(Either.isLeft(next) && next.left.reason).toBe("ProviderError")
      yield* live.interrupt.pipe(Effect.timeout("10 seconds"))
      expect(yield* codexProcessesUnder(s.root.root)).toEqual([])
    })))

  it.live("a configuration Codex rejects fails attach (its reason on stderr); a wrong token is HostedToolsUnavailable", () =>
    withTools(Effect.gen(function*() {
      // With `-c` overrides on its command line Codex validates its configuration at start-up
      // and exits 1 before answering `initialize`: the reason is on stderr, where core reads it.
      const bad = yield* setup({ sandbox_mode: "bogus-mode" })
      const session: Driver.SessionRequest = { _tag: "New", id: "thread-f" }
      const proc = yield* spawnLive(bad, session)
      const rejected = yield* Effect.either(
        bad.driver.live!.attach(proc.channel, LiveChannel.context(bad.request({ session })))
      )
      expect(Either.isLeft(rejected) && rejected.left).toMatchObject({ _tag: "ProtocolError", reason: "ProviderError" })
      expect(Either.isLeft(rejected) && rejected.left.detail).toContain("before answering initialize")
      expect(yield* proc.exitCode).toBe(1)
      expect(proc.stderr()).toContain("unknown variant `bogus-mode`")

      const s = yield* setup()
      // The hosted tools are `required`: `thread/start` fails before any turn.
      const outcome = yield* Effect.either(start(s, { _tag: "New", id: "thread-g" }, "not-the-token"))
      expect(Either.isLeft(outcome) && outcome.left).toMatchObject({
        _tag: "ProtocolError",
        reason: "HostedToolsUnavailable"
      })
      expect(yield* s.server.requests).toHaveLength(0)
      for (const [name, ms] of timings) console.log(`[codex live] ${name}: ${ms.toFixed(0)} ms`)
    })))
})
