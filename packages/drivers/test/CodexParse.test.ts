import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Codex } from "@tether/drivers"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"

const fixtures = Path.join(import.meta.dirname, "fixtures", "codex")
const samples = Path.resolve(import.meta.dirname, "fixtures/provider-samples")

const lines = (file: string): ReadonlyArray<string> => Fs.readFileSync(file, "utf8").split("\n")
const fixture = (name: string) => lines(Path.join(fixtures, name))

const newSession: Driver.SessionRequest = { _tag: "New", id: "00000000-0000-4000-8000-000000000000" }

const run = (input: ReadonlyArray<string>, context: Partial<Driver.ParseContext> = {}) =>
  Codex.parse(Stream.fromIterable(input), { hostedKey: "tether", session: newSession, ...context }).pipe(
    Stream.runCollect,
    Effect.map(Chunk.toReadonlyArray),
    Effect.either
  )

const ok = (result: Either.Either<ReadonlyArray<Driver.Output>, Driver.ProtocolError>) => {
  if (Either.isLeft(result)) throw new Error(`parse failed: ${result.left.message}`)
  return result.right
}

const tags = (outputs: ReadonlyArray<Driver.Output>) => outputs.map((o) => o._tag)
const terminal = (outputs: ReadonlyArray<Driver.Output>) =>
  outputs.find((o): o is Driver.Terminal => o._tag === "Terminal")
const calls = (outputs: ReadonlyArray<Driver.Output>) =>
  outputs.filter((o): o is Extract<Driver.Output, { _tag: "ToolCall" }> => o._tag === "ToolCall")

const metadataNotice = expect.objectContaining({
  _tag: "Notice",
  level: "warning",
  kind: "error",
  message: expect.stringContaining("Model metadata for `fake-model` not found")
})

