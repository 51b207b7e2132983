import { describe, expect, it } from "@effect/vitest"
import { GeminiServer } from "@tether/testing"
import * as Effect from "effect/Effect"

const body = (contents: ReadonlyArray<unknown>, tools: ReadonlyArray<string> = []) =>
  JSON.stringify({
    contents,
    systemInstruction: { parts: [{ text: "You are " }, { text: "helpful." }] },
    tools: [{ functionDeclarations: tools.map((name) => ({ name })) }]
  })

const post = (url: string, payload: string) =>
  Effect.promise(async () => {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "x-goog-api-key": "k" },
      body: payload
    })
    return { status: response.status, type: response.headers.get("content-type"), text: await response.text() }
  })

/** The `data:` payloads of an SSE body, parsed. */
const events = (text: string): Array<any> =>
  text.split("\r\n\r\n").filter((e) => e.startsWith("data: ")).map((e) => JSON.parse(e.slice(6)))

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const user = (text: string) => ({ role: "user", parts: [{ text }] })

describe("GeminiServer", () => {
  it.live("streams a text reply as SSE chunks with finishReason and usageMetadata on the last", () =>
    Effect.gen(function*() {
      const server = yield* GeminiServer.make({
        script: [GeminiServer.reply("Hello from the script", { usage: { inputTokens: 7, outputTokens: 3 } })]
      })
      expect(server.url).toBe(`http://127.0.0.1:${server.port}`)
      const res = yield* post(
        `${server.url}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`,
        body([user("hi")])
      )
      expect(res.status).toBe(200)
      expect(res.type).toBe("text/event-stream")
      const chunks = events(res.text)
      expect(chunks.length).toBeGreaterThan(1)
      expect(chunks.map((c) => c.candidates[0].content.parts[0].text).join("")).toBe("Hello from the script")
      expect(chunks.every((c) => c.candidates[0].content.role === "model" && c.modelVersion === "gemini-2.5-flash"))
        .toBe(true)
      expect(chunks.slice(0, -1).every((c) => c.candidates[0].finishReason === undefined)).toBe(true)
      expect(chunks.at(-1).candidates[0].finishReason).toBe("STOP")
      expect(chunks.at(-1).usageMetadata).toEqual({ promptTokenCount: 7, candidatesTokenCount: 3, totalTokenCount: 10 })
      const [recorded] = yield* server.requests
      expect(recorded?.headers["x-goog-api-key"]).toBe("k")
      expect(recorded?.step).toEqual(
        GeminiServer.reply("Hello from the script", { usage: { inputTokens: 7, outputTokens: 3 } })
      )
      const [generation] = yield* server.generations
      expect(generation?.model).toBe("gemini-2.5-flash")
      expect(GeminiServer.systemText(generation!)).toBe("You are helpful.")
      expect(GeminiServer.transcript(generation!)).toEqual([["user", "hi"]])
    }).pipe(Effect.scoped))

  it.live("a function call resolves the MCP-prefixed declaration; the round trip sees the response", () =>
    Effect.gen(function*() {
      const server = yield* GeminiServer.make({
        respond: GeminiServer.roundTrip(
          () => GeminiServer.callTool("lookup", { key: "A-1" }, { text: "Let me look." }),
          (responses) => GeminiServer.reply(`got ${responses.map((r) => `${r.name}=${r.output}`).join(",")}`)
        )
      })
      const url = `${server.url}/v1beta/models/m:streamGenerateContent?alt=sse`
      const first = events((yield* post(url, body([user("go")], ["read_file", "mcp_tether_lookup"]))).text)
      const call = first.at(-1).candidates[0].content.parts[0].functionCall
      expect(call).toEqual({ name: "mcp_tether_lookup", args: { key: "A-1" } })
      expect(first.slice(0, -1).map((c) => c.candidates[0].content.parts[0].text).join("")).toBe("Let me look.")
      const second = events(
        (yield* post(
          url,
          body([
            user("go"),
            { role: "model", parts: [{ functionCall: call }] },
            {
              role: "user",
              parts: [{ functionResponse: { name: "mcp_tether_lookup", id: "c1", response: { output: "open" } } }]
            }
          ])
        )).text
      )
      expect(second.map((c) => c.candidates[0].content.parts[0].text).join("")).toBe("got mcp_tether_lookup=open")
      const generations = yield* server.generations
      expect(GeminiServer.functionResponses(generations[1]!)).toEqual([{
        name: "mcp_tether_lookup",
        id: "c1",
        output: "open"
      }])
      expect(GeminiServer.declaredTools(generations[0]!)).toEqual(["read_file", "mcp_tether_lookup"])
    }).pipe(Effect.scoped))

  it.live("fails with the scripted status and the API's error body; exhausted script is 400; other paths 404", () =>
    Effect.gen(function*() {
      const server = yield* GeminiServer.make({ script: [GeminiServer.fail(429, "slow down")] })
      const url = `${server.url}/v1beta/models/m:streamGenerateContent?alt=sse`
      const failed = yield* post(url, body([user("x")]))
      expect(failed.status).toBe(429)
      expect(JSON.parse(failed.text)).toEqual({
        error: { code: 429, message: "slow down", status: "RESOURCE_EXHAUSTED" }
      })
      const exhausted = yield* post(url, body([user("x")]))
      expect(exhausted.status).toBe(400)
      expect(JSON.parse(exhausted.text).error.message).toContain("exhausted")
      yield* server.enqueue(GeminiServer.reply("{\"complexity_score\":1}"))
      const router = yield* post(`${server.url}/v1beta/models/lite:generateContent`, body([user("route")]))
      expect(JSON.parse(router.text).candidates[0].content.parts[0].text).toBe("{\"complexity_score\":1}")
      expect((yield* post(`${server.url}/v1/other`, "{}")).status).toBe(404)
      expect((yield* server.requests).map((r) => r.url)).toEqual([
        "/v1beta/models/m:streamGenerateContent?alt=sse",
        "/v1beta/models/m:streamGenerateContent?alt=sse",
        "/v1beta/models/lite:generateContent",
        "/v1/other"
      ])
    }).pipe(Effect.scoped))

  it.live("a delayed step holds its answer back; a client that gives up first gets nothing, the next step still runs", () =>
    Effect.gen(function*() {
      const server = yield* GeminiServer.make({
        script: [GeminiServer.reply("too late", { delay: 60_000 }), GeminiServer.reply("soon", { delay: 20 })]
      })
      const url = `${server.url}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`
      const abandoned = yield* Effect.promise(async () => {
        const controller = new AbortController()
        const response = fetch(url, { method: "POST", body: body([user("slow")]), signal: controller.signal })
        // Headers would arrive at once without the delay; 300 ms is far below the 60 s hold.
        const raced = await Promise.race([response.then(() => "answered"), sleep(300).then(() => "held")])
        controller.abort()
        await response.catch(() => undefined)
        return raced
      })
      expect(abandoned).toBe("held")
      const res = yield* post(url, body([user("next")]))
      expect(events(res.text).map((c) => c.candidates[0].content.parts[0].text).join("")).toBe("soon")
      expect((yield* server.requests).map((r) => r.step?._tag === "Text" ? r.step.text : undefined)).toEqual([
        "too late",
        "soon"
      ])
    }).pipe(Effect.scoped))

  it.live("a short tool name calls the exact mcp_<server>_<name>, not a longer one ending in it", () =>
    Effect.gen(function*() {
      const server = yield* GeminiServer.make({ respond: () => GeminiServer.callTool("lookup", {}) })
      const url = `${server.url}/v1beta/models/m:streamGenerateContent?alt=sse`
      const res = yield* post(url, body([user("go")], ["mcp_tether_issue_lookup", "mcp_tether_lookup"]))
      expect(events(res.text).at(-1).candidates[0].content.parts[0].functionCall.name).toBe("mcp_tether_lookup")
    }).pipe(Effect.scoped))

  it.live("a short tool name several declarations match is a scripting error: 400 with a message (the CLI retries a 5xx)", () =>
    Effect.gen(function*() {
      const server = yield* GeminiServer.make({ respond: () => GeminiServer.callTool("lookup", {}) })
      const url = `${server.url}/v1beta/models/m:streamGenerateContent?alt=sse`
      const res = yield* post(url, body([user("go")], ["mcp_a_lookup", "mcp_b_lookup"]))
      expect(res.status).toBe(400)
      expect(JSON.parse(res.text).error.message).toMatch(/lookup is ambiguous: mcp_a_lookup, mcp_b_lookup/)
    }).pipe(Effect.scoped))

  it.live("a responder that throws answers 400 with its message", () =>
    Effect.gen(function*() {
      const server = yield* GeminiServer.make({
        respond: () => {
          throw new Error("no step for this")
        }
      })
      const res = yield* post(`${server.url}/v1beta/models/m:generateContent`, body([user("go")]))
      expect(res.status).toBe(400)
      expect(JSON.parse(res.text).error.message).toMatch(/no step for this/)
    }).pipe(Effect.scoped))

  it.live("stops listening when its scope closes", () =>
    Effect.gen(function*() {
      const url = yield* GeminiServer.make().pipe(Effect.map((s) => s.url), Effect.scoped)
      const refused = yield* Effect.promise(() => fetch(`${url}/`).then(() => false, () => true))
      expect(refused).toBe(true)
    }))
})
