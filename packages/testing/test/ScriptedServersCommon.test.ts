/**
 * What every scripted model server does, as a user of @tether/testing uses them (public exports
 * only): a request whose responder threw is recorded (GeminiServer left it out of `requests`); a
 * short dotted tool name resolves as the CLIs write it on ChatCompletionsServer as on
 * AnthropicServer (it asked CodeBuddy for `issue.lookup`, a tool it does not have); each closes
 * with its scope while a client waits; concurrent requests get their own steps.
 */
import { describe, expect, it } from "@effect/vitest"
import { AnthropicServer, ChatCompletionsServer, GeminiServer, ResponsesServer } from "@tether/testing"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Http from "node:http"

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body)
    })
    return { status: response.status, text: await response.text() }
  })

/** Starts a request and resolves once the response headers arrived; `done` settles when the body ends or fails. */
const openStream = (url: string, body: unknown) =>
  new Promise<{ readonly status: number; readonly done: Promise<"ended" | "error"> }>((resolve, reject) => {
    const target = new URL(url)
    const payload = JSON.stringify(body)
    const req = Http.request({
      host: target.hostname,
      port: target.port,
      path: target.pathname + target.search,
      method: "POST",
      agent: false,
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(payload) }
    }, (res) => {
      const done = new Promise<"ended" | "error">((settle) => {
        res.on("data", () => {})
        res.on("end", () => settle("ended"))
        res.on("error", () => settle("error"))
        res.on("aborted", () => settle("error"))
        res.on("close", () => settle(res.complete ? "ended" : "error"))
      })
      resolve({ status: res.statusCode ?? 0, done })
    })
    req.on("error", reject)
    req.end(payload)
  })

/** Sends a request and waits until the server has it (no answer awaited); settles when the socket closes. */
const pending = (url: string, body: unknown) =>
  new Promise<{ readonly closed: Promise<string> }>((resolve) => {
    const target = new URL(url)
    const payload = JSON.stringify(body)
    const req = Http.request({
      host: target.hostname,
      port: target.port,
      path: target.pathname + target.search,
      method: "POST",
      agent: false,
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(payload) }
    })
    const closed = new Promise<string>((settle) => {
      req.on("error", (e) => settle(`error ${String(e)}`))
      req.on("response", (res) => {
        res.resume()
        res.on("close", () => settle(`response ${res.statusCode} complete=${res.complete}`))
      })
    })
    req.end(payload, () => setTimeout(() => resolve({ closed }), 200))
  })

const anthropicRequest = (content: unknown, tools: ReadonlyArray<string> = []) => ({
  model: "claude-test",
  stream: true,
  messages: [{ role: "user", content }],
  tools: tools.map((name) => ({ name, input_schema: { type: "object" } }))
})

describe("GeminiServer: every request is recorded", () => {
  it.live("a request answered 400 because `respond` threw is in `requests` (as in `generations`)", () =>
    Effect.gen(function*() {
      const server = yield* GeminiServer.make({
        respond: () => {
          throw new Error("expected the prompt to mention ISSUE-42")
        }
      })
      const res = yield* post(`${server.url}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`, {
        contents: [{ role: "user", parts: [{ text: "hi" }] }]
      })
      expect(res.status).toBe(400)
      const generations = yield* server.generations
      expect(generations.length).toBe(1)
      const requests = yield* server.requests
      // Doc: "Every request is recorded." / `requests`: "Every request so far, in arrival order."
      expect(requests.map((r) => r.url)).toEqual([
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
      ])
    }).pipe(Effect.scoped))
})

