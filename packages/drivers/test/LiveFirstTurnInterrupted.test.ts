/**
 * A thread's first live turn interrupted (docs/threads.md: the turn ends with
 * `RunFinished(canceled)` and the next turn reuses the process). Nothing is committed then: the
 * next turn asks for a fresh session, and the warm process, whose own fresh session no record
 * refers to, serves it (it was shut down and a cold one opened). Real CLIs, offline.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import type * as Event from "@tether/core/Event"
import { AnthropicServer, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { driverFor as claudeDriver, respond as claudeRespond } from "./ClaudeLiveHarness.js"
import { offlineCodex, withSandbox } from "./CodexHarness.js"

const lineOf = (text: string) => text.trim().split("\n").at(-1)!.trim()

const subjects: ReadonlyArray<{ name: string; make: Effect.Effect<Driver.Driver, unknown, Scope.Scope> }> = [
  { name: "Claude Code", make: Effect.map(AnthropicServer.make({ respond: claudeRespond }), claudeDriver) },
  {
    name: "Codex",
    make: Effect.map(
      ResponsesServer.make({
        script: (request) => {
          const line = lineOf(ResponsesServer.userTexts(request).at(-1) ?? "")
          const slow = /^SLOW (\d+)$/.exec(line)
          if (slow !== null) return ResponsesServer.delayed(Number(slow[1]), ResponsesServer.text("slow answer"))
          return ResponsesServer.text(`answer to ${line}`)
        }
      }),
      (server) => offlineCodex(server.baseUrl)
    )
  }
]

describe("the first live turn of a thread interrupted", () => {
  for (const subject of subjects) {
    it.live(
      `${subject.name}: RunFinished(canceled), and the next turn reuses the process`,
      () =>
        withSandbox((sandbox) =>
          Effect.gen(function*() {
            const driver = yield* subject.make
            const agent = yield* Agent.make({
              driver,
              definition: { instructions: "", tools: Toolkit.empty },
              workspace: sandbox.workspace,
              profile: sandbox.selection
            })
            const thread = yield* agent.thread("first-interrupted")
            const events: Array<Event.Event> = []
            const fiber = yield* thread.stream("SLOW 5000").pipe(
              Stream.runForEach((e) => Effect.sync(() => events.push(e))),
              Effect.fork
            )
            while (!events.some((e) => e._tag === "SessionStarted")) yield* Effect.sleep("10 millis")
            yield* Effect.sleep("300 millis")
            yield* Fiber.interrupt(fiber)
            const first = events.find((e): e is Event.ProcessStarted => e._tag === "ProcessStarted")!
            const next = Array.from(yield* Stream.runCollect(thread.stream("plain")))
            const started = next.find((e): e is Event.ProcessStarted => e._tag === "ProcessStarted")!
            const finished = next.at(-1) as Event.RunFinished
            expect(finished.result?.text).toBe("answer to plain")
            expect({ pid: started.pid, reused: started.reused }).toEqual({ pid: first.pid, reused: true })
            // Committed: the session the process reported; the turn after resumes it on the process.
            const committed = Option.getOrThrow(yield* thread.snapshot)
            expect(committed).toMatchObject({ turns: 1, session: finished.result?.session })
            const third = Array.from(yield* Stream.runCollect(thread.stream("again")))
            const thirdStarted = third.find((e): e is Event.ProcessStarted => e._tag === "ProcessStarted")!
            expect((third.at(-1) as Event.RunFinished).result?.text).toBe("answer to again")
            expect(thirdStarted.pid).toBe(first.pid)
            yield* agent.close()
          })
        ),
      90_000
    )
  }
})
