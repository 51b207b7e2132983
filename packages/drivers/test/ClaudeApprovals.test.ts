/**
 * Approvals of Claude Code's built-in tools: the real CLI (2.1.197) asks, one-shot, the approver
 * tool the agent serves on its gateway (`--permission-prompt-tool mcp__tether_approval__approve`),
 * and on live threads through `--permission-prompt-tool stdio` (`can_use_tool`), before each Bash
 * call or file write; the scripted Anthropic server on 127.0.0.1 is the model. Offline.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Approval } from "@tether/core"
import type * as Event from "@tether/core/Event"
import type * as Result from "@tether/core/Result"
import { Claude } from "@tether/drivers"
import { AnthropicServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"

/**
 * The model runs the command after `RUN: ` in the prompt with Bash (or writes `hello` to the file
 * after `WRITE: ` with Write, or hands `RUN: <the command after DELEGATE: >` to a subagent, which
 * the same model then plays), then reports the tool result.
 */
const bashModel = () =>
  AnthropicServer.make({
    respond: AnthropicServer.roundTrip(
      (request) => {
        const prompt = AnthropicServer.transcript(request).filter(([role]) => role === "user").at(-1)?.[1] ?? ""
        const delegate = /DELEGATE: (.*)$/m.exec(prompt)?.[1]
        if (delegate !== undefined) {
          // The subagent tool is `Agent` in recent CLIs, `Task` before.
          const tool = request.tools?.some((t) => t.name === "Agent") === true ? "Agent" : "Task"
          return AnthropicServer.callTool(tool, {
            description: "Run a command",
            prompt: `RUN: ${delegate}`,
            subagent_type: "general-purpose"
          })
        }
        const write = /WRITE: (.*)$/m.exec(prompt)?.[1]
        if (write !== undefined) return AnthropicServer.callTool("Write", { file_path: write, content: "hello" })
        const command = /RUN: (.*)$/m.exec(prompt)?.[1]
        return command === undefined
          ? AnthropicServer.reply("No command.")
          : AnthropicServer.callTool("Bash", { command, description: "Run the command" })
      },
      (results) => AnthropicServer.reply(`TOOL ${results[0]?.isError === true ? "ERROR" : "OK"}: ${results[0]?.text}`)
    )
  })

/** A host service the approvals handler depends on. */
class HostPolicy extends Context.Tag("test/HostPolicy")<HostPolicy, {
  readonly decide: (request: Approval.ApprovalRequest) => Effect.Effect<Approval.Decision>
}>() {}

const driverFor = (server: AnthropicServer.AnthropicServer) =>
  Claude.driver({
    env: {
      ANTHROPIC_BASE_URL: server.url,
      ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
      CLAUDE_CODE_MAX_RETRIES: "0"
    },
    partialMessages: false
  })

const withSandbox = <A, E>(body: (sandbox: Harness.Sandbox) => Effect.Effect<A, E, Agent.Requirements>) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const value = yield* body(sandbox).pipe(Effect.scoped, Effect.provide(Harness.layer))
    // The agent closed: nothing of it is left.
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    return value
  }).pipe(Effect.scoped)

/** An agent of no tools on the scripted model, in the sandbox, with these approvals. */
const agentFor = <R = never>(
  server: AnthropicServer.AnthropicServer,
  sandbox: Harness.Sandbox,
  approvals: Approval.Options<R>
) =>
  Agent.make({
    driver: driverFor(server),
    definition: { instructions: "", tools: Toolkit.empty },
    workspace: sandbox.workspace,
    profile: sandbox.selection,
    approvals
  })

/** An agent whose approvals handler records each request and answers `decide`. */
const recordingAgent = (
  server: AnthropicServer.AnthropicServer,
  sandbox: Harness.Sandbox,
  decide: (request: Approval.ApprovalRequest) => Approval.Decision
) =>
  Effect.gen(function*() {
    const asked: Array<Approval.ApprovalRequest> = []
    const agent = yield* agentFor(server, sandbox, {
      handler: (request) => Effect.sync(() => (asked.push(request), decide(request)))
    })
    return { agent, asked }
  })

const approvalsOf = (transcript: ReadonlyArray<Result.TranscriptEntry>) =>
  transcript.filter((entry): entry is Result.TranscriptApproval => entry._tag === "Approval")

const collect = (stream: Stream.Stream<Event.Event, unknown>) =>
  Effect.map(Stream.runCollect(stream), (chunk) => Array.from(chunk))

