/**
 * The AG-UI route reads the client's earlier tool calls (to keep their ids apart): a
 * RunAgentInput whose assistant message's `toolCalls` is not an array of calls is a bad input,
 * `400 invalid_request` with nothing run (AgentHttp.ts). It was read after the turn had started:
 * a 500, and a turn running with no reader. The same for a conversation nested past the call
 * stack (copied after the turn had started: a 500 whose turn ran and committed); and a user
 * message's image part, which a turn cannot carry, is refused rather than dropped.
 */
import { expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { randomUUID } from "node:crypto"
import { Fixture, layer as fixture } from "./support.js"

const post = (origin: string, body: unknown) =>
  Effect.promise(() =>
    fetch(`${origin}/agent/agui`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer alice", accept: "text/event-stream" },
      body: JSON.stringify(body)
    }).then(async (response) => ({ status: response.status, body: (await response.text()).slice(0, 300) }))
  )

layer(fixture, { excludeTestServices: true, timeout: 60_000 })("AG-UI: malformed or uncarried input", (it) => {
  it.effect("toolCalls that is not an array is 400 invalid_request and runs no turn", () =>
    Effect.gen(function*() {
      const { anthropic, origin } = yield* Fixture
      const before = (yield* anthropic.requests).length
      const answer = yield* post(origin, {
        threadId: "alice/agui-malformed",
        runId: randomUUID(),
        tools: [],
        messages: [
          { id: "m1", role: "assistant", content: "", toolCalls: 5 },
          { id: "m2", role: "user", content: "Is ISSUE-42 open?" }
        ]
      })
      // Whatever the answer, a turn that was started reaches the scripted model meanwhile.
      yield* Effect.sleep("3 seconds")
      expect({ status: answer.status, modelRequests: (yield* anthropic.requests).length - before }).toEqual({
        status: 400,
        modelRequests: 0
      })
    }))

  it.effect("a user message with an image part beside its text is 400 invalid_request, not run as its text alone", () =>
    Effect.gen(function*() {
      const { anthropic, origin } = yield* Fixture
      const before = (yield* anthropic.requests).length
      const answer = yield* post(origin, {
        threadId: "alice/agui-image",
        runId: randomUUID(),
        tools: [],
        messages: [{
          id: "m1",
          role: "user",
          content: [
            { type: "text", text: "What does this screenshot show?" },
            { type: "image", source: { type: "data", value: "iVBORw0KGgo=", mimeType: "image/png" } }
          ]
        }]
      })
      expect({ status: answer.status, modelRequests: (yield* anthropic.requests).length - before }).toEqual({
        status: 400,
        modelRequests: 0
      })
    }))

  it.effect("a conversation nested past the call stack is no 500: the turn runs and streams its answer", () =>
    Effect.gen(function*() {
      const { origin } = yield* Fixture
      const depth = 200_000
      // Valid JSON under the 1 MiB body limit (~400 KB), a valid AG-UI shape.
      const deep = "[".repeat(depth) + "]".repeat(depth)
      const answer = yield* Effect.promise(() =>
        // The router with the default body limit (1 MiB; /agent takes 4 KiB).
        fetch(`${origin}/small/agui`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: "Bearer alice", accept: "text/event-stream" },
          body: `{"threadId":"alice/agui-deep","runId":"${randomUUID()}","tools":[],"messages":[` +
            `{"id":"m0","role":"user","content":"earlier","extra":${deep}},` +
            `{"id":"m1","role":"user","content":"Is ISSUE-42 open?"}]}`
        }).then(async (response) => ({ status: response.status, body: await response.text() }))
      )
      expect(answer.status).toBe(200)
      expect(answer.body).toContain("RUN_FINISHED")
    }))
})
