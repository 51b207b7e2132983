import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { CodeBuddy } from "@tether/drivers"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"

const fixtures = Path.join(import.meta.dirname, "fixtures", "codebuddy")
const samples = Path.resolve(import.meta.dirname, "fixtures/provider-samples")

const lines = (file: string): ReadonlyArray<string> => Fs.readFileSync(file, "utf8").split("\n")

const S1 = "11111111-1111-4111-8111-111111111111"
const newSession = (id = S1): Driver.SessionRequest => ({ _tag: "New", id })

const run = (input: ReadonlyArray<string>, context: Partial<Driver.ParseContext> = {}) =>
  CodeBuddy.parse(Stream.fromIterable(input), { hostedKey: "tether", session: newSession(), ...context }).pipe(
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
const texts = (outputs: ReadonlyArray<Driver.Output>, tag: "TextDelta" | "ReasoningDelta") =>
  outputs.flatMap((o) => o._tag === tag ? [o.text] : []).join("")

/** A line of the CLI's stream-json. */
const line = (record: object) => JSON.stringify(record)
const init = (servers: ReadonlyArray<string> = ["tether"], session = S1) =>
  line({
    type: "system",
    subtype: "init",
    session_id: session,
    model: "default-model",
    mcp_servers: servers.map((name) => ({ name, status: "connected" }))
  })
const assistantText = (text: string) =>
  line({ type: "assistant", session_id: S1, message: { role: "assistant", content: [{ type: "text", text }] } })

describe("CodeBuddy.parse on recorded 2.117.0 fixtures", () => {
  it.effect("a text turn: session, message, usage, successful terminal; status and snapshot records say nothing", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(lines(`${fixtures}/text.jsonl`)))
      expect(tags(out)).toEqual(["SessionStarted", "Message", "Usage", "Terminal"])
      expect(out[0]).toEqual({ _tag: "SessionStarted", sessionId: S1, model: "default-model" })
      expect(out[1]).toEqual({ _tag: "Message", role: "assistant", text: "Hello from the scripted model (0)" })
      const end = terminal(out)!
      expect(end).toMatchObject({ ok: true, text: "Hello from the scripted model (0)", session: S1, error: undefined })
      expect(end.usage).toMatchObject({ inputTokens: 10, outputTokens: 5, cachedInputTokens: 0, costUsd: 0 })
      expect((end.raw as { type: string }).type).toBe("result")
    }))

  it.effect("partial messages: reasoning deltas, then text deltas that add up to the final text", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(lines(`${fixtures}/text-partial.jsonl`)))
      expect(texts(out, "ReasoningDelta")).toBe("Let me think about it.")
      expect(texts(out, "TextDelta")).toBe("Hello after thinking")
      expect(out.filter((o) => o._tag === "TextDelta").length).toBeGreaterThan(1)
      // The whole `thinking` record repeats the deltas: it is not emitted a second time.
      expect(out.filter((o) => o._tag === "ReasoningDelta").length).toBe(3)
      expect(out.filter((o) => o._tag === "Notice")).toEqual([])
      expect(terminal(out)?.text).toBe("Hello after thinking")
    }))

  it.effect("a hosted tool call: start with the input, end with the text of the MCP content, source host", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(lines(`${fixtures}/mcp.jsonl`)))
      expect(out.filter((o) => o._tag === "ToolCall")).toEqual([
        {
          _tag: "ToolCall",
          phase: "start",
          callId: "call_echo_1",
          name: "echo",
          source: "host",
          input: { text: "hello-mcp" }
        },
        {
          _tag: "ToolCall",
          phase: "end",
          callId: "call_echo_1",
          name: "echo",
          source: "host",
          output: "{\"echoed\":\"hello-mcp\"}",
          isError: false
        }
      ])
      expect(texts(out, "TextDelta")).toContain("Calling echo.")
      expect(terminal(out)?.ok).toBe(true)
    }))

  it.effect("a tool answering isError: the CLI reports success, the output is the error's text", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(lines(`${fixtures}/mcp-reject.jsonl`)))
      expect(out.find((o) => o._tag === "ToolCall" && o.phase === "end")).toMatchObject({
        name: "reject",
        output: "not_found: choose an issue that exists",
        isError: false
      })
    }))

  it.effect("a hosted tools server missing from system/init fails with HostedToolsUnavailable", () =>
    Effect.gen(function*() {
      const failed = yield* run(lines(`${fixtures}/mcp-failed.jsonl`))
      expect(Either.isLeft(failed) && failed.left.reason).toBe("HostedToolsUnavailable")
      expect(Either.isLeft(failed) && failed.left.detail).toContain("\"tether\"")
      const listed = ok(yield* run([init(["other", "tether"])]))
      expect(tags(listed)).toEqual(["SessionStarted"])
    }))

  it.effect("a model error: a notice instead of a message, then the failed terminal with the CLI's error", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(lines(`${fixtures}/error-500.jsonl`)))
      expect(tags(out)).toEqual(["SessionStarted", "Notice", "Usage", "Terminal"])
      expect(out[1]).toMatchObject({ level: "error", kind: "api_error" })
      expect(out[1]!._tag === "Notice" && out[1]!.message).toMatch(/^500 scripted outage \(/)
      const end = terminal(out)!
      expect(end.ok).toBe(false)
      expect(end.error).toMatch(/^500 scripted outage \(/)
      expect(end.text).toBeUndefined()
    }))

  it.effect("a 401 is reported as the bare status line: a notice too, not the model's message", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(lines(`${fixtures}/error-401.jsonl`)))
      expect(tags(out)).toEqual(["SessionStarted", "Notice", "Usage", "Terminal"])
      expect(out[1]).toMatchObject({ level: "error", kind: "api_error", message: "401 Unauthorized" })
      expect(terminal(out)).toMatchObject({ ok: false, error: expect.stringMatching(/^401 invalid api key \(/) })
    }))

  it.effect("an unreachable endpoint: the second error report ends the turn (the CLI never does)", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(lines(`${fixtures}/unreachable.jsonl`)))
      expect(tags(out)).toEqual(["SessionStarted", "Notice", "Notice", "Terminal"])
      const end = terminal(out)!
      expect(end.ok).toBe(false)
      expect(end.session).toBe(S1)
      expect(end.error).toContain("ECONNREFUSED 127.0.0.1:1")
      expect(end.error).toContain("gave up after 2 failed model requests")
      // Model output between two reports starts the count again.
      const reports = lines(`${fixtures}/unreachable.jsonl`).filter((l) => l.includes("\"assistant\""))
      const interleaved = ok(yield* run([init(), reports[0]!, assistantText("recovered"), reports[1]!]))
      expect(tags(interleaved)).toEqual(["SessionStarted", "Notice", "Message", "Notice"])
    }))

  it.effect("tool calls of successive responses reusing one id: each start paired with its end, then the result", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(lines(`${fixtures}/reused-id.jsonl`)))
      const calls = out.filter((o): o is Extract<Driver.Output, { _tag: "ToolCall" }> => o._tag === "ToolCall")
      expect(calls.map((c) => [c.phase, c.callId, c.name, c.source])).toEqual([
        ["start", "call_0", "lookup_issue", "host"],
        ["end", "call_0", "lookup_issue", "host"],
        ["start", "call_0", "lookup_issue", "host"],
        ["end", "call_0", "lookup_issue", "host"]
      ])
      expect(calls.map((c) => c.phase === "start" ? c.input : JSON.parse(c.output as string))).toEqual([
        { key: "ISSUE-1" },
        { title: "Title of ISSUE-1", state: "open" },
        { key: "ISSUE-2" },
        { title: "Title of ISSUE-2", state: "open" }
      ])
      expect(out.filter((o) => o._tag === "Notice")).toEqual([])
      expect(tags(out).at(-1)).toBe("Terminal")
      expect(terminal(out)).toMatchObject({ ok: true, text: "both looked up" })
    }))

  it.effect("two calls of one response sharing an id: the CLI's third report of a missing tool ends the turn", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(lines(`${fixtures}/reused-id-parallel.jsonl`)))
      // The CLI merged the two calls into one whose name is both names: no call ran.
      expect(tags(out)).toEqual(["SessionStarted", "Notice", "Notice", "Notice", "Terminal"])
      const merged = "Tool mcp__tether__lookup_issuemcp__tether__lookup_issue not found in agent cli."
      expect(out.slice(1, 4)).toMatchObject(Array(3).fill({ level: "error", kind: "tool_not_found", message: merged }))
      const end = terminal(out)!
      expect(end.ok).toBe(false)
      expect(end.session).toBe("d76a56bc-0e5b-4726-accf-17e797224a88")
      expect(end.error).toBe(
        `${merged} (CodeBuddy Code gave up after the model called a tool it does not have 3 times)`
      )
      // Model output between two reports starts the count again; the CLI then prompts the model again.
      const reports = lines(`${fixtures}/reused-id-parallel.jsonl`).filter((l) => l.startsWith(`{"type":"assistant"`))
      const interleaved = ok(yield* run([init(), reports[0]!, reports[1]!, assistantText("recovered"), reports[2]!]))
      expect(tags(interleaved)).toEqual(["SessionStarted", "Notice", "Notice", "Message", "Notice"])
      // So do the CLI's other reports: a failed model request is counted on its own.
      const unreachable = lines(`${fixtures}/unreachable.jsonl`).filter((l) => l.includes("\"assistant\""))
      const mixed = ok(
        yield* run([init(), reports[0]!, reports[1]!, unreachable[0]!, reports[2]!])
      )
      expect(tags(mixed)).toEqual(["SessionStarted", "Notice", "Notice", "Notice", "Notice"])
    }))

  it.effect("resume and fork: the session reported is the one asked for", () =>
    Effect.gen(function*() {
      const S2 = "22222222-2222-4222-8222-222222222222"
      const first = ok(yield* run(lines(`${fixtures}/resume-1.jsonl`), { session: newSession(S2) }))
      expect(terminal(first)?.session).toBe(S2)
      const resumed = ok(yield* run(lines(`${fixtures}/resume-2.jsonl`), { session: { _tag: "Resume", id: S2 } }))
      expect(resumed[0]).toMatchObject({ _tag: "SessionStarted", sessionId: S2 })
      expect(terminal(resumed)).toMatchObject({ ok: true, session: S2 })
      const S3 = "33333333-3333-4333-8333-333333333333"
      const forked = ok(yield* run(lines(`${fixtures}/fork-2.jsonl`), { session: { _tag: "Fork", from: S2, id: S3 } }))
      expect(terminal(forked)).toMatchObject({ ok: true, session: S3 })
      const wrong = yield* run(lines(`${fixtures}/resume-2.jsonl`), { session: { _tag: "Resume", id: S3 } })
      expect(Either.isLeft(wrong) && wrong.left.reason).toBe("ResumeRejected")
    }))

  it.effect("resuming a missing session fails with ResumeRejected; an error record otherwise ends the turn", () =>
    Effect.gen(function*() {
      const session: Driver.SessionRequest = { _tag: "Resume", id: "99999999-9999-4999-8999-999999999999" }
      const rejected = yield* run(lines(`${fixtures}/resume-missing.jsonl`), { session })
      expect(Either.isLeft(rejected) && rejected.left.reason).toBe("ResumeRejected")
      expect(Either.isLeft(rejected) && rejected.left.detail).toContain(session.id)
      const out = ok(yield* run(lines(`${fixtures}/resume-missing.jsonl`)))
      expect(tags(out)).toEqual(["Terminal"])
      expect(terminal(out)).toMatchObject({ ok: false, error: expect.stringContaining("No conversation found") })
      const driver = CodeBuddy.driver()
      const end = terminal(out)!
      expect(driver.classifyExit?.({ exitCode: 0, stderr: "", terminal: end, session })?.reason).toBe("ResumeRejected")
      expect(driver.classifyExit?.({ exitCode: 0, stderr: "", terminal: end, session: newSession() })).toBeUndefined()
      expect(driver.classifyExit?.({ exitCode: 1, stderr: "", terminal: undefined, session })).toBeUndefined()
    }))
})

