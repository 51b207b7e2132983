/**
 * Live threads through the public API (DESIGN §12), with the real pinned CLIs offline against the
 * scripted model servers. Every live driver (Claude Code, Codex, Gemini) runs the live clauses of
 * the exported conformance suite (`Conformance.liveClauses`: warm turns on one process,
 * interrupts that keep it, steering, a crash mid-turn, close with idle and busy processes), each
 * against a fresh scripted model; what only the model can tell is asserted here on its requests:
 * turn 3's request carries turns 1–2, steered input reaches the model within its turn, the turn
 * after a crash resumes the checkpoint. Driver-specific besides: a tool-policy change restarts
 * the process and the new one offers only the new tools (Gemini: in the crash's restart, its
 * resume costs up to a minute), the idle timeout and the per-agent cap, and a live turn's saved
 * session resumed by another agent. Last, a Gemini thread whose process died mid-turn resumes its
 * last committed checkpoint without the failed turn's prompt. The tests that mostly wait (Gemini's
 * resumes, the idle timeout) run beside the others, which run one after another.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, ThreadStore } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import type * as Event from "@tether/core/Event"
import { Codex, Gemini } from "@tether/drivers"
import { Gateway } from "@tether/gateway"
import { AnthropicServer, Conformance, GeminiServer, Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { driverFor as claudeDriver, respond as claudeRespond } from "./ClaudeLiveHarness.js"
import { offlineCodex } from "./CodexHarness.js"

const Tools = Conformance.liveTools
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
      driver: offlineCodex(server.baseUrl),
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

/** Polls `check` until it holds (30 s at most: the test fails rather than hangs). */
const eventually = (what: string, check: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 30_000
    while (!(yield* check)) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.sleep("25 millis")
    }
  })

const plain = "plain words"
const echoOnly = { allow: ["echo"] }

const count = (text: string, part: string) => text.split(part).length - 1

/** What the scripted model must have seen after each clause (its requests, driver by driver). */
const afterClause = (
  id: string,
  subject: Subject,
  requests: ReadonlyArray<{ readonly text: string; readonly tools: ReadonlyArray<string> }>
) => {
  switch (id) {
    case "L1": {
      // Turn 3's request carries turns 1 and 2: their prompts and answers.
      const last = requests.at(-1)!.text
      expect(count(last, `answer to ${plain}`)).toBeGreaterThanOrEqual(2)
      break
    }
    case "L3":
      // The input sent during the tool call reached the model within that turn.
      expect(requests.some((r) => r.text.includes(Conformance.steerInput))).toBe(subject.steers)
      break
    case "L4": {
      // The fresh process resumed the checkpoint saved after turn 1 (question and answer).
      const last = requests.at(-1)!
      expect(last.text).toContain(plain)
      expect(last.text).toContain(`answer to ${plain}`)
      expect(last.tools.slice().sort()).toEqual(subject.slowResume ? ["echo"] : ["echo", "wait"])
      break
    }
  }
}

const conformanceOf = (
  subject: Subject,
  model: { readonly driver: Driver.Driver; readonly requests: Effect.Effect<ReadonlyArray<unknown>> }
): Conformance.Subject => ({
  driver: model.driver,
  plain,
  plainText: `answer to ${plain}`,
  slow: "SLOW 60000",
  live: {
    callWait: (ms) => `CALL ${ms}`,
    modelRequests: Effect.map(model.requests, (all) => all.length),
    ...(subject.slowResume ? { afterCrash: { toolPolicy: echoOnly } } : {})
  }
})

/** The live clauses' ids and titles (the subject's model is not needed to list them). */
const clausesOf = (subject: Subject) => {
  const placeholder = conformanceOf(subject, { driver: Codex.driver(), requests: Effect.succeed([]) })
  return Conformance.liveClauses(placeholder, placeholder.live!)
}

/** A live clause against a fresh scripted model, then what that model must have seen. */
const clauseTest = (subject: Subject, id: string, title: string) =>
  it.live(`${id} ${title}`, () =>
    Effect.gen(function*() {
      const model = yield* subject.make
      const subjectNow = conformanceOf(subject, model)
      const clause = Conformance.liveClauses(subjectNow, subjectNow.live!).find((c) => c.id === id)!
      yield* clause.run
      afterClause(id, subject, yield* model.requests)
    }).pipe(Effect.scoped), 150_000)

/**
 * Mostly waiting: a slow-resume driver's crash clause (its fresh process waits for the next
 * minute before it loads the session, up to a minute) and the idle-timeout test (it waits the
 * timeout out). Each runs beside the other tests of this file, which run one after another (a
 * `concurrent` describe of `sequential` ones). Every test has its own scripted model, sandbox,
 * agent and gateway, and checks only its own processes, clones and tokens.
 */
const waitsTheMinute = (subject: Subject, id: string) => subject.slowResume && id === "L4"

