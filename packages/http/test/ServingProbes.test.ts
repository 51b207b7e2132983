/**
 * `AgentHttp.router` in a real server on 127.0.0.1 with the reference driver (live, a real process
 * per thread): many readers of one run each get every event once, odd routes and bodies get typed
 * JSON errors (never a 500) and odd keys round-trip, and closing the server with an AG-UI client
 * (the real `@ag-ui/client`) and SSE readers open ends them all and leaves nothing, without waiting
 * out the server's keep-alive (an SSE response closes its connection when it ends). A router whose
 * scope has closed (the documented shutdown order closes it before the server) answers every
 * request `503 agent_closed`, those that read a body too (they waited forever on a fiber its closed
 * set never ran). The router's limits: `threads.max` after a burst of concurrent turns on distinct
 * keys (the keys over the cap close as they go idle), concurrent turns on one key (exactly one runs,
 * the others `409 thread_busy`), and a finished run's events read after its key's handle closed.
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
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"
import * as Http from "node:http"
import { authorize, events, readUntil } from "./support.js"

const alice = { authorization: "Bearer alice" }
const json = { "content-type": "application/json" }

/** `slow <n> <ms>`: n deltas, `ms` between each; `hang`: never answers; anything else echoes. */
const respond = (prompt: string): ReadonlyArray<Reference.Step> => {
  if (prompt === "hang") return [{ _tag: "SessionStarted", sessionId: "s", model: "m" }, { _tag: "$hang" }]
  const match = /^slow (\d+) (\d+)$/.exec(prompt)
  if (match === null) return Reference.answer(prompt)
  const parts = Array.from({ length: Number(match[1]) }, (_, i) => `w${i} `)
  const text = parts.join("")
  return [
    { _tag: "SessionStarted", sessionId: "s", model: "reference-model" },
    ...parts.flatMap((part): Array<Reference.Step> => [
      { _tag: "TextDelta", text: part },
      { _tag: "$sleep", ms: Number(match[2]) }
    ]),
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

class Tether extends Context.Tag("test/ServingProbesTether")<Tether, Agent.Agent>() {}

const agentLayer = Layer.scoped(
  Tether,
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    return yield* Agent.make({
      driver: Reference.driver({ live: true, respond }),
      definition: { instructions: "", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection,
      processes: { killGrace: "500 millis" }
    })
  })
).pipe(Layer.provide(Harness.layer))

/** A server and its router (inside the server's lifetime, as documented) in `scope`. */
const serveIn = (scope: Scope.Scope, options: Omit<AgentHttp.Options<string, never>, "agent" | "authorize"> = {}) =>
  Effect.gen(function*() {
    const agent = yield* Tether
    // A long keep-alive: a connection kept open after its SSE stream ended would hold the server's
    // close for that long (Node's `close` ends only the connections idle when it is called).
    const server = yield* NodeHttpServer.make(() => Http.createServer({ keepAliveTimeout: 60_000 }), {
      host: "127.0.0.1",
      port: 0
    })
    yield* server.serve(
      yield* AgentHttp.router({
        threads: { idleTimeout: "1 second" },
        reconnectGrace: "300 millis",
        ...options,
        agent,
        authorize
      })
    )
    return `http://127.0.0.1:${(server.address as { readonly port: number }).port}`
  }).pipe(Scope.extend(scope))

const noProcessLeft = Effect.gen(function*() {
  const agent = yield* Tether
  for (let i = 0; i < 200; i++) {
    if ((yield* Harness.markedProcesses(agent.marker)).length === 0) return true
    yield* Effect.sleep("50 millis")
  }
  return false
})

const get = (origin: string, path: string, headers: Record<string, string> = {}) =>
  Effect.promise(() => fetch(`${origin}${path}`, { headers: { ...alice, ...headers } }))

const post = (origin: string, path: string, body: unknown, headers: Record<string, string> = json) =>
  Effect.promise(() =>
    fetch(`${origin}${path}`, {
      method: "POST",
      headers: { ...alice, ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body)
    })
  )

const status = (response: Response) =>
  Effect.promise(async () => {
    const text = await response.text()
    let code: string | undefined
    try {
      code = JSON.parse(text).error?.code
    } catch {
      code = `non-JSON: ${text.slice(0, 40)}`
    }
    return `${response.status} ${code}`
  })

/** The ids of the frames: strictly increasing, each once. */
const strictlyIncreasing = (ids: ReadonlyArray<number>) => ids.every((id, i) => i === 0 || id > ids[i - 1]!)

const turn = (origin: string, key: string, input: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${origin}/threads/${encodeURIComponent(key)}/turns`, {
      method: "POST",
      headers: { ...alice, ...json },
      body: JSON.stringify({ input })
    })
    if (response.status !== 200) return { status: response.status, body: await response.text(), frames: [] }
    return { status: 200, body: "", frames: events(await readUntil(response)) }
  })

const processes = Effect.flatMap(Tether, (agent) => Harness.markedProcesses(agent.marker))

const settleTo = (count: number) =>
  Effect.gen(function*() {
    let now = (yield* processes).length
    for (let i = 0; i < 60 && now > count; i++) {
      yield* Effect.sleep("50 millis")
      now = (yield* processes).length
    }
    return now
  })

layer(agentLayer, { excludeTestServices: true, timeout: 60_000 })(
  "serving: many readers, odd input, close with streams open",
  (it) => {
    it.effect("many concurrent readers of one run each get every event once, in order, like the requester", () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const origin = yield* serveIn(scope)
        const response = yield* post(origin, "/threads/alice%2Fmany/turns", { input: "slow 30 20" })
        expect(response.status).toBe(200)
        const reader = response.body!.getReader()
        const decoder = new TextDecoder()
        let text = ""
        while (!text.includes("event: RunStarted")) {
          text += decoder.decode((yield* Effect.promise(() => reader.read())).value)
        }
        const runId = /"runId":"([^"]+)"/.exec(text)![1]!
        const path = `/threads/alice%2Fmany/runs/${runId}/events`
        const readers = yield* Effect.forEach(
          Array.from({ length: 8 }, (_, i) => i),
          (i) =>
            Effect.flatMap(
              get(origin, path, i % 2 === 0 ? {} : { "last-event-id": "0" }),
              (r) => Effect.promise(() => readUntil(r))
            ),
          { concurrency: "unbounded" }
        ).pipe(Effect.fork)
        let rest = text
        for (;;) {
          const chunk = yield* Effect.promise(() => reader.read())
          if (chunk.done) break
          rest += decoder.decode(chunk.value, { stream: true })
        }
        const { parseFrames } = yield* Effect.promise(() => import("./support.js"))
        const mine = events(parseFrames(rest))
        const theirs = (yield* Fiber.join(readers)).map(events)
        const ids = mine.map((frame) => Number(frame.id))
        expect(strictlyIncreasing(ids)).toBe(true)
        expect(mine.at(-1)!.event).toBe("RunFinished")
        expect(mine.filter((f) => f.event === "TextDelta")).toHaveLength(30)
        theirs.forEach((frames, i) => {
          const expected = i % 2 === 0 ? mine : mine.slice(1)
          expect(frames.map((frame) => frame.id)).toEqual(expected.map((frame) => frame.id))
          expect(frames.map((frame) => frame.data)).toEqual(expected.map((frame) => frame.data))
        })
        yield* Scope.close(scope, Exit.void)
      }))

    it.effect("odd routes and bodies get typed JSON errors, never a 500; odd keys round-trip", () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const origin = yield* serveIn(scope)
        const answers: Record<string, string> = {}
        const method = (m: string, path: string) =>
          Effect.flatMap(
            Effect.promise(() => fetch(`${origin}${path}`, { method: m, headers: alice })),
            status
          )
        answers["PUT turns"] = yield* method("PUT", "/threads/alice%2Fx/turns")
        answers["PATCH key"] = yield* method("PATCH", "/threads/alice%2Fx")
        answers["GET turns"] = yield* method("GET", "/threads/alice%2Fx/turns")
        answers["DELETE unknown run"] = yield* method("DELETE", "/threads/alice%2Fx/runs/nope")
        answers["GET unknown run"] = yield* method("GET", "/threads/alice%2Fx/runs/nope/events")
        answers["GET trailing slash"] = yield* method("GET", "/threads/alice%2Fx/")
        answers["bad json"] = yield* Effect.flatMap(post(origin, "/threads/alice%2Fx/turns", "{"), status)
        answers["json null"] = yield* Effect.flatMap(post(origin, "/threads/alice%2Fx/turns", "null"), status)
        answers["input number"] = yield* Effect.flatMap(post(origin, "/threads/alice%2Fx/turns", { input: 1 }), status)
        answers["no content-type"] = yield* Effect.flatMap(
          post(origin, "/threads/alice%2Fx/turns", { input: "a" }, {}),
          status
        )
        answers["agui text/plain"] = yield* Effect.flatMap(
          post(origin, "/agui", "{}", { "content-type": "text/plain" }),
          status
        )
        answers["agui null"] = yield* Effect.flatMap(post(origin, "/agui", "null"), status)
        answers["agui no messages"] = yield* Effect.flatMap(
          post(origin, "/agui", { threadId: "alice/x", runId: "r", messages: [] }),
          status
        )
        answers["agui last assistant"] = yield* Effect.flatMap(
          post(origin, "/agui", {
            threadId: "alice/x",
            runId: "r",
            messages: [{ id: "1", role: "assistant", content: "a" }]
          }),
          status
        )
        answers["agui foreign"] = yield* Effect.flatMap(
          post(origin, "/agui", { threadId: "bob/x", runId: "r", messages: [{ id: "1", role: "user", content: "a" }] }),
          status
        )
        expect(answers).toEqual({
          "PUT turns": "404 not_found",
          "PATCH key": "404 not_found",
          "GET turns": "404 not_found",
          "DELETE unknown run": "404 not_found",
          "GET unknown run": "404 not_found",
          "GET trailing slash": "404 not_found",
          "bad json": "400 invalid_json",
          "json null": "400 invalid_request",
          "input number": "400 invalid_request",
          "no content-type": "415 unsupported_media_type",
          "agui text/plain": "415 unsupported_media_type",
          "agui null": "400 invalid_request",
          "agui no messages": "400 invalid_request",
          "agui last assistant": "400 invalid_request",
          "agui foreign": "404 not_found"
        })
        // Keys with slashes, percent signs, unicode, dots, spaces, query and fragment characters.
        for (
          const key of ["alice/a/b/c", "alice/100%/%2F", "alice/ünï©ødé 🎉", "alice/..", "alice/?x=1#y", "alice/ "]
        ) {
          const path = `/threads/${encodeURIComponent(key)}`
          const frames = events(
            yield* Effect.promise(async () =>
              readUntil(
                await fetch(`${origin}${path}/turns`, {
                  method: "POST",
                  headers: { ...alice, ...json },
                  body: JSON.stringify({ input: key })
                })
              )
            )
          )
          expect({ key, outcome: frames.at(-1)?.data.outcome }).toEqual({ key, outcome: "success" })
          const snapshot = yield* Effect.promise(() =>
            fetch(`${origin}${path}`, { headers: alice }).then((r) => r.json())
          )
          expect(snapshot).toMatchObject({ key, turns: 1 })
        }
        yield* Scope.close(scope, Exit.void)
        expect(yield* noProcessLeft).toBe(true)
      }))

    it.effect("closing the server (router inside) with an AG-UI client and SSE readers open: AG-UI run ends cancelled, streams end, nothing left", () =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const origin = yield* serveIn(scope)
        const agent = new HttpAgent({
          url: `${origin}/agui`,
          headers: alice,
          threadId: "alice/agui-close",
          initialMessages: [{ id: randomUUID(), role: "user", content: "hang" }]
        })
        const seen: Array<BaseEvent> = []
        const running = Effect.promise(() =>
          agent.runAgent({ runId: randomUUID() }, { onEvent: ({ event }) => void seen.push(event) }).then(
            () => "ok",
            (error: unknown) => `error: ${String(error)}`
          )
        ).pipe(Effect.fork)
        const fiber = yield* running
        let runId: string | undefined
        for (let i = 0; i < 100 && runId === undefined; i++) {
          yield* Effect.sleep("50 millis")
          const snapshot = yield* Effect.promise(() =>
            fetch(`${origin}/threads/alice%2Fagui-close`, { headers: alice }).then((r) =>
              r.status === 200 ? r.json() : {}
            )
          )
          runId = (snapshot as { readonly run?: string }).run
        }
        expect(runId).toBeDefined()
        const readers = yield* Effect.forEach(
          [1, 2, 3],
          () =>
            Effect.flatMap(
              get(origin, `/threads/alice%2Fagui-close/runs/${runId}/events`),
              (r) => Effect.promise(() => readUntil(r).catch(() => []))
            ),
          { concurrency: "unbounded" }
        ).pipe(Effect.fork)
        yield* Effect.sleep("300 millis")
        const closed = yield* Scope.close(scope, Exit.void).pipe(Effect.timeout("10 seconds"), Effect.option)
        expect(closed._tag).toBe("Some")
        const outcome = yield* Fiber.join(fiber).pipe(Effect.timeout("5 seconds"), Effect.orElseSucceed(() => "no end"))
        const last = seen.at(-1) as unknown as { readonly type: string; readonly outcome?: { readonly type: string } }
        expect({ outcome, types: seen.map((e) => e.type), last }).toMatchObject({
          outcome: "ok",
          last: { type: EventType.RUN_FINISHED }
        })
        const ended = (yield* Fiber.join(readers)).map((frames) => events(frames).at(-1)?.data?.outcome)
        expect(ended).toEqual(["canceled", "canceled", "canceled"])
        expect(yield* noProcessLeft).toBe(true)
      }))

    it.effect("requests that reach a router whose scope has closed get 503 agent_closed, not a hang", () =>
      Effect.gen(function*() {
        const agent = yield* Tether
        const routerScope = yield* Scope.make()
        // A long keep-alive: a connection kept open after its SSE stream ended would hold the server's
        // close for that long (Node's `close` ends only the connections idle when it is called).
        const server = yield* NodeHttpServer.make(() => Http.createServer({ keepAliveTimeout: 60_000 }), {
          host: "127.0.0.1",
          port: 0
        })
        yield* server.serve(yield* AgentHttp.router({ agent, authorize }).pipe(Scope.extend(routerScope)))
        const origin = `http://127.0.0.1:${(server.address as { readonly port: number }).port}`
        // The router's scope closes first (as it does inside the server's lifetime); the server is
        // still up and a request still comes in.
        yield* Scope.close(routerScope, Exit.void)
        const ask = (path: string, init: RequestInit) =>
          Effect.promise(() =>
            fetch(`${origin}${path}`, { ...init, signal: AbortSignal.timeout(3_000) }).then(
              (response) => response.status,
              () => "no answer within 3 s"
            )
          )
        const snapshot = yield* ask("/threads/alice%2Fafter", { headers: alice })
        const turn = yield* ask("/threads/alice%2Fafter/turns", {
          method: "POST",
          headers: { ...alice, ...json },
          body: JSON.stringify({ input: "hello" })
        })
        const agui = yield* ask("/agui", {
          method: "POST",
          headers: { ...alice, ...json },
          body: JSON.stringify({
            threadId: "alice/after",
            runId: "r",
            messages: [{ id: "m", role: "user", content: "hi" }]
          })
        })
        expect({ snapshot, turn, agui }).toEqual({ snapshot: 503, turn: 503, agui: 503 })
      }).pipe(Effect.scoped))
  }
)

