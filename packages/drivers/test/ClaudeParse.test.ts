import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Claude, CodeBuddy } from "@tether/drivers"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as OneEdit from "./OneEdit.js"

const fixtures = Path.join(import.meta.dirname, "fixtures", "claude")
const samples = Path.resolve(import.meta.dirname, "fixtures/provider-samples")

const lines = (file: string): ReadonlyArray<string> => Fs.readFileSync(file, "utf8").split("\n")

const newSession = (id = "00000000-0000-4000-8000-000000000000"): Driver.SessionRequest => ({ _tag: "New", id })

const run = (input: ReadonlyArray<string>, context: Partial<Driver.ParseContext> = {}) =>
  Claude.parse(Stream.fromIterable(input), { hostedKey: "tether", session: newSession(), ...context }).pipe(
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

describe("Claude.parse on recorded 2.1.197 fixtures", () => {
  it.effect("a text turn: session, message, usage, successful terminal", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(lines(`${fixtures}/text.jsonl`)))
      expect(tags(out)).toEqual(["SessionStarted", "Message", "Usage", "Terminal"])
      expect(out[0]).toEqual({
        _tag: "SessionStarted",
        sessionId: "11111111-1111-4111-8111-111111111111",
        model: "claude-opus-4-8[1m]"
      })
      expect(out[1]).toEqual({ _tag: "Message", role: "assistant", text: "Hello from the scripted model" })
      const end = terminal(out)!
      expect(end.ok).toBe(true)
      expect(end.text).toBe("Hello from the scripted model")
      expect(end.session).toBe("11111111-1111-4111-8111-111111111111")
      expect(end.error).toBeUndefined()
      expect(end.usage?.inputTokens).toBe(10)
      expect(end.usage?.outputTokens).toBe(8)
      expect(end.usage?.cachedInputTokens).toBe(0)
      expect(typeof end.usage?.costUsd).toBe("number")
      expect((end.raw as { type: string }).type).toBe("result")
    }))

  it.effect("partial messages give text deltas that add up to the message; status records are notices", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(lines(`${fixtures}/text-partial.jsonl`)))
      const deltas = out.filter((o) => o._tag === "TextDelta")
      expect(deltas.length).toBeGreaterThan(1)
      expect(deltas.map((d) => d._tag === "TextDelta" ? d.text : "").join("")).toBe("Hello from the scripted model")
      expect(out.filter((o) => o._tag === "Notice").map((o) => o._tag === "Notice" && o.kind)).toEqual([
        "system/status"
      ])
      expect(terminal(out)?.text).toBe("Hello from the scripted model")
    }))

  it.effect("a hosted tool call: start with the input, end with the structured output, source host", () =>
    Effect.gen(function*() {
      for (const file of ["mcp.jsonl", "mcp-partial.jsonl"]) {
        const out = ok(yield* run(lines(`${fixtures}/${file}`)))
        const calls = out.filter((o) => o._tag === "ToolCall")
        expect(calls).toEqual([
          {
            _tag: "ToolCall",
            phase: "start",
            callId: "toolu_scripted2",
            name: "echo",
            source: "host",
            input: { text: "hello-mcp" }
          },
          {
            _tag: "ToolCall",
            phase: "end",
            callId: "toolu_scripted2",
            name: "echo",
            source: "host",
            output: { echoed: "hello-mcp" },
            isError: false
          }
        ])
        expect(out.filter((o) => o._tag === "Message").map((o) => o._tag === "Message" && o.text)).toEqual([
          "Let me call the tool.",
          "FINAL: done"
        ])
        expect(terminal(out)?.text).toBe("FINAL: done")
      }
    }))

  it.effect("a call is the host's only when it names one of the run's hosted tools", () =>
    Effect.gen(function*() {
      // A server of the copied profile named `tether__x` names its tools as hosted ones would be.
      const record = (id: string, name: string) =>
        JSON.stringify({
          type: "assistant",
          message: { role: "assistant", content: [{ type: "tool_use", id, name, input: {} }] }
        })
      const calls = (hostedTools?: ReadonlyArray<string>) =>
        Effect.map(
          run([record("a", "mcp__tether__x__lookup"), record("b", "mcp__tether__issue_lookup")], {
            ...(hostedTools === undefined ? {} : { hostedTools })
          }),
          (result) => ok(result).flatMap((o) => o._tag === "ToolCall" ? [[o.name, o.source]] : [])
        )
      expect(yield* calls(["issue.lookup"])).toEqual([["x__lookup", "mcp"], ["issue.lookup", "host"]])
      // Without the run's tools (a third-party caller's context): by the prefix alone, as before.
      expect(yield* calls()).toEqual([["x__lookup", "host"], ["issue_lookup", "host"]])
    }))

  it.effect("a tool that answers isError ends with isError and its text", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(lines(`${fixtures}/mcp-reject.jsonl`)))
      const end = out.find((o) => o._tag === "ToolCall" && o.phase === "end")
      expect(end).toMatchObject({
        name: "reject",
        source: "host",
        isError: true,
        output: "not_found: Choose an issue key that exists."
      })
    }))

  it.effect("an init reporting the hosted server failed is a typed HostedToolsUnavailable", () =>
    Effect.gen(function*() {
      const result = yield* run(lines(`${fixtures}/mcp-failed.jsonl`))
      expect(Either.isLeft(result)).toBe(true)
      if (Either.isLeft(result)) {
        expect(result.left._tag).toBe("ProtocolError")
        expect(result.left.reason).toBe("HostedToolsUnavailable")
      }
      // Another server failing is a warning, not a failure.
      const other = ok(yield* run(lines(`${fixtures}/mcp-failed.jsonl`), { hostedKey: "other" }))
      expect(other.find((o) => o._tag === "Notice")).toMatchObject({ level: "warning", kind: "mcp_server" })
      expect(terminal(other)?.ok).toBe(true)
    }))

  it.effect("a hosted server still pending (the CLI stopped waiting for it) fails the run; another is a warning", () =>
    Effect.gen(function*() {
      const init = lines(`${fixtures}/text.jsonl`)[0]!.replace(
        `"mcp_servers":[]`,
        `"mcp_servers":[{"name":"tether","status":"pending"}]`
      )
      expect(init).toContain("pending")
      const result = yield* run([init])
      expect(Either.isLeft(result) && result.left).toMatchObject({
        _tag: "ProtocolError",
        reason: "HostedToolsUnavailable",
        detail: expect.stringContaining("pending")
      })
      const out = ok(yield* run([init], { hostedKey: "other" }))
      expect(out[1]).toMatchObject({
        _tag: "Notice",
        level: "warning",
        kind: "mcp_server",
        message: `MCP server "tether" is pending`
      })
    }))

  it.effect("a model error (400, 500) is a failed terminal carrying the API error", () =>
    Effect.gen(function*() {
      for (const status of [400, 500]) {
        const out = ok(yield* run(lines(`${fixtures}/error-${status}.jsonl`)))
        expect(tags(out)).toEqual(["SessionStarted", "Notice", "Usage", "Terminal"])
        expect(out[1]).toMatchObject({ level: "error", kind: "api_error" })
        const end = terminal(out)!
        expect(end.ok).toBe(false)
        expect(end.error).toContain(`API Error: ${status}`)
      }
    }))

  it.effect("a --json-schema turn reports result.structured_output; a plain turn never does", () =>
    Effect.gen(function*() {
      const outputSchema = { type: "object" }
      const asked = terminal(ok(yield* run(lines(`${fixtures}/structured.jsonl`), { outputSchema })))
      expect(asked?.ok).toBe(true)
      expect(asked?.text).toBe("{\"severity\":\"high\"}")
      expect(asked?.structuredOutput).toEqual({ _tag: "Value", value: { severity: "high" } })
      const plain = terminal(ok(yield* run(lines(`${fixtures}/structured.jsonl`))))
      expect(plain).not.toHaveProperty("structuredOutput")
      // The success of a model that never called the tool has no structured_output: nothing reported.
      const prose = terminal(ok(yield* run(lines(`${fixtures}/text.jsonl`), { outputSchema })))
      expect(prose?.ok).toBe(true)
      expect(prose).not.toHaveProperty("structuredOutput")
      const gaveUp = terminal(ok(yield* run(lines(`${fixtures}/structured-gave-up.jsonl`), { outputSchema })))
      expect(gaveUp?.ok).toBe(false)
      expect(gaveUp?.structuredOutput).toEqual({
        _tag: "GaveUp",
        detail: "Failed to provide valid structured output after 2 attempts"
      })
    }))

  it.effect("a resumed session keeps its id; another id is ResumeRejected", () =>
    Effect.gen(function*() {
      const id = "33333333-3333-4333-8333-333333333333"
      const out = ok(yield* run(lines(`${fixtures}/resume-2.jsonl`), { session: { _tag: "Resume", id } }))
      expect(out[0]).toMatchObject({ _tag: "SessionStarted", sessionId: id })
      expect(terminal(out)?.text).toBe("second answer")
      const other = yield* run(lines(`${fixtures}/resume-2.jsonl`), {
        session: { _tag: "Resume", id: "55555555-5555-4555-8555-555555555555" }
      })
      expect(Either.isLeft(other) && other.left.reason).toBe("ResumeRejected")
    }))

  it.effect("a fork reports the new session id it was asked for", () =>
    Effect.gen(function*() {
      const session: Driver.SessionRequest = {
        _tag: "Fork",
        from: "66666666-6666-4666-8666-666666666666",
        id: "77777777-7777-4777-8777-777777777777"
      }
      const out = ok(yield* run(lines(`${fixtures}/fork-2.jsonl`), { session }))
      expect(out[0]).toMatchObject({ _tag: "SessionStarted", sessionId: session.id })
      expect(terminal(out)).toMatchObject({ ok: true, session: session.id, text: "forked answer" })
    }))

  it.effect("resuming a missing session fails with ResumeRejected; without a resume it is a failed terminal", () =>
    Effect.gen(function*() {
      const session: Driver.SessionRequest = { _tag: "Resume", id: "44444444-4444-4444-8444-444444444444" }
      const rejected = yield* run(lines(`${fixtures}/resume-missing.jsonl`), { session })
      expect(Either.isLeft(rejected) && rejected.left.reason).toBe("ResumeRejected")
      expect(Either.isLeft(rejected) && rejected.left.detail).toContain(session.id)
      const out = ok(yield* run(lines(`${fixtures}/resume-missing.jsonl`)))
      const end = terminal(out)!
      expect(end.ok).toBe(false)
      expect(end.error).toContain("No conversation found")
      const driver = Claude.driver()
      const stderr = Fs.readFileSync(`${fixtures}/resume-missing.stderr.txt`, "utf8")
      expect(driver.classifyExit?.({ exitCode: 1, stderr, terminal: undefined, session })?.reason).toBe(
        "ResumeRejected"
      )
      expect(driver.classifyExit?.({ exitCode: 1, stderr: "", terminal: undefined, session })).toBeUndefined()
      expect(driver.classifyExit?.({ exitCode: 1, stderr, terminal: end, session: newSession() })).toBeUndefined()
    }))
})

