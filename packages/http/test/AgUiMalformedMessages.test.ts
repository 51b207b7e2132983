/**
 * The AG-UI route reads the client's earlier tool calls (to keep their ids apart): a
 * RunAgentInput whose assistant message's `toolCalls` is not an array of calls is a bad input,
 * `400 invalid_request` with nothing run (AgentHttp.ts). It was read after the turn had started:
 * a 500, and a turn running with no reader.
 */
import { expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { randomUUID } from "node:crypto"
import { Fixture, layer as fixture } from "./support.js"

layer(fixture, { excludeTestServices: true, timeout: 60_000 })("AG-UI: a malformed earlier tool call", (it) => {
  it.effect("toolCalls that is not an array is 400 invalid_request and runs no turn", () =>
    Effect.gen(function*() {
      const { anthropic, origin } = yield* Fixture
      const before = (yield* anthropic.requests).length
      const answer = yield* Effect.promise(() =>
        fetch(`${origin}/agent/agui`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: "Bearer alice", accept: "text/event-stream" },
          body: JSON.stringify({
            threadId: "alice/agui-malformed",
            runId: randomUUID(),
            tools: [],
            messages: [
              { id: "m1", role: "assistant", content: "", toolCalls: 5 },
              { id: "m2", role: "user", content: "Is ISSUE-42 open?" }
            ]
          })
        }).then(async (response) => ({ status: response.status, body: (await response.text()).slice(0, 300) }))
      )
      // Whatever the answer, a turn that was started reaches the scripted model meanwhile.
      yield* Effect.sleep("3 seconds")
      expect({ status: answer.status, modelRequests: (yield* anthropic.requests).length - before }).toEqual({
        status: 400,
        modelRequests: 0
      })
    }))
})
