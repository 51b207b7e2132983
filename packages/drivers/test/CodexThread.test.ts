/**
 * Threads over the real Codex binary through the public API: `agent.thread(key)` resumes the
 * committed Codex thread (`codex exec resume <thread_id>`), forks it (`codex exec fork`), and
 * commits nothing from a failed turn. Offline: the scripted Responses server is the model.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, ThreadStore } from "@tether/core"
import * as Profile from "@tether/profile/Profile"
import { Harness, ResponsesServer } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { offlineCodex } from "./CodexHarness.js"

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String }),
  revision: "lookup_issue/v1"
})
const IssueTools = Toolkit.make(LookupIssue)
const IssueToolsLive = IssueTools.toLayer({ lookup_issue: ({ key }) => Effect.succeed({ title: `Title of ${key}` }) })

const driverFor = (server: ResponsesServer.ResponsesServer) => offlineCodex(server.baseUrl)

type Needs = Agent.Requirements | Toolkit.HandlerServices<typeof IssueTools>

/** Makes agents on one sandbox; checks after the scope that no clone and no process is left. */
const withAgents = <A, E>(
  server: ResponsesServer.ResponsesServer,
  body: (make: Effect.Effect<Agent.Agent, unknown, Needs>) => Effect.Effect<A, E, Needs>,
  options: Profile.CloneOptions = {}
) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const markers: Array<string> = []
    const make = Agent.make({
      driver: driverFor(server),
      definition: { instructions: "You triage issues.", skills: [], tools: IssueTools },
      workspace: sandbox.workspace,
      profile: Profile.cloneFrom(sandbox.source, sandbox.root, options)
    }).pipe(Effect.tap((agent) => Effect.sync(() => markers.push(agent.marker))))
    const value = yield* body(make).pipe(Effect.scoped)
    for (const marker of markers) expect(yield* Harness.markedProcesses(marker)).toEqual([])
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    return value
  }).pipe(
    Effect.scoped,
    Effect.provide(Layer.mergeAll(IssueToolsLive, Harness.layer, ThreadStore.layerMemory))
  )

const prompts = (request: ResponsesServer.RecordedRequest) =>
  ResponsesServer.userTexts(request).filter((t) => !t.startsWith("<environment_context>"))

describe("Codex threads end to end (real CLI)", () => {
  it.live("the second turn of a thread resumes the first's Codex thread and its request carries the first turn", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make({ script: (r) => ResponsesServer.text(`answer ${r.index}`) })
      const [first, second, record] = yield* withAgents(server, (make) =>
        Effect.gen(function*() {
          const agent = yield* make
          const thread = yield* agent.thread("tenant-42/issue-123")
          const first = yield* thread.run("first question")
          const second = yield* thread.run("second question")
          return [first, second, Option.getOrThrow(yield* thread.snapshot)] as const
        }))
      expect(first.session).toMatch(/^[0-9a-f-]{36}$/)
      expect(second.session).toBe(first.session)
      expect(second.text).toBe("answer 1")
      expect(record).toMatchObject({ key: "tenant-42/issue-123", provider: "codex", session: first.session, turns: 2 })
      const requests = yield* server.requests
      expect(prompts(requests[1]!)).toEqual(["first question", "second question"])
      expect(ResponsesServer.assistantTexts(requests[1]!)).toEqual(["answer 0"])
    }).pipe(Effect.scoped))

  it.live("a model failure is a RunError and commits no checkpoint; the next clean turn does", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make({ script: () => ResponsesServer.fail(500, "scripted outage") })
      const [error, before, after] = yield* withAgents(server, (make) =>
        Effect.gen(function*() {
          const agent = yield* make
          const thread = yield* agent.thread("k")
          const error = yield* Effect.flip(thread.run("hello"))
          const before = yield* thread.snapshot
          yield* server.setScript(() => ResponsesServer.text("recovered"))
          const result = yield* thread.run("again")
          return [error, before, [result, yield* thread.snapshot] as const] as const
        }))
      expect(error._tag).toBe("RunError")
      expect(error._tag === "RunError" && error.reason).toBe("ProviderFailed")
      expect(Option.isNone(before)).toBe(true)
      const [result, record] = after
      expect(result.text).toBe("recovered")
      expect(Option.getOrThrow(record)).toMatchObject({ session: result.session, turns: 1 })
    }).pipe(Effect.scoped))

  it.live("a fork continues the committed thread in a new Codex thread; the parent is untouched", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make({ script: (r) => ResponsesServer.text(`answer ${r.index}`) })
      const [parent, branch, parentRecord] = yield* withAgents(server, (make) =>
        Effect.gen(function*() {
          const agent = yield* make
          const thread = yield* agent.thread("main")
          const parent = yield* thread.run("shared start")
          const forked = yield* thread.fork("branch")
          const branch = yield* forked.run("branch question")
          return [parent, branch, Option.getOrThrow(yield* thread.snapshot)] as const
        }))
      expect(branch.session).toBeDefined()
      expect(branch.session).not.toBe(parent.session)
      expect(parentRecord).toMatchObject({ session: parent.session, turns: 1 })
      const requests = yield* server.requests
      expect(prompts(requests[1]!)).toEqual(["shared start", "branch question"])
    }).pipe(Effect.scoped))

  it.live("a rebuilt agent has a new clone without the old rollout: resumeOnly is a typed ResumeRejected", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make({ script: (r) => ResponsesServer.text(`answer ${r.index}`) })
      const [first, rejected, fresh] = yield* withAgents(server, (make) =>
        Effect.gen(function*() {
          const agent = yield* make
          const first = yield* (yield* agent.thread("k")).run("one")
          yield* agent.close()
          const rebuilt = yield* make
          expect(rebuilt.fingerprint).toBe(agent.fingerprint)
          const rejected = yield* Effect.flip((yield* rebuilt.thread("k", { resumeOnly: true })).run("two"))
          // Continue-or-start retries once with a new session.
          const fresh = yield* (yield* rebuilt.thread("k")).run("three")
          return [first, rejected, fresh] as const
        }), { sessions: false })
      expect(rejected._tag).toBe("ResumeRejected")
      expect(fresh.session).not.toBe(first.session)
      const requests = yield* server.requests
      expect(prompts(requests.at(-1)!)).toEqual(["three"])
    }).pipe(Effect.scoped))
})
