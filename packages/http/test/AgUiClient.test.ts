/**
 * The AG-UI route driven by the real `@ag-ui/client` (`HttpAgent`, whose pipeline enforces
 * the `@ag-ui/core` schemas and verifies the event sequence) in front of the real Claude Code CLI
 * (offline, the scripted Anthropic server).
 */
import { type BaseEvent, EventType, HttpAgent, type RunAgentInput, type RunAgentParameters } from "@ag-ui/client"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpRouter from "@effect/platform/HttpRouter"
import { expect, layer } from "@effect/vitest"
import { AgentHttp } from "@tether/http"
import { AnthropicServer, Harness } from "@tether/testing"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { randomUUID } from "node:crypto"
import * as Http from "node:http"
import { authorize, issueAgent, IssueToolsLive, respond as issues } from "./support.js"

/** The text blocks of the last user message that is not a tool result. */
const blocksOf = (request: AnthropicServer.MessagesRequest): ReadonlyArray<string> => {
  for (let i = request.messages.length - 1; i >= 0; i--) {
    const message = request.messages[i]!
    if (message.role !== "user") continue
    if (typeof message.content === "string") return [message.content]
    const blocks = Array.isArray(message.content) ? message.content as ReadonlyArray<Record<string, unknown>> : []
    if (blocks.some((block) => block["type"] === "tool_result")) continue
    return blocks.flatMap((block) => typeof block["text"] === "string" ? [block["text"]] : [])
  }
  return []
}

/** `[echo] X` answers X; everything else as the shared fixture's model. */
const respond: AnthropicServer.Responder = (request) => {
  const echo = blocksOf(request).find((text) => text.startsWith("[echo] "))
  if (echo !== undefined) return AnthropicServer.reply(echo.slice("[echo] ".length))
  return issues(request)
}

class Served extends Context.Tag("test/Served")<Served, {
  readonly url: string
  readonly anthropic: AnthropicServer.AnthropicServer
}>() {}

const served = Layer.scoped(
  Served,
  Effect.gen(function*() {
    const anthropic = yield* AnthropicServer.make({ respond })
    const sandbox = yield* Harness.sandbox
    // Approvals answered by nobody fall back to deny after 2 s.
    const agent = yield* issueAgent(anthropic.url, sandbox, "2 seconds")
    const server = yield* NodeHttpServer.make(() => Http.createServer(), { host: "127.0.0.1", port: 0 })
    const router = yield* AgentHttp.router({
      agent,
      authorize,
      heartbeat: "200 millis",
      reconnectGrace: "300 millis",
      threads: { idleTimeout: "1 second" }
    })
    yield* server.serve(HttpRouter.empty.pipe(HttpRouter.mount("/agent", router)))
    const address = server.address
    if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("not a TCP address")
    return { url: `http://127.0.0.1:${address.port}/agent/agui`, anthropic }
  })
).pipe(Layer.provide([IssueToolsLive, Harness.layer]))

const client = (url: string, threadId: string) =>
  new HttpAgent({ url, headers: { authorization: "Bearer alice" }, threadId })

const runOnce = (agent: HttpAgent, text: string | undefined, parameters?: RunAgentParameters) =>
  Effect.promise(async () => {
    if (text !== undefined) agent.addMessage({ id: randomUUID(), role: "user", content: text })
    const seen: Array<BaseEvent> = []
    const outcome = await agent.runAgent({ runId: randomUUID(), ...parameters }, {
      onEvent: ({ event }) => {
        seen.push(event)
      }
    }).then(() => "ok", (error: unknown) => String(error))
    return { seen, outcome }
  })

const field = (event: BaseEvent, name: string) => (event as unknown as Record<string, unknown>)[name]

