/**
 * What a reader of a served run gets when the run outpaces it: every event in order (the run
 * waits for a connected reader rather than dropping it), and, over AG-UI, the assistant's
 * complete text even when text deltas were dropped on the way. The agent runs the testing
 * package's reference driver in live mode (a real process per thread) with scripted output; the
 * router is in a real server on 127.0.0.1, read with `fetch` and the official `@ag-ui/client`.
 */
import { type BaseEvent, EventType, HttpAgent } from "@ag-ui/client"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { expect, layer } from "@effect/vitest"
import { Agent } from "@tether/core"
import { AgentHttp } from "@tether/http"
import { Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { randomUUID } from "node:crypto"
import * as Http from "node:http"
import { authorize, events, readUntil } from "./support.js"

const alice = { authorization: "Bearer alice" }

/** The words of a scripted answer of `count` deltas: `w0 w1 … ` (each delta one word). */
const words = (count: number, size = 0) => Array.from({ length: count }, (_, i) => `w${i} `.padEnd(size, "x"))

/**
 * The scripted provider: `deltas <n>` streams n text deltas, then the assistant `Message` with
 * the whole text; `lag <n> <ms>` does the same but waits `ms` between the deltas and the message.
 */
const respond = (prompt: string): ReadonlyArray<Reference.Step> => {
  const match = /^(deltas|lag|big) (\d+)(?: (\d+))?$/.exec(prompt)
  if (match === null) return Reference.answer(prompt)
  const parts = words(Number(match[2]), match[1] === "big" ? Number(match[3]) : 0)
  const text = parts.join("")
  return [
    { _tag: "SessionStarted", sessionId: "s", model: "reference-model" },
    ...parts.map((part): Reference.Step => ({ _tag: "TextDelta", text: part })),
    ...(match[1] === "lag" ? [{ _tag: "$sleep", ms: Number(match[3]) } as const] : []),
    { _tag: "Message", role: "assistant", text },
    {
      _tag: "Terminal",
      ok: true,
      text,
      usage: { inputTokens: 1, outputTokens: parts.length },
      model: "reference-model",
      session: "s",
      error: undefined,
      raw: {}
    }
  ]
}

class Agents extends Context.Tag("test/Agents")<Agents, {
  /** The agent with the default event policy (deltas dropped when its consumer lags). */
  readonly lossy: Agent.Agent
  /** The agent with `events: { blocking: true }`. */
  readonly blocking: Agent.Agent
}>() {}

const agents = Layer.scoped(
  Agents,
  Effect.gen(function*() {
    const make = (events?: Agent.Options<typeof Toolkit.empty>["events"]) =>
      Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        return yield* Agent.make({
          driver: Reference.driver({ live: true, respond }),
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection,
          processes: { killGrace: "500 millis" },
          ...(events === undefined ? {} : { events })
        })
      })
    return { lossy: yield* make(), blocking: yield* make({ blocking: true }) }
  })
).pipe(Layer.provide(Harness.layer))

/** An agent of the test's own (the reference driver, live), closed with the test's scope. */
const ownAgent = (options: Partial<Agent.Options<typeof Toolkit.empty>> = {}) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const agent = yield* Agent.make({
      driver: Reference.driver({ live: true, respond }),
      definition: { instructions: "", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection,
      processes: { killGrace: "500 millis" },
      ...options
    })
    return { agent, sandbox }
  })

/** A router of `agent` in a server of its own on 127.0.0.1, both in the current scope. */
const serve = (
  agent: Agent.Agent,
  options: Omit<AgentHttp.Options<string, never>, "agent" | "authorize"> = {}
) =>
  Effect.gen(function*() {
    const server = yield* NodeHttpServer.make(() => Http.createServer(), { host: "127.0.0.1", port: 0 })
    yield* server.serve(yield* AgentHttp.router({ threads: { idleTimeout: "1 second" }, ...options, agent, authorize }))
    return `http://127.0.0.1:${(server.address as { readonly port: number }).port}`
  })

/**
 * A turn posted by a client that reads the first bytes of its stream, then no more: the connection
 * stays open and its buffers fill up. The request is destroyed when the scope closes.
 */