layer(agentLayer, { excludeTestServices: true, timeout: 60_000 })("router limits", (it) => {
  it.effect("after a burst of concurrent turns on distinct keys, no more than threads.max idle keys stay open", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      // The idle timeout is long: only the cap may close the extra keys.
      const origin = yield* serveIn(scope, { threads: { max: 1, idleTimeout: "5 minutes" } })
      const results = yield* Effect.forEach(
        ["alice/burst-a", "alice/burst-b", "alice/burst-c"],
        (key) => turn(origin, key, "slow 4 150"),
        { concurrency: "unbounded" }
      )
      expect(results.map((result) => result.status)).toEqual([200, 200, 200])
      expect(results.map((result) => result.frames.at(-1)?.data.outcome)).toEqual(["success", "success", "success"])
      // Every key is idle now: "when more than threads.max keys are open ... least recently used
      // idle keys first" — at most one key's warm process may stay.
      const left = yield* settleTo(1)
      yield* Scope.close(scope, Exit.void)
      expect(left, "warm processes of idle keys left open past threads.max = 1").toBeLessThanOrEqual(1)
    }))

  it.effect("concurrent turns on one key: exactly one runs, every other one is 409 thread_busy, nothing leaks", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const origin = yield* serveIn(scope, { threads: { idleTimeout: "0 millis" } })
      const results = yield* Effect.forEach(
        Array.from({ length: 6 }, () => "alice/one-key"),
        (key) => turn(origin, key, "slow 6 100"),
        { concurrency: "unbounded" }
      )
      const statuses = results.map((result) => result.status).sort()
      expect(statuses).toEqual([200, 409, 409, 409, 409, 409])
      for (const result of results.filter((result) => result.status === 409)) {
        expect(JSON.parse(result.body).error.code).toBe("thread_busy")
      }
      const ran = results.find((result) => result.status === 200)!
      expect(ran.frames.at(-1)!.data.outcome).toBe("success")
      // The next turn on that key runs (no run was leaked holding it).
      const next = yield* turn(origin, "alice/one-key", "again")
      expect(next.status).toBe(200)
      const snapshot = yield* Effect.promise(() =>
        fetch(`${origin}/threads/alice%2Fone-key`, { headers: alice }).then((r) =>
          r.json() as Promise<{ readonly run?: string }>
        )
      )
      expect(snapshot).toMatchObject({ key: "alice/one-key", turns: 2 })
      expect(snapshot.run).toBeUndefined()
      expect(yield* settleTo(0)).toBe(0)
      yield* Scope.close(scope, Exit.void)
    }))

  it.effect("a finished run's events are still served after its key's handle closed (idleTimeout 0); another principal's are 404", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const origin = yield* serveIn(scope, { threads: { idleTimeout: "0 millis" }, retention: "10 seconds" })
      const first = yield* turn(origin, "alice/evicted", "slow 3 10")
      expect(first.status).toBe(200)
      const runId = first.frames[0]!.data.runId as string
      expect(yield* settleTo(0)).toBe(0)
      const path = `/threads/alice%2Fevicted/runs/${runId}/events`
      const replay = yield* Effect.promise(() =>
        fetch(`${origin}${path}`, { headers: alice }).then((r) => readUntil(r))
      )
      expect(events(replay).map((frame) => frame.id)).toEqual(first.frames.map((frame) => frame.id))
      // Bob, with Alice's run id, on his own key or hers.
      for (
        const foreign of [
          `/threads/bob%2Fevicted/runs/${runId}/events`,
          path
        ]
      ) {
        const response = yield* Effect.promise(() =>
          fetch(`${origin}${foreign}`, { headers: { authorization: "Bearer bob" } })
        )
        expect(response.status).toBe(404)
        yield* Effect.promise(() => response.text())
      }
      yield* Scope.close(scope, Exit.void)
    }))
})