describe("one after another", { concurrent: true }, () => {
  for (const subject of [claude, codex, gemini]) {
    describe(`live threads: ${subject.name} (real CLI)`, { sequential: true }, () => {
      for (const { id, title } of clausesOf(subject)) {
        if (!waitsTheMinute(subject, id)) clauseTest(subject, id, title)
      }

      if (!subject.slowResume) {
        it.live(
          "a tool-policy change between turns restarts the process, which offers only the new tools",
          () =>
            Effect.gen(function*() {
              const model = yield* subject.make
              yield* withAgent(model.driver, (agent) =>
                Effect.gen(function*() {
                  const thread = yield* agent.thread("policy")
                  const first = Array.from(yield* Stream.runCollect(thread.stream("remember PAPAYA")))
                  expect((yield* model.requests).at(-1)!.tools.slice().sort()).toEqual(["echo", "wait"])
                  const narrowed = Array.from(
                    yield* Stream.runCollect(thread.stream({ input: "narrowed", toolPolicy: echoOnly }))
                  )
                  expect(pidOf(narrowed)).not.toBe(pidOf(first))
                  expect(narrowed.find((e) => e._tag === "ThreadOpened")).toMatchObject({
                    opening: { mode: "resumed" }
                  })
                  const last = (yield* model.requests).at(-1)!
                  expect(last.tools).toEqual(["echo"])
                  expect(last.text).toContain("answer to remember PAPAYA")
                }))
            }).pipe(Effect.scoped),
          90_000
        )
      }
    })
  }

  describe("live thread checkpoints (Claude Code, real CLI)", { sequential: true }, () => {
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
})

describe(`live threads: ${gemini.name} (real CLI)`, { concurrent: true }, () => {
  for (const { id, title } of clausesOf(gemini)) {
    if (waitsTheMinute(gemini, id)) clauseTest(gemini, id, title)
  }
})

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe("live processes of an agent (Claude Code, real CLI)", { concurrent: true }, () => {
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

/**
 * A Gemini CLI live thread (`gemini --acp`) whose process dies mid-turn, the turn started right
 * after the previous one committed. DESIGN §12: "A crashed live process fails the running turn
 * with RunError (partial result kept) and the next turn starts fresh from the last healthy
 * checkpoint." docs/profiles.md: a process resuming a thread's session resumes "what was committed
 * last ... and not what a failed turn of its own wrote past it". The committed turn's late save
 * (which waits for the session's files to go quiet) went on into the next turn and saved its
 * prompt under the last checkpoint: the resumed session replayed the failed turn to the model.
 * Its next turn waits for the next minute, as Gemini's L4 does: it runs beside the other tests.
 */
const lastUser = (request: GeminiServer.GenerateRequest) =>
  GeminiServer.transcript(request).filter(([role]) => role === "user").at(-1)?.[1] ?? ""

const resumeAfterCrash = (pauseMs: number) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const seen = yield* Effect.gen(function*() {
      const server = yield* GeminiServer.make({
        respond: (request) =>
          lastUser(request).includes("SECOND")
            ? GeminiServer.reply("too late", { delay: 15_000 })
            : GeminiServer.reply("ok")
      })
      const agent = yield* Agent.make({
        driver: Gemini.driver({
          model: "gemini-2.5-flash",
          env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
        }),
        definition: { instructions: "", tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        processes: { killGrace: "2 seconds" }
      })
      const thread = yield* agent.thread("crash")
      expect((yield* thread.run("FIRST: remember BANANA")).text).toBe("ok")
      if (pauseMs > 0) yield* Effect.sleep(pauseMs)
      let pid: number | undefined
      const second = yield* thread.stream("SECOND: this turn is lost").pipe(
        Stream.runForEach((e) =>
          Effect.sync(() => e._tag === "ProcessStarted" && (pid = (e as Event.ProcessStarted).pid))
        ),
        Effect.either,
        Effect.fork
      )
      for (let i = 0; i < 500; i++) {
        const generations = yield* server.generations
        if (generations.some((g) => lastUser(g).includes("SECOND"))) break
        yield* Effect.sleep("20 millis")
      }
      // The CLI has written the second prompt into its chat file; the process dies.
      yield* Effect.sleep("500 millis")
      process.kill(pid!, "SIGKILL")
      const failed = yield* Fiber.join(second)
      expect(failed._tag).toBe("Left")
      const third = yield* thread.run("THIRD: what did I ask you to remember?")
      expect(third.thread?.mode).toBe("resumed")
      const seen = GeminiServer.transcript((yield* server.generations).at(-1)!).map(([, text]) => text).join("\n")
      yield* agent.close()
      expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
      return seen
    }).pipe(Effect.scoped, Effect.provide(Harness.layer))
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    return seen
  }).pipe(Effect.scoped)

describe("Gemini live thread resumed after its process died mid-turn", { concurrent: true }, () => {
  it.live(
    "the next turn resumes the last committed checkpoint, without the failed turn's prompt",
    () =>
      Effect.gen(function*() {
        const seen = yield* resumeAfterCrash(0)
        expect(seen).toContain("FIRST: remember BANANA")
        expect(seen).toContain("THIRD")
        expect(seen).not.toContain("SECOND: this turn is lost")
      }),
    150_000
  )
})
