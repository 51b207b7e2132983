/**
 * The Claude live protocol without the CLI. Over recorded frames (fixtures/claude-live, recorded
 * by ClaudeLive.test.ts from the real CLI with TETHER_RECORD_CLAUDE_LIVE=1): the same scenarios
 * and checks as with the real CLI, deterministic; the replay channel fails any write that is not
 * the recorded next frame, so the session must also write exactly what it wrote to the CLI. Over
 * hand-fed lines: malformed lines, control requests, the end of stdout. And `live.open`.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import * as Driver from "@tether/core/Driver"
import { Claude } from "@tether/drivers"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"
import * as Live from "../src/internal/claudeLive.js"
import * as Frames from "../src/internal/claudeLiveFrames.js"
import { baseRequest, tempRoot } from "./ClaudeHarness.js"
import * as LiveFuzz from "./ClaudeLiveFuzz.js"
import { readFixture, replayChannel, runTurn, terminalOf } from "./ClaudeLiveHarness.js"
import { interrupts, steering, warmTurns } from "./ClaudeLiveScenarios.js"

const context: Driver.ParseContext = { hostedKey: "tether", session: { _tag: "New", id: "unused" } }

/** A replay that stalls (the session never writes the frame the recording has next) fails fast. */
const bounded = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.timeoutFail(effect, {
    duration: "20 seconds",
    onTimeout: () => new Error("the session stalled: it never wrote the next recorded frame")
  })

const replay = (name: string) =>
  Effect.gen(function*() {
    const frames = readFixture(name)
    const { channel, newId, written } = yield* replayChannel(frames)
    const session = yield* Live.attach(channel, context, { newId })
    return { frames, session, written, channel }
  })

/** A channel fed by hand: `push` prints lines, writes are kept. */
const manualChannel = Effect.gen(function*() {
  const lines = yield* Queue.unbounded<Take.Take<string>>()
  const written: Array<string> = []
  const channel: Driver.Channel = {
    write: (line) => Effect.sync(() => void written.push(typeof line === "string" ? line : line.text)),
    lines: Stream.flattenTake(Stream.fromQueue(lines)),
    closeInput: Queue.offer(lines, Take.end).pipe(Effect.asVoid)
  }
  const push = (...records: ReadonlyArray<unknown>) =>
    Queue.offer(
      lines,
      Take.chunk(Chunk.fromIterable(records.map((r) => typeof r === "string" ? r : JSON.stringify(r))))
    )
  return { channel, written, push, end: Queue.offer(lines, Take.end) }
})

const init = { type: "system", subtype: "init", session_id: "s-1", model: "claude-test", mcp_servers: [] }
const result = (text: string, total: number) => ({
  type: "result",
  subtype: "success",
  is_error: false,
  result: text,
  session_id: "s-1",
  total_cost_usd: total,
  usage: { input_tokens: 10, output_tokens: 2 }
})
const assistant = (text: string) => ({
  type: "assistant",
  message: { role: "assistant", model: "claude-test", content: [{ type: "text", text }] }
})
const replayOf = (line: string) => ({ ...(JSON.parse(line) as object), isReplay: true })

