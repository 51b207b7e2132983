/**
 * Approvals on Gemini CLI live threads: the real CLI (pinned 0.61.0) as `gemini --acp` asks
 * `session/request_permission` before a shell command or a file write, answered by the agent's approvals with one
 * of the options it offered; the scripted Gemini server on 127.0.0.1 is the model. Offline.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Approval } from "@tether/core"
import type * as Event from "@tether/core/Event"
import type * as Result from "@tether/core/Result"
import { Gemini } from "@tether/drivers"
import { GeminiServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"

/**
 * The model runs the command after `RUN: ` with run_shell_command (or writes `hello` to the file
 * after `WRITE: ` with write_file, or fetches the URL after `FETCH: ` with web_fetch), then reports
 * the tool's output.
 */
const modelOf = () =>
  GeminiServer.make({
    respond: GeminiServer.roundTrip((request) => {
      const prompt = GeminiServer.transcript(request).filter(([role]) => role === "user").at(-1)?.[1] ?? ""
      const write = /WRITE: (.*)$/m.exec(prompt)?.[1]
      if (write !== undefined) return GeminiServer.callTool("write_file", { file_path: write, content: "hello" })
      const fetch = /FETCH: (.*)$/m.exec(prompt)?.[1]
      if (fetch !== undefined) return GeminiServer.callTool("web_fetch", { prompt: `Summarize ${fetch}` })
      const command = /RUN: (.*)$/m.exec(prompt)?.[1]
      return command === undefined
        ? GeminiServer.reply("No command.")
        : GeminiServer.callTool("run_shell_command", { command })
    }, (responses) => GeminiServer.reply(`TOOL: ${responses.map((r) => r.output).join("|")}`))
  })

const driverFor = (server: GeminiServer.GeminiServer) =>
  Gemini.driver({
    model: "gemini-2.5-flash",
    env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
  })

const withSandbox = <A, E>(body: (sandbox: Harness.Sandbox) => Effect.Effect<A, E, Agent.Requirements>) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const value = yield* body(sandbox).pipe(Effect.scoped, Effect.provide(Harness.layer))
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    return value
  }).pipe(Effect.scoped)

const approvalsOf = (transcript: ReadonlyArray<Result.TranscriptEntry>) =>
  transcript.filter((entry): entry is Result.TranscriptApproval => entry._tag === "Approval")
const collect = (stream: Stream.Stream<Event.Event, unknown>) =>
  Effect.map(Stream.runCollect(stream), (chunk) => Array.from(chunk))
const processesOf = (events: ReadonlyArray<Event.Event>) =>
  events.filter((e): e is Event.ProcessStarted => e._tag === "ProcessStarted")

