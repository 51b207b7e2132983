import { describe, expect, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { McpStdioServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"

/** An official SDK client connected to the server through the `Mcp.stdio` source's fields. */
const connect = (source: ReturnType<typeof McpStdioServer.source>) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      if (source._tag !== "stdio") throw new Error("expected a stdio source")
      const transport = new StdioClientTransport({
        command: source.command,
        args: [...source.args],
        env: { ...source.env },
        stderr: "pipe"
      })
      const client = new Client({ name: "test", version: "1.0.0" })
      await client.connect(transport)
      return { client, pid: transport.pid }
    }),
    ({ client }) => Effect.promise(() => client.close())
  )

const tempDir = Effect.acquireRelease(
  Effect.sync(() => NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "tether-stamp-"))),
  (dir) => Effect.sync(() => NodeFs.rmSync(dir, { recursive: true, force: true }))
)

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe("McpStdioServer", () => {
  it.live("lists and calls `stamp` over stdio with the declared env, logging each request", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const log = NodePath.join(dir, "stamp.log")
      const source = McpStdioServer.source("ext", { suffix: "S1", log })
      expect(source).toMatchObject({
        _tag: "stdio",
        key: "ext",
        command: process.execPath,
        args: [McpStdioServer.path]
      })
      const pid = yield* Effect.scoped(Effect.gen(function*() {
        const { client, pid } = yield* connect(source)
        const { tools } = yield* Effect.promise(() => client.listTools())
        expect(tools.map((tool) => tool.name)).toEqual([McpStdioServer.toolName])
        const result = yield* Effect.promise(() => client.callTool({ name: "stamp", arguments: { text: "hi" } }))
        expect(result.content).toEqual([{ type: "text", text: McpStdioServer.stamp("hi", "S1") }])
        const wrong = yield* Effect.promise(() => client.callTool({ name: "stamp", arguments: {} }))
        expect(wrong.isError).toBe(true)
        return pid
      }))
      const methods = NodeFs.readFileSync(log, "utf8").trim().split("\n").map((line) => JSON.parse(line).method)
      expect(methods).toEqual(["start", "tools/list", "tools/call", "tools/call"])
      // Closing the client (stdin) ends the server.
      expect(pid).toBeDefined()
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 200)))
      expect(alive(pid!)).toBe(false)
    }).pipe(Effect.scoped))

  it.live("without STAMP_SUFFIX the suffix is `none`", () =>
    Effect.scoped(Effect.gen(function*() {
      const { client } = yield* connect(McpStdioServer.source("ext"))
      const result = yield* Effect.promise(() => client.callTool({ name: "stamp", arguments: { text: "x" } }))
      expect(result.content).toEqual([{ type: "text", text: "STAMP:x:none" }])
    })))
})