const stalledTurn = (origin: string, key: string, input: string) =>
  Effect.acquireRelease(
    Effect.async<Http.ClientRequest>((resume) => {
      const req = Http.request({
        host: "127.0.0.1",
        port: new URL(origin).port,
        method: "POST",
        path: `/threads/${encodeURIComponent(key)}/turns`,
        agent: false,
        headers: { ...alice, "content-type": "application/json" }
      }, (res) => res.once("data", () => resume(Effect.succeed(req))).once("data", () => res.pause()))
      req.end(JSON.stringify({ input }))
    }),
    (req) => Effect.sync(() => req.destroy())
  )

const postTurn = (origin: string, key: string, input: string) =>
  Effect.promise(() =>
    fetch(`${origin}/threads/${encodeURIComponent(key)}/turns`, {
      method: "POST",
      headers: { ...alice, "content-type": "application/json" },
      body: JSON.stringify({ input })
    })
  )

/** A response whose body is read one chunk per `ms`: a client on a slow connection. */
const slowly = (response: Response, ms: number): Response => {
  const reader = response.body!.getReader()
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      await new Promise((resolve) => setTimeout(resolve, ms))
      const { done, value } = await reader.read()
      if (done) controller.close()
      else controller.enqueue(value)
    },
    cancel: (reason) => reader.cancel(reason)
  }, { highWaterMark: 0 })
  return new Response(body, { status: response.status, headers: response.headers })
}

/** Runs one AG-UI turn with `@ag-ui/client`, its response read slowly. */
const agUiTurn = (origin: string, threadId: string, input: string, ms: number) =>
  Effect.promise(async () => {
    const agent = new HttpAgent({
      url: `${origin}/agui`,
      headers: alice,
      threadId,
      initialMessages: [{ id: randomUUID(), role: "user", content: input }],
      fetch: (url: string, init: RequestInit) => fetch(url, init).then((response) => slowly(response, ms))
    })
    const seen: Array<BaseEvent> = []
    await agent.runAgent({ runId: randomUUID() }, { onEvent: ({ event }) => void seen.push(event) })
    return { agent, seen }
  })

