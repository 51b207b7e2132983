/**
 * The Cursor driver against the fake `agent` of @tether/testing (a real Node process speaking
 * Cursor's stream-json and MCP over HTTP with the official SDK client), driver level: a
 * bearer-protected MCP server on 127.0.0.1 stands in for the gateway.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Cursor } from "@tether/drivers"
import * as CursorAgent from "@tether/testing/CursorAgent"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Path from "node:path"
import { baseRequest, mcpServer, runTurn, tempRoot } from "./ClaudeHarness.js"

const terminalOf = (outputs: ReadonlyArray<Driver.Output>): Driver.Terminal | undefined => {
  for (const output of outputs) if (output._tag === "Terminal") return output
  return undefined
}

const driver = Cursor.driver(CursorAgent.config())

const chatFiles = (profile: string): Array<string> => {
  const dir = Path.join(profile, "chats")
  return Fs.existsSync(dir)
    ? (Fs.readdirSync(dir, { recursive: true }) as Array<string>).filter((f) => f.endsWith(".json"))
    : []
}

/** An endpoint that wrongly accepts requests without credentials. */
const openServer = Effect.acquireRelease(
  Effect.async<Http.Server>((resume) => {
    const server = Http.createServer((_req, res) =>
      res.writeHead(200, { "content-type": "application/json" }).end("{}")
    )
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
  }),
  (server) =>
    Effect.async<void>((resume) => {
      server.close(() => resume(Effect.void))
    })
)

describe("Cursor driver with the fake agent", () => {
  it.live("host tool round trip, then a resumed turn on the same session", () =>
    Effect.gen(function*() {
      const root = yield* tempRoot
      const token = `tok-${crypto.randomUUID()}`
      const mcp = yield* mcpServer(token)
      const first = baseRequest(root, mcp.url, { prompt: `Check it.\n${CursorAgent.call("echo", { text: "hi" })}` })
      const turn1 = yield* runTurn(driver, first, token)
      expect(turn1.exitCode).toBe(0)
      expect(turn1.failure).toBeUndefined()
      const calls = turn1.outputs.filter((o) => o._tag === "ToolCall")
      expect(calls).toHaveLength(2)
      expect(calls[0]).toMatchObject({ phase: "start", name: "echo", source: "host", input: { text: "hi" } })
      expect(calls[1]).toMatchObject({ phase: "end", name: "echo", source: "host", output: "ECHO:hi", isError: false })
      const terminal1 = terminalOf(turn1.outputs)
      expect(terminal1).toMatchObject({ ok: true, text: "turn 1; echo -> ECHO:hi" })
      const session = terminal1!.session!
      expect(session).toMatch(/^[0-9a-f-]{36}$/)
      // The probe without credentials was refused; every other request carried the token.
      expect(mcp.log[0]).toMatchObject({ authorization: undefined })
      expect(mcp.log.slice(1).every((entry) => entry.authorization === `Bearer ${token}`)).toBe(true)
      expect(mcp.log.map((entry) => entry.body).filter((b) => b.includes("tools/"))).toHaveLength(2)
      expect(chatFiles(root.profile)).toHaveLength(1)
      expect(Fs.readFileSync(Path.join(root.profile, Cursor.mcpFile), "utf8")).not.toContain(token)

      const turn2 = yield* runTurn(
        driver,
        { ...first, prompt: "again", session: { _tag: "Resume", id: session } },
        token
      )
      expect(turn2.invocation.args.slice(-2)).toEqual(["--resume", session])
      expect(terminalOf(turn2.outputs)).toMatchObject({ ok: true, text: "turn 2", session })
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))

  it.live("restart at driver level: turns 1-2 on endpoint A, turn 3 resumed on endpoint B with a new token", () =>
    Effect.gen(function*() {
      // The session state lives in CURSOR_DATA_DIR: here one profile directory serves all three
      // turns (with Agent.make, threads must carry it across the clone of a rebuilt agent).
      const root = yield* tempRoot
      const tokenA = `tok-a-${crypto.randomUUID()}`
      const tokenB = `tok-b-${crypto.randomUUID()}`
      const serverA = yield* mcpServer(tokenA)
      const prompt = CursorAgent.call("echo", { text: "x" })
      const turn1 = yield* runTurn(driver, baseRequest(root, serverA.url, { prompt }), tokenA)
      const session = terminalOf(turn1.outputs)!.session!
      const resume = { _tag: "Resume", id: session } as const
      const turn2 = yield* runTurn(driver, baseRequest(root, serverA.url, { prompt, session: resume }), tokenA)
      expect(terminalOf(turn2.outputs)).toMatchObject({ ok: true, session, text: "turn 2; echo -> ECHO:x" })
      // Server A keeps holding its port: B necessarily listens elsewhere.
      const serverB = yield* mcpServer(tokenB)
      expect(serverB.url).not.toBe(serverA.url)
      const turn3 = yield* runTurn(driver, baseRequest(root, serverB.url, { prompt, session: resume }), tokenB)
      expect(terminalOf(turn3.outputs)).toMatchObject({ ok: true, session, text: "turn 3; echo -> ECHO:x" })
      expect(Fs.readFileSync(Path.join(root.profile, Cursor.mcpFile), "utf8")).toContain(serverB.url)
      expect(serverB.log.slice(1).every((entry) => entry.authorization === `Bearer ${tokenB}`)).toBe(true)
      const stale = yield* Effect.promise(() =>
        fetch(serverB.url, {
          method: "POST",
          headers: { authorization: `Bearer ${tokenA}`, "content-type": "application/json" },
          body: "{}"
        }).then((r) => r.status)
      )
      expect(stale).toBe(401)
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))

  it.live("a wrong token leaves the hosted tools missing; an unknown session is ResumeRejected", () =>
    Effect.gen(function*() {
      const root = yield* tempRoot
      const mcp = yield* mcpServer("the-right-token")
      const request = baseRequest(root, mcp.url, { prompt: CursorAgent.call("echo", { text: "hi" }) })
      const wrong = yield* runTurn(driver, request, "a-wrong-token")
      expect(wrong.exitCode).toBe(0)
      expect(terminalOf(wrong.outputs)?.text).toBe("turn 1; echo -> unavailable")
      expect(wrong.stderr).toContain("MCP server tether failed")
      expect(wrong.outputs.some((o) => o._tag === "ToolCall")).toBe(false)

      const resume = { _tag: "Resume", id: "00000000-0000-4000-8000-000000000000" } as const
      const unknown = yield* runTurn(driver, { ...request, session: resume }, "the-right-token")
      expect(unknown.exitCode).toBe(1)
      expect(terminalOf(unknown.outputs)).toBeUndefined()
      expect(
        driver.classifyExit!({ exitCode: 1, stderr: unknown.stderr, terminal: undefined, session: resume })?.reason
      )
        .toBe("ResumeRejected")
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))

  it.live("an endpoint that accepts a request without credentials fails the turn", () =>
    Effect.gen(function*() {
      const root = yield* tempRoot
      const server = yield* openServer
      const { port } = server.address() as { port: number }
      const turn = yield* runTurn(driver, baseRequest(root, `http://127.0.0.1:${port}/mcp`, { prompt: "hi" }), "token")
      expect(turn.exitCode).toBe(1)
      const terminal = terminalOf(turn.outputs)
      expect(terminal?.ok).toBe(false)
      expect(terminal?.error).toContain("answered 200 to a request without credentials")
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))
})
