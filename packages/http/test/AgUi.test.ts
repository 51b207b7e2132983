/**
 * The AG-UI endpoint, driven by the official `@ag-ui/client` (`HttpAgent`, which also verifies
 * the event sequence), in front of the real Claude Code CLI (offline).
 */
import { type BaseEvent, EventType, HttpAgent, type Message } from "@ag-ui/client"
import { EventEncoder } from "@ag-ui/encoder"
import { describe, expect, it, layer } from "@effect/vitest"
import { Event, Result } from "@tether/core"
import { AgUi } from "@tether/http"
import { Harness } from "@tether/testing"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { randomUUID } from "node:crypto"
import { Fixture, layer as fixture } from "./support.js"

const agentFor = (origin: string, threadId: string, text: string, authorization = "Bearer alice") =>
  new HttpAgent({
    url: `${origin}/agent/agui`,
    headers: { authorization },
    threadId,
    initialMessages: [{ id: randomUUID(), role: "user", content: text }]
  })

const run = (agent: HttpAgent) =>
  Effect.promise(async () => {
    const seen: Array<BaseEvent> = []
    const outcome = await agent.runAgent({ runId: randomUUID() }, {
      onEvent: ({ event }) => {
        seen.push(event)
      }
    }).then((result) => ({ ok: true as const, result }), (error: unknown) => ({ ok: false as const, error }))
    return { seen, outcome }
  })

layer(fixture, { excludeTestServices: true, timeout: 60_000 })("AG-UI through @ag-ui/client", (it) => {
  it.effect("a turn arrives as RUN_STARTED, text messages, a tool call with its result, RUN_FINISHED", () =>
    Effect.gen(function*() {
      const { origin } = yield* Fixture
      const agent = agentFor(origin, "alice/agui", "Is ISSUE-42 open?")
      const { seen, outcome } = yield* run(agent)
      expect(outcome.ok).toBe(true)
      const types = seen.map((event) => event.type)
      expect(types[0]).toBe(EventType.RUN_STARTED)
      expect(types[types.length - 1]).toBe(EventType.RUN_FINISHED)
      const calls = types.filter((type) => type.startsWith("TOOL_CALL"))
      expect(calls).toEqual([
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_ARGS,
        EventType.TOOL_CALL_END,
        EventType.TOOL_CALL_RESULT
      ])
      expect(types).toContain(EventType.TEXT_MESSAGE_START)
      expect(types).toContain(EventType.TEXT_MESSAGE_CONTENT)
      expect(types).toContain(EventType.TEXT_MESSAGE_END)
      const start = seen.find((event) => event.type === EventType.TOOL_CALL_START) as unknown as {
        readonly toolCallName: string
      }
      expect(start.toolCallName).toBe("lookup_issue")
      const args = seen.find((event) => event.type === EventType.TOOL_CALL_ARGS) as unknown as {
        readonly delta: string
      }
      expect(JSON.parse(args.delta)).toEqual({ key: "ISSUE-42" })
      const finished = seen.at(-1) as unknown as {
        readonly threadId: string
        readonly result: string
        readonly usage: ReadonlyArray<{ readonly provider: string }>
      }
      expect(finished.threadId).toBe("alice/agui")
      expect(finished.result).toBe("ISSUE-42 is open.")
      expect(finished.usage[0]!.provider).toBe("claude")
      // The client assembled the conversation: the tool's result and the final answer.
      const messages = agent.messages
      const tool = messages.find((message) => message.role === "tool")
      expect(String(tool?.content)).toContain("open")
      expect(messages.at(-1)).toMatchObject({ role: "assistant", content: "ISSUE-42 is open." })
    }))

  it.effect("a provider failure is RUN_ERROR with the RunError reason and a fixed message", () =>
    Effect.gen(function*() {
      const { origin } = yield* Fixture
      const { seen } = yield* run(agentFor(origin, "alice/agui-fail", "[fail] now"))
      const last = seen.at(-1) as unknown as { readonly type: string; readonly code: string; readonly message: string }
      expect(last.type).toBe(EventType.RUN_ERROR)
      expect(last.code).toBe("ProviderFailed")
      expect(last.message).toBe("The model provider reported a failure.")
    }))

  it.effect("a thread the principal may not use is refused before anything runs", () =>
    Effect.gen(function*() {
      const { agent: tether, origin } = yield* Fixture
      // Earlier threads' warm processes may still be there (until their idle handles close).
      const before = yield* Harness.markedProcesses(tether.marker)
      const { outcome, seen } = yield* run(agentFor(origin, "bob/agui", "Is ISSUE-42 open?"))
      expect(outcome.ok).toBe(false)
      expect(String((outcome as { readonly error: unknown }).error)).toContain("HTTP 404")
      expect(seen).toEqual([])
      const started = (yield* Harness.markedProcesses(tether.marker)).filter((pid) => !before.includes(pid))
      expect(started).toEqual([])
    }))

  it.effect("authentication runs before the body is read", () =>
    Effect.gen(function*() {
      const { origin } = yield* Fixture
      const answer = yield* Effect.promise(() =>
        fetch(`${origin}/agent/agui`, { method: "POST", headers: { "content-type": "application/json" }, body: "{" })
      )
      expect(answer.status).toBe(401)
    }))

  it.effect("an aborted client cancels the run: nothing is left", () =>
    Effect.gen(function*() {
      const { agent: tether, origin } = yield* Fixture
      const before = yield* Harness.markedProcesses(tether.marker)
      const agent = agentFor(origin, "alice/agui-abort", "[hang] wait")
      const running = agent.runAgent({ runId: randomUUID() }).catch(() => undefined)
      // The CLI is up and waiting for the model: now the client goes away.
      while ((yield* Harness.markedProcesses(tether.marker)).every((pid) => before.includes(pid))) {
        yield* Effect.sleep("50 millis")
      }
      agent.abortRun()
      yield* Effect.promise(() => running)
      // The canceled turn's warm process goes once the thread's handle has been idle for 1 s.
      let left = yield* Harness.markedProcesses(tether.marker)
      for (let i = 0; i < 200 && left.length > 0; i++) {
        yield* Effect.sleep("50 millis")
        left = yield* Harness.markedProcesses(tether.marker)
      }
      expect(left).toEqual([])
    }))
})

