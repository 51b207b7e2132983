import { describe, expect, it } from "@effect/vitest"
import { ChatCompletionsServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as Zlib from "node:zlib"

type Chunk = {
  readonly id: string
  readonly object: string
  readonly model: string
  readonly choices: ReadonlyArray<{
    readonly index: number
    readonly delta: { readonly [key: string]: unknown }
    readonly finish_reason: string | null
  }>
  readonly usage?: { readonly [key: string]: unknown } | null
}

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body)
    })
    return { status: response.status, contentType: response.headers.get("content-type"), text: await response.text() }
  })

/** The `data:` payloads of an SSE body: the chunks, and whether `[DONE]` came last. */
const chunks = (text: string): { readonly chunks: ReadonlyArray<Chunk>; readonly done: boolean } => {
  const data = text.split("\n\n").filter((b) => b.trim().length > 0).map((b) => {
    expect(b.startsWith("data: ")).toBe(true)
    return b.slice(6)
  })
  return {
    chunks: data.filter((d) => d !== "[DONE]").map((d) => JSON.parse(d) as Chunk),
    done: data.at(-1) === "[DONE]" && data.filter((d) => d === "[DONE]").length === 1
  }
}

const deltas = (all: ReadonlyArray<Chunk>, key: string): string =>
  all.flatMap((c) => c.choices.map((choice) => choice.delta[key])).filter((v) => typeof v === "string").join("")

const request = (messages: ReadonlyArray<unknown>, extra: Record<string, unknown> = {}) => ({
  model: "some-model",
  stream: true,
  stream_options: { include_usage: true },
  messages,
  ...extra
})

const tools = (...names: ReadonlyArray<string>) =>
  names.map((name) => ({ type: "function", function: { name, parameters: { type: "object" } } }))

const untilRecorded = (server: ChatCompletionsServer.ChatCompletionsServer, count: number) =>
  server.requests.pipe(Effect.repeat({ until: (all) => all.length >= count, schedule: Schedule.spaced("10 millis") }))

