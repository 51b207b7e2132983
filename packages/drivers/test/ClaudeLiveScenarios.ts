/**
 * Live-session scenarios of the Claude driver and the checks on their outputs. Each runs against
 * the real CLI (ClaudeLive.test.ts, which adds checks on the model's requests and the process)
 * and against the recorded frames of that run (ClaudeLiveProtocol.test.ts).
 */
import { expect } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { isSessionStarted, isToolStart, messagesOf, runTurn, startTurn, terminalOf } from "./ClaudeLiveHarness.js"

/** What a scenario may look at besides the session: the lines written to the process so far. */
export interface Probe {
  readonly written: () => ReadonlyArray<string>
}

const ok = (turn: { readonly outputs: ReadonlyArray<Driver.Output>; readonly failure?: Driver.ProtocolError }) => {
  expect(turn.failure).toBeUndefined()
  return terminalOf(turn.outputs)
}

const rawOf = (terminal: Driver.Terminal) => terminal.raw as { readonly [key: string]: unknown }

/**
 * Five turns on one process: plain, a hosted tool call, plain, a slash command (answered by the
 * CLI without the model and without a replay), plain. Each turn starts with the same session
 * and ends with its own terminal; its cost is its share of the CLI's running total.
 */
export const warmTurns = (session: Driver.LiveSession) =>
  Effect.gen(function*() {
    const one = yield* runTurn(session, "one")
    const two = yield* runTurn(session, "CALL 10")
    const three = yield* runTurn(session, "three")
    const command = yield* runTurn(session, "/cost")
    const five = yield* runTurn(session, "five")
    expect(ok(one)).toMatchObject({ ok: true, text: "answer to one" })
    expect(ok(two)).toMatchObject({ ok: true, text: "FINAL: {\"waited\":10}" })
    expect(two.outputs.filter((o) => o._tag === "ToolCall")).toEqual([
      expect.objectContaining({ phase: "start", name: "wait", source: "host", input: { ms: 10 } }),
      expect.objectContaining({ phase: "end", name: "wait", source: "host", output: { waited: 10 }, isError: false })
    ])
    expect(ok(three)).toMatchObject({ ok: true, text: "answer to three" })
    expect(ok(command).text).toContain("Total cost")
    expect(ok(five)).toMatchObject({ ok: true, text: "answer to five" })
    // The same provider session, reported once at the start of every turn.
    const turns = [one, two, three, command, five]
    const sessions = turns.map((t) => t.outputs.filter(isSessionStarted))
    for (const started of sessions) expect(started).toHaveLength(1)
    for (const t of turns) expect(t.outputs[0]!._tag).toBe("SessionStarted")
    const id = (sessions[0]![0] as { readonly sessionId: string }).sessionId
    for (const t of turns) expect(terminalOf(t.outputs).session).toBe(id)
    // Per-turn cost: the difference of the CLI's running totals, not the running total.
    const totals = [one, two, three].map((t) => rawOf(terminalOf(t.outputs))["total_cost_usd"] as number)
    expect(totals[2]!).toBeGreaterThan(totals[1]!)
    expect(terminalOf(three.outputs).usage?.costUsd).toBeCloseTo(totals[2]! - totals[1]!, 10)
    expect(terminalOf(one.outputs).usage?.costUsd).toBeCloseTo(totals[0]!, 10)
    return { one, two, three, id }
  })

/**
 * Steering: input sent during a running tool call is injected into the turn (one terminal);
 * input sent while the model answers with no tool boundary is queued: the same turn goes on to
 * answer it and ends with that answer; the next turn ends with its own answer.
 */