describe("AgUi.fromEvents", () => {
  const base = { runId: "r", time: 1 }
  const result = new Result.Result({
    runId: "r",
    provider: "p",
    text: "whole",
    transcript: [],
    raw: new Result.Raw({ stdout: "", stderr: "", stdoutBytes: 0, stderrBytes: 0 }),
    effectiveTools: [],
    instructions: ""
  })

  it.effect("a client conversation nested past the call stack is not restated, and the stream never fails", () =>
    Effect.gen(function*() {
      const depth = 200_000
      const deep: unknown = JSON.parse("[".repeat(depth) + "]".repeat(depth))
      const messages = [{ id: "m0", role: "user", content: "hi", extra: deep }] as unknown as ReadonlyArray<Message>
      const types = (given: ReadonlyArray<Message>) =>
        Effect.map(
          Stream.runCollect(AgUi.fromEvents({ threadId: "t", runId: "r" }, { messages: given })(Stream.empty)),
          (events) => Chunk.toReadonlyArray(events).map((event) => event.type)
        )
      // As for a plain conversation: the source's end without a result, told in AG-UI.
      expect(yield* types(messages)).toEqual(yield* types([{ id: "m0", role: "user", content: "hi" }]))
    }))

  it.effect("a message that arrives whole, and a retried run, make one well-formed AG-UI run", () =>
    Effect.gen(function*() {
      const tether = [
        new Event.RunStarted({ ...base, sequence: 0, provider: "p", effectiveTools: [], instructions: "" }),
        new Event.RunFinished({
          ...base,
          sequence: 1,
          outcome: "failure",
          durationMs: 1,
          reason: "ProtocolError",
          result
        }),
        new Event.RunStarted({ ...base, sequence: 0, provider: "p", effectiveTools: [], instructions: "" }),
        new Event.Message({ ...base, sequence: 1, role: "assistant", text: "whole" }),
        new Event.RunFinished({ ...base, sequence: 2, outcome: "success", durationMs: 1, result })
      ]
      const out = yield* Stream.fromIterable(tether).pipe(
        AgUi.fromEvents({ threadId: "t", runId: "a" }),
        Stream.runCollect
      )
      expect(Chunk.toReadonlyArray(out).map((event) => event.type)).toEqual([
        EventType.RUN_STARTED,
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.RUN_FINISHED
      ])
    }))

  const started = new Event.RunStarted({ ...base, sequence: 0, provider: "p", effectiveTools: [], instructions: "" })
  const delta = (sequence: number, text: string) => new Event.TextDelta({ ...base, sequence, text })
  const message = (sequence: number, text: string) => new Event.Message({ ...base, sequence, role: "assistant", text })
  const success = (sequence: number) =>
    new Event.RunFinished({ ...base, sequence, outcome: "success", durationMs: 1, result })
  const user: Message = { id: "u1", role: "user", content: "Is ISSUE-42 open?" }

  /** The AG-UI events of `tether`, and the messages `@ag-ui/client` assembles from them. */
  const through = (tether: ReadonlyArray<Event.Event>, options?: AgUi.Options) =>
    Effect.gen(function*() {
      const sent = Chunk.toReadonlyArray(
        yield* Stream.fromIterable(tether).pipe(
          AgUi.fromEvents({ threadId: "t", runId: "a" }, options),
          Stream.runCollect
        )
      )
      const encoder = new EventEncoder()
      const body = sent.map((event) => encoder.encodeSSE(event)).join("")
      const messages = yield* Effect.promise(async () => {
        const client = new HttpAgent({
          url: "http://127.0.0.1:9/unused",
          threadId: "t",
          initialMessages: [user],
          fetch: async () => new Response(body, { headers: { "content-type": "text/event-stream" } })
        })
        await client.runAgent({ runId: "a" })
        return client.messages
      })
      return { sent, messages }
    })

  it.effect("deltas dropped at the end: the rest of the Message's text follows before TEXT_MESSAGE_END", () =>
    Effect.gen(function*() {
      const { messages, sent } = yield* through([
        started,
        delta(1, "ISSUE-42 "),
        message(2, "ISSUE-42 is open."),
        success(3)
      ])
      expect(sent.map((event) => event.type)).toEqual([
        EventType.RUN_STARTED,
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.RUN_FINISHED
      ])
      expect((sent[3] as unknown as { readonly delta: string }).delta).toBe("is open.")
      expect(messages.map((m) => [m.role, m.content])).toEqual([["user", user.content], [
        "assistant",
        "ISSUE-42 is open."
      ]])
    }))

  it.effect("deltas dropped in the middle: a MESSAGES_SNAPSHOT gives the client the complete text, its conversation kept", () =>
    Effect.gen(function*() {
      const call = new Event.ToolCall({
        ...base,
        sequence: 1,
        phase: "start",
        callId: "c1",
        name: "lookup_issue",
        source: "host",
        input: { key: "ISSUE-42" }
      })
      const ended = new Event.ToolCall({
        ...base,
        sequence: 2,
        phase: "end",
        callId: "c1",
        name: "lookup_issue",
        source: "host",
        output: { state: "open" },
        isError: true
      })
      const tether = [
        started,
        call,
        ended,
        delta(3, "ISSUE-42 "),
        // "is " was dropped under backpressure.
        delta(5, "open."),
        new Event.Dropped({ ...base, sequence: 5, count: 1, kinds: ["TextDelta"] }),
        message(6, "ISSUE-42 is open."),
        success(7)
      ]
      const { messages, sent } = yield* through(tether, { messages: [user] })
      const types = sent.map((event) => event.type)
      expect(types.slice(-3)).toEqual([EventType.TEXT_MESSAGE_END, EventType.MESSAGES_SNAPSHOT, EventType.RUN_FINISHED])
      // What the client holds: its own message, the call, its result (with its metadata), the whole text.
      expect(messages).toHaveLength(4)
      expect(messages[0]).toEqual(user)
      expect(messages[1]).toMatchObject({
        role: "assistant",
        toolCalls: [{ id: "c1", function: { name: "lookup_issue" } }]
      })
      expect(messages[2]).toMatchObject({ role: "tool", toolCallId: "c1", metadata: { tether: { isError: true } } })
      expect(messages[3]).toMatchObject({ role: "assistant", content: "ISSUE-42 is open." })
      // Without the client's conversation, the complete text comes as a message of its own.
      const bare = yield* through(tether)
      expect(bare.sent.map((event) => event.type)).not.toContain(EventType.MESSAGES_SNAPSHOT)
      expect(bare.messages[0]).toEqual(user)
      expect(bare.messages.at(-1)).toMatchObject({ role: "assistant", content: "ISSUE-42 is open." })
    }))

  it.effect("a source that fails before RunFinished ends with RUN_ERROR, not a failure", () =>
    Effect.gen(function*() {
      const out = yield* Stream.make(
        new Event.RunStarted({ ...base, sequence: 0, provider: "p", effectiveTools: [], instructions: "" }),
        new Event.TextDelta({ ...base, sequence: 1, text: "par" })
      ).pipe(Stream.concat(Stream.fail("broken")), AgUi.fromEvents({ threadId: "t", runId: "a" }), Stream.runCollect)
      expect(Chunk.toReadonlyArray(out).map((event) => event.type)).toEqual([
        EventType.RUN_STARTED,
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.RUN_ERROR
      ])
    }))
})
