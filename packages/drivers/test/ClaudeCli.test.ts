/**
 * Driver-level runs of the real Claude Code binary (node_modules/.bin/claude, 2.1.197),
 * offline: AnthropicServer on 127.0.0.1 as the model, a bearer-protected MCP server as the
 * hosted tools. These prove `prepare` + `parse` against the real CLI without core.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Claude } from "@tether/drivers"
import { AnthropicServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Fs from "node:fs"
import { baseRequest, claudeBinary, mcpServer, runTurn, tempRoot } from "./ClaudeHarness.js"

const token = "harness-token-not-secret"

const driverFor = (server: AnthropicServer.AnthropicServer, config: Partial<Claude.Config> = {}) =>
  Claude.driver({
    ...config,
    binary: claudeBinary,
    env: {
      ANTHROPIC_BASE_URL: server.url,
      ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
      CLAUDE_CODE_MAX_RETRIES: "0"
    }
  })

const terminalOf = (outputs: ReadonlyArray<Driver.Output>) =>
  outputs.find((o): o is Driver.Terminal => o._tag === "Terminal")

describe("Claude driver with the real CLI", () => {
  it.live(
    "a hosted tool round trip: events, the tool result in the next request, instructions, env",
    () =>
      Effect.gen(function*() {
        const root = yield* tempRoot
        const mcp = yield* mcpServer(token)
        const server = yield* AnthropicServer.make({
          respond: AnthropicServer.roundTrip(
            () => AnthropicServer.callTool("echo", { text: "hello-mcp" }, { text: "Calling." }),
            (results) => AnthropicServer.reply(`FINAL: ${results.map((r) => r.text).join(",")}`)
          )
        })
        const turn = yield* runTurn(
          driverFor(server),
          baseRequest(root, mcp.url, { prompt: "Echo hello-mcp please", instructions: "You are the harness agent." }),
          token
        )
        expect(turn.failure).toBeUndefined()
        expect(turn.exitCode).toBe(0)
        const calls = turn.outputs.filter((o) => o._tag === "ToolCall")
        expect(calls.map((c) => c._tag === "ToolCall" && `${c.phase}:${c.source}:${c.name}`)).toEqual([
          "start:host:echo",
          "end:host:echo"
        ])
        expect(calls[0]).toMatchObject({ input: { text: "hello-mcp" } })
        expect(calls[1]).toMatchObject({ output: "ECHO:hello-mcp", isError: false })
        const deltas = turn.outputs.flatMap((o) => o._tag === "TextDelta" ? [o.text] : []).join("")
        expect(deltas).toBe("Calling.FINAL: ECHO:hello-mcp")
        expect(terminalOf(turn.outputs)).toMatchObject({ ok: true, text: "FINAL: ECHO:hello-mcp" })
        expect(terminalOf(turn.outputs)?.usage?.inputTokens).toBeGreaterThan(0)

        const messages = yield* server.messages
        expect(messages).toHaveLength(2)
        expect(AnthropicServer.transcript(messages[0]!).at(-1)?.[1]).toContain("Echo hello-mcp please")
        expect(JSON.stringify(messages[0]!.system)).toContain("You are the harness agent.")
        expect(messages[0]!.tools?.map((t) => t.name)).toContain("mcp__tether__echo")
        expect(AnthropicServer.toolResults(messages[1]!)).toEqual([
          { toolUseId: expect.any(String), text: "ECHO:hello-mcp", isError: false }
        ])
        const requests = yield* server.requests
        const post = requests.find((r) => r.method === "POST")!
        expect(post.headers["x-api-key"]).toBe("sk-ant-fake")
        // The MCP server saw the token through the variable; the token is nowhere in argv or files.
        expect(mcp.log.filter((l) => l.method === "POST").every((l) => l.authorization === `Bearer ${token}`)).toBe(
          true
        )
        expect(mcp.log.some((l) => l.body.includes("tools/call"))).toBe(true)
        expect(turn.invocation.args.join(" ")).not.toContain(token)
        const written = Fs.readFileSync(`${root.profile}/${Claude.mcpConfigFile}`, "utf8")
        expect(written).not.toContain(token)
        expect(written).toContain("${TETHER_TEST_TOKEN_5F0C2A9B}")
        // HOME (the layout's sibling) only gets Claude's MCP logs; no file the CLI wrote holds the token.
        for (const dir of [root.home, root.profile, root.tmp]) {
          for (const entry of Fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
            if (entry.isFile()) {
              expect(Fs.readFileSync(`${entry.parentPath}/${entry.name}`, "utf8")).not.toContain(token)
            }
          }
        }
        expect(Fs.readdirSync(root.home)).toEqual([".cache"])
        expect(Fs.readdirSync(root.profile)).toContain("projects")
        console.log(`[claude] tool round trip turn: ${turn.ms.toFixed(0)} ms`)
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    60_000
  )

  it.live(
    "the hosted tools are there from the first model request even when their server is slow to connect",
    () =>
      Effect.gen(function*() {
        const root = yield* tempRoot
        // In print mode the CLI connects --mcp-config servers in the background unless told to
        // wait (MCP_CONNECTION_NONBLOCKING=0): its first request would then go out without them.
        const mcp = yield* mcpServer(token, 2_500)
        const server = yield* AnthropicServer.make({
          respond: AnthropicServer.roundTrip(
            () => AnthropicServer.callTool("echo", { text: "slow" }),
            (results) => AnthropicServer.reply(`FINAL: ${results.map((r) => r.text).join(",")}`)
          )
        })
        // A wait well past the server's delay, so a loaded machine cannot make it run out.
        const driver = driverFor(server, { mcpTimeout: "30 seconds" })
        const turn = yield* runTurn(driver, baseRequest(root, mcp.url, { prompt: "Echo slow" }), token)
        expect(turn.failure).toBeUndefined()
        const messages = yield* server.messages
        expect(messages[0]!.tools?.map((t) => t.name)).toContain("mcp__tether__echo")
        expect(terminalOf(turn.outputs)).toMatchObject({ ok: true, text: "FINAL: ECHO:slow" })
        // No server was left behind still connecting.
        expect(turn.outputs.filter((o) => o._tag === "Notice" && o.level === "warning")).toEqual([])
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    60_000
  )

  it.live(
    "resume at the driver level: the second run resumes the checkpoint and its request carries the first turn",
    () =>
      Effect.gen(function*() {
        const root = yield* tempRoot
        const mcp = yield* mcpServer(token)
        const server = yield* AnthropicServer.make({
          script: [AnthropicServer.reply("first answer"), AnthropicServer.reply("second answer")]
        })
        const driver = driverFor(server)
        const first = yield* runTurn(driver, baseRequest(root, mcp.url, { prompt: "first question" }), token)
        const checkpoint = terminalOf(first.outputs)?.session
        expect(checkpoint).toBeDefined()
        const second = yield* runTurn(
          driver,
          baseRequest(root, mcp.url, { prompt: "second question", session: { _tag: "Resume", id: checkpoint! } }),
          token
        )
        expect(second.failure).toBeUndefined()
        expect(second.outputs[0]).toMatchObject({ _tag: "SessionStarted", sessionId: checkpoint })
        expect(terminalOf(second.outputs)).toMatchObject({ ok: true, text: "second answer", session: checkpoint })
        const messages = yield* server.messages
        const transcript = AnthropicServer.transcript(messages[1]!)
        expect(transcript.map(([role]) => role)).toEqual(["user", "assistant", "user"])
        expect(transcript[0]![1]).toContain("first question")
        expect(transcript[1]![1]).toBe("first answer")
        expect(transcript[2]![1]).toContain("second question")
        console.log(`[claude] plain turn: ${first.ms.toFixed(0)} ms, resumed turn: ${second.ms.toFixed(0)} ms`)
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    60_000
  )

  it.live("a model error with retries disabled ends in a failed terminal and exit 1", () =>
    Effect.gen(function*() {
      const root = yield* tempRoot
      const mcp = yield* mcpServer(token)
      const server = yield* AnthropicServer.make({ script: [AnthropicServer.fail(500, "scripted outage")] })
      const turn = yield* runTurn(driverFor(server), baseRequest(root, mcp.url), token)
      expect(turn.exitCode).toBe(1)
      const end = terminalOf(turn.outputs)!
      expect(end.ok).toBe(false)
      expect(end.error).toContain("500")
      expect(yield* server.messages).toHaveLength(1)
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 60_000)

  it.live(
    "a wrong bearer token: the hosted server fails and the run is a typed HostedToolsUnavailable",
    () =>
      Effect.gen(function*() {
        const root = yield* tempRoot
        const mcp = yield* mcpServer(token)
        const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.reply("no tools") })
        const turn = yield* runTurn(driverFor(server), baseRequest(root, mcp.url), "wrong-token")
        expect(turn.failure?.reason).toBe("HostedToolsUnavailable")
        expect(mcp.log.some((l) => l.authorization === "Bearer wrong-token")).toBe(true)
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    60_000
  )

  it.live(
    "a hosted tools server still connecting when mcpTimeout ends: a typed HostedToolsUnavailable",
    () =>
      Effect.gen(function*() {
        const root = yield* tempRoot
        const mcp = yield* mcpServer(token, 5_000)
        const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.reply("no tools") })
        const turn = yield* runTurn(driverFor(server, { mcpTimeout: "300 millis" }), baseRequest(root, mcp.url), token)
        expect(turn.failure?.reason).toBe("HostedToolsUnavailable")
        expect(turn.failure?.detail).toContain("pending")
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    60_000
  )

  it.live(
    "usage counts every input token: the CLI's uncached, cache-read and cache-write tokens",
    () =>
      Effect.gen(function*() {
        const root = yield* tempRoot
        const mcp = yield* mcpServer(token)
        const usage = { inputTokens: 5, outputTokens: 7, cacheReadInputTokens: 300, cacheCreationInputTokens: 40 }
        const server = yield* AnthropicServer.make({
          respond: AnthropicServer.roundTrip(
            () => AnthropicServer.callTool("echo", { text: "cached" }, { usage }),
            () => AnthropicServer.reply("DONE", { usage })
          )
        })
        const turn = yield* runTurn(driverFor(server), baseRequest(root, mcp.url), token)
        expect(turn.failure).toBeUndefined()
        // Anthropic reports the three kinds of input apart; `Usage.inputTokens` is all input the
        // model read (as Codex and Gemini report it), `cachedInputTokens` the part read from cache.
        expect(terminalOf(turn.outputs)?.usage).toMatchObject({ inputTokens: 690, cachedInputTokens: 600 })
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    60_000
  )

  it.live(
    "resuming an unknown session is a typed ResumeRejected (parser and exit classification)",
    () =>
      Effect.gen(function*() {
        const root = yield* tempRoot
        const mcp = yield* mcpServer(token)
        const server = yield* AnthropicServer.make()
        const session: Driver.SessionRequest = { _tag: "Resume", id: crypto.randomUUID() }
        const turn = yield* runTurn(driverFor(server), baseRequest(root, mcp.url, { session }), token)
        expect(turn.exitCode).toBe(1)
        expect(turn.failure?.reason).toBe("ResumeRejected")
        const classified = driverFor(server).classifyExit?.({
          exitCode: 1,
          stderr: turn.stderr,
          terminal: undefined,
          session
        })
        expect(classified?.reason).toBe("ResumeRejected")
        expect(yield* server.messages).toHaveLength(0)
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    60_000
  )
})