layer(agents, { excludeTestServices: true, timeout: 120_000 })("a served run and a reader slower than it", (it) => {
  it.effect("AG-UI: the client's assistant message is the complete text though deltas were dropped on the way", () =>
    Effect.gen(function*() {
      const { lossy } = yield* Agents
      // The router's defaults; a client reading one chunk per millisecond.
      const origin = yield* serve(lossy)
      const full = words(3000).join("")
      const { agent, seen } = yield* agUiTurn(origin, "alice/agui-lossy", "deltas 3000", 1)
      const finished = seen.at(-1) as unknown as { readonly type: string; readonly result?: string }
      expect(finished.type).toBe(EventType.RUN_FINISHED)
      expect(finished.result).toBe(full)
      const last = agent.messages.at(-1)!
      expect(last.role).toBe("assistant")
      expect(last.content).toBe(full)
      // The user's message is still there, once.
      expect(agent.messages.filter((message) => message.role === "user")).toHaveLength(1)
    }).pipe(Effect.scoped))

  it.effect("a requester reading normally never gets events_expired: the run is not canceled", () =>
    Effect.gen(function*() {
      const { lossy } = yield* Agents
      // A buffer much smaller than what the script emits at once, then a pause longer than the grace.
      const origin = yield* serve(lossy, { replay: 16, reconnectGrace: "2 seconds" })
      const response = yield* postTurn(origin, "alice/lag", "lag 50 4000")
      const frames = events(yield* Effect.promise(() => readUntil(response)))
      expect(frames.filter((frame) => frame.event === "error")).toEqual([])
      const finished = frames.at(-1)!
      expect(finished.event).toBe("RunFinished")
      expect(finished.data.outcome).toBe("success")
      // Every event in order; what the agent's policy dropped is counted.
      const ids = frames.map((frame) => Number(frame.id))
      expect(ids).toEqual([...ids].sort((a, b) => a - b))
      const deltas = frames.filter((frame) => frame.event === "TextDelta").length
      const dropped = frames.filter((frame) => frame.event === "Dropped").reduce((n, f) => n + f.data.count, 0)
      expect(deltas + dropped).toBe(50)
    }).pipe(Effect.scoped))

  it.effect("a reader that stops reading holds its run, yet DELETE ends the run at once", () =>
    Effect.gen(function*() {
      const { lossy } = yield* Agents
      const origin = yield* serve(lossy, { replay: 16 })
      const path = `${origin}/threads/alice%2Fstalled`
      // A client that reads the first bytes, then no more: the connection stays open, its buffers fill up.
      const stalled = yield* stalledTurn(origin, "alice/stalled", "big 2000 8192")
      expect(stalled.destroyed).toBe(false)
      const runOf = Effect.promise(() =>
        fetch(path, { headers: alice }).then((r) => r.json() as Promise<{ readonly run?: string }>)
      )
      const runId = (yield* runOf).run!
      expect(typeof runId).toBe("string")
      // Held: the script is done in well under this when read.
      yield* Effect.sleep("3 seconds")
      expect((yield* runOf).run).toBe(runId)
      const started = Date.now()
      const deleted = yield* Effect.promise(() => fetch(`${path}/runs/${runId}`, { method: "DELETE", headers: alice }))
      expect(deleted.status).toBe(204)
      expect(Date.now() - started).toBeLessThan(5_000)
      expect((yield* runOf).run).toBeUndefined()
    }).pipe(Effect.scoped))

  it.effect("a reader that stops reading cannot hold the agent's close", () =>
    Effect.gen(function*() {
      // An agent of its own, closed here while the router still serves it.
      const { agent, sandbox } = yield* ownAgent()
      const origin = yield* serve(agent, { replay: 16 })
      const path = `${origin}/threads/alice%2Fheld`
      yield* stalledTurn(origin, "alice/held", "big 2000 8192")
      const runOf = Effect.promise(() =>
        fetch(path, { headers: alice }).then((r) => r.json() as Promise<{ readonly run?: string }>)
      )
      expect(typeof (yield* runOf).run).toBe("string")
      // Held by the reader: the run's events fill the router's buffer and the agent's.
      yield* Effect.sleep("2 seconds")
      const started = Date.now()
      const closed = yield* Effect.either(agent.close({ timeout: "10 seconds" }))
      expect(closed._tag).toBe("Right")
      expect(Date.now() - started).toBeLessThan(5_000)
      expect(yield* Harness.entries(sandbox.root)).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(Harness.layer)))

  it.effect("input into a run of an agent whose turns cannot take it is 409 input_unsupported; the run goes on", () =>
    Effect.gen(function*() {
      // One-shot turns: the turn's process reads no input after its prompt.
      const { agent } = yield* ownAgent({ live: { threads: false } })
      const origin = yield* serve(agent)
      const response = yield* postTurn(origin, "alice/one-shot", "lag 1 1500")
      const path = `${origin}/threads/alice%2Fone-shot`
      const { run } = yield* Effect.promise(() =>
        fetch(path, { headers: alice }).then((r) => r.json() as Promise<{ readonly run: string }>)
      )
      const sent = yield* Effect.promise(() =>
        fetch(`${path}/runs/${run}/input`, {
          method: "POST",
          headers: { ...alice, "content-type": "application/json" },
          body: JSON.stringify({ input: "more" })
        }).then(async (r) => [r.status, await r.json()] as const)
      )
      expect(sent).toEqual([409, {
        error: { code: "input_unsupported", message: "This agent's turns cannot take input while they run." }
      }])
      const frames = events(yield* Effect.promise(() => readUntil(response)))
      expect(frames.at(-1)!.data.outcome).toBe("success")
    }).pipe(Effect.scoped, Effect.provide(Harness.layer)))

  it.effect("a slow reader gets every event of an agent with events.blocking, in order, and the run's success", () =>
    Effect.gen(function*() {
      const { blocking } = yield* Agents
      const origin = yield* serve(blocking, { replay: 16, reconnectGrace: 0 })
      const response = slowly(yield* postTurn(origin, "alice/slow-reader", "deltas 2000"), 1)
      const frames = events(yield* Effect.promise(() => readUntil(response)))
      expect(frames.filter((frame) => frame.event === "error" || frame.event === "Dropped")).toEqual([])
      expect(frames.filter((frame) => frame.event === "TextDelta").map((frame) => frame.data.text)).toEqual(
        words(2000)
      )
      const ids = frames.map((frame) => Number(frame.id))
      expect(ids).toEqual(ids.map((_, i) => ids[0]! + i))
      expect(frames.at(-1)!.data.outcome).toBe("success")
    }).pipe(Effect.scoped))
})