describe("Claude approvals, one-shot (real CLI)", () => {
  it.live(
    "handler mode: an allowed Bash command or file write runs; a denied one does not and the model gets the deny message",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          const server = yield* bashModel()
          const asked: Array<Approval.ApprovalRequest> = []
          // The handler's requirement (HostPolicy) comes from the layers around Agent.make.
          const agent = yield* agentFor(server, sandbox, {
            handler: (request) => Effect.flatMap(HostPolicy, (policy) => policy.decide(request))
          }).pipe(
            Effect.provideService(HostPolicy, {
              decide: (request) =>
                Effect.sync(() => {
                  asked.push(request)
                  return request.command?.includes("allowed") === true ||
                      request.paths?.some((path) => path.endsWith("allowed-write.txt")) === true
                    ? Approval.allow
                    : Approval.deny("Not on this host.")
                })
            })
          )
          const allowedFile = `${sandbox.workspace}/allowed.txt`
          const events = yield* collect(agent.stream(`RUN: touch ${allowedFile}`))
          expect(Fs.existsSync(allowedFile)).toBe(true)
          const requested = events.filter((e): e is Event.ApprovalRequested => e._tag === "ApprovalRequested")
          const resolved = events.filter((e): e is Event.ApprovalResolved => e._tag === "ApprovalResolved")
          expect(requested).toHaveLength(1)
          expect(requested[0]!.request).toMatchObject({
            toolName: "Bash",
            kind: "command",
            command: `touch ${allowedFile}`
          })
          expect(requested[0]!.request.callId).toMatch(/^toolu_/)
          expect(resolved.map((e) => [e.approvalId, e.decision, e.by])).toEqual([
            [requested[0]!.request.id, Approval.allow, "handler"]
          ])
          // Requested before resolved, both before the end of the run.
          const tags = events.map((e) => e._tag)
          expect(tags.indexOf("ApprovalRequested")).toBeLessThan(tags.indexOf("ApprovalResolved"))
          const finished = events.at(-1) as Event.RunFinished
          expect(finished.outcome).toBe("success")
          expect(finished.result.text).toMatch(/^TOOL OK/)
          expect(approvalsOf(finished.result.transcript).map((a) => [a.request.id, a.decision, a.by])).toEqual([
            [requested[0]!.request.id, Approval.allow, "handler"]
          ])

          const deniedFile = `${sandbox.workspace}/denied.txt`
          const denied = yield* agent.run(`RUN: touch ${deniedFile}`)
          expect(Fs.existsSync(deniedFile)).toBe(false)
          expect(denied.text).toBe("TOOL ERROR: Not on this host.")
          expect(approvalsOf(denied.transcript).map((a) => [a.decision, a.by])).toEqual([
            [Approval.deny("Not on this host."), "handler"]
          ])
          // A file write is asked as a fileChange with its path; allowed it is written, denied it is not.
          const allowedWrite = `${sandbox.workspace}/allowed-write.txt`
          const wrote = yield* agent.run(`WRITE: ${allowedWrite}`)
          expect(Fs.readFileSync(allowedWrite, "utf8")).toBe("hello")
          expect(wrote.text).toMatch(/^TOOL OK/)
          const deniedWrite = `${sandbox.workspace}/denied-write.txt`
          const refused = yield* agent.run(`WRITE: ${deniedWrite}`)
          expect(Fs.existsSync(deniedWrite)).toBe(false)
          expect(refused.text).toBe("TOOL ERROR: Not on this host.")
          expect(asked.map((r) => [r.toolName, r.kind])).toEqual([
            ["Bash", "command"],
            ["Bash", "command"],
            ["Write", "fileChange"],
            ["Write", "fileChange"]
          ])
          expect(asked[2]!.paths).toEqual([allowedWrite])

          // The model saw the deny message as the tool's error result; it never saw the approver tool.
          const messages = yield* server.messages
          const results = messages.flatMap(AnthropicServer.toolResults)
          expect(results.map((r) => [r.isError, r.text])).toEqual([
            [false, expect.any(String)],
            [true, "Not on this host."],
            [false, expect.any(String)],
            [true, "Not on this host."]
          ])
          for (const request of messages) {
            expect(request.tools?.map((t) => t.name)).not.toContainEqual(expect.stringContaining("approve"))
          }
        })
      ),
    120_000
  )

  it.live(
    "event mode: the host answers once (a second answer fails); unanswered, the deadline denies",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          const server = yield* bashModel()
          const agent = yield* agentFor(server, sandbox, { deadline: "2 seconds" })
          const hostFile = `${sandbox.workspace}/host.txt`
          const seconds: Array<Either.Either<void, unknown>> = []
          const events = yield* collect(
            agent.stream(`RUN: touch ${hostFile}`).pipe(
              Stream.tap((event) =>
                event._tag === "ApprovalRequested"
                  ? agent.approve(event.request.id, Approval.allow).pipe(
                    Effect.zipRight(Effect.either(agent.approve(event.request.id, Approval.deny("too late")))),
                    Effect.map((second) => void seconds.push(second))
                  )
                  : Effect.void
              )
            )
          )
          expect(Fs.existsSync(hostFile)).toBe(true)
          expect(seconds).toHaveLength(1)
          expect(Either.isLeft(seconds[0]!) && seconds[0].left).toMatchObject({
            _tag: "ApprovalAlreadyResolved",
            by: "host"
          })
          const resolved = events.filter((e): e is Event.ApprovalResolved => e._tag === "ApprovalResolved")
          expect(resolved.map((e) => [e.decision, e.by])).toEqual([[Approval.allow, "host"]])

          // A thread's turn nobody answers: the deadline's fallback (deny) is what the model sees.
          const thread = yield* agent.thread("approvals-deadline")
          const lateFile = `${sandbox.workspace}/late.txt`
          const result = yield* thread.run(`RUN: touch ${lateFile}`)
          expect(Fs.existsSync(lateFile)).toBe(false)
          const [approval] = approvalsOf(result.transcript)
          expect([approval?.decision, approval?.by]).toEqual([Approval.timedOutDecision, "deadline"])
          expect(result.text).toBe(`TOOL ERROR: ${(Approval.timedOutDecision as Approval.Deny).message}`)
          const late = yield* Effect.flip(thread.approve(approval!.request.id, Approval.allow))
          expect(late).toMatchObject({ _tag: "ApprovalAlreadyResolved", by: "deadline" })
          const unknown = yield* Effect.flip(agent.approve("not-an-approval", Approval.allow))
          expect(unknown._tag).toBe("ApprovalNotFound")
        })
      ),
    120_000
  )

  it.live(
    "closing the agent during a pending approval answers deny (by close) before RunFinished and leaves nothing",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          const server = yield* bashModel()
          const agent = yield* agentFor(server, sandbox, { deadline: "1 minute" })
          const file = `${sandbox.workspace}/closed.txt`
          const events: Array<Event.Event> = []
          const exit = yield* agent.stream(`RUN: touch ${file}`).pipe(
            Stream.runForEach((event) =>
              Effect.zipRight(
                Effect.sync(() => events.push(event)),
                event._tag === "ApprovalRequested" ? Effect.forkScoped(agent.close()) : Effect.void
              )
            ),
            Effect.exit
          )
          expect(exit._tag).toBe("Failure")
          const tags = events.map((e) => e._tag)
          const resolved = events.filter((e): e is Event.ApprovalResolved => e._tag === "ApprovalResolved")
          // The CLI may read the deny and ask again before close reaps it (under load it did): every
          // request of the closing run is denied by close.
          expect(resolved.length).toBeGreaterThan(0)
          expect(resolved.map((e) => [e.decision, e.by])).toEqual(
            resolved.map(() => [Approval.canceledDecision, "close"])
          )
          expect(tags.indexOf("ApprovalResolved")).toBeLessThan(tags.indexOf("RunFinished"))
          expect((events.at(-1) as Event.RunFinished).outcome).toBe("canceled")
          expect(Fs.existsSync(file)).toBe(false)
          expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
        })
      ),
    120_000
  )

  it.live(
    "built-in tool policy per turn: a denied built-in is not offered and not run; allow offers only the named ones",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          const server = yield* bashModel()
          // Everything asked would be allowed: only the policy can keep Bash from running.
          const { agent, asked } = yield* recordingAgent(server, sandbox, () => Approval.allow)
          const file = `${sandbox.workspace}/denied-builtin.txt`
          const denied = yield* agent.run({ input: `RUN: touch ${file}`, builtinTools: { deny: ["Bash"] } })
          expect(Fs.existsSync(file)).toBe(false)
          expect(asked).toEqual([])
          expect(denied.text).toMatch(/^TOOL ERROR/)
          // Claude Code has no sandbox level Tether can map: a turn asking one fails before spawn.
          const level = yield* Effect.flip(agent.run({ input: "x", builtinTools: { sandbox: "readOnly" } }))
          expect(level).toMatchObject({ _tag: "InvalidTurn", reason: "UnsupportedCapability" })
          const allowed = yield* agent.run({ input: "Just answer.", builtinTools: { allow: ["Read"] } })
          expect(allowed.text).toBe("No command.")
          const [first, , third] = yield* server.messages
          const builtins = (request: AnthropicServer.MessagesRequest | undefined) =>
            (request?.tools ?? []).map((t) => t.name).filter((name) => !name.startsWith("mcp__"))
          expect(builtins(first)).not.toContain("Bash")
          expect(builtins(first)).toEqual(expect.arrayContaining(["Read", "Write", "Edit"]))
          expect(builtins(third)).toEqual(["Read"])
        })
      ),
    120_000
  )

  it.live(
    "a subagent's (Task/Agent) Bash call is asked of the host, and a denial keeps it from running",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          const server = yield* bashModel()
          const { agent, asked } = yield* recordingAgent(
            server,
            sandbox,
            (request) => request.kind === "command" ? Approval.deny("No commands.") : Approval.allow
          )
          const file = `${sandbox.workspace}/subagent.txt`
          yield* agent.run(`DELEGATE: touch ${file}`)
          expect(Fs.existsSync(file)).toBe(false)
          expect(asked.map((r) => [r.toolName, r.kind, r.command])).toContainEqual(["Bash", "command", `touch ${file}`])
        })
      ),
    120_000
  )

  it.live(
    "a workspace .claude/settings.json allowing Bash does not answer in the host's place",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          // A checked-out repository's own project settings.
          Fs.mkdirSync(`${sandbox.workspace}/.claude`)
          Fs.writeFileSync(
            `${sandbox.workspace}/.claude/settings.json`,
            JSON.stringify({ permissions: { allow: ["Bash"] } })
          )
          const server = yield* bashModel()
          const { agent, asked } = yield* recordingAgent(server, sandbox, () => Approval.deny("Not on this host."))
          const file = `${sandbox.workspace}/project-allowed.txt`
          const result = yield* agent.run(`RUN: touch ${file}`)
          expect(Fs.existsSync(file)).toBe(false)
          expect(result.text).toBe("TOOL ERROR: Not on this host.")
          expect(asked.map((r) => [r.toolName, r.kind])).toEqual([["Bash", "command"]])
        })
      ),
    120_000
  )
})

