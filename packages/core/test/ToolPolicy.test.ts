import { describe, expect, it } from "@effect/vitest"
import type { Agent, Event } from "@tether/core"
import { ThreadStore, ToolPolicy } from "@tether/core"
import { FakeCli, Harness } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as Threads from "./fixtures/threads.js"

const withAgent = <A, E>(
  body: (agent: Agent.Agent) => Effect.Effect<A, E, Effect.Effect.Context<ReturnType<typeof Threads.makeAgent>>>
) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    return yield* Effect.gen(function*() {
      const agent = yield* Threads.makeAgent(sandbox, Threads.driver(Threads.makeControl()))
      return yield* body(agent)
    }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(Threads.ToolsLive, Harness.layer, ThreadStore.layerMemory)))
  }).pipe(Effect.scoped)

// Lists the tools, then calls delete_issue directly by name.
const probe = FakeCli.script({ op: "list" }, { op: "call", tool: "delete_issue", input: { key: "ISSUE-1" } })

const observe = (events: ReadonlyArray<Event.Event>) => {
  const listed = events.find((event): event is Event.Notice => event._tag === "Notice" && event.kind === "tools")
  const call = events.find((event): event is Event.ToolCall =>
    event._tag === "ToolCall" && event.phase === "end" && event.name === "delete_issue"
  )
  const started = events.find((event): event is Event.RunStarted => event._tag === "RunStarted")
  return { listed: listed?.message.split(",").sort(), call, started }
}

describe("ToolPolicy.effective", () => {
  it("is definition ∩ allow minus deny, sorted; unknown names never add a tool", () => {
    const tools = ["b", "a", "c"]
    expect(ToolPolicy.effective(tools, undefined)).toEqual(["a", "b", "c"])
    expect(ToolPolicy.effective(tools, { allow: ["c", "a", "zzz"] })).toEqual(["a", "c"])
    expect(ToolPolicy.effective(tools, { deny: ["b", "zzz"] })).toEqual(["a", "c"])
    expect(ToolPolicy.effective(tools, { allow: ["a", "b"], deny: ["b"] })).toEqual(["a"])
    expect(ToolPolicy.effective(tools, { allow: [] })).toEqual([])
  })

  it.prop(
    "the effective set is always a subset of the definition and excludes every denied tool",
    [
      FastCheck.uniqueArray(FastCheck.constantFrom("a", "b", "c", "d", "e")),
      FastCheck.option(FastCheck.array(FastCheck.constantFrom("a", "b", "c", "x")), { nil: undefined }),
      FastCheck.option(FastCheck.array(FastCheck.constantFrom("a", "b", "y")), { nil: undefined })
    ],
    ([tools, allow, deny]) => {
      const policy = { ...(allow === undefined ? {} : { allow }), ...(deny === undefined ? {} : { deny }) }
      const effective = ToolPolicy.effective(tools, policy)
      for (const name of effective) {
        expect(tools).toContain(name)
        expect(deny ?? []).not.toContain(name)
        if (allow !== undefined) expect(allow).toContain(name)
      }
      for (const name of tools) {
        if ((allow === undefined || allow.includes(name)) && !(deny ?? []).includes(name)) {
          expect(effective).toContain(name)
        }
      }
    },
    { fastCheck: { numRuns: 200 } }
  )
})

