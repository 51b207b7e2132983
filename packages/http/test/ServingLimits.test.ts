/**
 * The router's limits, with the reference driver (live: a real warm process per
 * thread) behind a real server on 127.0.0.1: `threads.max` after a burst of concurrent turns on
 * distinct keys, concurrent turns on one key (exactly one runs, the others `409 thread_busy`),
 * and a finished run's events read after its key's handle was closed.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { expect, layer } from "@effect/vitest"
import { Agent } from "@tether/core"
import { AgentHttp } from "@tether/http"
import { Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Http from "node:http"
import { authorize, events, readUntil } from "./support.js"

const alice = { authorization: "Bearer alice" }
const json = { "content-type": "application/json" }

/** `slow <n> <ms>`: n deltas, `ms` between each; anything else echoes. */
const respond = (prompt: string): ReadonlyArray<Reference.Step> => {
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

class Tether extends Context.Tag("test/ServingLimitsTether")<Tether, Agent.Agent>() {}

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

const serveIn = (scope: Scope.Scope, options: Omit<AgentHttp.Options<string, never>, "agent" | "authorize"> = {}) =>
  Effect.gen(function*() {
    const agent = yield* Tether
    const server = yield* NodeHttpServer.make(() => Http.createServer(), { host: "127.0.0.1", port: 0 })
    yield* server.serve(yield* AgentHttp.router({ reconnectGrace: "300 millis", ...options, agent, authorize }))
    return `http://127.0.0.1:${(server.address as { readonly port: number }).port}`
  }).pipe(Scope.extend(scope))

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