describe("Claude live protocol", () => {
  it.live("live.open is the one-shot invocation plus --replay-user-messages, stdin left open", () =>
    Effect.gen(function*() {
      const root = yield* tempRoot
      const driver = Claude.driver({ binary: "/opt/claude", model: "claude-test" })
      const request = baseRequest(root, "http://127.0.0.1:1/mcp", {
        prompt: "",
        instructions: "Be brief.",
        session: { _tag: "Resume", id: "22222222-2222-4222-8222-222222222222" }
      })
      const oneShot = yield* driver.prepare(request)
      const live = yield* driver.live!.open(request)
      expect(live).toEqual({ ...oneShot, args: [...oneShot.args, "--replay-user-messages"], stdin: undefined })
      expect(oneShot.stdin).toBe(Claude.promptLine(""))
      expect(live.args).toEqual(expect.arrayContaining(["--resume", "22222222-2222-4222-8222-222222222222"]))
      expect(driver.capabilities).toMatchObject({ persistentProcess: true, streamingInput: true })
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))

  it.live("warm turns: five turns, a host tool call, a slash command, per-turn cost", () =>
    Effect.gen(function*() {
      const { frames, session, written } = yield* replay("warm")
      yield* bounded(warmTurns(session))
      expect(written).toEqual(frames.filter((f) => f.dir === "in").map((f) => f.line))
    }).pipe(Effect.scoped))

  it.live("steering: injected during a tool call, queued otherwise, the next turn ends with its own answer", () =>
    Effect.gen(function*() {
      const { frames, session, written } = yield* replay("steer")
      yield* bounded(steering(session))
      expect(written).toEqual(frames.filter((f) => f.dir === "in").map((f) => f.line))
    }).pipe(Effect.scoped))

  it.live("interrupts: slow reply, slow tool, idle, queued input aborted with its turn", () =>
    Effect.gen(function*() {
      const { frames, session, written } = yield* replay("interrupt")
      yield* bounded(interrupts(session, { written: () => written }))
      // The session itself aborted the CLI turn of the input queued behind the interrupted turn.
      const interruptsWritten = written.filter((line) => line.includes("\"interrupt\""))
      expect(interruptsWritten).toHaveLength(5)
      expect(written).toEqual(frames.filter((f) => f.dir === "in").map((f) => f.line))
    }).pipe(Effect.scoped))

  it.live("as a line parser (the fuzz subject) the session gives each recorded turn, line by line", () =>
    Effect.gen(function*() {
      const [interrupt, steer, warm] = LiveFuzz.transcripts
      const texts = (lines: ReadonlyArray<string>) =>
        LiveFuzz.parse(Stream.fromIterable(lines), context).pipe(
          Stream.runCollect,
          Effect.map((outputs) =>
            Array.from(outputs).flatMap((o) => o._tag === "Terminal" ? [o.ok ? o.text : o.error] : [])
          )
        )
      // `/cost` prints no replay: no turn is started for it, its result is kept as an idle notice.
      expect(yield* texts(warm!)).toEqual([
        "answer to one",
        "FINAL: {\"waited\":10}",
        "answer to three",
        "answer to five"
      ])
      // Without the session's own writes the steered lines start turns of their own.
      expect(yield* texts(steer!)).toEqual([
        "FINAL: {\"waited\":1500}",
        "slow answer",
        "answer to STEER queued",
        "answer to after"
      ])
      expect((yield* texts(interrupt!)).at(-1)).toBe("answer to after")
      const replay = warm!.findIndex((line) => line.includes("\"isReplay\":true"))
      const foreign = yield* LiveFuzz.parse(
        Stream.fromIterable([...warm!.slice(0, replay + 1), "not json", ...warm!.slice(replay + 1)]),
        context
      ).pipe(Stream.runCollect)
      expect(Array.from(foreign).filter((o) => o._tag === "Notice" && o.kind === "malformed")).toHaveLength(1)
      expect(Array.from(foreign).filter((o) => o._tag === "Terminal")).toHaveLength(4)
    }))

  it.live("a line that is not JSON is a Notice of the running turn; a record before any turn goes to the next", () =>
    Effect.gen(function*() {
      const { channel, push, written } = yield* manualChannel
      const session = yield* Live.attach(channel, context, { newId: () => "u-1" })
      yield* push({ type: "system", subtype: "status", status: "idle-note", session_id: "s-1" })
      const running = yield* Effect.fork(runTurn(session, "hello"))
      yield* Effect.yieldNow()
      while (written.length === 0) yield* Effect.sleep("1 millis")
      yield* push(init, "not json {", replayOf(written[0]!), assistant("hi"), result("hi", 0.5))
      const turn = yield* Effect.fromFiber(running)
      expect(turn.outputs.map((o) => o._tag === "Notice" ? `Notice:${o.kind}` : o._tag)).toEqual([
        "Notice:system/status",
        "SessionStarted",
        "Notice:malformed",
        "Message",
        "Usage",
        "Terminal"
      ])
      expect(terminalOf(turn.outputs)).toMatchObject({ ok: true, text: "hi", usage: { costUsd: 0.5 } })
    }).pipe(Effect.scoped))

  it.live("a control request without a handler is answered with an error; with one, with its reply", () =>
    Effect.gen(function*() {
      const request = {
        type: "control_request",
        request_id: "req-1",
        request: { subtype: "can_use_tool", tool_name: "Bash", input: { command: "ls" } }
      }
      const bare = yield* manualChannel
      yield* Live.attach(bare.channel, context)
      yield* bare.push(request)
      while (bare.written.length === 0) yield* Effect.sleep("1 millis")
      expect(JSON.parse(bare.written[0]!)).toEqual({
        type: "control_response",
        response: {
          subtype: "error",
          request_id: "req-1",
          error: "Tether does not answer \"can_use_tool\" control requests"
        }
      })

      const seen: Array<Frames.ControlRequest> = []
      const handled = yield* manualChannel
      yield* Live.attach(handled.channel, context, {
        onControlRequest: (asked) =>
          Effect.sync(() => {
            seen.push(asked)
            return { _tag: "Success", response: { behavior: "allow", updatedInput: { command: "ls" } } }
          })
      })
      yield* handled.push(request)
      while (handled.written.length === 0) yield* Effect.sleep("1 millis")
      expect(seen).toEqual([{ requestId: "req-1", subtype: "can_use_tool", request: request.request }])
      expect(JSON.parse(handled.written[0]!)).toEqual({
        type: "control_response",
        response: {
          subtype: "success",
          request_id: "req-1",
          response: { behavior: "allow", updatedInput: { command: "ls" } }
        }
      })
    }).pipe(Effect.scoped))

  it.live("the CLI cancelling a control request interrupts its handler; it is not answered", () =>
    Effect.gen(function*() {
      const { channel, push, written } = yield* manualChannel
      let interrupted = false
      yield* Live.attach(channel, context, {
        onControlRequest: () => Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => (interrupted = true))))
      })
      yield* push({ type: "control_request", request_id: "req-2", request: { subtype: "can_use_tool" } })
      yield* Effect.sleep("20 millis")
      yield* push({ type: "control_cancel_request", request_id: "req-2" })
      while (!interrupted) yield* Effect.sleep("1 millis")
      expect(written).toEqual([])
    }).pipe(Effect.scoped))

  it.live("the end of stdout mid-turn fails the turn, its steer and a pending interrupt with a typed error", () =>
    Effect.gen(function*() {
      const { channel, end, push, written } = yield* manualChannel
      const session = yield* Live.attach(channel, context)
      const running = yield* Effect.fork(runTurn(session, "hello"))
      while (written.length === 0) yield* Effect.sleep("1 millis")
      yield* push(init)
      const steer = yield* Effect.fork(Effect.flip(session.steer!("more")))
      const interrupt = yield* Effect.fork(Effect.flip(session.interrupt))
      while (written.length < 3) yield* Effect.sleep("1 millis")
      yield* end
      const turn = yield* Effect.fromFiber(running)
      expect(turn.outputs.map((o) => o._tag)).toEqual(["SessionStarted"])
      expect(turn.failure).toBeInstanceOf(Driver.ProtocolError)
      expect((yield* Effect.fromFiber(steer)).reason).toBe("ProviderError")
      expect((yield* Effect.fromFiber(interrupt)).reason).toBe("ProviderError")
    }).pipe(Effect.scoped))
})
