/**
 * Interrupting a Gemini CLI live turn (`gemini --acp`) while one of its permission requests is
 * still pending with the host (event mode). docs/threads.md: "Interrupting a live turn ... asks the
 * provider to stop it: the turn ends with RunFinished(canceled) and the next turn reuses the
 * process. An approval still pending is answered deny first". Gemini CLI does not end a canceled
 * prompt while its permission request waits: answered after the interrupt (as it was), the
 * interrupt ran into the kill grace and the process was killed.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Event from "@tether/core/Event"
import { Gemini } from "@tether/drivers"
import { GeminiServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"

const modelOf = () =>
  GeminiServer.make({
    respond: GeminiServer.roundTrip((request) => {
      const prompt = GeminiServer.transcript(request).filter(([role]) => role === "user").at(-1)?.[1] ?? ""
      const command = /RUN: (.*)$/m.exec(prompt)?.[1]
      return command === undefined || prompt.includes("again")
        ? GeminiServer.reply("No command.")
        : GeminiServer.callTool("run_shell_command", { command })
    }, (responses) => GeminiServer.reply(`TOOL: ${responses.map((r) => r.output).join("|")}`))
  })

const collect = (stream: Stream.Stream<Event.Event, unknown>) =>
  Effect.map(Stream.runCollect(stream), (chunk) => Array.from(chunk))

describe("ACP interrupt with a pending permission request (real Gemini CLI)", () => {
  it.live(
    "a turn interrupted while its approval is pending ends promptly and the next turn reuses the warm process",
    () =>
      Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        yield* Effect.gen(function*() {
          const server = yield* modelOf()
          const agent = yield* Agent.make({
            driver: Gemini.driver({
              model: "gemini-2.5-flash",
              env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
            }),
            definition: { instructions: "", tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            // Event mode, nobody answers: only the interrupt can settle the request.
            approvals: { deadline: "60 seconds" },
            processes: { killGrace: "5 seconds" }
          })
          const thread = yield* agent.thread("interrupt-approval")
          const first = yield* collect(thread.stream("hello"))
          const opened = first.find((e): e is Event.ProcessStarted => e._tag === "ProcessStarted")!
          const file = `${sandbox.workspace}/never.txt`
          // The consumer stops at the approval request: the live turn is interrupted.
          const cut = yield* collect(
            thread.stream(`RUN: touch ${file}`).pipe(Stream.takeUntil((e) => e._tag === "ApprovalRequested"))
          )
          expect(cut.at(-1)?._tag).toBe("ApprovalRequested")
          const next = yield* collect(thread.stream("hello again"))
          const reopened = next.find((e): e is Event.ProcessStarted => e._tag === "ProcessStarted")
          expect(Fs.existsSync(file)).toBe(false)
          // The interrupt is not left to run into the kill grace: the process stays warm.
          expect({ pid: reopened?.pid, reused: reopened?.reused }).toEqual({ pid: opened.pid, reused: true })
          yield* agent.close()
          expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
        }).pipe(Effect.scoped, Effect.provide(Harness.layer))
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
      }).pipe(Effect.scoped),
    90_000
  )
})
