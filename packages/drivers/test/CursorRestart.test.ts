/**
 * The mission's hermetic restart test, through the public API with the fake Cursor `agent`:
 * turns 1 and 2 on one thread (same endpoint and token, `--resume` on turn 2, execution profile
 * ≠ source); close the agent; hold the old loopback port so the next listener gets another one;
 * build a new agent against the same thread store; resume a third turn (new endpoint, new token,
 * old token refused); the source profile was never written; both endpoints and both execution
 * profiles are reclaimed. For a dedicated profile and for a temporary clone.
 *
 * The CLI keeps its chats in `CURSOR_DATA_DIR` = the execution clone, which dies with its agent:
 * the chats survive through the identity's session store (the layout's `sessions` class), seeded
 * into every new clone and saved after each clean turn.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, ThreadStore } from "@tether/core"
import type { Driver } from "@tether/core"
import { Cursor } from "@tether/drivers"
import { Profile } from "@tether/profile"
import { CursorAgent, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String, state: Schema.String }),
  revision: "lookup_issue/v1"
})
const IssueTools = Toolkit.make(LookupIssue)
const IssueToolsLive = IssueTools.toLayer({
  lookup_issue: ({ key }) => Effect.succeed({ title: `Title of ${key}`, state: "open" })
})

interface Prepared {
  readonly url: string
  readonly tokenVariable: string
  readonly profileDir: string
  readonly args: ReadonlyArray<string>
}

/** The Cursor driver, recording what each turn was prepared with (test instrumentation). */
const spyDriver = (prepared: Array<Prepared>): Driver.Driver => {
  const driver = Cursor.driver(CursorAgent.config())
  return {
    ...driver,
    prepare: (request) =>
      driver.prepare(request).pipe(Effect.tap((invocation) =>
        Effect.sync(() =>
          prepared.push({
            url: request.hosted.url,
            tokenVariable: request.hosted.tokenVariable,
            profileDir: request.profileDir,
            args: invocation.args
          })
        )
      ))
  }
}

const portOf = (url: string) => Number(new URL(url).port)

/** Binds `127.0.0.1:port` (succeeds only when nothing listens there); released with the scope. */
const holdPort = (port: number) =>
  Effect.acquireRelease(
    Effect.async<Net.Server, Error>((resume) => {
      const server = Net.createServer()
      server.once("error", (error) => resume(Effect.fail(error)))
      server.listen(port, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) =>
      Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void))
      })
  )

const lookup = CursorAgent.call("lookup_issue", { key: "ISSUE-42" })

