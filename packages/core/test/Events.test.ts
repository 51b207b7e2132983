/**
 * What the events say about their run: a thread's turn names its thread on `RunStarted` (an
 * agent's own run does not), and reported usage is the `Usage` event carrying `Result.Usage`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Event, Result } from "@tether/core"
import { FakeCli } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as Threads from "./fixtures/threads.js"
import { withThreads } from "./fixtures/threadTest.js"

const [, memoryStore] = Threads.stores.find(([name]) => name === "memory")!

describe("events of a run", () => {
  it.live("RunStarted names the thread of a thread's turn, and no thread for an agent's run", () =>
    withThreads(memoryStore, ({ agent }) =>
      Effect.gen(function*() {
        const thread = yield* agent.thread("tenant-42/issue-7")
        const threadEvents = Array.from(
          yield* Stream.runCollect(thread.stream(FakeCli.script({ op: "text", text: "a" })))
        )
        const agentEvents = Array.from(
          yield* Stream.runCollect(agent.stream(FakeCli.script({ op: "text", text: "b" })))
        )
        expect(threadEvents[0]).toMatchObject({ _tag: "RunStarted", threadKey: "tenant-42/issue-7" })
        expect(agentEvents[0]?._tag).toBe("RunStarted")
        expect(agentEvents[0]).not.toHaveProperty("threadKey")
      })))

  it.live("reported usage is one Event.Usage whose usage is the Result.Usage of the result", () =>
    withThreads(memoryStore, ({ make }) =>
      Effect.gen(function*() {
        // The fake CLI's parser reports usage on its terminal record; this one also reports it
        // on its own first, as the real CLIs' parsers do.
        const fake = FakeCli.driver()
        const agent = yield* make({
          ...fake,
          parse: (lines, context) =>
            fake.parse(lines, context).pipe(Stream.flatMap((output) =>
              output._tag === "Terminal" && output.usage !== undefined
                ? Stream.make({ _tag: "Usage" as const, usage: output.usage }, output)
                : Stream.make(output)
            ))
        })
        const events = Array.from(
          yield* Stream.runCollect(agent.stream(FakeCli.script(
            { op: "text", text: "counted" },
            { op: "result", text: "counted", usage: { input_tokens: 12, output_tokens: 3 } }
          )))
        )
        const usage = events.filter((event) =>
          event._tag === "Usage"
        )
        expect(usage).toHaveLength(1)
        expect(usage[0]).toBeInstanceOf(Event.Usage)
        const reported = (usage[0] as Event.Usage).usage
        expect(reported).toBeInstanceOf(Result.Usage)
        expect(reported).toMatchObject({ inputTokens: 12, outputTokens: 3 })
        const finished = events.at(-1)
        expect(finished?._tag === "RunFinished" && finished.result.usage).toEqual(reported)
      })))
})