describe("CodeBuddy.parse on the shared provider samples", () => {
  it.effect("both samples parse; the MCP sample maps the server's tool and unwraps its content", () =>
    Effect.gen(function*() {
      // Recorded without any MCP server: the hosted tools are missing from `system/init`.
      const unavailable = yield* run(lines(`${samples}/codebuddy-sample.jsonl`), { hostedKey: "echo" })
      expect(Either.isLeft(unavailable) && unavailable.left.reason).toBe("HostedToolsUnavailable")
      const plain = ok(yield* run(lines(`${samples}/codebuddy-sample.jsonl`).filter((l) => !l.includes("\"init\""))))
      expect(terminal(plain)).toMatchObject({ ok: true, text: "Hello from fake model" })
      const mcp = ok(yield* run(lines(`${samples}/codebuddy-mcp-sample.jsonl`), { hostedKey: "echo" }))
      expect(
        mcp.filter((o) => o._tag === "ToolCall").map((o) => o._tag === "ToolCall" && `${o.phase}:${o.source}:${o.name}`)
      ).toEqual(["start:host:echo", "end:host:echo"])
      expect(mcp.find((o) => o._tag === "ToolCall" && o.phase === "end")).toMatchObject({ output: "ECHO:hello-mcp" })
    }))
})

describe("CodeBuddy.parse robustness", () => {
  it.effect("text that only looks like an error report is the model's message", () =>
    Effect.gen(function*() {
      const out = ok(
        yield* run([
          init(),
          // No trailer, another session's trailer, a trailer that is not a request id.
          assistantText("500 Internal Server Error is what the logs say"),
          assistantText(`500 boom (0123456789abcdef0123456789abcdef/${"2".repeat(8)}-2222-4222-8222-222222222222)`),
          assistantText(`500 boom (not-a-request-id/${S1})`),
          assistantText(`500 boom (0123456789abcdef0123456789abcdef/${S1})`)
        ])
      )
      expect(tags(out)).toEqual(["SessionStarted", "Message", "Message", "Message", "Notice"])
    }))

  it.effect("text that only looks like a missing tool's report is the model's message", () =>
    Effect.gen(function*() {
      const out = ok(
        yield* run([
          init(),
          assistantText("The Tool Read not found in agent cli."),
          assistantText("Tool Read not found in agent cli. Try another."),
          assistantText("Tool Read not found in agent my cli."),
          assistantText("Tool Read not found in agent cli.")
        ])
      )
      expect(tags(out)).toEqual(["SessionStarted", "Message", "Message", "Message", "Notice"])
    }))

  it.effect("tool content that is not only text parts stays as the CLI wrote it", () =>
    Effect.gen(function*() {
      const result = (text: string) =>
        line({
          type: "user",
          message: {
            role: "user",
            content: [{ type: "tool_result", tool_use_id: "c", content: [{ type: "text", text }] }]
          }
        })
      const image = JSON.stringify([{ type: "image", data: "AAAA", mimeType: "image/png" }])
      const out = ok(yield* run([result(image), result("[not json"), result("[]"), result("plain")]))
      expect(out.map((o) => o._tag === "ToolCall" && o.output)).toEqual([image, "[not json", "[]", "plain"])
    }))

  it.effect("unknown records and non-JSON lines are notices naming CodeBuddy Code; a status with a value is kept", () =>
    Effect.gen(function*() {
      const out = ok(
        yield* run([
          `{"type":"control_request","request_id":"x","request":{"subtype":"can_use_tool"}}`,
          `not json`,
          `{"type":"system","subtype":"status","status":"compacting"}`,
          ...lines(`${fixtures}/text.jsonl`)
        ])
      )
      expect(out.slice(0, 3)).toMatchObject([
        { _tag: "Notice", kind: "unknown/control_request", message: "unknown CodeBuddy Code record" },
        { _tag: "Notice", kind: "malformed" },
        { _tag: "Notice", kind: "system/status", message: "compacting" }
      ])
      expect(terminal(out)?.ok).toBe(true)
    }))

  it.effect.prop(
    "arbitrary lines never fail the stream and each yields a bounded number of outputs",
    [FastCheck.array(FastCheck.oneof(FastCheck.string(), FastCheck.json()), { maxLength: 20 })],
    ([input]) =>
      Effect.gen(function*() {
        const out = ok(yield* run(input))
        expect(out.length).toBeLessThanOrEqual(input.length * 4)
      }),
    { fastCheck: { numRuns: 50 } }
  )
})
