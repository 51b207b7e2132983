/**
 * A driver's `parse` built with `Driver.parseFromLines`: a run reads the process's lines with the
 * line function itself (no `Stream` per run), and gives the same events as through the stream,
 * a protocol error in the middle of a chunk included. A driver that wraps it in a `parse` of its
 * own is read through its own.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Driver, type Event } from "@tether/core"
import { FakeCli, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"

const Tools = Toolkit.empty
const ToolsLive = Tools.toLayer({})

/**
 * The events of one run, without their stamps (run id, sequence, time, pids, durations), and
 * consecutive text deltas joined (where a delta is cut depends on how the pipe delivered the lines).
 */
const eventsOf = (driver: Driver.Driver, input: string) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const agent = yield* Agent.make({
      driver,
      definition: { instructions: "", skills: [], tools: Tools },
      workspace: sandbox.workspace,
      profile: sandbox.selection
    })
    const events = yield* Stream.runCollect(agent.stream(input).pipe(Stream.either))
    const out: Array<Record<string, unknown>> = []
    for (
      const event of Array.from(events, (either) => {
        if (either._tag === "Left") {
          return { error: either.left._tag, reason: (either.left as { reason?: string }).reason }
        }
        const event: Event.Event = either.right
        switch (event._tag) {
          case "TextDelta":
          case "Message":
            return { _tag: event._tag, text: event.text }
          case "RunFinished":
            return { _tag: event._tag, outcome: event.outcome, reason: event.reason }
          default:
            return { _tag: event._tag }
        }
      })
    ) {
      const last = out.at(-1)
      if (event._tag === "TextDelta" && last?.["_tag"] === "TextDelta") last["text"] = `${last["text"]}${event.text}`
      else out.push({ ...event })
    }
    return out
  }).pipe(Effect.scoped, Effect.provide([ToolsLive, Harness.layer]))

/** The fake CLI's mapping, with a ProtocolError for its `malformed` line, counting its runs. */
const counted = () => {
  const fake = FakeCli.driver()
  const counts = { runs: 0, lines: 0 }
  const parse = Driver.parseFromLines((context) => {
    counts.runs++
    return (line) => {
      counts.lines++
      if (!line.startsWith("{")) {
        return new Driver.ProtocolError({ reason: "MalformedOutput", detail: "a line that is not the protocol" })
      }
      return FakeCli.parseLine(line, context)
    }
  })
  return { fake, counts, parse }
}

// Two texts, a line that is not JSON, and a text after it that is never read.
const script = FakeCli.script(
  { op: "text", text: "one" },
  { op: "text", text: "two" },
  { op: "malformed" },
  { op: "text", text: "never" }
)

describe("Driver.parseFromLines", () => {
  it.live("a run reads the lines with the line function, never through the driver's parse", () =>
    Effect.gen(function*() {
      const { counts, fake, parse } = counted()
      let streamCalls = 0
      // A parse that counts its calls as a stream and carries the same line function.
      const watched = Object.assign((lines: Stream.Stream<string>, context: Driver.ParseContext) => {
        streamCalls++
        return parse(lines, context)
      }, parse)
      const events = yield* eventsOf({ ...fake, parse: watched }, FakeCli.script({ op: "text", text: "hi" }))
      expect(streamCalls).toBe(0)
      expect(counts.runs).toBe(1)
      expect(events.at(-1)).toEqual({ _tag: "RunFinished", outcome: "success", reason: undefined })
      expect(events.filter((e) => "text" in e)).toEqual([
        { _tag: "TextDelta", text: "hi" },
        { _tag: "Message", text: "hi" }
      ])
    }))

  it.live("the line function and the stream give the same events: the lines before a ProtocolError, then the failure", () =>
    Effect.gen(function*() {
      const direct = counted()
      const viaLines = yield* eventsOf({ ...direct.fake, parse: direct.parse }, script)
      const wrapped = counted()
      // A wrapper of its own: the run reads it as a stream.
      const viaStream = yield* eventsOf({
        ...wrapped.fake,
        parse: (lines, context) => wrapped.parse(lines, context)
      }, script)
      expect(viaLines).toEqual(viaStream)
      expect(viaLines.filter((e) => "text" in e).map((e) => e["text"])).toEqual([
        "one",
        "one",
        "two",
        "two"
      ])
      expect(viaLines.at(-2)).toEqual({ _tag: "RunFinished", outcome: "failure", reason: "ProtocolError" })
      expect(viaLines.at(-1)).toEqual({ error: "RunError", reason: "ProtocolError" })
      // No line after the failing one was given to either function.
      expect(direct.counts.lines).toBe(wrapped.counts.lines)
    }))
})
