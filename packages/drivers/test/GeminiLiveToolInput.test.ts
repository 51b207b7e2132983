/**
 * The input of a hosted tool call on a Gemini live thread (`gemini --acp`), from the
 * recorded session of the real CLI (`fixtures/gemini-acp/session.jsonl`) replayed through the
 * mapping the live session uses. Gemini's ACP `tool_call` has no `rawInput`: the arguments are
 * the JSON text of its `content` (`{"text":"hello-live"}`). The one-shot parser reports the same
 * call's input (`tool_use.parameters`); the live one reports none.
 */
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Gemini } from "@tether/drivers"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as AcpMap from "../src/internal/acpMap.js"
import * as GeminiLive from "../src/internal/geminiLive.js"

const read = (...parts: ReadonlyArray<string>) =>
  Fs.readFileSync(Path.join(import.meta.dirname, "fixtures", ...parts), "utf8").split("\n").filter((l) => l.length > 0)

const starts = (outputs: ReadonlyArray<Driver.Output>) =>
  outputs.filter((o): o is Extract<Driver.Output, { _tag: "ToolCall" }> => o._tag === "ToolCall" && o.phase === "start")

describe("Gemini live ToolCall input", () => {
  it.effect("one-shot (recorded stream-json): the hosted call's start carries its arguments", () =>
    Effect.gen(function*() {
      const outputs = yield* Gemini.parse(Stream.fromIterable(read("gemini", "tool.jsonl")), {
        hostedKey: "echo",
        session: { _tag: "New", id: "11111111-2222-4333-8444-555555555555" }
      }).pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray))
      expect(starts(outputs)[0]?.input).toEqual({ text: "hello-mcp" })
    }))

  it.effect("live (recorded gemini --acp): the hosted call's start should carry its arguments too", () =>
    Effect.gen(function*() {
      const outputs = yield* AcpMap.parse(
        Stream.fromIterable(read("gemini-acp", "session.jsonl")),
        { hostedKey: "tether", session: { _tag: "New", id: "unused" } },
        GeminiLive.naming
      ).pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray))
      const echo = starts(outputs).find((o) => o.name === "echo")
      expect(echo).toMatchObject({ source: "host" })
      // The recorded frame: {"sessionUpdate":"tool_call", ..., "content":[{"type":"content",
      // "content":{"type":"text","text":"{\"text\":\"hello-live\"}"}}]} — no rawInput.
      expect(echo?.input).toEqual({ text: "hello-live" })
    }))
})
