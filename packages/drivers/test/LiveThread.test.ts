/**
 * Live threads through the public API (DESIGN §12), with the real pinned CLIs offline against the
 * scripted model servers, the same clauses for every live driver (Claude Code, Codex, Gemini):
 * a thread's turns run on one warm process (same pid), a host tool works on a warm turn, a later
 * turn's request carries the earlier ones, `send` steers a running tool call (or fails
 * `UnsupportedCapability` on Gemini) and fails `NoActiveTurn` without a turn, an interrupted turn
 * ends `RunFinished(canceled)` and the next one reuses the process, a crash mid-turn is a
 * `RunError` and the next turn resumes the checkpoint on a fresh process, a tool-policy change
 * restarts the process with only the new tools, and the agent's close with an idle and a busy
 * live process leaves nothing (marker scan, clones, 401).
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, ThreadStore } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import type * as Event from "@tether/core/Event"
import { Codex, Gemini } from "@tether/drivers"
import { Gateway } from "@tether/gateway"
import { AnthropicServer, GeminiServer, Harness, ResponsesServer } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { driverFor as claudeDriver, respond as claudeRespond } from "./ClaudeLiveHarness.js"

const Wait = Tool.make("wait", {
  description: "Wait for the given number of milliseconds.",
  input: { ms: Schema.Number },
  output: Schema.Struct({ waited: Schema.Number }),
  revision: "wait/v1"
})
const Echo = Tool.make("echo", {
  description: "Echo the text.",
  input: { text: Schema.String },
  output: Schema.String,
  revision: "echo/v1"
})
const Tools = Toolkit.make(Wait, Echo)
const ToolsLive = Tools.toLayer({
  wait: ({ ms }) => Effect.as(Effect.sleep(ms), { waited: ms }),
  echo: ({ text }) => Effect.succeed(`ECHO:${text}`)
})

/**
 * A live driver against its scripted model. The model reads the last user line: `CALL <ms>` calls
 * the host tool `wait`; `SLOW <ms>` answers after that delay; anything else gets `answer to
 * <line>`; after a tool result it answers `FINAL`.
 */
interface Subject {
  readonly name: string
  readonly steers: boolean
  /**
   * A fresh process resuming a session costs up to a minute (Gemini CLI 0.61 cannot load a
   * session in the minute it was written: `Gemini.driver`'s `live.open` waits): the crash and
   * the policy change share one restart.
   */
  readonly slowResume: boolean
  readonly make: Effect.Effect<
    {
      readonly driver: Driver.Driver
      /** Every model request so far, as JSON text, and the hosted tools it declared (catalog names). */
      readonly requests: Effect.Effect<ReadonlyArray<{ readonly text: string; readonly tools: ReadonlyArray<string> }>>
    },
    unknown,
    Scope.Scope
  >
}

const lineOf = (text: string) => text.trim().split("\n").at(-1)!.trim()

const claude: Subject = {
  name: "Claude Code",
  steers: true,
  slowResume: false,
  make: Effect.map(AnthropicServer.make({ respond: claudeRespond }), (server) => ({
    driver: claudeDriver(server),
    requests: Effect.map(server.messages, (all) =>
      all.map((m) => ({
        text: JSON.stringify(m.messages),
        tools: (m.tools ?? []).flatMap((t) => t.name.startsWith("mcp__tether__") ? [t.name.slice(13)] : [])
      })))
  }))
}

