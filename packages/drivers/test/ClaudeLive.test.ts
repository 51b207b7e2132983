/**
 * The Claude driver's live protocol against the real Claude Code binary (node_modules/.bin/claude,
 * 2.1.197), offline: AnthropicServer on 127.0.0.1 is the model, the real gateway serves a slow
 * `wait` host tool, the process is spawned with `LiveChannel` from `driver.live.open`.
 */
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { AnthropicServer, Harness } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import {
  driverFor,
  isSessionStarted,
  record,
  respond,
  runTurn,
  spawnLive,
  startTurn,
  systemTexts,
  terminalOf
} from "./ClaudeLiveHarness.js"
import { interrupts, steering, warmTurns } from "./ClaudeLiveScenarios.js"

const written = (frames: ReadonlyArray<{ readonly dir: string; readonly line: string }>) => () =>
  frames.flatMap((f) => f.dir === "in" ? [f.line] : [])

describe("Claude live sessions with the real CLI", () => {
  it.live(
    "turns on one warm process: a hosted tool call, turn 3's request carries turns 1 and 2, shutdown exits 0",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({ respond })
        const driver = driverFor(server)
        expect(driver.capabilities).toMatchObject({ persistentProcess: true, streamingInput: true })
        const { invocation, proc, session } = yield* spawnLive(driver)
        expect(invocation.args).toEqual(
          expect.arrayContaining(["--input-format", "stream-json", "--replay-user-messages"])
        )
        expect(invocation.args).toEqual(expect.arrayContaining(["--mcp-config", "--allowedTools", "mcp__tether__wait"]))
        const started = performance.now()
        const { id } = yield* warmTurns(session)
        const ms = performance.now() - started
        expect(yield* Harness.isAlive(proc.pid)).toBe(true)
        // One process: one session id throughout, no second spawn.
        expect(id).toMatch(/^[0-9a-f-]{36}$/)
        const messages = yield* server.messages
        const third = messages.find((m) => AnthropicServer.transcript(m).at(-1)?.[1].endsWith("three"))!
        const transcript = AnthropicServer.transcript(third)
        expect(transcript.map(([role]) => role)).toEqual([
          "user",
          "assistant",
          "user",
          "assistant",
          "user",
          "assistant",
          "user"
        ])
        expect(transcript[0]![1]).toMatch(/one$/)
        expect(transcript[1]![1]).toBe("answer to one")
        expect(transcript[2]![1]).toBe("CALL 10")
        expect(transcript[3]![1]).toContain("tool_use mcp__tether__wait")
        expect(transcript[4]![1]).toBe("{\"waited\":10}")
        expect(transcript[5]![1]).toBe("FINAL: {\"waited\":10}")
        // `/cost` is answered by the CLI itself: four model requests for the other four turns and the tool.
        expect(messages).toHaveLength(5)
        yield* session.shutdown
        expect(yield* proc.exitCode).toBe(0)
        const after = yield* runTurn(session, "too late")
        expect(after.failure?.reason).toBe("ProviderError")
        yield* record("warm", proc.frames)
        console.log(`[claude live] 5 warm turns (one with a host tool call): ${ms.toFixed(0)} ms`)
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    120_000
  )

  it.live(
    "steer: injected during a tool call (the model sees it in that turn), queued otherwise",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({ respond })
        const { proc, session } = yield* spawnLive(driverFor(server))
        yield* steering(session)
        const messages = yield* server.messages
        // The injected input reaches the model in the request that follows the tool result.
        const afterTool = messages.find((m) =>
          AnthropicServer.toolResults({ ...m, messages: m.messages.filter((x) => x.role !== "system") }).length > 0
        )!
        expect(systemTexts(afterTool).join("\n")).toContain(
          "The user sent a new message while you were working:\nSTEER injected"
        )
        // The queued input is a request of its own, after the slow answer.
        const queued = messages.find((m) => AnthropicServer.transcript(m).at(-1)?.[1].endsWith("STEER queued"))!
        expect(AnthropicServer.transcript(queued).at(-2)).toEqual(["assistant", "slow answer"])
        yield* session.shutdown
        expect(yield* proc.exitCode).toBe(0)
        yield* record("steer", proc.frames)
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    120_000
  )

  it.live(
    "interrupt: slow model reply, slow host tool, idle, queued input; the process stays warm",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({ respond })
        const { proc, session } = yield* spawnLive(driverFor(server))
        yield* interrupts(session, { written: written(proc.frames) })
        expect(yield* Harness.isAlive(proc.pid)).toBe(true)
        const messages = yield* server.messages
        const last = AnthropicServer.transcript(messages.at(-1)!)
        // The model saw the aborted turns (and the input queued behind the last one) as history.
        expect(last.at(-1)?.[1]).toMatch(/after$/)
        const history = last.map(([, text]) => text).join("\n")
        expect(history).toContain("[Request interrupted by user]")
        expect(history).toContain("STEER dropped")
        yield* record("interrupt", proc.frames)
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    120_000
  )

  it.live(
    "a process killed mid-turn fails the turn with a typed error, keeps its outputs, and hangs nothing",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({ respond })
        const { proc, session } = yield* spawnLive(driverFor(server))
        const turn = yield* startTurn(session, "SLOW 20000")
        yield* turn.waitFor(isSessionStarted)
        yield* proc.kill
        const ended = yield* turn.done
        expect(ended.failure).toMatchObject({ _tag: "ProtocolError", reason: "ProviderError" })
        expect(ended.failure?.detail).toContain("ended before the turn's result")
        expect(ended.outputs[0]?._tag).toBe("SessionStarted")
        const next = yield* runTurn(session, "again")
        expect(next.failure?.reason).toBe("ProviderError")
        expect((yield* Effect.flip(session.interrupt)).reason).toBe("ProviderError")
        expect((yield* Effect.flip(session.steer!("late"))).reason).toBe("ProviderError")
        // Its stdout closes as the kernel tears the process down, which a loaded machine may
        // not have finished yet: its exit (a SIGKILL, which `exitCode` dies of) comes within a bound.
        yield* Effect.timeout(Effect.exit(proc.exitCode), "5 seconds")
        expect(yield* Harness.isAlive(proc.pid)).toBe(false)
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )

  it.live(
    "a control request the session has no handler for is answered with an error at once",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({ respond })
        const { proc, root, session } = yield* spawnLive(driverFor(server, { builtinTools: ["Bash"] }), {
          extraArgs: ["--permission-prompt-tool", "stdio"]
        })
        const turn = yield* runTurn(session, "BASH touch created.txt")
        expect(turn.failure).toBeUndefined()
        expect(terminalOf(turn.outputs)).toMatchObject({ ok: true })
        const asked = turn.outputs.find((o): o is Extract<Driver.Output, { _tag: "Notice" }> =>
          o._tag === "Notice" && o.kind === "control_request"
        )
        expect(asked?.message).toContain("can_use_tool")
        const call = turn.outputs.find((o) => o._tag === "ToolCall" && o.phase === "end")
        expect(call).toMatchObject({ name: "Bash", source: "builtin", isError: true })
        expect(String((call as { readonly output: unknown }).output)).toContain("Tether does not answer")
        const request = proc.frames.find((f) => f.dir === "out" && f.line.includes("\"control_request\""))!
        const requestId = (JSON.parse(request.line) as { readonly request_id: string }).request_id
        const answer = proc.frames.find((f) => f.dir === "in" && f.line.includes("\"control_response\""))!
        expect(JSON.parse(answer.line)).toMatchObject({ response: { subtype: "error", request_id: requestId } })
        expect(Fs.existsSync(Path.join(root.work, "created.txt"))).toBe(false)
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )

  it.live(
    "resuming an unknown session is a typed ResumeRejected, at the attach (before any turn)",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({ respond })
        // The CLI itself would refuse it only at the first message, after the turn began.
        const error = yield* Effect.flip(
          spawnLive(driverFor(server), { session: { _tag: "Resume", id: crypto.randomUUID() } })
        )
        expect(error).toMatchObject({ _tag: "ProtocolError", reason: "ResumeRejected" })
        expect(yield* server.messages).toHaveLength(0)
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )
})
