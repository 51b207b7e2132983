/**
 * Codex live threads (warm `codex app-server`) with approvals pending while the turn
 * is interrupted, steered, closed, or its process dies. The real CLI (pinned 0.171.0) offline
 * against the scripted Responses server on 127.0.0.1.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Approval } from "@tether/core"
import type * as Event from "@tether/core/Event"
import { Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import { approvalsOf, commandScript as script, offlineCodex, withSandbox } from "./CodexHarness.js"

describe("Codex live approvals under interrupt / steer / close", () => {
  it.live(
    "a turn interrupted while its approval is pending: denied by cancel, the command never runs, the next turn reuses the process and is clean",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          const server = yield* ResponsesServer.make({ script })
          const asked = yield* Deferred.make<void>()
          const agent = yield* Agent.make({
            driver: offlineCodex(server.baseUrl),
            definition: { instructions: "", tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            policy: { sandbox: "workspaceWrite" },
            approvals: {
              handler: (request) =>
                request.command?.includes("blocked") === true
                  ? Effect.zipRight(Deferred.succeed(asked, undefined), Effect.never)
                  : Effect.succeed(Approval.allow)
            }
          })
          const thread = yield* agent.thread("interrupt-pending")
          const blockedFile = `${sandbox.workspace}/blocked.txt`
          const events: Array<Event.Event> = []
          yield* thread.events.pipe(Stream.runForEach((e) => Effect.sync(() => events.push(e))), Effect.forkScoped)
          yield* Effect.sleep("50 millis")
          yield* thread.run("warm up")
          const fiber = yield* thread.stream(`RUN: touch ${blockedFile}`).pipe(Stream.runDrain, Effect.fork)
          yield* Deferred.await(asked)
          yield* Fiber.interrupt(fiber)
          yield* Effect.sleep("200 millis")
          const resolved = events.filter((e): e is Event.ApprovalResolved => e._tag === "ApprovalResolved")
          expect(resolved.map((e) => e.by)).toEqual(["cancel"])
          const started = Date.now()
          const next = yield* thread.stream("hello again").pipe(
            Stream.runCollect,
            Effect.map((c) => Array.from(c)),
            Effect.timeout("30 seconds")
          )
          const took = Date.now() - started
          const finished = next.at(-1) as Event.RunFinished
          expect(finished._tag).toBe("RunFinished")
          expect(finished.outcome).toBe("success")
          expect(finished.result.text).toBe("PLAIN: hello again")
          expect(approvalsOf(finished.result.transcript)).toEqual([])
          expect(next.filter((e) => e._tag === "ApprovalRequested" || e._tag === "ApprovalResolved")).toEqual([])
          expect(next.find((e) => e._tag === "ProcessStarted")).toMatchObject({ reused: true })
          expect(Fs.existsSync(blockedFile)).toBe(false)
          // The next turn's model request carries no input of the interrupted turn's approval.
          const requests = yield* server.requests
          const lastTexts = ResponsesServer.userTexts(requests.at(-1)!)
          expect(lastTexts.at(-1)).toBe("hello again")
          expect(took).toBeLessThan(20_000)
          yield* agent.close()
          expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
        })
      ),
    90_000
  )

  it.live(
    "send while an approval is pending is Injected, and the model reads it in the same turn",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          const server = yield* ResponsesServer.make({ script })
          const asked = yield* Deferred.make<void>()
          const go = yield* Deferred.make<void>()
          const agent = yield* Agent.make({
            driver: offlineCodex(server.baseUrl),
            definition: { instructions: "", tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            policy: { sandbox: "workspaceWrite" },
            approvals: {
              handler: () =>
                Effect.zipRight(Deferred.succeed(asked, undefined), Deferred.await(go)).pipe(
                  Effect.as(Approval.allow)
                )
            }
          })
          const thread = yield* agent.thread("send-pending")
          const fiber = yield* thread.run(`RUN: echo ran-it`).pipe(Effect.fork)
          yield* Deferred.await(asked)
          const delivery = yield* thread.send("STEER-42")
          expect(delivery).toBe("Injected")
          yield* Deferred.succeed(go, undefined)
          const result = yield* Fiber.join(fiber)
          const requests = yield* server.requests
          expect(JSON.stringify(ResponsesServer.functionCallOutputs(requests.at(-1)!))).toContain("ran-it")
          expect(result.text).toBe("PLAIN: STEER-42")
          expect(ResponsesServer.userTexts(requests.at(-1)!)).toContain("STEER-42")
          yield* agent.close()
          expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
        })
      ),
    90_000
  )

  it.live(
    "thread.close while an approval is pending: the turn ends canceled + ThreadClosed, the process is gone",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          const server = yield* ResponsesServer.make({ script })
          const asked = yield* Deferred.make<void>()
          const agent = yield* Agent.make({
            driver: offlineCodex(server.baseUrl),
            definition: { instructions: "", tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            policy: { sandbox: "workspaceWrite" },
            approvals: {
              handler: () => Effect.zipRight(Deferred.succeed(asked, undefined), Effect.never)
            }
          })
          const thread = yield* agent.thread("close-pending")
          const file = `${sandbox.workspace}/closed.txt`
          const events: Array<Event.Event> = []
          const fiber = yield* thread.stream(`RUN: touch ${file}`).pipe(
            Stream.runForEach((e) => Effect.sync(() => events.push(e))),
            Effect.either,
            Effect.fork
          )
          yield* Deferred.await(asked)
          yield* thread.close.pipe(Effect.timeout("20 seconds"))
          const exit = yield* Fiber.join(fiber).pipe(Effect.timeout("5 seconds"))
          expect(exit._tag).toBe("Left")
          expect(exit._tag === "Left" && (exit.left as { _tag: string })._tag).toBe("ThreadClosed")
          expect((events.at(-1) as Event.RunFinished).outcome).toBe("canceled")
          expect(Fs.existsSync(file)).toBe(false)
          expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
          yield* agent.close()
        })
      ),
    90_000
  )
})
