/**
 * The ACP mapping without a process: the recorded `gemini --acp` session of `GeminiLive.test.ts`
 * (`fixtures/gemini-acp/session.jsonl`, the CLI's stdout) replayed through the same mapping the
 * live session uses, the naming of Gemini's tool calls, edge cases of the mapping, and the wait
 * before a `session/load` that would reset the session.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Usage } from "@tether/core/Result"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as AcpMap from "../src/internal/acpMap.js"
import * as GeminiLive from "../src/internal/geminiLive.js"

const context: Driver.ParseContext = { hostedKey: "tether", session: { _tag: "New", id: "unused" } }

const replay = (lines: ReadonlyArray<string>) =>
  AcpMap.parse(Stream.fromIterable(lines), context, GeminiLive.naming).pipe(
    Stream.runCollect,
    Effect.map(Chunk.toReadonlyArray)
  )

const recorded = Fs.readFileSync(Path.join(import.meta.dirname, "fixtures", "gemini-acp", "session.jsonl"), "utf8")
  .split("\n")
  .filter((line) => line.length > 0)

/** The outputs cut into turns (each ends with its Terminal), deltas joined. */
const turnsOf = (outputs: ReadonlyArray<Driver.Output>) => {
  const turns: Array<Array<unknown>> = [[]]
  for (const output of outputs) {
    const turn = turns.at(-1)!
    const last = turn.at(-1) as { _tag?: string; text?: string } | undefined
    if (output._tag === "TextDelta" && last?._tag === "TextDelta") {
      turn[turn.length - 1] = { _tag: "TextDelta", text: `${last.text}${output.text}` }
    } else if (output._tag === "Terminal") {
      turn.push({ _tag: "Terminal", ok: output.ok, text: output.text, error: output.error, model: output.model })
      turns.push([])
    } else if (output._tag === "ToolCall") {
      const { input: _input, ...rest } = output
      turn.push(rest)
    } else {
      turn.push(output)
    }
  }
  return turns.filter((turn) => turn.length > 0)
}

describe("ACP mapping of a recorded gemini --acp session", () => {
  it.effect("each prompt result ends a turn with the one-shot outputs; cancelled turns end not ok", () =>
    Effect.gen(function*() {
      const outputs = yield* replay(recorded)
      const started = outputs[0]
      expect(started).toMatchObject({ _tag: "SessionStarted", model: "gemini-2.5-flash" })
      const session = started?._tag === "SessionStarted" ? started.sessionId : ""
      const terminals = outputs.filter((o): o is Driver.Terminal => o._tag === "Terminal")
      expect(terminals.map((t) => t.ok)).toEqual([true, true, true, false, true, false, true, true])
      expect(terminals.every((t) => t.session === session)).toBe(true)
      const turns = turnsOf(outputs.slice(1))
      expect(turns[0]).toEqual([
        { _tag: "TextDelta", text: "reply to: turn one: remember BANANA" },
        { _tag: "Message", role: "assistant", text: "reply to: turn one: remember BANANA" },
        { _tag: "Usage", usage: new Usage({ inputTokens: 20, outputTokens: 9 }) },
        {
          _tag: "Terminal",
          ok: true,
          text: "reply to: turn one: remember BANANA",
          error: undefined,
          model: "gemini-2.5-flash"
        }
      ])
      // The hosted tool: named from Gemini's call id, source host, output the tool's text.
      const echo = turns[1]!.filter((o) => (o as { _tag: string })._tag === "ToolCall")
      expect(echo).toEqual([
        expect.objectContaining({ phase: "start", name: "echo", source: "host" }),
        expect.objectContaining({ phase: "end", name: "echo", source: "host", isError: false })
      ])
      expect(String((echo[1] as { output: unknown }).output)).toContain("ECHO:hello-live")
      expect(turns[1]!.at(-1)).toMatchObject({ ok: true, text: expect.stringContaining("FINAL:") })
      // The slow model, cancelled: no text, not ok.
      expect(turns[3]).toEqual([{
        _tag: "Terminal",
        ok: false,
        text: undefined,
        error: "the turn was cancelled",
        model: "gemini-2.5-flash"
      }])
      // The slow tool, cancelled: the call fails, the turn is not ok.
      expect(turns[5]).toEqual([
        expect.objectContaining({ _tag: "ToolCall", phase: "start", name: "slow_wait", source: "host" }),
        expect.objectContaining({ _tag: "ToolCall", phase: "end", name: "slow_wait", isError: true }),
        expect.objectContaining({ _tag: "Terminal", ok: false, error: "the turn was cancelled" })
      ])
      // Nothing else: the session's command list is no output.
      expect(outputs.filter((o) => o._tag === "Notice")).toEqual([])
    }))

  it.effect("a line that is not a JSON object is a notice; an error response is an error notice", () =>
    Effect.gen(function*() {
      const outputs = yield* replay([
        "Loaded cached credentials.",
        "[1,2]",
        "{\"jsonrpc\":\"2.0\",\"id\":9,\"error\":{\"code\":-32603,\"message\":\"Internal error\"}}",
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"session/request_permission\",\"params\":{}}"
      ])
      expect(outputs).toEqual([
        expect.objectContaining({ _tag: "Notice", level: "warning", kind: "acp.non_json" }),
        expect.objectContaining({ _tag: "Notice", level: "warning", kind: "acp.unknown" }),
        expect.objectContaining({ _tag: "Notice", level: "error", kind: "acp.error", message: "Internal error" })
      ])
    }))
})

