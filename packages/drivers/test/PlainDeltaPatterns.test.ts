/**
 * The parsers' anchored patterns for plain text deltas (see docs/contributing.md, P3) read what
 * `JSON.parse` would in the states where the record path behaves differently (after Gemini's
 * terminal record, a subagent's delta, CodeBuddy's dialect, U+2028, lone surrogates), and never
 * backtrack their way into a hang on a line of 1 MiB that almost matches (parsing is synchronous:
 * the whole host would wait).
 */
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Claude, CodeBuddy, Cursor, Gemini } from "@tether/drivers"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as CodexLiveParse from "../src/internal/codexLiveParse.js"

const context: Driver.ParseContext = {
  hostedKey: "tether",
  session: { _tag: "New", id: "00000000-0000-4000-8000-000000000000" }
}

const outputs = (parse: Driver.Driver["parse"], lines: ReadonlyArray<string>) =>
  parse(Stream.fromIterable(lines), context).pipe(
    Stream.runCollect,
    Effect.map(Chunk.toReadonlyArray),
    Effect.either,
    Effect.runSync
  )

const claudeDelta = (text: string, tail = "") =>
  `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"${text}"}}${tail}}`
const geminiDelta = (content: string, timestamp = "2025-01-01T00:00:00.000Z") =>
  `{"type":"message","timestamp":"${timestamp}","role":"assistant","content":"${content}","delta":true}`

const cursorMessage = (text: string) =>
  `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"${text}"}]},"session_id":"s"}`
const cursorThinking = (text: string, stamp: string) =>
  `{"type":"thinking","subtype":"delta","text":"${text}","session_id":"s","timestamp_ms":${stamp}}`

/** The same line as `JSON.parse` reads it, written with every member re-serialized (never matched). */
const reserialized = (line: string) => JSON.stringify(JSON.parse(line), null, 1).replace(/\n/g, "")

const ms = (f: () => void) => {
  const start = performance.now()
  f()
  return performance.now() - start
}

describe("the plain text delta patterns", () => {
  it("read what JSON.parse reads in the states that differ", () => {
    const gemini = [
      `{"type":"init","timestamp":"t","session_id":"s","model":"m"}`,
      geminiDelta("before"),
      `{"type":"result","timestamp":"t","status":"success","stats":{}}`,
      geminiDelta("after"),
      geminiDelta("\u2028\ud800x")
    ]
    expect(outputs(Gemini.parse, gemini)).toEqual(outputs(Gemini.parse, gemini.map(reserialized)))
    const claude = [
      claudeDelta("a\u2028b\udc00", `,"parent_tool_use_id":"toolu_1","session_id":"s","uuid":null`),
      claudeDelta("", `,"parent_tool_use_id":null`),
      `{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"x"}]}}`,
      `{"type":"result","subtype":"success","is_error":false,"result":"x","session_id":"s"}`,
      claudeDelta("late")
    ]
    for (const parse of [Claude.parse, CodeBuddy.parse]) {
      expect(outputs(parse, claude)).toEqual(outputs(parse, claude.map(reserialized)))
    }
  })

  it("read a line of 1 MiB that almost matches in linear time", () => {
    const n = 1 << 20
    const cases: ReadonlyArray<readonly [string, Driver.Driver["parse"], (size: number) => string]> = [
      ["claude unclosed text", Claude.parse, (size) => claudeDelta("a".repeat(size)).slice(0, -3)],
      ["claude many members, no end", Claude.parse, (size) => claudeDelta("x", `,"a":null`.repeat(size / 9)) + ","],
      ["claude long key", Claude.parse, (size) => claudeDelta("x", `,"${"a".repeat(size)}`)],
      ["claude long values, bad end", Claude.parse, (size) => claudeDelta("x", `,"a":"${"b".repeat(size)}"`) + " "],
      ["gemini unclosed timestamp", Gemini.parse, (size) => geminiDelta("x", "a".repeat(size)).slice(0, -30)],
      ["gemini unclosed content", Gemini.parse, (size) => geminiDelta("a".repeat(size)).slice(0, -15)],
      ["cursor unclosed message", Cursor.parse, (size) => cursorMessage("a".repeat(size)).slice(0, -40)],
      ["cursor long stamp, bad end", Cursor.parse, (size) => `${cursorThinking("x", "1".repeat(size))} `]
    ]
    for (const [name, parse, line] of cases) {
      const small = line(n / 4)
      const large = line(n)
      outputs(parse, [small])
      const t1 = Math.min(ms(() => outputs(parse, [small])), ms(() => outputs(parse, [small])))
      const t4 = Math.min(ms(() => outputs(parse, [large])), ms(() => outputs(parse, [large])))
      // Linear: four times the line, about four times the time (quadratic would be sixteen, and
      // seconds); the bounds are loose so that a loaded machine does not fail them.
      expect({ name, linear: t4 < 10 * t1 + 20, bounded: t4 < 1_000 }).toEqual({ name, linear: true, bounded: true })
    }
  })

  it("Codex's app-server delta, on edge texts in each string and any emittedAtMs, decodes to the frame of its JSON", () => {
    const texts = [
      "\ud800",
      "a\udfffb",
      "\u2028\u2029",
      "\u007f",
      "😀",
      "",
      " ",
      "/",
      "}",
      "{\"",
      "a'b",
      "\u0085",
      "\ufeff"
    ]
    const stamps = ["", `,"emittedAtMs":0`, `,"emittedAtMs":1733000000000`, `,"emittedAtMs":${"9".repeat(400)}`]
    for (const text of texts) {
      for (const stamp of stamps) {
        for (const field of ["threadId", "turnId", "itemId", "delta"] as const) {
          const p = { threadId: "T", turnId: "U1", itemId: "msg_1", delta: "d", [field]: text }
          const line =
            `{"method":"item/agentMessage/delta","params":{"threadId":"${p.threadId}","turnId":"${p.turnId}",` +
            `"itemId":"${p.itemId}","delta":"${p.delta}"}${stamp}}`
          const frame = CodexLiveParse.decode(line)
          let parsed: { readonly method: string; readonly params: object }
          try {
            parsed = JSON.parse(line)
          } catch {
            expect(frame).toMatchObject({ _tag: "Malformed" })
            continue
          }
          expect(frame).toStrictEqual({ _tag: "Notification", method: parsed.method, params: parsed.params })
          expect(Object.keys((frame as { readonly params: object }).params)).toEqual(Object.keys(parsed.params))
        }
      }
    }
  })
})