const restart = (selection: (sandbox: Harness.Sandbox) => Profile.Selection) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    // The user's own Cursor profile content, which must stay byte-identical.
    Fs.writeFileSync(Path.join(sandbox.source, Cursor.mcpFile), JSON.stringify({ mcpServers: {} }))
    const before = yield* Harness.treeDigest(sandbox.source)
    const prepared: Array<Prepared> = []
    const observed: Array<Harness.Observed> = []
    const driver = spyDriver(prepared)
    const build = Agent.make({
      driver,
      definition: { instructions: "", skills: [], tools: IssueTools },
      workspace: sandbox.workspace,
      profile: selection(sandbox)
    })

    // Agent 1: turns 1 and 2 on one thread.
    const [first, second] = yield* Effect.gen(function*() {
      const agent = yield* build
      const thread = yield* agent.thread("tenant-42/issue-123")
      const first = yield* thread.run(`Is it open?\n${lookup}`)
      const second = yield* thread.run(`And now?\n${lookup}`)
      return [first, second] as const
    }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.recordingLayer(observed)]))
    expect(first.text).toBe(`turn 1; lookup_issue -> {"title":"Title of ISSUE-42","state":"open"}`)
    expect(second.text).toBe(`turn 2; lookup_issue -> {"title":"Title of ISSUE-42","state":"open"}`)
    expect(second.session).toBe(first.session)
    expect(prepared).toHaveLength(2)
    expect(prepared[1]!.url).toBe(prepared[0]!.url)
    expect(prepared[1]!.tokenVariable).toBe(prepared[0]!.tokenVariable)
    expect(observed).toHaveLength(1)
    expect(prepared[0]!.args).not.toContain("--resume")
    expect(prepared[1]!.args.slice(-2)).toEqual(["--resume", first.session!])
    expect(prepared[0]!.profileDir).not.toBe(sandbox.source)
    expect(Fs.existsSync(prepared[0]!.profileDir)).toBe(false)

    // The old endpoint is reclaimed: its port can be bound, and stays held during agent 2.
    const oldPort = portOf(prepared[0]!.url)
    yield* holdPort(oldPort)

    // Agent 2, against the same thread store: the third turn resumes the same session.
    const third = yield* Effect.gen(function*() {
      const agent = yield* build
      const thread = yield* agent.thread("tenant-42/issue-123", { resumeOnly: true })
      const third = yield* thread.run(`Once more.\n${lookup}`)
      // The old token is refused by the new endpoint; the new one is accepted.
      expect(yield* Harness.probe({ url: observed[1]!.url, token: observed[0]!.token })).toBe(401)
      expect(yield* Harness.probe(observed[1]!)).toBe(200)
      return third
    }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.recordingLayer(observed)]))
    expect(third.text).toBe(`turn 3; lookup_issue -> {"title":"Title of ISSUE-42","state":"open"}`)
    expect(third.session).toBe(first.session)
    expect(prepared).toHaveLength(3)
    expect(portOf(prepared[2]!.url)).not.toBe(oldPort)
    expect(prepared[2]!.tokenVariable).not.toBe(prepared[0]!.tokenVariable)
    expect(Redacted.value(observed[1]!.token)).not.toBe(Redacted.value(observed[0]!.token))
    expect(prepared[2]!.args.slice(-2)).toEqual(["--resume", first.session!])
    expect(prepared[2]!.profileDir).not.toBe(prepared[0]!.profileDir)

    // Both execution profiles and both endpoints are reclaimed; the source was never written.
    for (const turn of prepared) expect(Fs.existsSync(turn.profileDir)).toBe(false)
    yield* holdPort(portOf(prepared[2]!.url))
    expect(yield* Harness.treeDigest(sandbox.source)).toBe(before)
  }).pipe(Effect.scoped, Effect.provide(ThreadStore.layerMemory))

describe("Cursor hermetic restart (fake agent, threads)", () => {
  it.live("dedicated profile: resume a third turn on a rebuilt agent, new port, new token", () =>
    restart((sandbox) => Profile.dedicated(sandbox.source, { root: sandbox.root })))

  it.live("temporary clone: resume a third turn on a rebuilt agent, new port, new token", () =>
    restart((sandbox) => sandbox.selection))

  it.live("a clean turn's session is saved when its CLI exits, not only at close (a host killed later resumes)", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const prepared: Array<Prepared> = []
      const build = Agent.make({
        driver: spyDriver(prepared),
        definition: { instructions: "", skills: [], tools: IssueTools },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      // Agent 1 runs a turn and is never closed while agent 2 resumes (as if its host were killed).
      const agent1 = yield* build
      const first = yield* Effect.flatMap(agent1.thread("k"), (thread) => thread.run(`One.\n${lookup}`))
      // Agent 1's CLI exits after its result; its session reaches the store then, before any close.
      const saved = () =>
        (Fs.readdirSync(Path.join(sandbox.base, "sessions"), { recursive: true }) as Array<string>)
          .some((entry) => entry.includes(first.session!))
      yield* Effect.repeat(Effect.sync(saved), {
        until: (done) => done,
        schedule: Schedule.spaced("20 millis").pipe(Schedule.upTo("10 seconds"))
      })
      expect(saved()).toBe(true)
      const agent2 = yield* build
      const thread2 = yield* agent2.thread("k", { resumeOnly: true })
      const second = yield* thread2.run(`Two.\n${lookup}`)
      expect(second.session).toBe(first.session)
      expect(second.text).toBe(`turn 2; lookup_issue -> {"title":"Title of ISSUE-42","state":"open"}`)
      expect(prepared[1]!.profileDir).not.toBe(prepared[0]!.profileDir)
    }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.layer, ThreadStore.layerMemory])))
})