describe("ACP update mapping", () => {
  const update = (sessionUpdate: string, fields: object) => ({
    sessionId: "s",
    update: { sessionUpdate, ...fields }
  })

  it("a tool call first seen in its final state starts and ends; a failed one is an error", () => {
    const mapper = AcpMap.makeMapper("tether", GeminiLive.naming)
    mapper.session = "s"
    const id = "mcp_tether_echo__mcp_tether_echo_1796095415393_0"
    // An update's one output comes as it is, not in an array.
    expect(mapper.update(update("agent_message_chunk", { content: { type: "text", text: "before" } }))).toEqual(
      { _tag: "TextDelta", text: "before" }
    )
    const outputs = mapper.update(update("tool_call_update", {
      toolCallId: id,
      status: "failed",
      content: [{ type: "content", content: { type: "text", text: "boom" } }]
    }))
    expect(outputs).toEqual([
      { _tag: "Message", role: "assistant", text: "before" },
      { _tag: "ToolCall", phase: "start", callId: id, name: "echo", source: "host" },
      { _tag: "ToolCall", phase: "end", callId: id, name: "echo", source: "host", output: "boom", isError: true }
    ])
    // Updates of another session are not this session's.
    expect(mapper.update({ sessionId: "other", update: { sessionUpdate: "agent_message_chunk" } })).toEqual([])
  })

  it("ACP's own usage wins over Gemini's quota; a stop other than end_turn is not ok", () => {
    const mapper = AcpMap.makeMapper("tether", AcpMap.genericNaming)
    mapper.session = "s"
    const outputs = mapper.finish({
      stopReason: "max_tokens",
      usage: { totalTokens: 12, inputTokens: 7, outputTokens: 5, cachedReadTokens: 2, thoughtTokens: 1 },
      _meta: { quota: { token_count: { input_tokens: 99, output_tokens: 99 } } }
    })
    const usage = new Usage({ inputTokens: 7, outputTokens: 5, cachedInputTokens: 2, reasoningTokens: 1 })
    expect(outputs).toEqual([
      { _tag: "Usage", usage },
      expect.objectContaining({
        _tag: "Terminal",
        ok: false,
        usage,
        session: "s",
        error: "the agent stopped the turn: max_tokens"
      })
    ])
  })

  it("unknown updates are info notices, session-level ones are quiet, a plan is reported", () => {
    const mapper = AcpMap.makeMapper("tether", AcpMap.genericNaming)
    // One output comes as it is, more in an array: read both as a list.
    const listOf = (outputs: Driver.Output | ReadonlyArray<Driver.Output>) =>
      Array.isArray(outputs) ? outputs : [outputs]
    expect(listOf(mapper.update(update("current_mode_update", { currentModeId: "yolo" })))).toEqual([])
    expect(listOf(mapper.update(update("something_new", {})))).toEqual([
      expect.objectContaining({ _tag: "Notice", level: "info", kind: "acp.something_new" })
    ])
    expect(listOf(mapper.update(update("plan", { entries: [] })))).toEqual([
      expect.objectContaining({ _tag: "Notice", kind: "acp.plan" })
    ])
    expect(listOf(mapper.update(update("agent_thought_chunk", { content: { type: "text", text: "hmm" } })))).toEqual([
      { _tag: "ReasoningDelta", text: "hmm" }
    ])
  })

  it("generic naming reads ACP's name: mcp__<server>__<tool>, the hosted key's tools are host tools", () => {
    const call = (name: string | undefined, title?: string) => ({
      toolCallId: "c",
      name,
      title,
      kind: undefined,
      meta: undefined,
      input: undefined
    })
    expect(AcpMap.genericNaming(call("mcp__tether__lookup"), "tether")).toEqual({ name: "lookup", source: "host" })
    expect(AcpMap.genericNaming(call("mcp__docs__search"), "tether")).toEqual({
      name: "mcp__docs__search",
      source: "mcp"
    })
    expect(AcpMap.genericNaming(call(undefined, "Read file"), "tether")).toEqual({
      name: "Read file",
      source: "builtin"
    })
  })
})

