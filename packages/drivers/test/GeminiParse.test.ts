import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Gemini } from "@tether/drivers"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as OneEdit from "./OneEdit.js"

// Recorded from the real `gemini` 0.61.0 against the scripted GeminiServer and a
// bearer-protected MCP server whose key was `echo` (tools `echo`, `boom`).
const fixture = (name: string): ReadonlyArray<string> =>
  Fs.readFileSync(Path.join(import.meta.dirname, "fixtures", "gemini", name), "utf8").split("\n")

const recordedSession = "11111111-2222-4333-8444-555555555555"

const context = (session: Driver.SessionRequest = { _tag: "New", id: recordedSession }): Driver.ParseContext => ({
  hostedKey: "echo",
  session
})

const parseLines = (lines: ReadonlyArray<string>, ctx: Driver.ParseContext = context()) =>
  Gemini.parse(Stream.fromIterable(lines), ctx).pipe(
    Stream.runCollect,
    Effect.map(Chunk.toReadonlyArray),
    Effect.either
  )

const outputs = (lines: ReadonlyArray<string>, ctx?: Driver.ParseContext) =>
  parseLines(lines, ctx).pipe(Effect.flatMap(Either.match({
    onLeft: (e) => Effect.die(e),
    onRight: Effect.succeed
  })))

const terminalOf = (out: ReadonlyArray<Driver.Output>) => {
  const terminal = out.filter((o): o is Driver.Terminal => o._tag === "Terminal")
  expect(terminal).toHaveLength(1)
  return terminal[0]!
}