describe("ChatCompletionsServer", () => {
  it.live("streams text as chat.completion.chunk deltas, then a usage chunk with no choices, then [DONE]", () =>
    Effect.gen(function*() {
      const server = yield* ChatCompletionsServer.make({
        script: () =>
          ChatCompletionsServer.text("Hello there, friend", {
            reasoning: "let me think",
            usage: { promptTokens: 7, completionTokens: 3, cachedTokens: 2 }
          })
      })
      expect(server.baseUrl).toBe(`http://127.0.0.1:${server.port}/v1`)
      const response = yield* post(server.baseUrl, request([{ role: "user", content: "hi" }]))
      expect(response.status).toBe(200)
      expect(response.contentType).toBe("text/event-stream")
      const { chunks: all, done } = chunks(response.text)
      expect(done).toBe(true)
      expect(all.every((c) => c.object === "chat.completion.chunk" && c.id === "chatcmpl-0")).toBe(true)
      expect(all[0]!.model).toBe("some-model")
      expect(all[0]!.choices[0]!.delta).toEqual({ role: "assistant", content: "" })
      expect(all.filter((c) => c.choices.some((ch) => typeof ch.delta["content"] === "string")).length)
        .toBeGreaterThan(2)
      expect(deltas(all, "content")).toBe("Hello there, friend")
      expect(deltas(all, "reasoning_content")).toBe("let me think")
      const finishes = all.flatMap((c) => c.choices.map((ch) => ch.finish_reason)).filter((f) => f !== null)
      expect(finishes).toEqual(["stop"])
      const last = all.at(-1)!
      expect(last.choices).toEqual([])
      expect(last.usage).toEqual({
        prompt_tokens: 7,
        completion_tokens: 3,
        total_tokens: 10,
        prompt_tokens_details: { cached_tokens: 2 },
        completion_tokens_details: { reasoning_tokens: 0 }
      })
      // With include_usage every other chunk says `usage: null`, as the API does.
      expect(all.slice(0, -1).every((c) => c.usage === null)).toBe(true)
    }).pipe(Effect.scoped))

  it.live("without stream_options there is no usage chunk; without stream the answer is one chat.completion", () =>
    Effect.gen(function*() {
      const server = yield* ChatCompletionsServer.make({
        model: "pinned",
        script: () => ChatCompletionsServer.text("hi")
      })
      const streamed = chunks((yield* post(server.baseUrl, request([], { stream_options: undefined }))).text)
      expect(streamed.chunks.every((c) => c.choices.length === 1 && c.usage === undefined)).toBe(true)
      expect(streamed.chunks[0]!.model).toBe("pinned")
      const whole = yield* post(server.baseUrl, request([], { stream: false }))
      expect(whole.contentType).toBe("application/json")
      expect(JSON.parse(whole.text)).toMatchObject({
        id: "chatcmpl-1",
        object: "chat.completion",
        model: "pinned",
        choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
        usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }
      })
    }).pipe(Effect.scoped))

  it.live("a tool round trip: a call in the OpenAI chat format, then the answer once the last message is a tool result", () =>
    Effect.gen(function*() {
      const server = yield* ChatCompletionsServer.make({
        script: ChatCompletionsServer.roundTrip(
          () => ChatCompletionsServer.callTool("echo", { text: "hi" }, { text: "Calling." }),
          (results) => ChatCompletionsServer.text(`got ${results.map((r) => `${r.toolCallId}=${r.text}`).join(",")}`)
        )
      })
      const first = chunks(
        (yield* post(
          server.baseUrl,
          request([{ role: "user", content: "echo hi" }], { tools: tools("mcp__srv__echo") })
        ))
          .text
      ).chunks
      expect(deltas(first, "content")).toBe("Calling.")
      const callDeltas = first.flatMap((c) => c.choices.flatMap((ch) => (ch.delta["tool_calls"] ?? []) as Array<any>))
      // The name resolves to the offered tool ending in `__echo`; arguments arrive in pieces.
      expect(callDeltas[0]).toEqual({
        index: 0,
        id: "call_0_0",
        type: "function",
        function: { name: "mcp__srv__echo", arguments: "" }
      })
      expect(callDeltas.length).toBeGreaterThan(2)
      expect(callDeltas.map((d) => d.function.arguments).join("")).toBe(JSON.stringify({ text: "hi" }))
      expect(first.flatMap((c) => c.choices.map((ch) => ch.finish_reason)).filter((f) => f !== null)).toEqual([
        "tool_calls"
      ])
      const second = chunks(
        (yield* post(
          server.baseUrl,
          request([
            { role: "system", content: "be nice" },
            { role: "user", content: [{ type: "text", text: "echo hi" }] },
            {
              role: "assistant",
              content: "Calling.",
              tool_calls: [{
                id: "call_0_0",
                type: "function",
                function: { name: "mcp__srv__echo", arguments: "{\"text\":\"hi\"}" }
              }]
            },
            { role: "tool", tool_call_id: "call_0_0", content: "ECHO:hi" }
          ])
        )).text
      ).chunks
      expect(deltas(second, "content")).toBe("got call_0_0=ECHO:hi")
      const recorded = yield* server.requests
      expect(recorded.map((r) => [r.index, r.path])).toEqual([[0, "/v1/chat/completions"], [1, "/v1/chat/completions"]])
      expect(ChatCompletionsServer.toolNames(recorded[0]!)).toEqual(["mcp__srv__echo"])
      expect(ChatCompletionsServer.lastToolResults(recorded[0]!)).toEqual([])
      expect(ChatCompletionsServer.lastToolResults(recorded[1]!)).toEqual([{ toolCallId: "call_0_0", text: "ECHO:hi" }])
      expect(ChatCompletionsServer.texts(recorded[1]!, "user")).toEqual(["echo hi"])
      expect(ChatCompletionsServer.texts(recorded[1]!, "system")).toEqual(["be nice"])
      expect(ChatCompletionsServer.messages(recorded[1]!)[2]).toEqual({
        role: "assistant",
        text: "Calling.",
        toolCalls: [{ id: "call_0_0", name: "mcp__srv__echo", input: { text: "hi" } }],
        toolCallId: undefined
      })
    }).pipe(Effect.scoped))

  it.live("parallel calls stream one index each; only trailing tool messages count as the last results", () =>
    Effect.gen(function*() {
      const server = yield* ChatCompletionsServer.make({
        script: () =>
          ChatCompletionsServer.callTools([{ name: "a", input: { n: 1 } }, { name: "b", input: { n: 2 }, id: "mine" }])
      })
      const whole = yield* post(server.baseUrl, request([], { stream: false, tools: tools("a", "b") }))
      expect(JSON.parse(whole.text).choices[0]).toMatchObject({
        finish_reason: "tool_calls",
        message: {
          content: null,
          tool_calls: [
            { id: "call_0_0", type: "function", function: { name: "a", arguments: "{\"n\":1}" } },
            { id: "mine", type: "function", function: { name: "b", arguments: "{\"n\":2}" } }
          ]
        }
      })
      const streamed = chunks((yield* post(server.baseUrl, request([], { tools: tools("a", "b") }))).text).chunks
      const starts = streamed.flatMap((c) => c.choices.flatMap((ch) => (ch.delta["tool_calls"] ?? []) as Array<any>))
        .filter((d) => d.id !== undefined)
      expect(starts.map((d) => [d.index, d.id, d.function.name])).toEqual([[0, "call_1_0", "a"], [1, "mine", "b"]])
      const recorded = (yield* server.requests)[0]!
      expect(ChatCompletionsServer.toolResults(recorded)).toEqual([])
      const earlier = {
        ...recorded,
        body: request([
          { role: "tool", tool_call_id: "x", content: [{ type: "text", text: "old" }] },
          { role: "user", content: "next" }
        ])
      }
      expect(ChatCompletionsServer.toolResults(earlier)).toEqual([{ toolCallId: "x", text: "old" }])
      expect(ChatCompletionsServer.lastToolResults(earlier)).toEqual([])
    }).pipe(Effect.scoped))

  it.live("fails with the scripted status and an OpenAI error body; a finished sequence answers 500", () =>
    Effect.gen(function*() {
      const server = yield* ChatCompletionsServer.make({
        script: ChatCompletionsServer.sequence(ChatCompletionsServer.fail(429, "slow down"))
      })
      const failed = yield* post(server.baseUrl, request([]))
      expect(failed.status).toBe(429)
      expect(JSON.parse(failed.text)).toEqual({
        error: { message: "slow down", type: "invalid_request_error", code: "rate_limit_exceeded", param: null }
      })
      const exhausted = yield* post(server.baseUrl, request([]))
      expect(exhausted.status).toBe(500)
      expect(JSON.parse(exhausted.text).error.message).toContain("no step for request 1")
    }).pipe(Effect.scoped))

  it.live("with an API key, a request without the right bearer gets 401 and is still recorded", () =>
    Effect.gen(function*() {
      const server = yield* ChatCompletionsServer.make({ apiKey: Redacted.make("sk-right") })
      expect((yield* post(server.baseUrl, request([]), { authorization: "Bearer sk-wrong" })).status).toBe(401)
      expect((yield* post(server.baseUrl, request([]))).status).toBe(401)
      expect((yield* post(server.baseUrl, request([]), { authorization: "Bearer sk-right" })).status).toBe(200)
      const recorded = yield* server.requests
      expect(recorded.map((r) => r.headers["authorization"])).toEqual(["Bearer sk-wrong", undefined, "Bearer sk-right"])
    }).pipe(Effect.scoped))

  it.live("decodes gzip bodies, serves the path without /v1, lists the model, 404s and records other paths", () =>
    Effect.gen(function*() {
      const server = yield* ChatCompletionsServer.make({
        script: (r) => {
          if (r.index === 1) throw new Error("script bug")
          return ChatCompletionsServer.text("fine")
        }
      })
      const root = server.baseUrl.slice(0, -3)
      const zipped = Zlib.gzipSync(JSON.stringify(request([{ role: "user", content: "zipped" }])))
      expect((yield* post(root, new Uint8Array(zipped), { "content-encoding": "gzip" })).status).toBe(200)
      expect(ChatCompletionsServer.texts((yield* server.requests)[0]!, "user")).toEqual(["zipped"])
      expect((yield* server.requests)[0]!.path).toBe("/chat/completions")
      expect((yield* post(server.baseUrl, request([]))).status).toBe(500)
      const models = yield* Effect.promise(() => fetch(`${server.baseUrl}/models`).then((r) => r.json()))
      expect(models).toMatchObject({ object: "list", data: [{ id: "fake-model", object: "model" }] })
      const missing = yield* Effect.promise(() => fetch(`${server.baseUrl}/embeddings`).then((r) => r.status))
      expect(missing).toBe(404)
      expect((yield* server.otherRequests).map((r) => [r.method, r.path])).toEqual([
        ["GET", "/v1/models"],
        ["GET", "/v1/embeddings"]
      ])
      expect((yield* server.requests).length).toBe(2)
    }).pipe(Effect.scoped))

  it.live("a short tool name: only mcp__<server>__<name>, never a longer name; ambiguous is a 500 with a message", () =>
    Effect.gen(function*() {
      const server = yield* ChatCompletionsServer.make({
        script: () => ChatCompletionsServer.callTool("lookup", { key: "A-1" })
      })
      const tools = (names: ReadonlyArray<string>) =>
        names.map((name) => ({ type: "function", function: { name, parameters: { type: "object" } } }))
      const called = (text: string) => JSON.parse(text).choices[0].message.tool_calls[0].function.name
      const answer = (names: ReadonlyArray<string>) =>
        post(server.baseUrl, { model: "m", messages: [{ role: "user", content: "hi" }], tools: tools(names) })
      expect(called((yield* answer(["mcp__tether__lookup", "mcp__tether__issues__lookup"])).text))
        .toBe("mcp__tether__lookup")
      // The app renamed its tool: the script's stale name must not still "work".
      expect(called((yield* answer(["mcp__tether__issues__lookup"])).text)).toBe("lookup")
      const ambiguous = yield* answer(["mcp__docs__lookup", "mcp__tether__lookup"])
      expect(ambiguous.status).toBe(500)
      expect(ambiguous.text).toContain("the tool name lookup is ambiguous: mcp__docs__lookup, mcp__tether__lookup")
    }).pipe(Effect.scoped))

  it.live("setScript changes later answers; a delayed step waits; closing the scope ends waits and the listener", () =>
    Effect.gen(function*() {
      let port = 0
      yield* Effect.gen(function*() {
        const server = yield* ChatCompletionsServer.make()
        port = server.port
        expect(deltas(chunks((yield* post(server.baseUrl, request([]))).text).chunks, "content")).toBe("ok")
        yield* server.setScript((r) =>
          ChatCompletionsServer.delayed(r.index === 1 ? 300 : 60_000, ChatCompletionsServer.text("late"))
        )
        const fiber = yield* Effect.fork(post(server.baseUrl, request([])))
        yield* untilRecorded(server, 2)
        // Recorded but not answered yet: the answer waits for the delay.
        expect(fiber.unsafePoll()).toBeNull()
        const response = yield* Fiber.join(fiber)
        expect(deltas(chunks(response.text).chunks, "content")).toBe("late")
        // A pending answer of a minute must not hold the scope's close.
        yield* Effect.forkScoped(post(server.baseUrl, request([])))
        yield* untilRecorded(server, 3)
      }).pipe(Effect.scoped)
      const refused = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: "POST", body: "{}" }).then(
          () => false,
          () => true
        )
      )
      expect(refused).toBe(true)
    }))
})