describe("Gemini's tool call ids", () => {
  it("the function name is recovered from the id the CLI makes, even with __ in the name", () => {
    expect(GeminiLive.functionName("mcp_tether_echo__mcp_tether_echo_1796114204299_0")).toBe("mcp_tether_echo")
    expect(GeminiLive.functionName("mcp_tether_a__b__mcp_tether_a__b_1796114204299_12")).toBe("mcp_tether_a__b")
    expect(GeminiLive.functionName("run_shell_command__run_shell_command_1796095387791_0")).toBe(
      "run_shell_command"
    )
    // An id the model supplied: the name is what precedes the first separator.
    expect(GeminiLive.functionName("read_file__call-7")).toBe("read_file")
    expect(GeminiLive.functionName("no-separator")).toBeUndefined()
    expect(
      GeminiLive.naming({
        toolCallId: "mcp_docs_search__x",
        name: undefined,
        title: "t",
        kind: "other",
        meta: undefined,
        input: undefined
      }, "tether")
    )
      .toEqual({ name: "mcp_docs_search", source: "mcp" })
  })
})

describe("session/load within the minute the session was created", () => {
  it.effect("waits until the next minute when a chat file of the session carries the current minute", () =>
    Effect.gen(function*() {
      const root = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tether-acp-minute-"))
      try {
        const chats = Path.join(root, ".gemini", "tmp", "work", "chats")
        Fs.mkdirSync(chats, { recursive: true })
        const now = Date.UTC(2026, 11, 1, 8, 36, 44, 500)
        yield* TestClock.setTime(now)
        const id = "d43938e5-2d2e-4fb8-9247-48b9c4c09d30"
        const delay = (session: string) => GeminiLive.loadDelay(root, session).pipe(Effect.provide(NodeContext.layer))
        expect(yield* delay(id)).toBe(0)
        Fs.writeFileSync(Path.join(chats, `session-2026-12-01T08-35-${id.slice(0, 8)}.jsonl`), "{}\n")
        expect(yield* delay(id)).toBe(0)
        Fs.writeFileSync(Path.join(chats, `session-2026-12-01T08-36-${id.slice(0, 8)}.jsonl`), "{}\n")
        expect(yield* delay(id)).toBe(15_600)
        expect(yield* delay("0df98fc4-816f-41e8-aa1b-9c391a319df4")).toBe(0)
      } finally {
        Fs.rmSync(root, { recursive: true, force: true })
      }
    }))
})