describe("Claude.parse on the shared provider samples", () => {
  it.effect("every sample parses; MCP samples map the server's tools", () =>
    Effect.gen(function*() {
      const mcp = ok(yield* run(lines(`${samples}/claude-mcp-sample.jsonl`), { hostedKey: "echo" }))
      expect(
        mcp.filter((o) => o._tag === "ToolCall").map((o) => o._tag === "ToolCall" && `${o.phase}:${o.source}:${o.name}`)
      )
        .toEqual(["start:host:echo", "end:host:echo"])
      expect(mcp.find((o) => o._tag === "ToolCall" && o.phase === "end")).toMatchObject({ output: "ECHO:hello-mcp" })
      const asExternal = ok(yield* run(lines(`${samples}/claude-mcp-sample.jsonl`)))
      expect(asExternal.find((o) => o._tag === "ToolCall")).toMatchObject({ source: "mcp", name: "echo" })
      const multi = ok(yield* run(lines(`${samples}/claude-multiturn-sample.jsonl`), { hostedKey: "echo" }))
      expect(multi.filter((o) => o._tag === "Terminal")).toHaveLength(2)
      const plain = ok(yield* run(lines(`${samples}/claude-sample.jsonl`)))
      expect(terminal(plain)).toMatchObject({ ok: true, text: "Hello from fake model", model: "claude-opus-4-8[1m]" })
      const error = ok(yield* run(lines(`${samples}/claude-error-sample.jsonl`)))
      expect(terminal(error)?.ok).toBe(false)
    }))

  it.effect("api_retry records are warning notices; a stream cut before the result has no terminal", () =>
    Effect.gen(function*() {
      const out = ok(yield* run(lines(`${samples}/claude-500.jsonl`)))
      const retries = out.filter((o) => o._tag === "Notice" && o.kind === "api_retry")
      expect(retries).toHaveLength(9)
      expect(retries[0]).toMatchObject({ level: "warning", message: "model API retry 1/10 after 500" })
      expect(terminal(out)).toBeUndefined()
    }))
})

