/**
 * Codex live threads (warm `codex app-server`): parallel approvals in one model
 * response, a process killed while an approval is pending or between turns, concurrent sends.
 * The real CLI (pinned 0.171.0) offline against the scripted Responses server on 127.0.0.1.
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
import { approvalsOf, denied, offlineCodex, withSandbox } from "./CodexHarness.js"

const exec = (id: string, cmd: string) => ({
  type: "function_call",
  id: `fc_${id}`,
  call_id: `call_${id}`,
  name: "exec_command",
  arguments: JSON.stringify({ cmd, yield_time_ms: 10_000 })
})

const script: ResponsesServer.Script = (request) => {
  const last = ResponsesServer.userTexts(request).at(-1) ?? ""
  const outputs = ResponsesServer.functionCallOutputs(request)
  const pair = /PAIR: (\S+) (\S+)$/m.exec(last)
  if (pair !== null && outputs.length === 0) {
    return ResponsesServer.items([exec("a", `touch ${pair[1]}`), exec("b", `touch ${pair[2]}`)])
  }
  if (last.startsWith(denied)) return ResponsesServer.text(`TOLD: ${last}`)
  const output = ResponsesServer.lastFunctionCallOutput(request)
  if (output !== undefined) return ResponsesServer.text(`TOOL: ${output.text}`)
  const command = /RUN: (.*)$/m.exec(last)?.[1]
  return command === undefined
    ? ResponsesServer.text(`PLAIN: ${last}`)
    : ResponsesServer.callTool({ name: "exec_command", input: { cmd: command, yield_time_ms: 10_000 } })
}

describe("Codex live races", () => {
  it.live(
    "two approvals of one model response: each decision goes to its own call (deny answered first)",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          const server = yield* ResponsesServer.make({ script })
          const agent = yield* Agent.make({
            driver: offlineCodex(server.baseUrl),
            definition: { instructions: "", tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            policy: { sandbox: "workspaceWrite" },
            approvals: {
              handler: (request) =>
                request.command?.includes("yes-file") === true
                  ? Effect.as(Effect.sleep("400 millis"), Approval.allow)
                  : Effect.succeed(Approval.deny("Not that one."))
            }
          })
          const thread = yield* agent.thread("pair")
          const yes = `${sandbox.workspace}/yes-file`
          const no = `${sandbox.workspace}/no-file`
          const result = yield* thread.run(`PAIR: ${yes} ${no}`)
          expect(Fs.existsSync(yes)).toBe(true)
          expect(Fs.existsSync(no)).toBe(false)
          const pairs = approvalsOf(result.transcript).map((a) => [
            a.request.command?.includes("yes-file") ? "yes" : "no",
            a.decision?._tag
          ])
          expect(pairs.sort()).toEqual([["no", "Deny"], ["yes", "Allow"]])
          yield* agent.close()
        })
      ),
    90_000
  )

  it.live(
    "the app-server killed while an approval is pending: the turn fails, the approval is resolved, the next turn resumes",
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
          const thread = yield* agent.thread("killed")
          const events: Array<Event.Event> = []
          yield* thread.events.pipe(Stream.runForEach((e) => Effect.sync(() => events.push(e))), Effect.forkScoped)
          yield* Effect.sleep("50 millis")
          yield* thread.run("remember KIWI")
          const file = `${sandbox.workspace}/blocked.txt`
          const fiber = yield* thread.stream(`RUN: touch ${file}`).pipe(
            Stream.runCollect,
            Effect.either,
            Effect.fork
          )
          yield* Deferred.await(asked)
          const pid = events.filter((e): e is Event.ProcessStarted => e._tag === "ProcessStarted").at(-1)!.pid
          process.kill(pid, "SIGKILL")
          const failed = yield* Fiber.join(fiber).pipe(Effect.timeout("20 seconds"))
          expect(failed._tag).toBe("Left")
          const next = yield* thread.run("what did I say?").pipe(Effect.timeout("30 seconds"))
          expect(next.text).toBe("PLAIN: what did I say?")
          const requests = yield* server.requests
          expect(ResponsesServer.userTexts(requests.at(-1)!)).toContain("remember KIWI")
          expect(Fs.existsSync(file)).toBe(false)
          const resolved = events.filter((e): e is Event.ApprovalResolved => e._tag === "ApprovalResolved")
          expect(resolved).toHaveLength(1)
          yield* agent.close()
          expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
        })
      ),
    90_000
  )

  it.live(
    "two sends in flight during one turn: both Injected, both read by the model in that turn",
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
                Effect.zipRight(Deferred.succeed(asked, undefined), Deferred.await(go)).pipe(Effect.as(Approval.allow))
            }
          })
          const thread = yield* agent.thread("two-sends")
          const fiber = yield* thread.run(`RUN: echo ran-it`).pipe(Effect.fork)
          yield* Deferred.await(asked)
          const deliveries = yield* Effect.all([thread.send("ONE-1"), thread.send("TWO-2")], { concurrency: 2 })
          expect(deliveries).toEqual(["Injected", "Injected"])
          yield* Deferred.succeed(go, undefined)
          yield* Fiber.join(fiber)
          const requests = yield* server.requests
          const texts = ResponsesServer.userTexts(requests.at(-1)!)
          expect(texts).toContain("ONE-1")
          expect(texts).toContain("TWO-2")
          yield* agent.close()
          expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
        })
      ),
    90_000
  )
})

const patch = (path: string, update: boolean) =>
  `apply_patch <<'EOF'\n*** Begin Patch\n` +
  (update ? `*** Update File: ${path}\n@@\n-hello\n+world\n` : `*** Add File: ${path}\n+hello\n`) +
  `*** End Patch\nEOF\n`

const patchScript: ResponsesServer.Script = (request) => {
  const last = ResponsesServer.userTexts(request).at(-1) ?? ""
  if (last.startsWith(denied)) return ResponsesServer.text(`TOLD: ${last}`)
  const output = ResponsesServer.lastFunctionCallOutput(request)
  if (output !== undefined) return ResponsesServer.text(`TOOL: ${output.text}`)
  const file = /(ADD|UPDATE): (.*)$/m.exec(last)
  if (file === null) return ResponsesServer.text(`PLAIN: ${last}`)
  return ResponsesServer.callTool({
    name: "exec_command",
    input: { cmd: patch(file[2]!, file[1] === "UPDATE"), yield_time_ms: 10_000 }
  })
}

describe("Codex allowForSession scope", () => {
  it.live(
    "a file change allowed for the session does not let a change of another file through unasked",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          const server = yield* ResponsesServer.make({ script: patchScript })
          const asked: Array<Approval.ApprovalRequest> = []
          const agent = yield* Agent.make({
            driver: offlineCodex(server.baseUrl),
            definition: { instructions: "", tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            policy: { sandbox: "workspaceWrite" },
            approvals: {
              handler: (request) =>
                Effect.sync(() => {
                  asked.push(request)
                  return request.paths?.some((p) => p.includes("session-ok")) === true
                    ? Approval.allowForSession
                    : Approval.deny("Not that file.")
                })
            }
          })
          const thread = yield* agent.thread("session-scope")
          const ok = `${sandbox.workspace}/session-ok.txt`
          const other = `${sandbox.workspace}/other.txt`
          yield* thread.run(`ADD: ${ok}`)
          expect(Fs.readFileSync(ok, "utf8")).toBe("hello\n")
          yield* thread.run(`ADD: ${other}`)
          expect(asked.map((r) => r.paths)).toEqual([[ok], [other]])
          expect(Fs.existsSync(other)).toBe(false)
          yield* agent.close()
        })
      ),
    90_000
  )
})