describe("Gemini approvals, live thread (real CLI)", () => {
  it.live(
    "handler then event mode: allowed commands and writes run, denied do not, allowForSession, a second answer fails, the deadline and close deny; one warm process",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          const server = yield* modelOf()
          const asked: Array<Approval.ApprovalRequest> = []
          const agent = yield* Agent.make({
            driver: driverFor(server),
            definition: { instructions: "", tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            approvals: {
              deadline: "3 seconds",
              // Handler mode for commands and paths naming "handled"; the others are left to the host
              // (event mode), or to the deadline.
              handler: (request) => {
                const named = (word: string) =>
                  request.command?.includes(word) === true || request.paths?.some((p) => p.includes(word)) === true
                return Effect.sync(() => asked.push(request)).pipe(
                  Effect.zipRight(
                    request.toolName === "web_fetch"
                      ? Effect.succeed(Approval.deny("No fetches."))
                      : named("handled-allow")
                      ? Effect.succeed(Approval.allow)
                      : named("handled-deny")
                      ? Effect.succeed(Approval.deny("No."))
                      : named("handled-session")
                      ? Effect.succeed(Approval.allowForSession)
                      : Effect.never
                  )
                )
              }
            }
          })
          const oneShot = yield* Effect.flip(agent.run("RUN: true"))
          expect(oneShot).toMatchObject({ _tag: "InvalidTurn", reason: "UnsupportedCapability" })
          const thread = yield* agent.thread("gemini-approvals")
          const allowedFile = `${sandbox.workspace}/allowed.txt`
          const first = yield* collect(thread.stream(`RUN: touch ${allowedFile} && echo handled-allow`))
          expect(Fs.existsSync(allowedFile)).toBe(true)
          const done = (first.at(-1) as Event.RunFinished).result
          expect(done.text).toContain("handled-allow")
          expect(approvalsOf(done.transcript).map((a) => [a.request.kind, a.decision, a.by])).toEqual([
            ["command", Approval.allow, "handler"]
          ])
          expect(asked[0]).toMatchObject({ toolName: "run_shell_command" })
          expect(asked[0]!.options?.map((o) => o.kind)).toEqual(["allow_always", "allow_once", "reject_once"])

          const deniedFile = `${sandbox.workspace}/denied.txt`
          const second = yield* collect(thread.stream(`RUN: touch ${deniedFile} # handled-deny`))
          expect(Fs.existsSync(deniedFile)).toBe(false)
          const refused = (second.at(-1) as Event.RunFinished).result
          expect(approvalsOf(refused.transcript).map((a) => [a.decision, a.by])).toEqual([
            [Approval.deny("No."), "handler"]
          ])
          // Gemini's tool result says the call "was canceled by the user": ACP's reject outcome carries
          // no message, and Gemini cannot take input during a turn, so the deny message is not delivered.
          expect(refused.text).toMatch(/cancel/i)

          // A file write is asked with its diff and path: denied, nothing is written.
          const deniedWrite = `${sandbox.workspace}/handled-deny-write.txt`
          yield* thread.run(`WRITE: ${deniedWrite}`)
          expect(Fs.existsSync(deniedWrite)).toBe(false)
          // Allowed for the session: written this once. Gemini's `allow_always` on a write would turn
          // on its session's autoEdit mode, under which writes, edits and web fetches run unasked
          // (ahead of the run's ask_user rules): a later fetch and the next write are still asked.
          const sessionWrite = `${sandbox.workspace}/handled-session-write.txt`
          yield* thread.run(`WRITE: ${sessionWrite}`)
          expect(Fs.readFileSync(sessionWrite, "utf8")).toBe("hello")
          const fetched = yield* thread.run("FETCH: https://example.invalid/page")
          expect(fetched.text).toMatch(/cancel/i)
          const askedWrite = `${sandbox.workspace}/handled-deny-again-write.txt`
          yield* thread.run(`WRITE: ${askedWrite}`)
          expect(Fs.existsSync(askedWrite)).toBe(false)
          expect(asked.slice(-3).map((r) => r.toolName)).toEqual(["write_file", "web_fetch", "write_file"])
          const writes = asked.filter((request) => request.kind === "fileChange")
          expect(writes.map((r) => [r.toolName, r.paths])).toEqual([
            ["write_file", [deniedWrite]],
            ["write_file", [sessionWrite]],
            ["write_file", [askedWrite]]
          ])
          expect(writes[1]!.diff).toContain("hello")

          // Event mode: the host answers first (the handler never does for this command).
          const hostFile = `${sandbox.workspace}/host.txt`
          const seconds: Array<unknown> = []
          const third = yield* collect(
            thread.stream(`RUN: touch ${hostFile}`).pipe(
              Stream.tap((event) =>
                event._tag === "ApprovalRequested"
                  ? thread.approve(event.request.id, Approval.allow).pipe(
                    Effect.zipRight(Effect.flip(thread.approve(event.request.id, Approval.deny("too late")))),
                    Effect.map((second) => void seconds.push(second))
                  )
                  : Effect.void
              )
            )
          )
          expect(Fs.existsSync(hostFile)).toBe(true)
          expect(approvalsOf((third.at(-1) as Event.RunFinished).result.transcript).map((a) => a.by)).toEqual(["host"])
          expect(seconds).toEqual([expect.objectContaining({ _tag: "ApprovalAlreadyResolved", by: "host" })])

          // Nobody answers: the deadline denies.
          const lateFile = `${sandbox.workspace}/late.txt`
          const late = yield* thread.run(`RUN: touch ${lateFile}`)
          expect(Fs.existsSync(lateFile)).toBe(false)
          expect(approvalsOf(late.transcript).map((a) => [a.decision, a.by])).toEqual([
            [Approval.timedOutDecision, "deadline"]
          ])

          const closedFile = `${sandbox.workspace}/closed.txt`
          const events: Array<Event.Event> = []
          const exit = yield* thread.stream(`RUN: touch ${closedFile}`).pipe(
            Stream.runForEach((event) =>
              Effect.zipRight(
                Effect.sync(() => events.push(event)),
                event._tag === "ApprovalRequested" ? Effect.forkScoped(agent.close()) : Effect.void
              )
            ),
            Effect.exit
          )
          expect(exit._tag).toBe("Failure")
          yield* agent.close()
          const resolved = events.filter((e): e is Event.ApprovalResolved => e._tag === "ApprovalResolved")
          expect(resolved.map((e) => [e.decision, e.by])).toEqual([[Approval.canceledDecision, "close"]])
          expect(Fs.existsSync(closedFile)).toBe(false)
          // One process served every turn.
          const [opened] = processesOf(first)
          for (const turn of [second, third, events]) {
            expect(processesOf(turn)[0]).toMatchObject({ pid: opened!.pid, reused: true })
          }
          expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
        })
      ),
    120_000
  )
})