describe("Codex.parse on recorded 0.171.0 fixtures", () => {
  it.effect("a text turn: thread = session, the metadata error item is a notice, message, usage, terminal", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(fixture("text.jsonl")))
      expect(tags(out)).toEqual(["SessionStarted", "Notice", "Message", "Usage", "Terminal"])
      const thread = JSON.parse(fixture("text.jsonl")[0]!).thread_id as string
      expect(out[0]).toEqual({ _tag: "SessionStarted", sessionId: thread, model: undefined })
      expect(out[1]).toEqual(metadataNotice)
      expect(out[2]).toEqual({ _tag: "Message", role: "assistant", text: "Hello from fake model" })
      const end = terminal(out)!
      expect(end).toMatchObject({ ok: true, text: "Hello from fake model", session: thread, error: undefined })
      expect({ ...end.usage }).toEqual({ inputTokens: 10, cachedInputTokens: 0, outputTokens: 5, reasoningTokens: 0 })
      expect((end.raw as { type: string }).type).toBe("turn.completed")
    }))

  it.effect("an MCP tool call of the hosted server is a host ToolCall start and end with the structured result", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(fixture("mcp-tool.jsonl"), { hostedKey: "echo" }))
      expect(tags(out)).toEqual(["SessionStarted", "Notice", "ToolCall", "ToolCall", "Message", "Usage", "Terminal"])
      expect(calls(out)).toEqual([
        {
          _tag: "ToolCall",
          phase: "start",
          callId: "item_1",
          name: "echo",
          source: "host",
          input: { text: "hello-mcp" }
        },
        {
          _tag: "ToolCall",
          phase: "end",
          callId: "item_1",
          name: "echo",
          source: "host",
          output: { echoed: "hello-mcp" },
          isError: false
        }
      ])
      expect(terminal(out)?.text).toBe("FINAL: Wall time: 0.0100 seconds\nOutput:\n{\"echoed\":\"hello-mcp\"}")
    }))

  it.effect("a tool of another MCP server has source mcp; a failed call ends with isError and its text", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(fixture("mcp-tool-error.jsonl")))
      expect(calls(out).map((c) => [c.phase, c.name, c.source])).toEqual([["start", "boom", "mcp"], [
        "end",
        "boom",
        "mcp"
      ]])
      expect(calls(out)[1]).toMatchObject({ output: "internal_error: the tool failed", isError: true })
      expect(terminal(out)?.ok).toBe(true)
    }))

  it.effect("a model failure: the error record is a notice, turn.failed a failed terminal with the message", () =>
    Effect.gen(function*() {
      for (const name of ["model-500.jsonl", "model-400.jsonl"]) {
        const out = ok(yield* run(fixture(name)))
        expect(tags(out)).toEqual(["SessionStarted", "Notice", "Notice", "Terminal"])
        expect(out[2]).toMatchObject({ _tag: "Notice", level: "error", kind: "error" })
        const end = terminal(out)!
        expect(end.ok).toBe(false)
        expect(end.usage).toBeUndefined()
        expect(end.text).toBeUndefined()
        expect(end.error).toBe((out[2] as { message: string }).message)
        expect((end.raw as { type: string }).type).toBe("turn.failed")
      }
      const bad = terminal(ok(yield* run(fixture("model-400.jsonl"))))!
      expect(bad.error).toContain("bad request scripted")
    }))

  it.effect("reconnection errors are notices, not terminal", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(fixture("model-unreachable.jsonl")))
      expect(terminal(out)).toBeUndefined()
      const errors = out.filter((o) => o._tag === "Notice" && o.kind === "error" && o.level === "error")
      expect(errors.length).toBeGreaterThan(0)
      expect(errors.every((o) => o._tag === "Notice" && o.message.startsWith("Reconnecting..."))).toBe(true)
    }))

  it.effect("with maxReconnects, the driver's parser fails once Codex reconnected more often than allowed", () =>
    Effect.gen(function*() {
      const parse = (maxReconnects: number) =>
        Codex.driver({ binary: "codex", maxReconnects }).parse(
          Stream.fromIterable(fixture("model-unreachable.jsonl")),
          {
            hostedKey: "tether",
            session: newSession
          }
        ).pipe(Stream.runCollect, Effect.either)
      const failed = yield* parse(2)
      expect(Either.isLeft(failed) && failed.left.reason).toBe("ProviderError")
      expect(Either.isLeft(failed) && failed.left.detail).toContain("3 reconnection attempts")
      expect(Either.isRight(yield* parse(5))).toBe(true)
      // Without the option the driver still bounds the wait (Codex alone would wait forever).
      const byDefault = yield* Codex.driver({ binary: "codex" }).parse(
        Stream.fromIterable(fixture("model-unreachable.jsonl")),
        { hostedKey: "tether", session: newSession }
      ).pipe(Stream.runCollect, Effect.either)
      expect(Codex.defaultMaxReconnects).toBe(2)
      expect(Either.isLeft(byDefault) && byDefault.left.detail).toContain("3 reconnection attempts")
    }))

  it.effect("a shell command is a builtin ToolCall with the command, its output and exit code", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(fixture("command.jsonl")))
      expect(calls(out)).toEqual([
        {
          _tag: "ToolCall",
          phase: "start",
          callId: "item_1",
          name: "command_execution",
          source: "builtin",
          input: { command: "/bin/bash -lc 'echo hi'" }
        },
        {
          _tag: "ToolCall",
          phase: "end",
          callId: "item_1",
          name: "command_execution",
          source: "builtin",
          output: { output: "hi\n", exitCode: 0 },
          isError: false
        }
      ])
    }))

  it.effect("reasoning is a ReasoningDelta before the message", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(fixture("reasoning.jsonl")))
      expect(tags(out)).toEqual(["SessionStarted", "Notice", "ReasoningDelta", "Message", "Usage", "Terminal"])
      expect(out[2]).toEqual({ _tag: "ReasoningDelta", text: "**Planning** the answer" })
    }))

  it.effect("a web search is a builtin ToolCall with its query; a turn without a message has no text", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(fixture("web-search.jsonl")))
      expect(calls(out).map((c) => [c.phase, c.name, c.source, c.callId])).toEqual([
        ["start", "web_search", "builtin", "ws_1"],
        ["end", "web_search", "builtin", "ws_1"]
      ])
      expect(calls(out)[0]!.input).toMatchObject({ query: "effect typescript" })
      expect(terminal(out)).toMatchObject({ ok: true, text: undefined })
    }))

  it.effect("a resumed turn keeps the thread id; another thread id is a ResumeRejected", () =>
    Effect.gen(function*() {
      const first = ok(yield* run(fixture("resume-first.jsonl")))
      const thread = terminal(first)!.session!
      const second = ok(yield* run(fixture("resume-second.jsonl"), { session: { _tag: "Resume", id: thread } }))
      expect(second[0]).toEqual({ _tag: "SessionStarted", sessionId: thread, model: undefined })
      expect(terminal(second)).toMatchObject({ ok: true, session: thread, text: "turn 1" })
      const other = yield* run(fixture("resume-second.jsonl"), {
        session: { _tag: "Resume", id: "0199a213-81c0-7800-8aa1-bbab2a035a53" }
      })
      expect(Either.isLeft(other) && other.left.reason).toBe("ResumeRejected")
    }))

  it.effect("the shared provider samples parse to the same shapes", () =>
    Effect.gen(function*() {
      const text = ok(yield* run(lines(`${samples}/codex-sample.jsonl`)))
      expect(terminal(text)).toMatchObject({ ok: true, text: "Hello from fake model" })
      const mcp = ok(yield* run(lines(`${samples}/codex-mcp-sample.jsonl`), { hostedKey: "echo" }))
      expect(calls(mcp)[1]).toMatchObject({ source: "host", output: "ECHO:hello-mcp", isError: false })
      expect(terminal(mcp)?.usage?.inputTokens).toBe(20)
      const error = ok(yield* run(lines(`${samples}/codex-error-sample.jsonl`)))
      expect(terminal(error)).toMatchObject({
        ok: false,
        error: "We’re currently experiencing high demand, which may cause temporary errors."
      })
    }))
})