const codex: Subject = {
  name: "Codex",
  steers: true,
  slowResume: false,
  make: Effect.map(
    ResponsesServer.make({
      script: (request) => {
        if (ResponsesServer.lastFunctionCallOutput(request) !== undefined) return ResponsesServer.text("FINAL")
        const line = lineOf(ResponsesServer.userTexts(request).at(-1) ?? "")
        const call = /^CALL (\d+)$/.exec(line)
        if (call !== null) return ResponsesServer.mcpTool("tether", "wait", { ms: Number(call[1]) })
        const slow = /^SLOW (\d+)$/.exec(line)
        if (slow !== null) return ResponsesServer.delayed(Number(slow[1]), ResponsesServer.text("slow answer"))
        return ResponsesServer.text(`answer to ${line}`)
      }
    }),
    (server) => ({
      driver: Codex.driver({
        model: "fake-model",
        modelProvider: {
          id: "fake",
          baseUrl: server.baseUrl,
          apiKey: Redacted.make("sk-fake-codex"),
          requestMaxRetries: 0,
          streamMaxRetries: 0
        },
        settings: Codex.offlineSettings
      }),
      requests: Effect.map(server.requests, (all) =>
        all.map((r) => ({
          text: JSON.stringify(r),
          tools: Object.entries(ResponsesServer.namespaceTools(r)).flatMap(([ns, tools]) =>
            ns.includes("tether") ? tools : []
          )
        })))
    })
  )
}

const latestPrompt = (request: GeminiServer.GenerateRequest): string => {
  const text = GeminiServer.transcript(request).at(-1)?.[1] ?? ""
  const end = "</session_context>"
  const at = text.lastIndexOf(end)
  return at === -1 ? text : text.slice(at + end.length)
}

const gemini: Subject = {
  name: "Gemini",
  steers: false,
  slowResume: true,
  make: Effect.map(
    GeminiServer.make({
      respond: GeminiServer.roundTrip((request) => {
        const line = lineOf(latestPrompt(request))
        const call = /^CALL (\d+)$/.exec(line)
        if (call !== null) return GeminiServer.callTool("wait", { ms: Number(call[1]) })
        const slow = /^SLOW (\d+)$/.exec(line)
        if (slow !== null) return GeminiServer.reply("slow answer", { delay: Number(slow[1]) })
        return GeminiServer.reply(`answer to ${line}`)
      }, () => GeminiServer.reply("FINAL"))
    }),
    (server) => ({
      driver: Gemini.driver({
        model: "gemini-2.5-flash",
        env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
      }),
      requests: Effect.map(server.generations, (all) =>
        all.map((g) => ({
          text: JSON.stringify(g),
          tools: GeminiServer.declaredTools(g).flatMap((t) => t.startsWith("mcp_tether_") ? [t.slice(11)] : [])
        })))
    })
  )
}

/** Runs `body` with an agent on `driver`, closes it through its scope, then checks nothing is left. */
const withAgent = <A, E>(
  driver: Driver.Driver,
  body: (agent: Agent.Agent) => Effect.Effect<A, E, Scope.Scope>,
  live?: Agent.Options<never>["live"]
) => {
  const observed: Array<Harness.Observed> = []
  return Effect.gen(function*() {
    // A bystander registration keeps the listener up, so the agent's revoked token gets 401.
    const gateway = yield* Gateway.Gateway
    yield* gateway.register(yield* Toolkit.executor(Tools))
    const sandbox = yield* Harness.sandbox
    const [agent, value] = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver,
        definition: { instructions: "", skills: [], tools: Tools },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        processes: { killGrace: "1 second", exitGrace: "2 seconds" },
        ...(live === undefined ? {} : { live })
      })
      return [agent, yield* body(agent)] as const
    }).pipe(Effect.scoped)
    expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    expect(yield* Harness.probe(observed[1]!)).toBe(401)
    return value
  }).pipe(Effect.scoped, Effect.provide([ToolsLive, Harness.recordingLayer(observed)]))
}

const pidOf = (events: ReadonlyArray<Event.Event>): number => {
  const pids = events.flatMap((e) => e._tag === "ProcessStarted" ? [e.pid] : [])
  expect(pids).toHaveLength(1)
  return pids[0]!
}
const finishedOf = (events: ReadonlyArray<Event.Event>): Event.RunFinished => {
  const last = events.at(-1)
  if (last?._tag !== "RunFinished") throw new Error(`the turn did not end with RunFinished: ${last?._tag}`)
  return last
}