describe("ToolPolicy through the fake CLI and the real gateway", () => {
  it.live("a tool outside the policy is not listed and a direct call is refused; the next turn sees it again", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        Threads.calls.length = 0
        const restricted = observe(Array.from(
          yield* Stream.runCollect(agent.stream({ input: probe, toolPolicy: { allow: ["lookup_issue"] } }))
        ))
        expect(restricted.listed).toEqual(["lookup_issue"])
        expect(restricted.call?.isError).toBe(true)
        expect(restricted.started?.effectiveTools).toEqual(["lookup_issue"])
        expect(Threads.calls).toEqual([])

        const open = yield* Stream.runCollect(agent.stream(probe))
        const seen = observe(Array.from(open))
        expect(seen.listed).toEqual(["delete_issue", "lookup_issue"])
        expect(seen.call?.isError).toBe(false)
        expect(seen.started?.effectiveTools).toEqual(["delete_issue", "lookup_issue"])
        expect(Threads.calls).toEqual(["delete_issue:ISSUE-1"])

        const denied = yield* agent.run({ input: probe, toolPolicy: { deny: ["delete_issue"] } })
        expect(denied.effectiveTools).toEqual(["lookup_issue"])
        expect(denied.transcript.find((entry) => entry._tag === "ToolCall")).toMatchObject({
          name: "delete_issue",
          isError: true
        })
        expect(Threads.calls).toEqual(["delete_issue:ISSUE-1"])
        // The definition never changed.
        expect(agent.definition.catalog.descriptors.map((descriptor) => descriptor.name)).toEqual([
          "delete_issue",
          "lookup_issue"
        ])
      })
    ))

  it.live("a policy naming a tool the definition lacks fails with InvalidTurn before anything runs", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        Threads.calls.length = 0
        for (const toolPolicy of [{ deny: ["delete_isue"] }, { allow: ["lookup_issue", "nope"] }]) {
          const error = yield* Effect.flip(agent.run({ input: probe, toolPolicy }))
          expect(error._tag).toBe("InvalidTurn")
          expect(error.message).toContain(toolPolicy.deny?.[0] ?? "nope")
        }
        const thread = yield* agent.thread("policy-typo")
        const onThread = yield* Effect.flip(thread.run({ input: probe, toolPolicy: { deny: ["delete_isue"] } }))
        expect(onThread._tag).toBe("InvalidTurn")
        // The refused turn held no lease: the thread's next turn runs.
        yield* thread.run({ input: probe, toolPolicy: { allow: ["lookup_issue"] } })
        expect(Threads.calls).toEqual([])
        // The agent keeps working after the refusals.
        const fine = yield* agent.run({ input: probe, toolPolicy: { deny: ["delete_issue"] } })
        expect(fine.effectiveTools).toEqual(["lookup_issue"])
      })
    ))

  it.live("a built-in tool policy the driver cannot map fails with InvalidTurn before anything runs", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(agent.run({ input: probe, builtinTools: { deny: ["Bash"] } }))
        expect(error).toMatchObject({ _tag: "InvalidTurn", reason: "UnsupportedCapability" })
        const thread = yield* agent.thread("builtin-policy")
        const onThread = yield* Effect.flip(thread.run({ input: probe, builtinTools: { allow: [] } }))
        expect(onThread).toMatchObject({ _tag: "InvalidTurn", reason: "UnsupportedCapability" })
        // The refused turn held no lease: the thread's next turn runs.
        yield* thread.run(probe)
      })
    ))

  it.live("a turn's sandbox level can only narrow the agent's; a level the driver lacks fails before anything runs", () =>
    Effect.gen(function*() {
      const paths = yield* Harness.sandbox
      const other = yield* Harness.sandbox
      yield* Effect.gen(function*() {
        // No level on the agent: the CLI's default, unknown to Tether; only the narrowest level narrows it.
        const agent = yield* Threads.makeAgent(paths, Threads.driver(Threads.makeControl()))
        yield* agent.run({ input: probe, builtinTools: { sandbox: "readOnly" } })
        const widened = yield* Effect.flip(agent.run({ input: probe, builtinTools: { sandbox: "workspaceWrite" } }))
        expect(widened).toMatchObject({ _tag: "InvalidTurn", reason: "PolicyWidened" })
        const thread = yield* agent.thread("sandbox-policy")
        const onThread = yield* Effect.flip(thread.run({ input: probe, builtinTools: { sandbox: "unrestricted" } }))
        expect(onThread).toMatchObject({ _tag: "InvalidTurn", reason: "PolicyWidened" })
        // The refused turn held no lease: the thread's next turn runs.
        yield* thread.run({ input: probe, builtinTools: { sandbox: "readOnly" } })
        // A driver without sandbox levels refuses any.
        const levelless = yield* Threads.makeAgent(other, Threads.driver(Threads.makeControl(), { sandbox: [] }))
        const unsupported = yield* Effect.flip(levelless.run({ input: probe, builtinTools: { sandbox: "readOnly" } }))
        expect(unsupported).toMatchObject({ _tag: "InvalidTurn", reason: "UnsupportedCapability" })
        expect(unsupported.message).toContain("readOnly")
      }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(Threads.ToolsLive, Harness.layer, ThreadStore.layerMemory)))
    }).pipe(Effect.scoped))

  it.live("on a thread the policy applies to that turn only and leaves the fingerprint unchanged", () =>
    withAgent((agent) =>
      Effect.gen(function*() {
        Threads.calls.length = 0
        const before = agent.fingerprint
        const thread = yield* agent.thread("policy")
        const narrowed = yield* thread.run({ input: probe, toolPolicy: { allow: [] } })
        expect(narrowed.effectiveTools).toEqual([])
        expect(Threads.calls).toEqual([])
        const committed = yield* thread.snapshot
        expect(committed._tag === "Some" && committed.value.fingerprint).toBe(before)
        const events = Array.from(yield* Stream.runCollect(thread.stream(probe)))
        expect(observe(events).listed).toEqual(["delete_issue", "lookup_issue"])
        expect(Threads.calls).toEqual(["delete_issue:ISSUE-1"])
        expect(agent.fingerprint).toBe(before)
      })
    ))
})
