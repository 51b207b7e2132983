/**
 * The driver against the real Gemini CLI (pinned 0.61.0), offline: the scripted GeminiServer
 * plays the model, a bearer-protected MCP server on 127.0.0.1 serves `echo`. Two CLI turns
 * (≈3 s each): keep this file small.
 */
import { NodeContext } from "@effect/platform-node"
import * as FileSystem from "@effect/platform/FileSystem"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Gemini } from "@tether/drivers"
import * as GeminiServer from "@tether/testing/GeminiServer"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { baseRequest, mcpServer, runTurn, tempRoot } from "./ClaudeHarness.js"

const terminalOf = (outputs: ReadonlyArray<Driver.Output>): Driver.Terminal | undefined => {
  for (const output of outputs) if (output._tag === "Terminal") return output
  return undefined
}

const marker = "INSTRUCTIONS-MARKER-7d1f: you triage issues."

describe("Gemini driver with the real CLI", () => {
  it.live(
    "host tool round trip, instructions in systemInstruction, then a resumed turn with a narrower allow-list",
    () =>
      Effect.gen(function*() {
        const root = yield* tempRoot
        // Core's materialization creates parents; the harness writes files directly.
        yield* (yield* FileSystem.FileSystem).makeDirectory(`${root.profile}/.gemini`)
        const token = `tok-${crypto.randomUUID()}`
        const mcp = yield* mcpServer(token)
        const model = yield* GeminiServer.make({
          script: [GeminiServer.callTool("echo", { text: "hello-mcp" })],
          respond: GeminiServer.roundTrip(
            (request) => GeminiServer.reply(`turn ${GeminiServer.transcript(request).length}`),
            (responses) => GeminiServer.reply(`FINAL: ${responses.map((r) => r.output).join("|")}`)
          )
        })
        const driver = Gemini.driver({
          model: "gemini-2.5-flash",
          env: { GOOGLE_GEMINI_BASE_URL: model.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
        })
        const sessionId = crypto.randomUUID()
        const first = baseRequest(root, mcp.url, {
          prompt: "please echo hello-mcp",
          instructions: marker,
          session: { _tag: "New", id: sessionId }
        })
        const turn1 = yield* runTurn(driver, first, token)
        expect(turn1.failure).toBeUndefined()
        expect(turn1.exitCode).toBe(0)
        const calls = turn1.outputs.filter((o) => o._tag === "ToolCall")
        expect(calls.map((c) => c._tag === "ToolCall" ? [c.phase, c.name, c.source] : [])).toEqual([
          ["start", "echo", "host"],
          ["end", "echo", "host"]
        ])
        expect(calls[1]).toMatchObject({ output: "ECHO:hello-mcp", isError: false })
        const terminal1 = terminalOf(turn1.outputs)
        expect(terminal1).toMatchObject({ ok: true, session: sessionId, model: "gemini-2.5-flash" })
        expect(terminal1?.text).toContain("FINAL: <untrusted_context>\nECHO:hello-mcp")

        const generations = yield* model.generations
        expect(generations).toHaveLength(2)
        expect(generations[0]!.model).toBe("gemini-2.5-flash")
        expect(GeminiServer.systemText(generations[0]!)).toContain(marker)
        expect(GeminiServer.declaredTools(generations[0]!)).toContain("mcp_tether_echo")
        expect(GeminiServer.transcript(generations[0]!).at(-1)?.[1]).toContain("please echo hello-mcp")
        expect(GeminiServer.functionResponses(generations[1]!).map((r) => r.name)).toEqual(["mcp_tether_echo"])
        const requests = yield* model.requests
        expect(requests.every((r) => r.headers["x-goog-api-key"] === "fake-gemini-key")).toBe(true)
        expect(mcp.log.length).toBeGreaterThan(0)
        expect(mcp.log.every((entry) => entry.authorization === `Bearer ${token}`)).toBe(true)
        expect(mcp.log.some((entry) => entry.body.includes(`"tools/call"`))).toBe(true)

        const turn2 = yield* runTurn(
          driver,
          {
            ...first,
            prompt: "and again",
            // The turn's allow-list (`includeTools`) no longer has `echo`: the CLI must not offer it.
            hosted: { ...first.hosted, tools: ["not_served"] },
            session: { _tag: "Resume", id: sessionId }
          },
          token
        )
        expect(turn2.exitCode).toBe(0)
        const terminal2 = terminalOf(turn2.outputs)
        expect(terminal2).toMatchObject({ ok: true, session: sessionId })
        const resumed = (yield* model.generations).at(-1)!
        const roles = GeminiServer.transcript(resumed).map(([role]) => role)
        expect(roles.slice(-2)).toEqual(["model", "user"])
        expect(GeminiServer.transcript(resumed).at(-1)?.[1]).toBe("and again")
        expect(roles.length).toBeGreaterThanOrEqual(5)
        expect(GeminiServer.declaredTools(resumed).filter((name) => name.startsWith("mcp_"))).toEqual([])
        expect(GeminiServer.systemText(resumed)).toContain(marker)
        console.info(
          `gemini turn timings (spawn to exit): tool turn ${Math.round(turn1.ms)} ms, resumed turn ${
            Math.round(turn2.ms)
          } ms`
        )
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    120_000
  )

  it.live(
    "no .env around the workspace chooses the model, endpoint or credentials: not a parent's .gemini/.env, not the workspace's .env",
    () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const root = yield* tempRoot
        yield* fs.makeDirectory(`${root.profile}/.gemini`)
        const token = `tok-${crypto.randomUUID()}`
        const mcp = yield* mcpServer(token)
        const model = yield* GeminiServer.make({ respond: () => GeminiServer.reply("fine") })
        // An endpoint only a stray file names, and one the CLI would send the host's key to.
        const stray = yield* GeminiServer.make({ respond: () => GeminiServer.reply("from a stray .env") })
        const dotenv = (file: string) =>
          `GEMINI_MODEL=model-from-${file}\nGOOGLE_VERTEX_BASE_URL=${stray.url}\nHTTPS_PROXY=http://127.0.0.1:9\n`
        // A parent of the workspace (the CLI reads it when the workspace is trusted, as Tether's are).
        yield* fs.makeDirectory(`${root.root}/.gemini`)
        yield* fs.writeFileString(`${root.root}/.gemini/.env`, dotenv("parent"))
        yield* fs.writeFileString(`${root.work}/.env`, dotenv("workspace"))
        // The host chooses the model, the endpoint and the key; a file's proxy would break the turn.
        const driver = Gemini.driver({
          model: "gemini-2.5-flash",
          env: { GOOGLE_GEMINI_BASE_URL: model.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
        })
        for (const [where, file] of [["parent", `${root.root}/.gemini/.env`], ["workspace", `${root.work}/.env`]]) {
          const turn = yield* runTurn(driver, baseRequest(root, mcp.url, { prompt: "hi" }), token)
          expect(turn.failure, where).toBeUndefined()
          expect(terminalOf(turn.outputs)?.text, where).toBe("fine")
          const generations = yield* model.generations
          expect(generations.at(-1)!.model, where).not.toContain("model-from")
          expect(turn.invocation.env["GEMINI_MODEL"]).toBe("")
          yield* fs.remove(file)
        }
        expect(yield* stray.requests).toEqual([])
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    120_000
  )
})