/** A turn's events (into `events`, readable while it runs), also when it fails. */
const collect = (stream: Stream.Stream<Event.Event, unknown>, events: Array<Event.Event> = []) =>
  Effect.suspend(() => {
    return stream.pipe(
      Stream.runForEach((event) => Effect.sync(() => events.push(event))),
      Effect.either,
      Effect.map((outcome) => ({ events, outcome }))
    )
  })

/** Polls `check` until it holds (30 s at most: the test fails rather than hangs). */
const eventually = (what: string, check: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 30_000
    while (!(yield* check)) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.sleep("25 millis")
    }
  })

const killGroup = (pid: number) =>
  Effect.sync(() => {
    try {
      process.kill(-pid, "SIGKILL")
    } catch {
      // already gone
    }
  })

for (const subject of [claude, codex, gemini]) {
  describe(`live threads: ${subject.name} (real CLI)`, () => {
    it.live(
      "turns run on one warm process: a host tool, send during a tool call, interrupts (slow model, consumer stop, slow tool), the context carried",
      () =>
        Effect.gen(function*() {
          const model = yield* subject.make
          yield* withAgent(model.driver, (agent) =>
            Effect.gen(function*() {
              const thread = yield* agent.thread("warm")
              const idle = yield* Effect.flip(thread.send("nobody listens"))
              expect(idle._tag).toBe(subject.steers ? "NoActiveTurn" : "UnsupportedCapability")

              const first = yield* Stream.runCollect(thread.stream("first words"))
              const pid = pidOf(Array.from(first))
              expect(finishedOf(Array.from(first)).result.text).toBe("answer to first words")

              // A host tool on the warm process; input sent while the tool runs.
              const turn = yield* Effect.fork(collect(thread.stream("CALL 2500")))
              yield* eventually("the tool call", Effect.map(model.requests, (all) => all.length >= 2))
              const sent = yield* Effect.either(thread.send("STEER-7f3a and more"))
              const second = yield* Fiber.join(turn)
              expect(pidOf(second.events)).toBe(pid)
              expect(second.events.find((e) => e._tag === "ProcessStarted")).toMatchObject({ reused: true })
              const calls = second.events.filter((e): e is Event.ToolCall => e._tag === "ToolCall")
              expect(calls.map((c) => [c.phase, c.name, c.source])).toEqual([
                ["start", "wait", "host"],
                ["end", "wait", "host"]
              ])
              const delivered = second.events.filter((e): e is Event.InputDelivered => e._tag === "InputDelivered")
              if (subject.steers) {
                expect(sent._tag).toBe("Right")
                expect(delivered.map((e) => e.text)).toEqual(["STEER-7f3a and more"])
                const result = finishedOf(second.events).result
                expect(result.transcript).toContainEqual(
                  expect.objectContaining({ role: "user", text: "STEER-7f3a and more" })
                )
                // The model saw the input within that turn.
                const requests = yield* model.requests
                expect(requests.slice(1).some((r) => r.text.includes("STEER-7f3a"))).toBe(true)
              } else {
                expect(sent._tag === "Left" && sent.left._tag).toBe("UnsupportedCapability")
                expect(delivered).toEqual([])
              }
              expect(finishedOf(second.events).outcome).toBe("success")

              // An interrupt while the model is slow: canceled, and the process stays warm.
              const before = (yield* model.requests).length
              const cancel = yield* Deferred.make<void>()
              const slow = yield* Effect.fork(
                collect(thread.stream({ input: "SLOW 60000", cancel: Deferred.await(cancel) }))
              )
              yield* eventually("the slow request", Effect.map(model.requests, (all) => all.length > before))
              yield* Deferred.succeed(cancel, undefined)
              const canceled = yield* Fiber.join(slow)
              expect(finishedOf(canceled.events).outcome).toBe("canceled")
              expect(pidOf(canceled.events)).toBe(pid)

              // The consumer's fiber interrupted mid-turn: the same, seen on the thread's events.
              const watched: Array<Event.Event> = []
              const watcher = yield* Effect.fork(
                Stream.runForEach(thread.events, (event) => Effect.sync(() => watched.push(event)))
              )
              yield* Effect.sleep("50 millis")
              const asked = (yield* model.requests).length
              const consumer = yield* Effect.fork(Stream.runDrain(thread.stream("SLOW 60000")))
              yield* eventually("the slow request", Effect.map(model.requests, (all) => all.length > asked))
              yield* Fiber.interrupt(consumer)
              yield* eventually(
                "the interrupted turn's RunFinished",
                Effect.sync(() => watched.some((e) => e._tag === "RunFinished"))
              )
              yield* Fiber.interrupt(watcher)
              expect(watched.find((e) => e._tag === "RunFinished")).toMatchObject({ outcome: "canceled" })
              expect(pidOf(watched)).toBe(pid)

              const third = Array.from(yield* Stream.runCollect(thread.stream("third words")))
              expect(pidOf(third)).toBe(pid)
              expect(finishedOf(third).result.text).toBe("answer to third words")
              const last = (yield* model.requests).at(-1)!
              expect(last.text).toContain("first words")
              expect(last.text).toContain("CALL 2500")
              expect(last.text).toContain("third words")
              // An interrupt during a slow host tool call: canceled, and the next turn runs on the same process.
              const inTool: Array<Event.Event> = []
              const toolCancel = yield* Deferred.make<void>()
              const slowTool = yield* Effect.fork(
                collect(thread.stream({ input: "CALL 30000", cancel: Deferred.await(toolCancel) }), inTool)
              )
              yield* eventually("the tool call", Effect.sync(() => inTool.some((e) => e._tag === "ToolCall")))
              yield* Deferred.succeed(toolCancel, undefined)
              expect(finishedOf((yield* Fiber.join(slowTool)).events).outcome).toBe("canceled")
              const fourth = Array.from(yield* Stream.runCollect(thread.stream("fourth words")))
              expect(pidOf(fourth)).toBe(pid)
              expect(finishedOf(fourth).outcome).toBe("success")

              const none = yield* Effect.flip(thread.send("too late"))
              expect(none._tag).toBe(subject.steers ? "NoActiveTurn" : "UnsupportedCapability")
            }))
        }).pipe(Effect.scoped),
      180_000
    )

    it.live(
      "a crash mid-turn is a RunError and the next turn resumes on a fresh process; a policy change restarts it; close leaves nothing",
      () =>
        Effect.gen(function*() {
          const model = yield* subject.make
          yield* withAgent(model.driver, (agent) =>
            Effect.gen(function*() {
              const thread = yield* agent.thread("crash")
              const first = Array.from(yield* Stream.runCollect(thread.stream("remember PAPAYA")))
              const pid = pidOf(first)

              const before = (yield* model.requests).length
              const turn = yield* Effect.fork(collect(thread.stream("SLOW 60000")))
              yield* eventually("the slow request", Effect.map(model.requests, (all) => all.length > before))
              yield* killGroup(pid)
              const crashed = yield* Fiber.join(turn)
              expect(finishedOf(crashed.events).outcome).toBe("failure")
              expect(crashed.outcome._tag === "Left" && crashed.outcome.left).toMatchObject({
                _tag: "RunError",
                reason: "ExitedWithoutResult"
              })

              const echoOnly = { allow: ["echo"] }
              const after = Array.from(
                yield* Stream.runCollect(
                  thread.stream(
                    subject.slowResume ? { input: "after the crash", toolPolicy: echoOnly } : "after the crash"
                  )
                )
              )
              const fresh = pidOf(after)
              expect(fresh).not.toBe(pid)
              expect(after.find((e) => e._tag === "ThreadOpened")).toMatchObject({ opening: { mode: "resumed" } })
              // The checkpoint saved after turn 1 holds its question and its answer.
              expect((yield* model.requests).at(-1)!.text).toContain("remember PAPAYA")
              expect((yield* model.requests).at(-1)!.text).toContain("answer to remember PAPAYA")
              expect((yield* model.requests).at(-1)!.tools.slice().sort()).toEqual(
                subject.slowResume ? ["echo"] : ["echo", "wait"]
              )

              if (!subject.slowResume) {
                // Only `echo` from now on: a new process, whose model sees no `wait`.
                const narrowed = Array.from(
                  yield* Stream.runCollect(thread.stream({ input: "narrowed", toolPolicy: echoOnly }))
                )
                expect(pidOf(narrowed)).not.toBe(fresh)
                expect((yield* model.requests).at(-1)!.tools.slice().sort()).toEqual(["echo"])
              }

              // Close with one idle live process (another thread) and one busy one.
              yield* Stream.runDrain(
                (yield* agent.thread("idle")).stream({ input: "idle one", toolPolicy: { allow: ["echo"] } })
              )
              const busyFrom = (yield* model.requests).length
              yield* Effect.fork(collect(thread.stream({ input: "SLOW 60000", toolPolicy: { allow: ["echo"] } })))
              yield* eventually("the busy request", Effect.map(model.requests, (all) => all.length > busyFrom))
            }))
        }).pipe(Effect.scoped),
      180_000
    )
  })
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe("live processes of an agent (Claude Code, real CLI)", () => {
  it.live(
    "an idle process is shut down after the idle timeout; over the cap the least recently used goes",
    () =>
      Effect.gen(function*() {
        const model = yield* claude.make
        yield* withAgent(model.driver, (agent) =>
          Effect.gen(function*() {
            const a = yield* agent.thread("a")
            const b = yield* agent.thread("b")
            const c = yield* agent.thread("c")
            const pidA = pidOf(Array.from(yield* Stream.runCollect(a.stream("one"))))
            const pidB = pidOf(Array.from(yield* Stream.runCollect(b.stream("two"))))
            expect(alive(pidA) && alive(pidB)).toBe(true)
            // `a` is used again: `b` is now the least recently used, and goes when `c` starts.
            expect(pidOf(Array.from(yield* Stream.runCollect(a.stream("three"))))).toBe(pidA)
            const pidC = pidOf(Array.from(yield* Stream.runCollect(c.stream("four"))))
            yield* eventually("b's process to end", Effect.sync(() => !alive(pidB)))
            expect(alive(pidA) && alive(pidC)).toBe(true)
            // Idle past the timeout: both end, and the next turn starts a fresh process.
            yield* eventually("the idle processes to end", Effect.sync(() => !alive(pidA) && !alive(pidC)))
            const again = Array.from(yield* Stream.runCollect(a.stream("five")))
            expect(pidOf(again)).not.toBe(pidA)
            expect(again.find((e) => e._tag === "ThreadOpened")).toMatchObject({ opening: { mode: "resumed" } })
          }), { maxProcesses: 2, idleTimeout: "10 seconds" })
      }).pipe(Effect.scoped),
    120_000
  )
})

describe("live thread checkpoints (Claude Code, real CLI)", () => {
  it.live(
    "the session saved for a live turn holds its answer: another agent resumes it from the store",
    () =>
      Effect.gen(function*() {
        const model = yield* claude.make
        const sandbox = yield* Harness.sandbox
        const make = Agent.make({
          driver: model.driver,
          definition: { instructions: "", skills: [], tools: Tools },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        // The first agent stays open, its process warm: the second has its own clone, restored from
        // the session store (what another host does).
        const first = yield* make
        yield* (yield* first.thread("shared")).run("remember MANGO")
        yield* Effect.sleep("500 millis")
        const second = yield* make
        const resumed = yield* (yield* second.thread("shared", { resumeOnly: true })).run("what was it?")
        expect(resumed.thread?.mode).toBe("resumed")
        const last = (yield* model.requests).at(-1)!.text
        expect(last).toContain("remember MANGO")
        expect(last).toContain("answer to remember MANGO")
      }).pipe(Effect.scoped, Effect.provide([ToolsLive, Harness.layer, ThreadStore.layerMemory])),
    90_000
  )
})
