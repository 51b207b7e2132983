/**
 * `POST /threads/:key/turns` with `resumeOnly: true` on a thread whose committed session the
 * provider rejects (the CLI says the session is gone: `ResumeRejected`, docs/threads.md:33-34
 * "`"fail"` fails the turn with `ThreadIncompatible` ... or `ResumeRejected`, and keeps the
 * record. `resumeOnly` fails the same way"). Over HTTP the first case is `409 thread_incompatible`
 * ("The thread's checkpoint cannot be resumed by this agent."); the second must be a typed answer
 * too, not `500 internal_error`, which AgentHttp.ts keeps for a failure of the server ("logged,
 * nothing else said").
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { expect, layer } from "@effect/vitest"
import { Agent } from "@tether/core"
import { ProtocolError } from "@tether/core/Driver"
import { AgentHttp } from "@tether/http"
import { Harness, Reference } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Http from "node:http"
import { authorize, events, readUntil } from "./support.js"

class Origin extends Context.Tag("test/ResumeOnlyRejectedOrigin")<Origin, string>() {}

// One-shot reference CLI that can resume; "gone" makes the process exit without a word, which the
// driver reads as the provider refusing the session it was asked to resume (as Claude Code's
// "No conversation found with session ID").
const base = Reference.driver({
  capabilities: { resume: true },
  respond: (prompt) => prompt === "gone" ? [{ _tag: "$exit", code: 1 }] : Reference.answer(prompt)
})
const driver = {
  ...base,
  classifyExit: (info: { readonly session: { readonly _tag: string } }) =>
    info.session._tag === "Resume" ? new ProtocolError({ reason: "ResumeRejected", detail: "session gone" }) : undefined
}

const serverLayer = Layer.scoped(
  Origin,
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const agent = yield* Agent.make({
      driver,
      definition: { instructions: "", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection,
      processes: { killGrace: "500 millis" }
    })
    const server = yield* NodeHttpServer.make(() => Http.createServer(), { host: "127.0.0.1", port: 0 })
    yield* server.serve(yield* AgentHttp.router({ agent, authorize, threads: { idleTimeout: "0 millis" } }))
    return `http://127.0.0.1:${(server.address as { readonly port: number }).port}`
  })
).pipe(Layer.provide(Harness.layer))

const post = (origin: string, body: unknown) =>
  Effect.promise(() =>
    fetch(`${origin}/threads/alice%2Fresume/turns`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer alice" },
      body: JSON.stringify(body)
    })
  )

layer(serverLayer, { excludeTestServices: true, timeout: 60_000 })("resumeOnly over HTTP", (it) => {
  it.effect("a resumeOnly turn whose session the provider rejects streams its RunFinished(failure), not 500 internal_error", () =>
    Effect.gen(function*() {
      const origin = yield* Origin
      const first = yield* post(origin, { input: "hello" })
      expect(first.status).toBe(200)
      const frames = events(yield* Effect.promise(() => readUntil(first)))
      expect(frames.at(-1)?.data.outcome).toBe("success")
      const second = yield* post(origin, { input: "gone", resumeOnly: true })
      expect(second.status).toBe(200)
      const last = events(yield* Effect.promise(() => readUntil(second))).at(-1)
      expect({ event: last?.event, outcome: last?.data.outcome, reason: last?.data.reason }).toEqual({
        event: "RunFinished",
        outcome: "failure",
        reason: "ProtocolError"
      })
    }))
})