describe("Gemini.parse (recorded fixtures)", () => {
  it.effect("a plain turn: session, user message, deltas, assembled message, usage, terminal", () =>
    Effect.gen(function*() {
      const out = yield* outputs(fixture("plain.jsonl"))
      expect(out[0]).toEqual({ _tag: "SessionStarted", sessionId: recordedSession, model: "gemini-2.5-flash" })
      expect(out[1]).toEqual({ _tag: "Message", role: "user", text: "please echo hello-mcp" })
      const deltas = out.filter((o) => o._tag === "TextDelta").map((o) => o._tag === "TextDelta" ? o.text : "")
      expect(deltas.length).toBeGreaterThan(1)
      expect(deltas.join("")).toBe("Hello from the scripted model")
      expect(out.filter((o) => o._tag === "Message" && o.role === "assistant")).toEqual([
        { _tag: "Message", role: "assistant", text: "Hello from the scripted model" }
      ])
      const usage = out.find((o) => o._tag === "Usage")
      expect(usage?._tag === "Usage" ? { ...usage.usage } : undefined).toEqual({
        inputTokens: 20,
        outputTokens: 8,
        cachedInputTokens: 0
      })
      const terminal = terminalOf(out)
      expect(terminal.ok).toBe(true)
      expect(terminal.text).toBe("Hello from the scripted model")
      expect(terminal.session).toBe(recordedSession)
      expect(terminal.model).toBe("gemini-2.5-flash")
      expect(terminal.error).toBeUndefined()
      expect(out.at(-1)).toBe(terminal)
    }))

  it.effect("a call is the host's only when it names one of the run's hosted tools", () =>
    Effect.gen(function*() {
      // A server of the copied profile named `echo_x` names its tools `mcp_echo_x_<tool>`.
      const use = (id: string, name: string) =>
        JSON.stringify({ type: "tool_use", timestamp: "t", tool_name: name, tool_id: id, parameters: {} })
      const calls = (hostedTools?: ReadonlyArray<string>) =>
        Effect.map(
          outputs([use("a", "mcp_echo_x_lookup"), use("b", "mcp_echo_echo")], {
            ...context(),
            ...(hostedTools === undefined ? {} : { hostedTools })
          }),
          (out) => out.flatMap((o) => o._tag === "ToolCall" ? [[o.name, o.source]] : [])
        )
      expect(yield* calls(["echo"])).toEqual([["mcp_echo_x_lookup", "mcp"], ["echo", "host"]])
      expect(yield* calls()).toEqual([["x_lookup", "host"], ["echo", "host"]])
    }))

  it.effect("a host tool round trip: start and end carry the catalog name, input and output", () =>
    Effect.gen(function*() {
      const out = yield* outputs(fixture("tool.jsonl"))
      const calls = out.filter((o) => o._tag === "ToolCall")
      expect(calls).toHaveLength(2)
      const [start, end] = calls
      expect(start).toMatchObject({ phase: "start", name: "echo", source: "host", input: { text: "hello-mcp" } })
      expect(end).toMatchObject({
        phase: "end",
        name: "echo",
        source: "host",
        output: "ECHO:hello-mcp",
        isError: false
      })
      expect(start?._tag === "ToolCall" && end?._tag === "ToolCall" && start.callId === end.callId).toBe(true)
      expect(terminalOf(out).text).toBe("FINAL: done")
    }))

  it.effect("a failed tool call ends with isError and the CLI's message", () =>
    Effect.gen(function*() {
      const out = yield* outputs(fixture("tool-error.jsonl"))
      const end = out.find((o) => o._tag === "ToolCall" && o.phase === "end")
      expect(end).toMatchObject({ name: "boom", source: "host", isError: true })
      expect(terminalOf(out)).toMatchObject({ ok: true, text: "FINAL: it failed" })
    }))

  it.effect("an API 400 is a failed terminal record with the provider's message and zero usage", () =>
    Effect.gen(function*() {
      const out = yield* outputs(fixture("api-error.jsonl"))
      const terminal = terminalOf(out)
      expect(terminal.ok).toBe(false)
      expect(terminal.error).toContain("scripted 400")
      expect(terminal.text).toBeUndefined()
      expect(terminal.usage).toMatchObject({ inputTokens: 0, outputTokens: 0 })
    }))

  it.effect("a resumed turn keeps the session id; another id is ResumeRejected", () =>
    Effect.gen(function*() {
      const ok = yield* outputs(fixture("resume-turn2.jsonl"), context({ _tag: "Resume", id: recordedSession }))
      expect(terminalOf(ok)).toMatchObject({ ok: true, text: "second answer", session: recordedSession })
      const other = yield* parseLines(
        fixture("resume-turn2.jsonl"),
        context({ _tag: "Resume", id: "99999999-2222-4333-8444-555555555555" })
      )
      expect(Either.isLeft(other) && other.left.reason).toBe("ResumeRejected")
    }))

  it.effect("text before a tool call is its own message; the final text is only what follows the last call", () =>
    Effect.gen(function*() {
      const delta = (content: string) => JSON.stringify({ type: "message", role: "assistant", content, delta: true })
      const out = yield* outputs([
        JSON.stringify({ type: "init", session_id: recordedSession, model: "m" }),
        delta("Let me "),
        delta("check."),
        JSON.stringify({ type: "tool_use", tool_id: "t1", tool_name: "mcp_echo_echo", parameters: {} }),
        JSON.stringify({ type: "tool_result", tool_id: "t1", status: "success", output: "ok" }),
        delta("Done."),
        JSON.stringify({ type: "result", status: "success", stats: { input_tokens: 1, output_tokens: 2 } })
      ])
      expect(out.filter((o) => o._tag === "Message").map((o) => o._tag === "Message" ? o.text : "")).toEqual([
        "Let me check.",
        "Done."
      ])
      expect(terminalOf(out)).toMatchObject({ text: "Done.", model: "m", usage: { inputTokens: 1, outputTokens: 2 } })
    }))

  it.effect("tools of other MCP servers and built-ins keep their names with their source", () =>
    Effect.gen(function*() {
      const lines = [
        JSON.stringify({ type: "tool_use", tool_id: "a", tool_name: "mcp_other_search", parameters: {} }),
        JSON.stringify({ type: "tool_result", tool_id: "a", status: "success", output: "x" }),
        JSON.stringify({ type: "tool_use", tool_id: "b", tool_name: "read_file", parameters: { path: "f" } })
      ]
      const out = yield* outputs(lines)
      expect(out.map((o) => o._tag === "ToolCall" ? [o.phase, o.name, o.source] : o._tag)).toEqual([
        ["start", "mcp_other_search", "mcp"],
        ["end", "mcp_other_search", "mcp"],
        ["start", "read_file", "builtin"]
      ])
    }))

  it.effect("non-JSON lines, unknown records and error records become notices", () =>
    Effect.gen(function*() {
      const out = yield* outputs([
        "Warning: 256-color support not detected.",
        JSON.stringify({ type: "future_kind", x: 1 }),
        JSON.stringify({ type: "error", severity: "warning", message: "loop detected" }),
        "[1,2]"
      ])
      expect(out.map((o) => o._tag === "Notice" ? [o.level, o.kind] : o._tag)).toEqual([
        ["warning", "gemini.non_json"],
        ["info", "gemini.future_kind"],
        ["warning", "gemini.error"],
        ["warning", "gemini.unknown"]
      ])
    }))

  it.effect("an init record without a session id is MalformedOutput", () =>
    Effect.gen(function*() {
      const result = yield* parseLines([JSON.stringify({ type: "init", model: "m" })])
      expect(Either.isLeft(result) && result.left.reason).toBe("MalformedOutput")
    }))

  it.effect.prop(
    "arbitrary lines never fail the stream except through a typed ProtocolError",
    [FastCheck.array(
      FastCheck.oneof(FastCheck.string(), FastCheck.json(), FastCheck.constantFrom(...fixture("tool.jsonl"))),
      { maxLength: 12 }
    )],
    ([lines]) =>
      Effect.gen(function*() {
        const result = yield* parseLines(lines)
        if (Either.isLeft(result)) expect(result.left._tag).toBe("ProtocolError")
        else expect(result.right.filter((o) => o._tag === "Terminal").length).toBeLessThanOrEqual(1)
      }),
    { fastCheck: { numRuns: 30 } }
  )
})