describe("ChatCompletionsServer: a short tool name resolves as AnthropicServer's does", () => {
  it.live("callTool(\"issue.lookup\") calls the offered mcp__tether__issue_lookup (as CodeBuddy names it)", () =>
    Effect.gen(function*() {
      const server = yield* ChatCompletionsServer.make({
        script: () => ChatCompletionsServer.callTool("issue.lookup", { key: "ISSUE-1" })
      })
      const res = yield* post(`${server.baseUrl}/chat/completions`, {
        model: "m",
        messages: [{ role: "user", content: "look it up" }],
        tools: [
          { type: "function", function: { name: "Read", parameters: { type: "object" } } },
          { type: "function", function: { name: "mcp__tether__issue_lookup", parameters: { type: "object" } } }
        ]
      })
      expect(res.status).toBe(200)
      const call = JSON.parse(res.text).choices[0].message.tool_calls[0]
      expect(call.function.name).toBe("mcp__tether__issue_lookup")
    }).pipe(Effect.scoped))

  it.live("(same rule on AnthropicServer, for comparison)", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({
        script: [AnthropicServer.callTool("issue.lookup", { key: "ISSUE-1" })]
      })
      const res = yield* post(
        `${server.url}/v1/messages`,
        anthropicRequest("look", ["Read", "mcp__tether__issue_lookup"])
      )
      expect(res.status).toBe(200)
      expect(res.text).toContain("\"name\":\"mcp__tether__issue_lookup\"")
    }).pipe(Effect.scoped))
})

describe("scripted servers close with their scope while a client is connected and waiting", () => {
  it.live("AnthropicServer: a reply in pieces whose gate never opens; the scope closes promptly", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const gate = yield* Deferred.make<void>()
      const server = yield* AnthropicServer.make({
        script: [AnthropicServer.replyInPieces(["a", "b"], { between: Deferred.await(gate) })]
      }).pipe(Scope.extend(scope))
      expect(server.url.startsWith("http://127.0.0.1:")).toBe(true)
      const stream = yield* Effect.promise(() => openStream(`${server.url}/v1/messages`, anthropicRequest("hi")))
      expect(stream.status).toBe(200)
      const started = Date.now()
      yield* Scope.close(scope, Exit.void)
      expect(Date.now() - started).toBeLessThan(3_000)
      expect(yield* Effect.promise(() => stream.done)).toBe("error")
      const refused = yield* Effect.promise(() => fetch(`${server.url}/`).then(() => false, () => true))
      expect(refused).toBe(true)
    }))

  it.live("ResponsesServer / ChatCompletionsServer / GeminiServer: a long delayed answer; the scope closes promptly", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const responses = yield* ResponsesServer.make({
        script: () => ResponsesServer.delayed(60_000, ResponsesServer.text("late"))
      }).pipe(Scope.extend(scope))
      const chat = yield* ChatCompletionsServer.make({
        script: () => ChatCompletionsServer.delayed(60_000, ChatCompletionsServer.text("late"))
      }).pipe(Scope.extend(scope))
      const gemini = yield* GeminiServer.make({ script: [GeminiServer.reply("late", { delay: 60_000 })] })
        .pipe(Scope.extend(scope))
      const a = yield* Effect.promise(() => pending(`${responses.baseUrl}/responses`, { model: "m", input: [] }))
      const b = yield* Effect.promise(() =>
        pending(`${chat.baseUrl}/chat/completions`, { model: "m", stream: true, messages: [] })
      )
      const c = yield* Effect.promise(() =>
        pending(`${gemini.url}/v1beta/models/m:streamGenerateContent?alt=sse`, { contents: [] })
      )
      const started = Date.now()
      yield* Scope.close(scope, Exit.void)
      expect(Date.now() - started).toBeLessThan(3_000)
      const closed = yield* Effect.promise(() => Promise.all([a.closed, b.closed, c.closed]))
      for (const line of closed) expect(line).not.toMatch(/complete=true/)
    }))
})

describe("concurrent requests", () => {
  it.live("AnthropicServer answers concurrent requests each with its own scripted step", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({
        script: [0, 1, 2, 3, 4, 5].map((n) => AnthropicServer.delayed(100, AnthropicServer.reply(`answer-${n}`)))
      })
      const results = yield* Effect.forEach(
        [0, 1, 2, 3, 4, 5],
        () => post(`${server.url}/v1/messages`, anthropicRequest("hi")),
        { concurrency: "unbounded" }
      )
      const texts = results.map((r) => /answer-\d/.exec(r.text)?.[0])
      expect(new Set(texts).size).toBe(6)
      expect((yield* server.messages).length).toBe(6)
    }).pipe(Effect.scoped))
})
