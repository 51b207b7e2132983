/**
 * A Gemini CLI live thread (`gemini --acp`) whose process dies mid-turn, the turn started right
 * after the previous one committed. DESIGN §12: "A crashed live process fails the running turn
 * with RunError (partial result kept) and the next turn starts fresh from the last healthy
 * checkpoint." docs/profiles.md: a process resuming a thread's session resumes "what was committed
 * last ... and not what a failed turn of its own wrote past it". The committed turn's late save
 * (which waits for the session's files to go quiet) went on into the next turn and saved its
 * prompt under the last checkpoint: the resumed session replayed the failed turn to the model.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Event from "@tether/core/Event"
import { Gemini } from "@tether/drivers"
import { GeminiServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"

const lastUser = (request: GeminiServer.GenerateRequest) =>
  GeminiServer.transcript(request).filter(([role]) => role === "user").at(-1)?.[1] ?? ""

const scenario = (pauseMs: number) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const seen = yield* Effect.gen(function*() {
      const server = yield* GeminiServer.make({
        respond: (request) =>
          lastUser(request).includes("SECOND")
            ? GeminiServer.reply("too late", { delay: 15_000 })
            : GeminiServer.reply("ok")
      })
      const agent = yield* Agent.make({
        driver: Gemini.driver({
          model: "gemini-2.5-flash",
          env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
        }),
        definition: { instructions: "", tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        processes: { killGrace: "2 seconds" }
      })
      const thread = yield* agent.thread("crash")
      expect((yield* thread.run("FIRST: remember BANANA")).text).toBe("ok")
      if (pauseMs > 0) yield* Effect.sleep(pauseMs)
      let pid: number | undefined
      const second = yield* thread.stream("SECOND: this turn is lost").pipe(
        Stream.runForEach((e) =>
          Effect.sync(() => e._tag === "ProcessStarted" && (pid = (e as Event.ProcessStarted).pid))
        ),
        Effect.either,
        Effect.fork
      )
      for (let i = 0; i < 500; i++) {
        const generations = yield* server.generations
        if (generations.some((g) => lastUser(g).includes("SECOND"))) break
        yield* Effect.sleep("20 millis")
      }
      // The CLI has written the second prompt into its chat file; the process dies.
      yield* Effect.sleep("500 millis")
      process.kill(pid!, "SIGKILL")
      const failed = yield* Fiber.join(second)
      expect(failed._tag).toBe("Left")
      const third = yield* thread.run("THIRD: what did I ask you to remember?")
      expect(third.thread?.mode).toBe("resumed")
      const seen = GeminiServer.transcript((yield* server.generations).at(-1)!).map(([, text]) => text).join("\n")
      yield* agent.close()
      expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
      return seen
    }).pipe(Effect.scoped, Effect.provide(Harness.layer))
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    return seen
  }).pipe(Effect.scoped)

describe("Gemini live thread resumed after its process died mid-turn", () => {
  it.live(
    "the next turn resumes the last committed checkpoint, without the failed turn's prompt",
    () =>
      Effect.gen(function*() {
        const seen = yield* scenario(0)
        expect(seen).toContain("FIRST: remember BANANA")
        expect(seen).toContain("THIRD")
        expect(seen).not.toContain("SECOND: this turn is lost")
      }),
    150_000
  )
})