describe("Gemini.parse reads a plain delta without JSON.parse, as JSON.parse reads it", () => {
  /** What `JSON.parse` makes of a line that may be an assistant delta (`undefined`: another record). */
  const expected = (line: string): ReadonlyArray<Driver.Output> | "non_json" | undefined => {
    const r = OneEdit.parsedRecord(line)
    if (r === "non_json" || r === undefined) return r
    if (r["type"] !== "message" || r["role"] !== "assistant" || r["delta"] !== true) return undefined
    const text = typeof r["content"] === "string" ? r["content"] : ""
    return text === "" ? [] : [{ _tag: "TextDelta", text }]
  }
  const delta = (timestamp: string, content: string) =>
    JSON.stringify({ type: "message", timestamp, role: "assistant", content, delta: true })

  it.effect.prop(
    "any content, and any line one edit away from a delta, gives what JSON.parse reads",
    [FastCheck.string({ unit: "binary" }), FastCheck.string({ maxLength: 30 }), OneEdit.edits],
    ([content, timestamp, edits]) =>
      Effect.gen(function*() {
        const line = OneEdit.edited(delta(timestamp, content), edits)
        const want = expected(line)
        if (want === undefined) return
        const out = yield* outputs([line])
        if (want === "non_json") expect(out).toMatchObject([{ _tag: "Notice", kind: "gemini.non_json" }])
        else expect(out).toEqual(want)
      }),
    { fastCheck: { numRuns: 300 } }
  )

  it.effect("lines a pattern could misread: a repeated key, escapes, a record after the terminal one", () =>
    Effect.gen(function*() {
      const head = `{"type":"message","timestamp":"t","role":"assistant","content":`
      expect(yield* outputs([`${head}"a","delta":true,"content":"b"}`])).toEqual([{ _tag: "TextDelta", text: "b" }])
      expect(yield* outputs([`${head}"a","delta":false,"delta":true}`])).toEqual([{ _tag: "TextDelta", text: "a" }])
      expect(yield* outputs([`${head}"a\\"b","delta":true}`])).toEqual([{ _tag: "TextDelta", text: `a"b` }])
      expect(yield* outputs([`${head}"a","delta":true} `])).toEqual([{ _tag: "TextDelta", text: "a" }])
      expect(yield* outputs([`${head}"a","delta":true}}`])).toMatchObject([{ _tag: "Notice", kind: "gemini.non_json" }])
      // The deltas are the final message's text, and after the terminal record a delta is a notice.
      const out = yield* outputs([
        JSON.stringify({ type: "init", session_id: recordedSession, model: "m" }),
        delta("t", "Hel"),
        delta("t", "lo"),
        JSON.stringify({ type: "result", status: "success" }),
        delta("t", "late")
      ])
      expect(terminalOf(out).text).toBe("Hello")
      expect(out.at(-1)).toMatchObject({ _tag: "Notice", kind: "gemini.message", level: "info" })
    }))
})

describe("Gemini.parse on values of the wrong type", () => {
  // `String` throws on both ("Cannot convert object to primitive value"; a stack overflow).
  for (
    const [label, value] of [
      ["an object whose toString is not a function", `{"toString":1}`],
      ["arrays nested 10,000 deep", "[".repeat(10_000) + "]".repeat(10_000)]
    ] as const
  ) {
    it.effect(`${label} as a message role is a notice`, () =>
      Effect.gen(function*() {
        const out = yield* outputs([`{"type":"message","role":${value},"content":"hi"}`])
        expect(out).toMatchObject([{ _tag: "Notice", level: "info", message: "message with role (not text)" }])
      }))

    it.effect(`${label} as a result status is a failed terminal`, () =>
      Effect.gen(function*() {
        const out = yield* outputs([`{"type":"result","status":${value}}`])
        expect(terminalOf(out)).toMatchObject({ ok: false, error: "the CLI reported status (not text)" })
      }))
  }
})

describe("Gemini.parse cost per line", () => {
  it.effect("20,000 tool calls in one run parse without the cost of a line growing with the run", () =>
    Effect.gen(function*() {
      const lines: Array<string> = [JSON.stringify({ type: "init", session_id: recordedSession, model: "m" })]
      for (let i = 0; i < 20_000; i++) {
        lines.push(JSON.stringify({ type: "tool_use", tool_name: "mcp_echo_echo", tool_id: `t${i}`, parameters: {} }))
        lines.push(JSON.stringify({ type: "tool_result", tool_id: `t${i}`, status: "success", output: "ok" }))
      }
      lines.push(JSON.stringify({ type: "result", status: "success" }))
      // Copying the map of calls on every line made this run take ~30 s (the cost of a line grew
      // with the calls before it); linear parsing takes well under a second. The bound only
      // separates the two by a wide margin.
      const started = performance.now()
      const out = yield* outputs(lines)
      const elapsed = performance.now() - started
      const ends = out.filter((o) => o._tag === "ToolCall" && o.phase === "end")
      expect(ends).toHaveLength(20_000)
      expect(ends.at(-1)).toMatchObject({ callId: "t19999", name: "echo", source: "host" })
      expect(elapsed).toBeLessThan(10_000)
    }))
})