describe("Codex.parse on the other item kinds and records", () => {
  const line = (record: unknown) => JSON.stringify(record)

  it.effect("file_change is a builtin ToolCall; a failed one is an error", () =>
    Effect.gen(function*() {
      const changes = [{ path: "src/a.ts", kind: "update" }, { path: "b.md", kind: "add" }]
      const out = ok(
        yield* run([
          line({ type: "item.completed", item: { id: "item_3", type: "file_change", changes, status: "completed" } }),
          line({ type: "item.completed", item: { id: "item_4", type: "file_change", changes, status: "failed" } })
        ])
      )
      expect(calls(out).map((c) => [c.phase, c.callId, c.name, c.isError])).toEqual([
        ["start", "item_3", "file_change", undefined],
        ["end", "item_3", "file_change", false],
        ["start", "item_4", "file_change", undefined],
        ["end", "item_4", "file_change", true]
      ])
      expect(calls(out)[0]!.input).toEqual({ changes })
    }))

  it.effect("started, updated and completed of one item give exactly one start and one end", () =>
    Effect.gen(function*() {
      const item = { id: "item_5", type: "command_execution", command: "false", aggregated_output: "" }
      const out = ok(
        yield* run([
          line({ type: "item.started", item: { ...item, exit_code: null, status: "in_progress" } }),
          line({ type: "item.updated", item: { ...item, exit_code: null, status: "in_progress" } }),
          line({ type: "item.completed", item: { ...item, exit_code: 1, status: "failed" } })
        ])
      )
      expect(calls(out).map((c) => [c.phase, c.isError])).toEqual([["start", undefined], ["end", true]])
    }))

  it.effect("todo_list items are notices at every phase; an in-progress message is not emitted", () =>
    Effect.gen(function*() {
      const items = [{ text: "read", completed: true }, { text: "write", completed: false }]
      const out = ok(
        yield* run([
          line({ type: "turn.started" }),
          line({ type: "item.started", item: { id: "item_6", type: "todo_list", items } }),
          line({ type: "item.updated", item: { id: "item_6", type: "todo_list", items } }),
          line({ type: "item.started", item: { id: "item_7", type: "agent_message", text: "" } })
        ])
      )
      expect(out).toEqual([
        expect.objectContaining({ _tag: "Notice", kind: "todo_list", message: "plan started: 1/2 done" }),
        expect.objectContaining({ _tag: "Notice", kind: "todo_list", message: "plan updated: 1/2 done" })
      ])
    }))

  it.effect("a failed MCP call with an error object ends with the error message", () =>
    Effect.gen(function*() {
      const out = ok(
        yield* run([
          line({
            type: "item.completed",
            item: {
              id: "item_8",
              type: "mcp_tool_call",
              server: "tether",
              tool: "lookup",
              arguments: { key: "A" },
              result: null,
              error: { message: "tool call timed out" },
              status: "failed"
            }
          })
        ])
      )
      expect(calls(out)[1]).toMatchObject({ source: "host", output: "tool call timed out", isError: true })
    }))

  it.effect("unknown records, unknown item kinds and non-JSON lines become notices; blank lines nothing", () =>
    Effect.gen(function*() {
      const out = ok(
        yield* run([
          line({ type: "thread.compacted", thread_id: "x" }),
          line({ type: "item.completed", item: { id: "i", type: "collab_tool_call" } }),
          "not json {",
          "[1,2]",
          "   ",
          line({ type: "item.completed" })
        ])
      )
      expect(out.map((o) => o._tag === "Notice" ? o.kind : o._tag)).toEqual([
        "unknown/thread.compacted",
        "item/collab_tool_call",
        "malformed",
        "malformed",
        "malformed"
      ])
    }))

  it.effect.prop(
    "arbitrary lines never fail a new session's parse and every line is accounted for",
    [FastCheck.array(
      FastCheck.oneof(
        FastCheck.string(),
        FastCheck.json(),
        FastCheck.record({
          type: FastCheck.constantFrom("item.started", "item.completed", "turn.completed", "turn.failed", "error"),
          item: FastCheck.anything()
        }).map((r) => JSON.stringify(r))
      ),
      { maxLength: 20 }
    )],
    ([input]) =>
      Effect.gen(function*() {
        const result = yield* run(input)
        expect(Either.isRight(result)).toBe(true)
      }),
    { fastCheck: { numRuns: 100 } }
  )
})

