/**
 * The Cursor driver end to end through the public API (`Agent.make`), the real gateway and the
 * fake `agent` program of @tether/testing, plus the driver conformance suite.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Cursor } from "@tether/drivers"
import { Conformance, CursorAgent, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String, state: Schema.String }),
  revision: "lookup_issue/v1"
})
const IssueTools = Toolkit.make(LookupIssue)
const looked: Array<string> = []
const IssueToolsLive = IssueTools.toLayer({
  lookup_issue: ({ key }) =>
    Effect.sync(() => {
      looked.push(key)
      return { title: `Title of ${key}`, state: "open" }
    })
})

const driver = Cursor.driver(CursorAgent.config())

describe("Cursor through Agent.make and the fake agent", () => {
  it.live("a host tool round trip through the gateway; after close nothing is left", () =>
    Effect.gen(function*() {
      const observed: Array<Harness.Observed> = []
      const sandbox = yield* Harness.sandbox
      Fs.writeFileSync(
        Path.join(sandbox.source, Cursor.mcpFile),
        JSON.stringify({ mcpServers: { mine: { command: "/bin/true" } } })
      )
      const before = yield* Harness.treeDigest(sandbox.source)
      const { agent, events, result } = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver,
          definition: { instructions: "", skills: [], tools: IssueTools },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        const events = Array.from(
          yield* agent.stream(`Is it open?\n${CursorAgent.call("lookup_issue", { key: "ISSUE-42" })}`).pipe(
            Stream.runCollect
          )
        )
        const result = yield* agent.run("second turn")
        // A second agent keeps the listener up: the closed agent's token must get 401 from it.
        const witness = yield* Agent.make({
          driver,
          definition: { instructions: "", skills: [], tools: IssueTools },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        yield* agent.close()
        expect(yield* Harness.probe(observed[0]!)).toBe(401)
        expect(yield* Harness.probe(observed[1]!)).toBe(200)
        expect((yield* witness.run("still here")).text).toBe("turn 1")
        return { agent, events, result }
      }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.recordingLayer(observed)]))
      const calls = events.filter((event) => event._tag === "ToolCall")
      expect(calls.map((call) => [call.phase, call.name, call.source])).toEqual([
        ["start", "lookup_issue", "host"],
        ["end", "lookup_issue", "host"]
      ])
      expect(calls[0]!.input).toEqual({ key: "ISSUE-42" })
      expect(looked).toContain("ISSUE-42")
      const finished = events.at(-1)!
      expect(finished._tag).toBe("RunFinished")
      expect(finished._tag === "RunFinished" && finished.outcome).toBe("success")
      const first = events.find((event) => event._tag === "SessionStarted")
      expect(first?._tag === "SessionStarted" && first.sessionId).toMatch(/^[0-9a-f-]{36}$/)
      expect(result.provider).toBe("cursor")
      expect(result.text).toBe("turn 1")
      expect(result.session).toMatch(/^[0-9a-f-]{36}$/)
      expect(result.effectiveTools).toEqual(["lookup_issue"])
      // After close: no process, no clone, the token refused, the source untouched.
      expect(yield* Harness.markedProcesses(agent.marker)).toEqual([])
      expect(yield* Harness.entries(sandbox.root)).toEqual([])
      expect(observed).toHaveLength(2)
      for (const registration of observed) expect(yield* Harness.probe(registration)).not.toBe(200)
      expect(yield* Harness.treeDigest(sandbox.source)).toBe(before)
    }).pipe(Effect.scoped))

  it.live("instructions and sandbox levels fail before spawn with UnsupportedCapability", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const make = (options: Partial<Agent.Options<typeof IssueTools>>) =>
        Agent.make({
          driver,
          definition: { instructions: "", skills: [], tools: IssueTools },
          workspace: sandbox.workspace,
          profile: sandbox.selection,
          ...options
        }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.layer]), Effect.flip)
      const instructions = yield* make({
        definition: { instructions: "You triage issues.", skills: [], tools: IssueTools }
      })
      expect(instructions._tag).toBe("UnsupportedCapability")
      expect(instructions._tag === "UnsupportedCapability" && instructions.capability).toBe("instructions")
      for (const level of ["readOnly", "workspaceWrite", "unrestricted"] as const) {
        const refused = yield* make({ policy: { sandbox: level } })
        expect(refused._tag === "UnsupportedCapability" && refused.capability).toBe("sandbox")
      }
      // Nothing was started: no clone was created.
      expect(yield* Harness.entries(sandbox.root)).toEqual([])
    }).pipe(Effect.scoped))
})

describe("Cursor conformance (fake agent)", () => {
  const clauses = Conformance.clauses({
    driver,
    plain: "hello",
    plainText: "turn 1",
    slow: "@sleep 20000",
    crash: "@think partial\n@crash 3"
  })
  for (const clause of clauses) it.live(`${clause.id} ${clause.title}`, () => clause.run)
})