describe("Claude.parse robustness", () => {
  it.effect("unknown record kinds and non-JSON lines are notices and the run goes on", () =>
    Effect.gen(function*() {
      const input = [
        `{"type":"rate_limit_event","rate_limit_info":{}}`,
        `not json at all`,
        `[1,2]`,
        ``,
        `{"type":"system","subtype":"hook_started","hook":"x"}`,
        ...lines(`${fixtures}/text.jsonl`)
      ]
      const out = ok(yield* run(input))
      expect(out.slice(0, 4).map((o) => o._tag === "Notice" && o.kind)).toEqual([
        "unknown/rate_limit_event",
        "malformed",
        "malformed",
        "system/hook_started"
      ])
      expect(terminal(out)?.ok).toBe(true)
    }))

  it.effect("a thinking delta becomes a ReasoningDelta", () =>
    Effect.gen(function*() {
      const out = ok(
        yield* run([
          `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}}`,
          `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"x"}}}`
        ])
      )
      expect(out).toEqual([{ _tag: "ReasoningDelta", text: "hmm" }])
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

// Values no well-behaved CLI prints: `String` throws on both ("Cannot convert object to
// primitive value"; a stack overflow for the nested arrays).
const hostileValues: ReadonlyArray<readonly [string, string]> = [
  ["an object whose toString is not a function", `{"toString":1}`],
  ["arrays nested 10,000 deep", "[".repeat(10_000) + "]".repeat(10_000)]
]

describe("Claude's and CodeBuddy's parsers read plain text deltas and quiet events without JSON.parse, as JSON.parse does", () => {
  const parsers = { claude: Claude.parse, codebuddy: CodeBuddy.parse }
  const outputs = (parse: Driver.Driver["parse"], line: string) =>
    parse(Stream.make(line), { hostedKey: "tether", session: newSession() }).pipe(
      Stream.runCollect,
      Effect.map(Chunk.toReadonlyArray)
    )
  /** What `JSON.parse` makes of a line that may be a text delta (`undefined`: another record). */
  const expected = (line: string): ReadonlyArray<Driver.Output> | "non_json" | undefined => {
    const r = OneEdit.parsedRecord(line)
    if (r === "non_json" || r === undefined) return r
    const event = r["event"] as { readonly [key: string]: unknown } | null | undefined
    const delta = typeof event === "object" && event !== null
      ? event["delta"] as { readonly [key: string]: unknown } | null | undefined
      : undefined
    if (
      r["type"] !== "stream_event" || event?.["type"] !== "content_block_delta" || typeof delta !== "object" ||
      delta === null || delta["type"] !== "text_delta" || typeof delta["text"] !== "string"
    ) return undefined
    return [{ _tag: "TextDelta", text: delta["text"] }]
  }
  // The members the CLIs write after the event (CodeBuddy Code adds the last two).
  const members = FastCheck.record({
    session_id: FastCheck.string({ maxLength: 40 }),
    parent_tool_use_id: FastCheck.option(FastCheck.string({ maxLength: 20 })),
    uuid: FastCheck.string({ maxLength: 40 }),
    __timestamp: FastCheck.string({ maxLength: 30 }),
    _requestId: FastCheck.string({ maxLength: 30 })
  }, { requiredKeys: ["session_id", "parent_tool_use_id", "uuid"] })
  const delta = (index: number, text: string, rest: object) =>
    JSON.stringify({
      type: "stream_event",
      event: { type: "content_block_delta", index, delta: { type: "text_delta", text } },
      ...rest
    })

  it.effect.prop(
    "any text and members, and any line one edit away from a delta, give what JSON.parse reads",
    [
      FastCheck.constantFrom("claude" as const, "codebuddy" as const),
      FastCheck.nat(),
      FastCheck.string({ unit: "binary" }),
      members,
      OneEdit.edits
    ],
    ([cli, index, text, rest, edits]) =>
      Effect.gen(function*() {
        const line = OneEdit.edited(delta(index, text, rest), edits)
        const want = expected(line)
        if (want === undefined) return
        const out = yield* outputs(parsers[cli], line)
        if (want === "non_json") expect(out).toMatchObject([{ _tag: "Notice", kind: "malformed" }])
        else expect(out).toEqual(want)
      }),
    { fastCheck: { numRuns: 300 } }
  )

  /** The same line re-serialized with a space after each brace: `JSON.parse` reads it, no pattern does. */
  const reserialized = (line: string) => JSON.stringify(JSON.parse(line), null, 1).replace(/\n/g, "")
  const quiet = (kind: number, index: number, text: string, rest: object) =>
    JSON.stringify({
      type: "stream_event",
      event: kind === 0
        ? { type: "content_block_stop", index }
        : kind === 1
        ? { type: "message_stop" }
        : { type: "content_block_start", index, content_block: { type: "text", text } },
      ...rest
    })

  it.effect.prop(
    "any line one or two edits away from a block's stop or start or the message's stop reads as JSON.parse reads it",
    [
      FastCheck.constantFrom("claude" as const, "codebuddy" as const),
      FastCheck.nat({ max: 2 }),
      FastCheck.nat(),
      FastCheck.string({ unit: "binary" }),
      members,
      OneEdit.edits
    ],
    ([cli, kind, index, text, rest, edits]) =>
      Effect.gen(function*() {
        const line = OneEdit.edited(quiet(kind, index, text, rest), edits)
        const record = OneEdit.parsedRecord(line)
        const out = yield* outputs(parsers[cli], line)
        if (record === "non_json") expect(out).toMatchObject([{ _tag: "Notice", kind: "malformed" }])
        else expect(out).toEqual(yield* outputs(parsers[cli], reserialized(line)))
      }),
    { fastCheck: { numRuns: 300 } }
  )

  it.effect("a quiet event's line a pattern could misread: a repeated event or type, a number JSON refuses", () =>
    Effect.gen(function*() {
      const stop = `{"type":"stream_event","event":{"type":"content_block_stop","index":1}`
      const text = `"event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"b"}}`
      for (const parse of [Claude.parse, CodeBuddy.parse]) {
        expect(yield* outputs(parse, `${stop},"uuid":"u"}`)).toEqual([])
        expect(yield* outputs(parse, `${stop},${text}}`)).toEqual([{ _tag: "TextDelta", text: "b" }])
        expect(yield* outputs(parse, `${stop},"type":"mystery"}`)).toMatchObject([{ _tag: "Notice" }])
        expect(yield* outputs(parse, `${stop.replace(`"index":1`, `"index":01`)}}`)).toMatchObject([
          { _tag: "Notice", kind: "malformed" }
        ])
      }
    }))

  it.effect("lines a pattern could misread: a repeated type or event, escapes, a number JSON refuses", () =>
    Effect.gen(function*() {
      const head =
        `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta",`
      for (const parse of [Claude.parse, CodeBuddy.parse]) {
        expect(yield* outputs(parse, `${head}"text":"a"}},"uuid":"u"}`)).toEqual([{ _tag: "TextDelta", text: "a" }])
        expect(
          yield* outputs(
            parse,
            `${head}"text":"a"}},"event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"b"}}}`
          )
        )
          .toEqual([{ _tag: "TextDelta", text: "b" }])
        expect(yield* outputs(parse, `${head}"text":"a"}},"type":"assistant"}`)).not.toContainEqual({
          _tag: "TextDelta",
          text: "a"
        })
        expect(yield* outputs(parse, `${head}"text":"a\\"b"}},"uuid":"u"}`)).toEqual([{
          _tag: "TextDelta",
          text: `a"b`
        }])
        // Not JSON: a number with a leading zero, a member's escaped quote, what follows the record.
        for (
          const line of [
            head.replace(`"index":0`, `"index":01`) + `"text":"a"}}}`,
            `${head}"text":"a"}},"uuid":"a\\","k":"x"}`,
            `${head}"text":"a"}},"uuid":"u"}}`,
            `${head}"text":"a"}},"uuid":"u"} x`
          ]
        ) expect(yield* outputs(parse, line)).toMatchObject([{ _tag: "Notice", kind: "malformed" }])
      }
    }))
})

describe("Claude.parse on values of the wrong type", () => {
  for (const [label, value] of hostileValues) {
    it.effect(`${label} as an unknown record type is a notice`, () =>
      Effect.gen(function*() {
        const out = ok(yield* run([`{"type":${value}}`]))
        expect(out).toMatchObject([{ _tag: "Notice", level: "info", kind: "unknown/(not text)" }])
      }))

    it.effect(`${label} in an api_retry record is a warning notice`, () =>
      Effect.gen(function*() {
        const line =
          `{"type":"system","subtype":"api_retry","attempt":${value},"max_retries":${value},"error":${value}}`
        const out = ok(yield* run([line]))
        expect(out).toMatchObject([{
          _tag: "Notice",
          level: "warning",
          kind: "api_retry",
          message: "model API retry (not text)/(not text) after (not text)"
        }])
      }))

    it.effect(`${label} as an MCP server name in init is a warning notice`, () =>
      Effect.gen(function*() {
        const line =
          `{"type":"system","subtype":"init","session_id":"s-1","mcp_servers":[{"name":${value},"status":"failed"}]}`
        const out = ok(yield* run([line]))
        expect(out).toMatchObject([
          { _tag: "SessionStarted", sessionId: "s-1" },
          { _tag: "Notice", level: "warning", kind: "mcp_server", message: "MCP server \"(not text)\" is failed" }
        ])
      }))

    it.effect(`${label} among a result's errors is reported as an error that is not text`, () =>
      Effect.gen(function*() {
        const line = `{"type":"result","subtype":${value},"is_error":true,"errors":["first",${value}]}`
        const out = ok(yield* run([line]))
        expect(terminal(out)).toMatchObject({ ok: false, error: "first\n(an error that is not text)" })
        const noErrors = ok(yield* run([`{"type":"result","subtype":${value},"is_error":true}`]))
        expect(terminal(noErrors)).toMatchObject({ ok: false, error: "Claude Code ended with (not text)" })
      }))
  }
})

const toolUse = (name: string) =>
  JSON.stringify({
    type: "assistant",
    message: { content: [{ type: "tool_use", id: "toolu_1", name, input: {} }] }
  })

describe("Claude.parse tool names", () => {
  it.effect("a name of mcp__, 64 KiB of underscores and a line break parses in linear time", () =>
    Effect.gen(function*() {
      // The pattern this replaces backtracked quadratically on such a name (which it does not
      // match): ~8 s at 64 KiB, ~20 min at 1 MiB, while the whole host waits. Linear parsing takes
      // milliseconds: the bound is not a speed target, it separates linear from quadratic widely.
      const name = `mcp__${"_".repeat(64 * 1024)}\n`
      const started = performance.now()
      const out = ok(yield* run([toolUse(name), toolUse(name.trim())]))
      const elapsed = performance.now() - started
      expect(out).toMatchObject([
        { _tag: "ToolCall", phase: "start", source: "builtin", name },
        { _tag: "ToolCall", phase: "start", source: "mcp", name: name.trim().slice(8) }
      ])
      expect(elapsed).toBeLessThan(2_000)
    }))

  it("names split exactly as /^mcp__(.+?)__(.+)$/ splits them", () => {
    const name = FastCheck.tuple(
      FastCheck.constantFrom("", "mcp__", "mcp__tether__", "mcp_", "mcp__a\n"),
      FastCheck.array(FastCheck.constantFrom("_", "__", "a", "tether", "\n", "\u2028", "é"), { maxLength: 12 })
    ).map(([prefix, parts]) => prefix + parts.join(""))
    FastCheck.assert(
      FastCheck.property(name, (name) => {
        const out = ok(Effect.runSync(run([toolUse(name)])))
        const mcp = /^mcp__(.+?)__(.+)$/.exec(name)
        const expected = name.startsWith("mcp__tether__")
          ? { source: "host", name: name.slice("mcp__tether__".length) }
          : mcp !== null
          ? { source: "mcp", name: mcp[2] }
          : { source: "builtin", name }
        expect(out).toMatchObject([{ _tag: "ToolCall", ...expected }])
      }),
      { numRuns: 300 }
    )
  })
})