layer(served, { excludeTestServices: true, timeout: 120_000 })(
  "AG-UI through the real @ag-ui/client and the real Claude CLI",
  (it) => {
    it.effect("turns back to back on one thread (host tool, built-in denied by the approval deadline, unicode): verified, ids unique", () =>
      Effect.gen(function*() {
        const { url } = yield* Served
        const agent = client(url, "alice/agui-seq")
        const unicode =
          "héllo 🧪 𝔘𝔫𝔦 日本語 עברית\u2028line\u2029para\r\nCRLF \"quoted\" \\ data: {\"type\":\"RUN_ERROR\"}\n\nend"
        const runs = []
        runs.push(yield* runOnce(agent, "Is ISSUE-42 open?"))
        runs.push(yield* runOnce(agent, "[bash] touch nope.txt"))
        runs.push(yield* runOnce(agent, `[echo] ${unicode}`))
        runs.push(yield* runOnce(agent, "Is ISSUE-42 open?"))
        for (const run of runs) {
          expect(run.outcome).toBe("ok")
          expect(run.seen[0]!.type).toBe(EventType.RUN_STARTED)
          expect(run.seen.at(-1)!.type).toBe(EventType.RUN_FINISHED)
        }
        // The built-in call: start/args/end and an error result (denied), approvals as CUSTOM.
        const bash = runs[1]!.seen
        expect(bash.some((e) => e.type === EventType.TOOL_CALL_START && field(e, "toolCallName") === "Bash")).toBe(true)
        expect(bash.filter((e) => e.type === EventType.CUSTOM).map((e) => field(e, "name"))).toEqual([
          "tether.ApprovalRequested",
          "tether.ApprovalResolved"
        ])
        // Unicode and SSE-looking text arrive exactly.
        expect(field(runs[2]!.seen.at(-1)!, "result")).toBe(unicode)
        const all = runs.flatMap((run) => run.seen)
        const messageIds = all.filter((e) => e.type === EventType.TEXT_MESSAGE_START).map((e) => field(e, "messageId"))
        const resultIds = all.filter((e) => e.type === EventType.TOOL_CALL_RESULT).map((e) => field(e, "messageId"))
        const callIds = all.filter((e) => e.type === EventType.TOOL_CALL_START).map((e) => field(e, "toolCallId"))
        expect(callIds.length).toBe(3)
        expect(new Set([...messageIds, ...resultIds]).size).toBe(messageIds.length + resultIds.length)
        expect(new Set(callIds).size).toBe(callIds.length)
        // The client's conversation: message ids unique, the last answer whole.
        const ids = agent.messages.map((m) => m.id)
        expect(new Set(ids).size).toBe(ids.length)
        expect(agent.messages.at(-1)).toMatchObject({ role: "assistant", content: "ISSUE-42 is open." })
      }))

    it.effect("a second run on a thread while one runs is refused (409); after the client aborts, the thread takes a new run", () =>
      Effect.gen(function*() {
        const { url } = yield* Served
        const first = client(url, "alice/agui-busy")
        first.addMessage({ id: randomUUID(), role: "user", content: "[hang] wait" })
        let started = false
        const running = first.runAgent({ runId: randomUUID() }, {
          onRunStartedEvent: () => {
            started = true
          }
        }).then(() => "ok", (error: unknown) => String(error))
        while (!started) yield* Effect.sleep("20 millis")
        const second = yield* runOnce(client(url, "alice/agui-busy"), "Is ISSUE-42 open?")
        expect(second.outcome).toContain("409")
        expect(second.seen).toEqual([])
        first.abortRun()
        yield* Effect.promise(() => running)
        // The aborted run is canceled once its grace (300 ms) is over: the same client goes on.
        let next = { outcome: "", seen: [] as Array<BaseEvent> }
        const t0 = Date.now()
        for (let i = 0; i < 40; i++) {
          next = yield* runOnce(first, i === 0 ? "Is ISSUE-42 open?" : undefined)
          if (next.outcome === "ok") break
          yield* Effect.sleep("250 millis")
        }
        expect(next.outcome).toBe("ok")
        expect(Date.now() - t0).toBeLessThan(5_000)
        expect(first.messages.at(-1)).toMatchObject({ role: "assistant", content: "ISSUE-42 is open." })
      }))

    it.effect("a run offering the client's own tools is refused (400 client_tools_unsupported), nothing runs", () =>
      Effect.gen(function*() {
        const { url, anthropic } = yield* Served
        const before = (yield* anthropic.messages).length
        const response = yield* Effect.promise(() =>
          fetch(url, {
            method: "POST",
            headers: { "content-type": "application/json", authorization: "Bearer alice", accept: "text/event-stream" },
            body: JSON.stringify({
              threadId: "alice/agui-tools",
              runId: "r1",
              messages: [{ id: "u1", role: "user", content: "[echo] use confirm_action if needed" }],
              tools: [{
                name: "confirm_action",
                description: "Ask the user to confirm an action in the browser.",
                parameters: { type: "object", properties: { action: { type: "string" } }, required: ["action"] }
              }],
              context: [],
              state: {}
            })
          }).then(async (r) => ({ status: r.status, body: await r.json() }))
        )
        expect(response).toMatchObject({ status: 400, body: { error: { code: "client_tools_unsupported" } } })
        expect((yield* anthropic.messages).length).toBe(before)
      }))

    it.effect("a long unicode input (27 KB) arrives whole and comes back whole", () =>
      Effect.gen(function*() {
        const { url } = yield* Served
        const long = "ß🧪語".repeat(3_000)
        const run = yield* runOnce(client(url, "alice/agui-long"), `[echo] ${long}`)
        expect(run.outcome).toBe("ok")
        expect(field(run.seen.at(-1)!, "result")).toBe(long)
      }))

    it.effect("bad AG-UI inputs are refused with an HTTP error, nothing runs", () =>
      Effect.gen(function*() {
        const { url } = yield* Served
        const post = (body: unknown) =>
          Effect.promise(() =>
            fetch(url, {
              method: "POST",
              headers: {
                "content-type": "application/json",
                authorization: "Bearer alice",
                accept: "text/event-stream"
              },
              body: JSON.stringify(body)
            }).then(async (r) => [r.status, await r.text()] as const)
          )
        const base = { threadId: "alice/agui-bad", runId: "r1", tools: [], context: [], state: {} }
        expect((yield* post({ ...base, messages: [] }))[0]).toBe(400)
        expect((yield* post({ ...base, messages: [{ id: "a", role: "assistant", content: "hi" }] }))[0]).toBe(400)
        expect((yield* post({ ...base, threadId: 42, messages: [{ id: "u", role: "user", content: "hi" }] }))[0])
          .toBe(400)
        expect((yield* post({ ...base, threadId: "", messages: [{ id: "u", role: "user", content: "hi" }] }))[0])
          .toBe(404)
      }))

    it.effect("a client asking for the protobuf encoding (Accept) still gets a stream it can read", () =>
      Effect.gen(function*() {
        const { url } = yield* Served
        const response = yield* Effect.promise(() =>
          fetch(url, {
            method: "POST",
            headers: {
              "content-type": "application/json",
              authorization: "Bearer alice",
              accept: "application/vnd.ag-ui.event+proto"
            },
            body: JSON.stringify({
              threadId: "alice/agui-proto",
              runId: "r1",
              tools: [],
              context: [],
              messages: [{ id: "u", role: "user", content: "[echo] proto?" }]
            })
          })
        )
        const type = response.headers.get("content-type")
        const body = yield* Effect.promise(() => response.arrayBuffer())
        // The content type says what the body is.
        const text = new TextDecoder().decode(body)
        if (type?.startsWith("text/event-stream")) expect(text).toContain("\"RUN_FINISHED\"")
        else expect(type).toBe("application/vnd.ag-ui.event+proto")
        // And the real client, when it asks for protobuf, gets a run it verifies.
        class ProtoAgent extends HttpAgent {
          protected override requestInit(input: RunAgentInput): RequestInit {
            const init = super.requestInit(input)
            return {
              ...init,
              headers: { ...(init.headers as Record<string, string>), Accept: "application/vnd.ag-ui.event+proto" }
            }
          }
        }
        const agent = new ProtoAgent({ url, headers: { authorization: "Bearer alice" }, threadId: "alice/agui-proto2" })
        const run = yield* runOnce(agent, "[echo] proto!")
        expect(run.outcome).toBe("ok")
        expect(field(run.seen.at(-1)!, "result")).toBe("proto!")
      }))
  }
)
