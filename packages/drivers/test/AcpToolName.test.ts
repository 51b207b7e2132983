/**
 * Mapping an ACP tool call's name back to a tool (`mcp__<server>__<tool>`). The Claude
 * parser splits such a name in linear time because `/^mcp__(.+?)__(.+)$/` "backtracks
 * quadratically on `mcp__`, many underscores and a line break (seconds at 64 KiB, minutes at
 * 1 MiB), and parsing is synchronous: the whole host would wait". The ACP mapping
 * (claude-agent-acp's `_meta.claudeCode.toolName`, any agent's `name`) used that pattern: the
 * name is the model's, and one 64 KiB `session/update` line stalled the mapping for seconds.
 * The bounds below are not speed targets: they separate linear from quadratic widely.
 */
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Claude } from "@tether/drivers"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as AcpMap from "../src/internal/acpMap.js"

const context: Driver.ParseContext = { hostedKey: "tether", session: { _tag: "New", id: "s" } }
const name = `mcp__${"_".repeat(64 * 1024)}\nx`

const timed = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const start = Date.now()
    const value = yield* effect
    return { value, ms: Date.now() - start }
  })

const collect = (stream: Stream.Stream<Driver.Output, Driver.ProtocolError>) =>
  Stream.runCollect(stream).pipe(Effect.map(Chunk.toReadonlyArray))

describe("a long tool name through the ACP mapping", () => {
  it.effect("Claude stream-json (control): a 64 KiB tool_use name maps at once", () =>
    Effect.gen(function*() {
      const line = JSON.stringify({
        type: "assistant",
        message: { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name, input: {} }] }
      })
      const { ms, value } = yield* timed(collect(Claude.parse(Stream.make(line), context)))
      expect(value.some((o) => o._tag === "ToolCall")).toBe(true)
      expect(ms).toBeLessThan(500)
    }))

  it.effect(
    "claude-agent-acp naming: the same name in a tool_call update maps at once too",
    () =>
      Effect.gen(function*() {
        const lines = [
          JSON.stringify({ jsonrpc: "2.0", id: 2, result: { sessionId: "S" } }),
          JSON.stringify({
            jsonrpc: "2.0",
            method: "session/update",
            params: {
              sessionId: "S",
              update: {
                sessionUpdate: "tool_call",
                toolCallId: "toolu_1",
                status: "in_progress",
                title: "x",
                rawInput: { a: 1 },
                _meta: { claudeCode: { toolName: name } }
              }
            }
          })
        ]
        const { ms, value } = yield* timed(
          collect(AcpMap.parse(Stream.fromIterable(lines), context, AcpMap.claudeNaming))
        )
        expect(value.some((o) => o._tag === "ToolCall")).toBe(true)
        expect(ms).toBeLessThan(500)
      }),
    120_000
  )

  it("splits every name as the pattern it replaces would", () => {
    const names = [
      "mcp__tether__lookup",
      "mcp__tether__a__b",
      "mcp___x__y",
      "mcp__a___",
      "mcp__a__",
      "mcp____b",
      "mcp__server__tool\n",
      "mcp__x",
      "Bash",
      "mcp__tether__"
    ]
    for (const candidate of names) {
      const pattern = /^mcp__(.+?)__(.+)$/.exec(candidate)
      const expected = pattern === null
        ? { name: candidate, source: "builtin" }
        : pattern[1] === "tether"
        ? { name: pattern[2], source: "host" }
        : { name: candidate, source: "mcp" }
      expect(AcpMap.identityOf(candidate, "tether")).toEqual(expected)
    }
  })
})
