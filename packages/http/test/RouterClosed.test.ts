/**
 * A router whose scope has closed (the documented shutdown order closes it before the server)
 * answers every request `503 agent_closed`, those that read a body too (they waited forever on
 * a fiber its closed set never ran). A real server on 127.0.0.1, the reference driver (live).
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
import { authorize } from "./support.js"

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

class Tether extends Context.Tag("test/AuditTether")<Tether, Agent.Agent>() {}

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

layer(agentLayer, { excludeTestServices: true, timeout: 60_000 })("a closed router", (it) => {
  it.effect("requests that reach a router whose scope has closed get 503 agent_closed, not a hang", () =>
    Effect.gen(function*() {
      const agent = yield* Tether
      const routerScope = yield* Scope.make()
      const server = yield* NodeHttpServer.make(() => Http.createServer(), { host: "127.0.0.1", port: 0 })
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
})