const processesOf = (events: ReadonlyArray<Event.Event>) =>
  events.filter((e): e is Event.ProcessStarted => e._tag === "ProcessStarted")

describe("Claude approvals, live thread (real CLI, --permission-prompt-tool stdio)", () => {
  it.live(
    "handler mode: allowed commands and writes run, denied ones are the model's error result, allowForSession is not asked again (a write: this once); one warm process",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          const server = yield* bashModel()
          const { agent, asked } = yield* recordingAgent(server, sandbox, (request) => {
            const named = (word: string) =>
              request.command?.includes(word) === true || request.paths?.some((p) => p.includes(word)) === true
            return named("allowed")
              ? Approval.allow
              : named("session")
              ? Approval.allowForSession
              : Approval.deny("Not live.")
          })
          const thread = yield* agent.thread("live-approvals")
          const allowedFile = `${sandbox.workspace}/live-allowed.txt`
          const first = yield* collect(thread.stream(`RUN: touch ${allowedFile}`))
          expect(Fs.existsSync(allowedFile)).toBe(true)
          const finished = first.at(-1) as Event.RunFinished
          expect(finished.result.text).toMatch(/^TOOL OK/)
          expect(approvalsOf(finished.result.transcript).map((a) => [a.request.toolName, a.decision, a.by])).toEqual([
            ["Bash", Approval.allow, "handler"]
          ])
          expect(asked[0]!.callId).toMatch(/^toolu_/)
          const deniedFile = `${sandbox.workspace}/live-denied.txt`
          const second = yield* collect(thread.stream(`RUN: touch ${deniedFile}`))
          expect(Fs.existsSync(deniedFile)).toBe(false)
          expect((second.at(-1) as Event.RunFinished).result.text).toBe("TOOL ERROR: Not live.")
          // A file write: denied, nothing is written and the model gets the message.
          const deniedWrite = `${sandbox.workspace}/live-denied-write.txt`
          const third = yield* collect(thread.stream(`WRITE: ${deniedWrite}`))
          expect(Fs.existsSync(deniedWrite)).toBe(false)
          expect((third.at(-1) as Event.RunFinished).result.text).toBe("TOOL ERROR: Not live.")
          // allowForSession answers the CLI's own suggestion, kept to the session: for a Bash command
          // a prefix rule (`git init *`), so the next `git init` is not asked; nothing is written to
          // a settings file.
          yield* thread.run(`RUN: git init -q ${sandbox.workspace}/session-one`)
          const asks = asked.length
          const again = yield* thread.run(`RUN: git init -q ${sandbox.workspace}/session-two`)
          expect(Fs.existsSync(`${sandbox.workspace}/session-two/.git`)).toBe(true)
          expect(asked).toHaveLength(asks)
          expect(approvalsOf(again.transcript)).toEqual([])
          // For a file write the CLI's one suggestion is the session's `acceptEdits` mode, which
          // also runs rm, mv, cp, sed, touch, mkdir and rmdir unasked: the write is allowed this once,
          // and neither a later `rm` nor the next write goes unasked.
          const sessionWrite = `${sandbox.workspace}/live-session-write.txt`
          const wrote = yield* thread.run(`WRITE: ${sessionWrite}`)
          expect(Fs.readFileSync(sessionWrite, "utf8")).toBe("hello")
          expect(approvalsOf(wrote.transcript).map((a) => [a.request.kind, a.decision])).toEqual([
            ["fileChange", Approval.allowForSession]
          ])
          const precious = `${sandbox.workspace}/precious.txt`
          Fs.writeFileSync(precious, "keep me")
          const removed = yield* thread.run(`RUN: rm ${precious}`)
          expect(Fs.existsSync(precious)).toBe(true)
          expect(removed.text).toBe("TOOL ERROR: Not live.")
          const asksAgain = `${sandbox.workspace}/live-asked-write.txt`
          yield* thread.run(`WRITE: ${asksAgain}`)
          expect(Fs.existsSync(asksAgain)).toBe(false)
          expect(asked.map((r) => [r.toolName, r.kind])).toEqual([
            ["Bash", "command"],
            ["Bash", "command"],
            ["Write", "fileChange"],
            ["Bash", "command"],
            ["Write", "fileChange"],
            ["Bash", "command"],
            ["Write", "fileChange"]
          ])
          expect(Fs.existsSync(`${sandbox.workspace}/.claude`)).toBe(false)
          // One process served every turn: the approvals did not cost it.
          const [opened] = processesOf(first)
          const [reused] = processesOf(second)
          expect(opened!.reused).toBeUndefined()
          expect(reused).toMatchObject({ pid: opened!.pid, reused: true })
          const results = (yield* server.messages).flatMap(AnthropicServer.toolResults)
          expect(results.slice(0, 3).map((r) => [r.isError, r.text])).toEqual([
            [false, expect.any(String)],
            [true, "Not live."],
            [true, "Not live."]
          ])
        })
      ),
    120_000
  )

  it.live(
    "event mode: the host allows on a live thread (a second answer fails); the deadline denies; closing the agent while one is pending denies it by close",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          const server = yield* bashModel()
          const agent = yield* agentFor(server, sandbox, { deadline: "3 seconds" })
          const thread = yield* agent.thread("live-events")
          const hostFile = `${sandbox.workspace}/live-host.txt`
          const seconds: Array<unknown> = []
          const allowed = yield* collect(
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
          expect((allowed.at(-1) as Event.RunFinished).result.text).toMatch(/^TOOL OK/)
          expect(seconds).toEqual([expect.objectContaining({ _tag: "ApprovalAlreadyResolved", by: "host" })])
          // Nobody answers: the deadline denies, and the model reads the fallback's message.
          const lateFile = `${sandbox.workspace}/live-late.txt`
          const late = yield* thread.run(`RUN: touch ${lateFile}`)
          expect(Fs.existsSync(lateFile)).toBe(false)
          expect(approvalsOf(late.transcript).map((a) => [a.decision, a.by])).toEqual([
            [Approval.timedOutDecision, "deadline"]
          ])
          expect(late.text).toBe(`TOOL ERROR: ${(Approval.timedOutDecision as Approval.Deny).message}`)
          const closedFile = `${sandbox.workspace}/live-closed.txt`
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
          // Every close call returns once the agent is closed (its warm process shut down).
          yield* agent.close()
          expect(processesOf(events)[0]).toMatchObject({ reused: true })
          const tags = events.map((e) => e._tag)
          const resolved = events.filter((e): e is Event.ApprovalResolved => e._tag === "ApprovalResolved")
          // The CLI may read the deny and ask again before close reaps it (under load it did): every
          // request of the closing run is denied by close.
          expect(resolved.length).toBeGreaterThan(0)
          expect(resolved.map((e) => [e.decision, e.by])).toEqual(
            resolved.map(() => [Approval.canceledDecision, "close"])
          )
          expect(tags.indexOf("ApprovalResolved")).toBeLessThan(tags.indexOf("RunFinished"))
          expect((events.at(-1) as Event.RunFinished).outcome).toBe("canceled")
          expect(Fs.existsSync(closedFile)).toBe(false)
          expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
        })
      ),
    120_000
  )
})