describe("Codex.classifyExit on recorded stderr", () => {
  const info = (stderr: string, session: Driver.SessionRequest): Driver.ExitInfo => ({
    exitCode: 1,
    stderr,
    terminal: undefined,
    session
  })

  it("an unknown thread on resume or fork is a ResumeRejected; on a new session it is not", () => {
    const stderr = Fs.readFileSync(Path.join(fixtures, "resume-unknown.stderr.txt"), "utf8")
    const resume = Codex.classifyExit(info(stderr, { _tag: "Resume", id: "0199a213-81c0-7800-8aa1-bbab2a035a53" }))
    expect(resume?.reason).toBe("ResumeRejected")
    expect(resume?.detail).toContain("0199a213-81c0-7800-8aa1-bbab2a035a53")
    expect(Codex.classifyExit(info(stderr, { _tag: "Fork", from: "abc", id: "def" }))?.reason).toBe("ResumeRejected")
    expect(Codex.classifyExit(info(stderr, newSession))).toBeUndefined()
  })

  it("a required MCP server that failed to start is HostedToolsUnavailable; other stderr is left to core", () => {
    const stderr = Fs.readFileSync(Path.join(fixtures, "mcp-auth-required.stderr.txt"), "utf8")
    expect(Codex.classifyExit(info(stderr, newSession))?.reason).toBe("HostedToolsUnavailable")
    expect(Codex.classifyExit(info("Reading additional input from stdin...\nsegfault", newSession))).toBeUndefined()
  })
})

describe("Codex.parse on values of the wrong type", () => {
  // `String` throws on both ("Cannot convert object to primitive value"; a stack overflow).
  for (
    const [label, value] of [
      ["an object whose toString is not a function", `{"toString":1}`],
      ["arrays nested 10,000 deep", "[".repeat(10_000) + "]".repeat(10_000)]
    ] as const
  ) {
    it.effect(`${label} as the record type is a notice and the run goes on`, () =>
      Effect.gen(function*() {
        const out = ok(yield* run([`{"type":${value}}`, ...fixture("text.jsonl")]))
        expect(out[0]).toMatchObject({ _tag: "Notice", level: "info", kind: "unknown/(not text)" })
        expect(terminal(out)?.ok).toBe(true)
      }))
  }
})
