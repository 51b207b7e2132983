/**
 * Driver-level runs of the real Codex binary (`@openai/codex` 0.171.0, the native binary of the
 * platform package) offline: the scripted Responses server is the model, a bearer-protected
 * MCP server on 127.0.0.1 stands in for the gateway. Each test materializes the invocation that
 * `Codex.driver(...).prepare` built, spawns it, and parses its stdout with the driver's parser.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Codex } from "@tether/drivers"
import { ResponsesServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { baseRequest, mcpServer, runTurn, tempRoot } from "./ClaudeHarness.js"
import type { TurnResult } from "./ClaudeHarness.js"
import { offlineCodex } from "./CodexHarness.js"

const token = "codex-cli-test-token-6a1f0d"

const driverFor = (server: ResponsesServer.ResponsesServer) => offlineCodex(server.baseUrl)

const tags = (result: TurnResult) => result.outputs.map((o) => o._tag)
const terminal = (result: TurnResult) => result.outputs.find((o): o is Driver.Terminal => o._tag === "Terminal")
const calls = (result: TurnResult) =>
  result.outputs.filter((o): o is Extract<Driver.Output, { _tag: "ToolCall" }> => o._tag === "ToolCall")
const prompts = (request: ResponsesServer.RecordedRequest) =>
  ResponsesServer.userTexts(request).filter((t) => !t.startsWith("<environment_context>"))

const timings: Array<[string, number]> = []

describe("Codex driver with the real CLI (driver level)", () => {
  it.live("a plain turn: the prompt arrives verbatim, only the enabled hosted tools are offered", () =>
    Effect.gen(function*() {
      const root = yield* tempRoot
      const mcp = yield* mcpServer(token)
      const server = yield* ResponsesServer.make({ script: () => ResponsesServer.text("Hello from fake model") })
      const prompt = "--version; \"quoted\" $HOME `tick`"
      const result = yield* runTurn(driverFor(server), baseRequest(root, mcp.url, { prompt }), token)
      timings.push(["plain turn", result.ms])
      expect(result.exitCode).toBe(0)
      expect(result.failure).toBeUndefined()
      expect(tags(result)).toEqual(["SessionStarted", "Notice", "Message", "Usage", "Terminal"])
      expect(terminal(result)).toMatchObject({ ok: true, text: "Hello from fake model" })
      const [request] = yield* server.requests
      expect(prompts(request!)).toEqual([prompt])
      expect(request!.headers["authorization"]).toBe("Bearer sk-fake-codex")
      expect(ResponsesServer.namespaceTools(request!)["mcp__tether"]).toEqual(["echo"])
      // The MCP server saw the real token, under the variable the config names.
      expect(mcp.log.length).toBeGreaterThan(0)
      expect(mcp.log.every((entry) => entry.authorization === `Bearer ${token}`)).toBe(true)
      // TMPDIR outside CODEX_HOME: no refusal to create the helper aliases; nothing written to HOME.
      expect(result.stderr).not.toContain("Refusing to create helper binaries")
      expect(Fs.readdirSync(root.home)).toEqual([])
      expect(Fs.readFileSync(`${root.profile}/config.toml`, "utf8")).not.toContain(token)
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))

  it.live("a turn whose policy allows no tool offers no hosted tool (enabled_tools = [])", () =>
    Effect.gen(function*() {
      const root = yield* tempRoot
      const mcp = yield* mcpServer(token)
      const server = yield* ResponsesServer.make()
      const request = baseRequest(root, mcp.url)
      const result = yield* runTurn(driverFor(server), { ...request, hosted: { ...request.hosted, tools: [] } }, token)
      expect(result.exitCode).toBe(0)
      const [model] = yield* server.requests
      expect(ResponsesServer.namespaceTools(model!)["mcp__tether"] ?? []).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))

  it.live("a hosted tool round trip: host ToolCall events and the result in the next model request", () =>
    Effect.gen(function*() {
      const root = yield* tempRoot
      const mcp = yield* mcpServer(token)
      const server = yield* ResponsesServer.make({
        script: (r) => {
          const output = ResponsesServer.lastFunctionCallOutput(r)
          return output === undefined
            ? ResponsesServer.mcpTool("tether", "echo", { text: "hello-mcp" })
            : ResponsesServer.text(`FINAL ${output.text.includes("ECHO:hello-mcp") ? "echoed" : "missing"}`)
        }
      })
      const result = yield* runTurn(driverFor(server), baseRequest(root, mcp.url), token)
      timings.push(["tool round trip", result.ms])
      expect(result.exitCode).toBe(0)
      expect(calls(result).map((c) => [c.phase, c.name, c.source])).toEqual([
        ["start", "echo", "host"],
        ["end", "echo", "host"]
      ])
      expect(calls(result)[0]!.input).toEqual({ text: "hello-mcp" })
      expect(calls(result)[1]).toMatchObject({ output: "ECHO:hello-mcp", isError: false })
      expect(terminal(result)?.text).toBe("FINAL echoed")
      const requests = yield* server.requests
      expect(requests).toHaveLength(2)
      expect(ResponsesServer.lastFunctionCallOutput(requests[1]!)?.text).toContain("ECHO:hello-mcp")
      const call = mcp.log.find((entry) => entry.body.includes("tools/call"))
      expect(JSON.parse(call!.body).params).toMatchObject({ name: "echo", arguments: { text: "hello-mcp" } })
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))

  it.live("declared MCP sources: a stdio server and a bearer-protected HTTP server are called as mcp tools", () =>
    Effect.gen(function*() {
      const root = yield* tempRoot
      const hosted = yield* mcpServer(token)
      const external = yield* mcpServer("external-token-3b9e")
      const server = yield* ResponsesServer.make({
        script: ResponsesServer.sequence(
          ResponsesServer.mcpTool("local", "echo", { text: "one" }),
          ResponsesServer.mcpTool("remote", "echo", { text: "two" }),
          ResponsesServer.text("done")
        )
      })
      const mcp: ReadonlyArray<Driver.McpServer> = [
        {
          _tag: "stdio",
          key: "local",
          command: process.execPath,
          args: [Path.join(import.meta.dirname, "fixtures", "codex", "stdio-echo-server.mjs")],
          env: { ECHO_PREFIX: "from-env" }
        },
        { _tag: "http", key: "remote", url: external.url, headers: {}, bearerTokenEnv: "REMOTE_MCP_TOKEN" }
      ]
      const request = baseRequest(root, hosted.url, {
        mcp,
        hostEnv: { PATH: process.env["PATH"], REMOTE_MCP_TOKEN: "external-token-3b9e" }
      })
      const result = yield* runTurn(driverFor(server), request, token)
      expect(result.exitCode).toBe(0)
      expect(calls(result).filter((c) => c.phase === "end").map((c) => [c.name, c.source, c.output, c.isError]))
        .toEqual([
          ["echo", "mcp", "STDIO:one:from-env", false],
          ["echo", "mcp", "ECHO:two", false]
        ])
      expect(external.log.every((entry) => entry.authorization === "Bearer external-token-3b9e")).toBe(true)
      const offered = ResponsesServer.namespaceTools((yield* server.requests)[0]!)
      expect(offered["mcp__local"]).toEqual(["echo"])
      expect(offered["mcp__remote"]).toEqual(["echo"])
      expect(Fs.readFileSync(`${root.profile}/config.toml`, "utf8")).not.toContain("external-token-3b9e")
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))

  it.live("resume: the second run resumes the first run's thread and its model request carries the first turn", () =>
    Effect.gen(function*() {
      const root = yield* tempRoot
      const mcp = yield* mcpServer(token)
      const server = yield* ResponsesServer.make({ script: (r) => ResponsesServer.text(`answer ${r.index}`) })
      const driver = driverFor(server)
      const first = yield* runTurn(driver, baseRequest(root, mcp.url, { prompt: "first question" }), token)
      const thread = terminal(first)!.session!
      expect(thread).toMatch(/^[0-9a-f-]{36}$/)
      const second = yield* runTurn(
        driver,
        baseRequest(root, mcp.url, { prompt: "second question", session: { _tag: "Resume", id: thread } }),
        token
      )
      timings.push(["resumed turn", second.ms])
      expect(second.exitCode).toBe(0)
      expect(second.outputs[0]).toEqual({ _tag: "SessionStarted", sessionId: thread, model: undefined })
      expect(terminal(second)).toMatchObject({ ok: true, text: "answer 1", session: thread })
      const requests = yield* server.requests
      expect(prompts(requests[1]!)).toEqual(["first question", "second question"])
      expect(ResponsesServer.assistantTexts(requests[1]!)).toEqual(["answer 0"])
      // A fork starts a new thread that still carries the history.
      const forked = yield* runTurn(
        driver,
        baseRequest(root, mcp.url, { prompt: "forked", session: { _tag: "Fork", from: thread, id: "unused" } }),
        token
      )
      expect(terminal(forked)?.ok).toBe(true)
      expect(terminal(forked)?.session).not.toBe(thread)
      expect(prompts((yield* server.requests)[2]!)).toEqual(["first question", "second question", "forked"])
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))

  it.live("resuming an unknown thread exits 1 and is classified as ResumeRejected", () =>
    Effect.gen(function*() {
      const root = yield* tempRoot
      const mcp = yield* mcpServer(token)
      const server = yield* ResponsesServer.make()
      const session: Driver.SessionRequest = { _tag: "Resume", id: "0199a213-81c0-7800-8aa1-bbab2a035a53" }
      const result = yield* runTurn(driverFor(server), baseRequest(root, mcp.url, { session }), token)
      expect(result.exitCode).toBe(1)
      expect(terminal(result)).toBeUndefined()
      const classified = Codex.classifyExit({ exitCode: 1, stderr: result.stderr, terminal: undefined, session })
      expect(classified?.reason).toBe("ResumeRejected")
      expect(yield* server.requests).toHaveLength(0)
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))

  it.live("a wrong token fails the run before any model request (required = true): HostedToolsUnavailable", () =>
    Effect.gen(function*() {
      const root = yield* tempRoot
      const mcp = yield* mcpServer(token)
      const server = yield* ResponsesServer.make()
      const result = yield* runTurn(driverFor(server), baseRequest(root, mcp.url), "not-the-token")
      expect(result.exitCode).toBe(1)
      expect(result.outputs.filter((o) => o._tag !== "Notice")).toEqual([])
      const classified = Codex.classifyExit({
        exitCode: 1,
        stderr: result.stderr,
        terminal: undefined,
        session: { _tag: "New", id: "x" }
      })
      expect(classified?.reason).toBe("HostedToolsUnavailable")
      expect(mcp.log[0]?.authorization).toBe("Bearer not-the-token")
      expect(yield* server.requests).toHaveLength(0)
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))

  it.live("a model failure with retries off is a failed terminal with the provider's message", () =>
    Effect.gen(function*() {
      const root = yield* tempRoot
      const mcp = yield* mcpServer(token)
      const server = yield* ResponsesServer.make({ script: () => ResponsesServer.fail(400, "scripted rejection") })
      const result = yield* runTurn(driverFor(server), baseRequest(root, mcp.url), token)
      expect(result.exitCode).toBe(1)
      expect(terminal(result)).toMatchObject({ ok: false })
      expect(terminal(result)?.error).toContain("scripted rejection")
      expect(yield* server.requests).toHaveLength(1)
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))

  it.live("the prompt `-` still arrives verbatim (fed on stdin, the only thing ever written there)", () =>
    Effect.gen(function*() {
      const root = yield* tempRoot
      const mcp = yield* mcpServer(token)
      const server = yield* ResponsesServer.make()
      const result = yield* runTurn(driverFor(server), baseRequest(root, mcp.url, { prompt: "-" }), token)
      expect(result.exitCode).toBe(0)
      expect(prompts((yield* server.requests)[0]!)).toEqual(["-"])
      for (const [name, ms] of timings) console.log(`[codex driver] ${name}: ${ms.toFixed(0)} ms spawn → exit`)
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))
})
