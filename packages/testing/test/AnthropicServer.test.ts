import { describe, expect, it } from "@effect/vitest"
import { AnthropicServer } from "@tether/testing"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"

interface SseEvent {
  readonly event: string
  readonly data: { readonly [key: string]: unknown }
}

const parseSse = (body: string): ReadonlyArray<SseEvent> =>
  body.split("\n\n").filter((chunk) => chunk.length > 0).map((chunk) => {
    const lines = chunk.split("\n")
    const event = lines.find((l) => l.startsWith("event: "))!.slice(7)
    const data = JSON.parse(lines.find((l) => l.startsWith("data: "))!.slice(6)) as SseEvent["data"]
    return { event, data }
  })

const post = (url: string, body: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}/v1/messages?beta=true`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": "sk-ant-fake" },
      body: JSON.stringify(body)
    })
    return { status: response.status, headers: response.headers, text: await response.text() }
  })

const request = (content: unknown, tools: ReadonlyArray<string> = []) => ({
  model: "claude-test",
  stream: true,
  messages: [{ role: "user", content }],
  tools: tools.map((name) => ({ name, input_schema: { type: "object" } }))
})

describe("AnthropicServer", () => {
  it.scopedLive("streams a text reply as the API's SSE sequence with usage", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({
        script: [AnthropicServer.reply("Hello from the script", { usage: { inputTokens: 7, outputTokens: 5 } })]
      })
      expect(server.url).toBe(`http://127.0.0.1:${server.port}`)
      const response = yield* post(server.url, request("hi"))
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toContain("text/event-stream")
      const events = parseSse(response.text)
      expect(events.map((e) => e.event)).toEqual([
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop"
      ])
      for (const e of events) expect(e.data["type"]).toBe(e.event)
      const text = events.filter((e) => e.event === "content_block_delta")
        .map((e) => (e.data["delta"] as { text: string }).text).join("")
      expect(text).toBe("Hello from the script")
      const start = events[0]!.data["message"] as { model: string; usage: { input_tokens: number } }
      expect(start.model).toBe("claude-test")
      expect(start.usage.input_tokens).toBe(7)
      expect(events[7]!.data).toEqual({
        type: "message_delta",
        delta: { stop_reason: "end_turn", stop_sequence: null },
        usage: { output_tokens: 5 }
      })
    }))

  it.scopedLive("streams a tool_use block whose name resolves against the request's tools", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({
        script: [AnthropicServer.callTool("lookup", { key: "ISSUE-42", nested: { n: [1, 2, 3] } }, { id: "toolu_x" })]
      })
      const response = yield* post(server.url, request("look", ["Bash", "mcp__tether__lookup"]))
      const events = parseSse(response.text)
      const start = events.find((e) => e.event === "content_block_start")!
      expect(start.data["content_block"]).toEqual({
        type: "tool_use",
        id: "toolu_x",
        name: "mcp__tether__lookup",
        input: {}
      })
      const json = events.filter((e) => e.event === "content_block_delta")
        .map((e) => (e.data["delta"] as { type: string; partial_json: string }))
      expect(json.every((d) => d.type === "input_json_delta")).toBe(true)
      expect(JSON.parse(json.map((d) => d.partial_json).join(""))).toEqual({
        key: "ISSUE-42",
        nested: { n: [1, 2, 3] }
      })
      const delta = events.find((e) => e.event === "message_delta")!
      expect((delta.data["delta"] as { stop_reason: string }).stop_reason).toBe("tool_use")
    }))

  it.scopedLive("fails with the scripted status and the API's error body; an exhausted script answers 500", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({ script: [AnthropicServer.fail(429, "slow down")] })
      const first = yield* post(server.url, request("a"))
      expect(first.status).toBe(429)
      expect(JSON.parse(first.text)).toEqual({
        type: "error",
        error: { type: "rate_limit_error", message: "slow down" }
      })
      const second = yield* post(server.url, request("b"))
      expect(second.status).toBe(500)
      expect((JSON.parse(second.text) as { error: { type: string } }).error.type).toBe("api_error")
    }))

  it.scopedLive("records every request, answers HEAD / and 404s other paths; the responder sees tool results", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({
        respond: AnthropicServer.roundTrip(
          () => AnthropicServer.callTool("echo", { text: "x" }),
          (results) => AnthropicServer.reply(`got ${results.map((r) => r.text).join(",")}`)
        )
      })
      const head = yield* Effect.promise(() => fetch(`${server.url}/`, { method: "HEAD" }))
      expect(head.status).toBe(200)
      const other = yield* Effect.promise(() => fetch(`${server.url}/v1/models`))
      expect(other.status).toBe(404)
      const first = yield* post(server.url, request("call it", ["mcp__s__echo"]))
      expect(first.text).toContain("mcp__s__echo")
      const second = yield* post(server.url, {
        model: "m",
        messages: [
          { role: "user", content: "call it" },
          { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "mcp__s__echo", input: { text: "x" } }] },
          {
            role: "user",
            content: [{ type: "tool_result", tool_use_id: "t1", content: [{ type: "text", text: "ECHO:x" }] }]
          }
        ]
      })
      expect(
        parseSse(second.text).filter((e) => e.event === "content_block_delta")
          .map((e) => (e.data["delta"] as { text: string }).text).join("")
      ).toBe("got ECHO:x")
      const requests = yield* server.requests
      expect(requests.map((r) => `${r.method} ${r.url}`)).toEqual([
        "HEAD /",
        "GET /v1/models",
        "POST /v1/messages?beta=true",
        "POST /v1/messages?beta=true"
      ])
      expect(requests[2]!.headers["x-api-key"]).toBe("sk-ant-fake")
      const messages = yield* server.messages
      expect(messages).toHaveLength(2)
      expect(AnthropicServer.toolResults(messages[1]!)).toEqual([{ toolUseId: "t1", text: "ECHO:x", isError: false }])
      expect(AnthropicServer.transcript(messages[1]!)).toEqual([
        ["user", "call it"],
        ["assistant", `tool_use mcp__s__echo {"text":"x"}`],
        ["user", "ECHO:x"]
      ])
    }))

  it.scopedLive("a reply in pieces is written piece by piece: the first delta is readable before the gate opens", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const server = yield* AnthropicServer.make({
        script: [AnthropicServer.replyInPieces(["Hel", "lo ", "there"], { between: Deferred.await(gate) })]
      })
      const { before, body } = yield* Effect.promise(async () => {
        const response = await fetch(`${server.url}/v1/messages`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(request("hi"))
        })
        const reader = response.body!.getReader()
        const decoder = new TextDecoder()
        let before = ""
        // Reads until the first delta: the server is blocked on the gate, so all of this came early.
        while (!before.includes("text_delta")) before += decoder.decode((await reader.read()).value)
        Deferred.unsafeDone(gate, Exit.void)
        let body = before
        for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
          body += decoder.decode(chunk.value)
        }
        return { before, body }
      })
      expect(parseSse(before).filter((e) => e.event === "content_block_delta")).toHaveLength(1)
      expect(before).not.toContain("message_stop")
      const deltas = parseSse(body).filter((e) => e.event === "content_block_delta")
      expect(deltas.map((e) => (e.data["delta"] as { text: string }).text)).toEqual(["Hel", "lo ", "there"])
      expect(parseSse(body).at(-1)?.event).toBe("message_stop")
    }))

  it.scopedLive("a delayed step is recorded at once and answered after its delay", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({
        script: [AnthropicServer.delayed(300, AnthropicServer.reply("late"))]
      })
      const started = Date.now()
      const fiber = yield* Effect.fork(post(server.url, request("slow")))
      yield* Effect.sleep(100)
      expect((yield* server.requests).map((r) => r.step?._tag)).toEqual(["Delayed"])
      const response = yield* fiber.await.pipe(Effect.flatten)
      expect(Date.now() - started).toBeGreaterThanOrEqual(300)
      expect(response.text).toContain("late")
    }))

  it.live("closing interrupts a delayed reply in flight and drops its connection", () =>
    Effect.gen(function*() {
      const outcome = yield* Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          script: [AnthropicServer.delayed(30_000, AnthropicServer.reply("never"))]
        })
        const pending = fetch(`${server.url}/v1/messages`, {
          method: "POST",
          body: JSON.stringify(request("slow"))
        }).then(() => "answered", () => "dropped")
        while ((yield* server.requests).length === 0) yield* Effect.sleep(10)
        return pending
      }).pipe(Effect.scoped)
      const started = Date.now()
      expect(yield* Effect.promise(() => outcome)).toBe("dropped")
      expect(Date.now() - started).toBeLessThan(5_000)
    }))

  it.live("closes the listener with its scope", () =>
    Effect.gen(function*() {
      const port = yield* Effect.scoped(AnthropicServer.make().pipe(Effect.map((s) => s.port)))
      const refused = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${port}/`, { method: "HEAD" }).then(() => false, () => true)
      )
      expect(refused).toBe(true)
    }))
})

describe("AnthropicServer tool names and scripting errors", () => {
  const toolName = (text: string) =>
    parseSse(text).find((e) =>
      e.event === "content_block_start" && (e.data["content_block"] as any).type === "tool_use"
    )
      ?.data["content_block"] as { readonly name: string } | undefined

  it.scopedLive("a name with __ but no mcp__ prefix resolves to mcp__<server>__<name>", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.callTool("ns__tool", {}) })
      const response = yield* post(server.url, request("go", ["Bash", "mcp__tether__ns__tool"]))
      expect(toolName(response.text)?.name).toBe("mcp__tether__ns__tool")
    }))

  it.scopedLive("a catalog name with characters Claude rewrites resolves (issue.lookup → issue_lookup)", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.callTool("issue.lookup", {}) })
      const response = yield* post(server.url, request("go", ["mcp__tether__lookup", "mcp__tether__issue_lookup"]))
      expect(toolName(response.text)?.name).toBe("mcp__tether__issue_lookup")
    }))

  it.scopedLive("a short name calls the exact mcp__<server>__<name>, not a longer one ending in it", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.callTool("lookup", {}) })
      const response = yield* post(server.url, request("go", ["mcp__tether__issue__lookup", "mcp__tether__lookup"]))
      expect(toolName(response.text)?.name).toBe("mcp__tether__lookup")
    }))

  it.scopedLive("a name several tools match is a scripting error: 500 with a message", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.callTool("lookup", {}) })
      const response = yield* post(server.url, request("go", ["mcp__a__lookup", "mcp__b__lookup"]))
      expect(response.status).toBe(500)
      expect(JSON.parse(response.text).error.message).toMatch(/lookup is ambiguous: mcp__a__lookup, mcp__b__lookup/)
    }))

  it.scopedLive("a responder that throws answers 500 with its message instead of hanging", () =>
    Effect.gen(function*() {
      const server = yield* AnthropicServer.make({
        respond: () => {
          throw new Error("no step for this")
        }
      })
      const response = yield* post(server.url, request("go")).pipe(Effect.timeout("5 seconds"))
      expect(response.status).toBe(500)
      expect(JSON.parse(response.text).error.message).toMatch(/no step for this/)
    }))
})