export const steering = (session: Driver.LiveSession) =>
  Effect.gen(function*() {
    const tool = yield* startTurn(session, "CALL 1500")
    yield* tool.waitFor(isToolStart)
    const injected = yield* session.steer!("STEER injected")
    const first = yield* tool.done
    expect(injected).toEqual({ _tag: "Injected" })
    expect(ok(first)).toMatchObject({ ok: true, text: "FINAL: {\"waited\":1500}" })
    expect(rawOf(terminalOf(first.outputs))["num_turns"]).toBe(2)

    const slow = yield* startTurn(session, "SLOW 1500")
    yield* slow.waitFor(isSessionStarted)
    const queued = yield* session.steer!("STEER queued")
    const second = yield* slow.done
    expect(queued).toEqual({ _tag: "Queued" })
    expect(ok(second)).toMatchObject({ ok: true, text: "answer to STEER queued" })
    expect(messagesOf(second.outputs)).toEqual(["assistant:slow answer", "assistant:answer to STEER queued"])
    expect(second.outputs.filter(isSessionStarted)).toHaveLength(1)
    expect(second.outputs.filter((o) => o._tag === "Notice" && o.kind === "queued_input")).toHaveLength(1)
    // Usage of a turn with a queued answer covers both answers.
    const usages = second.outputs.filter((o) => o._tag === "Usage")
    expect(usages).toHaveLength(2)
    expect(terminalOf(second.outputs).usage?.outputTokens).toBeGreaterThan(
      (usages[0] as { readonly usage: { readonly outputTokens: number } }).usage.outputTokens
    )

    const after = yield* runTurn(session, "after")
    expect(ok(after)).toMatchObject({ ok: true, text: "answer to after" })
    expect(messagesOf(after.outputs)).toEqual(["assistant:answer to after"])
    return { first, second, after }
  })

const waitUntil = (condition: () => boolean) =>
  Effect.gen(function*() {
    while (!condition()) yield* Effect.sleep("5 millis")
  })

const interrupted = (
  turn: { readonly outputs: ReadonlyArray<Driver.Output>; readonly failure?: Driver.ProtocolError }
) => {
  expect(turn.failure).toBeUndefined()
  const terminal = terminalOf(turn.outputs)
  expect(terminal.ok).toBe(false)
  expect(terminal.error).toMatch(/^interrupted/)
  return terminal
}

/**
 * Interrupts: during a slow model reply, during a slow host tool, while idle (harmless), and
 * with input queued behind the running turn (aborted with it). Each interrupted turn ends with
 * a failed terminal; the next turn answers on the same process.
 */
export const interrupts = (session: Driver.LiveSession, probe: Probe) =>
  Effect.gen(function*() {
    const slow = yield* startTurn(session, "SLOW 20000")
    yield* slow.waitFor(isSessionStarted)
    yield* session.interrupt
    const first = interrupted(yield* slow.done)
    expect(rawOf(first)["terminal_reason"]).toBe("aborted_streaming")

    const tool = yield* startTurn(session, "CALL 20000")
    yield* tool.waitFor(isToolStart)
    yield* session.interrupt
    const second = yield* tool.done
    expect(rawOf(interrupted(second))["terminal_reason"]).toBe("aborted_tools")
    expect(second.outputs.filter((o) => o._tag === "ToolCall")).toEqual([
      expect.objectContaining({ phase: "start", name: "wait" }),
      expect.objectContaining({ phase: "end", name: "wait", isError: true })
    ])

    yield* session.interrupt

    const third = yield* startTurn(session, "SLOW 20000")
    yield* third.waitFor(isSessionStarted)
    const steer = yield* Effect.fork(session.steer!("STEER dropped"))
    yield* waitUntil(() => probe.written().some((line) => line.includes("STEER dropped")))
    yield* session.interrupt
    interrupted(yield* third.done)
    expect(yield* Fiber.join(steer)).toEqual({ _tag: "Queued" })

    const after = yield* runTurn(session, "after")
    expect(ok(after)).toMatchObject({ ok: true, text: "answer to after" })
    expect(messagesOf(after.outputs)).toEqual(["assistant:answer to after"])
    return { after }
  })
