import { describe, expect, it } from "@effect/vitest"
import { ResponsesServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as Zlib from "node:zlib"

interface SseEvent {
  readonly event: string
  readonly data: { readonly [key: string]: unknown }
}

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}/responses`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body)
    })
    return { status: response.status, contentType: response.headers.get("content-type"), text: await response.text() }
  })

const events = (text: string): Array<SseEvent> =>
  text.split("\n\n").filter((block) => block.trim().length > 0).map((block) => {
    const lines = block.split("\n")
    const event = lines.find((l) => l.startsWith("event: "))!.slice(7)
    const data = JSON.parse(lines.find((l) => l.startsWith("data: "))!.slice(6))
    return { event, data }
  })

const untilRecorded = (server: ResponsesServer.ResponsesServer, count: number) =>
  server.requests.pipe(
    Effect.repeat({ until: (all) => all.length >= count, schedule: Schedule.spaced("10 millis") })
  )

const request = (input: ReadonlyArray<unknown>, tools: ReadonlyArray<unknown> = []) => ({
  model: "fake-model",
  stream: true,
  input,
  tools
})

describe("ResponsesServer", () => {
  it.live("streams text as the Responses API does: created, item added, deltas, item done, completed with usage", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make({
        script: () => ResponsesServer.text("Hello there, friend", { usage: { inputTokens: 7, outputTokens: 3 } })
      })
      expect(server.baseUrl).toBe(`http://127.0.0.1:${server.port}/v1`)
      const response = yield* post(server.baseUrl, request([]))
      expect(response.status).toBe(200)
      expect(response.contentType).toBe("text/event-stream")
      const all = events(response.text)
      expect(all.every((e) => e.event === e.data["type"])).toBe(true)
      expect(all.map((e) => e.data["sequence_number"])).toEqual(all.map((_, i) => i))
      const kinds = all.map((e) => e.event)
      expect(kinds[0]).toBe("response.created")
      expect(kinds.indexOf("response.output_item.added")).toBeLessThan(kinds.indexOf("response.output_text.delta"))
      expect(kinds.at(-2)).toBe("response.output_item.done")
      expect(kinds.at(-1)).toBe("response.completed")
      const deltas = all.filter((e) => e.event === "response.output_text.delta").map((e) => e.data["delta"])
      expect(deltas.length).toBeGreaterThan(1)
      expect(deltas.join("")).toBe("Hello there, friend")
      const completed = all.at(-1)!.data["response"] as { usage: unknown; status: string; output: Array<unknown> }
      expect(completed.status).toBe("completed")
      expect(completed.usage).toMatchObject({ input_tokens: 7, output_tokens: 3, total_tokens: 10 })
      expect(completed.output).toEqual([
        expect.objectContaining({
          type: "message",
          role: "assistant",
          content: [{ type: "output_text", text: "Hello there, friend", annotations: [] }]
        })
      ])
    }).pipe(Effect.scoped))

  it.live("calls an MCP tool with namespace and name, and records the output sent back", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make({
        script: (r) => {
          const output = ResponsesServer.lastFunctionCallOutput(r)
          return output === undefined
            ? ResponsesServer.mcpTool("echo", "echo", { text: "hi" }, "call_x")
            : ResponsesServer.text(`got ${output.text}`)
        }
      })
      const tools = [{ type: "namespace", name: "mcp__echo", tools: [{ type: "function", name: "echo" }] }]
      const first = events((yield* post(server.baseUrl, request([], tools))).text)
      const call = first.find((e) => e.event === "response.output_item.done")!.data["item"]
      expect(call).toEqual({
        id: "fc_resp_0",
        type: "function_call",
        status: "completed",
        call_id: "call_x",
        name: "echo",
        namespace: "mcp__echo",
        arguments: JSON.stringify({ text: "hi" })
      })
      const second = events(
        (yield* post(
          server.baseUrl,
          request([
            { type: "message", role: "user", content: [{ type: "input_text", text: "please echo" }] },
            call,
            {
              type: "function_call_output",
              call_id: "call_x",
              output: [{ type: "input_text", text: "Wall time: 0 s" }, { type: "input_text", text: "ECHO:hi" }]
            }
          ])
        )).text
      )
      const deltas = second.filter((e) => e.event === "response.output_text.delta").map((e) => e.data["delta"])
      expect(deltas.join("")).toBe("got Wall time: 0 s\nECHO:hi")
      const recorded = yield* server.requests
      expect(recorded.map((r) => r.index)).toEqual([0, 1])
      expect(ResponsesServer.namespaceTools(recorded[0]!)).toEqual({ mcp__echo: ["echo"] })
      expect(ResponsesServer.userTexts(recorded[1]!)).toEqual(["please echo"])
      expect(ResponsesServer.functionCallOutputs(recorded[1]!)).toEqual([
        expect.objectContaining({ callId: "call_x", text: "Wall time: 0 s\nECHO:hi" })
      ])
      expect(ResponsesServer.lastFunctionCallOutput(recorded[0]!)).toBeUndefined()
    }).pipe(Effect.scoped))

  it.live("a reasoning summary and raw items are sent as output items", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make({
        script: ResponsesServer.sequence(
          ResponsesServer.text("answer", { reasoning: "thinking hard" }),
          ResponsesServer.items([{ type: "web_search_call", id: "ws_1", status: "completed" }])
        )
      })
      const first = events((yield* post(server.baseUrl, request([]))).text)
      const done = first.filter((e) => e.event === "response.output_item.done").map((e) => e.data["item"])
      expect(done).toEqual([
        { id: "rs_resp_0", type: "reasoning", summary: [{ type: "summary_text", text: "thinking hard" }] },
        expect.objectContaining({ type: "message" })
      ])
      expect(
        first.filter((e) => e.event === "response.reasoning_summary_text.delta").map((e) => e.data["delta"]).join("")
      ).toBe("thinking hard")
      const second = events((yield* post(server.baseUrl, request([]))).text)
      expect(second.find((e) => e.event === "response.output_item.done")!.data["item"]).toEqual({
        type: "web_search_call",
        id: "ws_1",
        status: "completed"
      })
    }).pipe(Effect.scoped))

  it.live("fails with the scripted status and an OpenAI error body; a finished sequence answers 500", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make({
        script: ResponsesServer.sequence(ResponsesServer.fail(429, "slow down"))
      })
      const failed = yield* post(server.baseUrl, request([]))
      expect(failed.status).toBe(429)
      expect(JSON.parse(failed.text)).toMatchObject({ error: { message: "slow down" } })
      const exhausted = yield* post(server.baseUrl, request([]))
      expect(exhausted.status).toBe(500)
      expect((yield* server.requests).length).toBe(2)
    }).pipe(Effect.scoped))

  it.live("with an API key, a request without the right bearer gets 401 and is still recorded", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make({ apiKey: Redacted.make("sk-right") })
      expect((yield* post(server.baseUrl, request([]), { authorization: "Bearer sk-wrong" })).status).toBe(401)
      expect((yield* post(server.baseUrl, request([]))).status).toBe(401)
      expect((yield* post(server.baseUrl, request([]), { authorization: "Bearer sk-right" })).status).toBe(200)
      const recorded = yield* server.requests
      expect(recorded.map((r) => r.headers["authorization"])).toEqual(["Bearer sk-wrong", undefined, "Bearer sk-right"])
    }).pipe(Effect.scoped))

  it.live("decodes gzip bodies, answers 404 elsewhere, and a script that throws answers 500", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make({
        script: (r) => {
          if (r.index === 1) throw new Error("script bug")
          return ResponsesServer.text("fine")
        }
      })
      const zipped = Zlib.gzipSync(JSON.stringify(request([{ type: "message", role: "user", content: "zipped" }])))
      expect((yield* post(server.baseUrl, new Uint8Array(zipped), { "content-encoding": "gzip" })).status).toBe(200)
      expect((yield* server.requests)[0]!.body).toMatchObject({ input: [{ content: "zipped" }] })
      expect((yield* post(server.baseUrl, request([]))).status).toBe(500)
      const other = yield* Effect.promise(() => fetch(`${server.baseUrl}/models`).then((r) => r.status))
      expect(other).toBe(404)
      expect((yield* server.requests).length).toBe(2)
    }).pipe(Effect.scoped))

  it.live("records a request to another path (GET /v1/models, answered 404) in otherRequests", () =>
    Effect.gen(function*() {
      const server = yield* ResponsesServer.make()
      const status = yield* Effect.promise(() =>
        fetch(`${server.baseUrl}/models`, { headers: { authorization: "Bearer k" } }).then((r) => r.status)
      )
      expect(status).toBe(404)
      expect(yield* server.otherRequests).toMatchObject([{
        method: "GET",
        path: "/v1/models",
        headers: { authorization: "Bearer k" }
      }])
      expect(yield* server.requests).toEqual([])
    }).pipe(Effect.scoped))

  it.live("a delayed step answers later; closing the scope ends the wait and stops the listener", () =>
    Effect.gen(function*() {
      let port = 0
      yield* Effect.gen(function*() {
        const server = yield* ResponsesServer.make({
          script: (r) => ResponsesServer.delayed(r.index === 0 ? 300 : 60_000, ResponsesServer.text("late"))
        })
        port = server.port
        const fiber = yield* Effect.fork(post(server.baseUrl, request([])))
        yield* untilRecorded(server, 1)
        // Recorded but not answered yet: the answer waits for the delay.
        expect(fiber.unsafePoll()).toBeNull()
        const response = yield* Fiber.join(fiber)
        expect(response.status).toBe(200)
        expect(events(response.text).at(-1)!.event).toBe("response.completed")
        // A pending answer of a minute must not hold the scope's close.
        yield* Effect.forkScoped(post(server.baseUrl, request([])))
        yield* untilRecorded(server, 2)
      }).pipe(Effect.scoped)
      const refused = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${port}/v1/responses`, { method: "POST", body: "{}" }).then(() => false, () => true)
      )
      expect(refused).toBe(true)
    }))
})
