/**
 * Checks how approvals treat MCP tools on Gemini CLI (real 0.61, `gemini --acp`, offline).
 * docs/approvals.md: a tool of the definition's MCP sources is the host's (not asked); for a tool
 * of an MCP server the profile declares, `allowForSession` reaches "that tool
 * (`proceed_always_tool`), never all of the server's tools".
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Approval } from "@tether/core"
import { Gemini } from "@tether/drivers"
import { GeminiServer, Harness, McpStdioServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"

const sdk = (sub: string) =>
  pathToFileURL(
    Path.join(
      Path.dirname(createRequire(import.meta.url).resolve("@modelcontextprotocol/sdk/server/index.js")),
      "..",
      "..",
      "esm",
      sub
    )
  ).href

/** A user's own MCP server with two tools, `alpha` and `beta`, each logging its call to `LOG`. */
const serverSource = () => `
import { Server } from ${JSON.stringify(sdk("server/index.js"))}
import { StdioServerTransport } from ${JSON.stringify(sdk("server/stdio.js"))}
import { CallToolRequestSchema, ListToolsRequestSchema } from ${JSON.stringify(sdk("types.js"))}
import * as Fs from "node:fs"
const server = new Server({ name: "mine", version: "1.0.0" }, { capabilities: { tools: {} } })
const schema = { type: "object", properties: { text: { type: "string" } }, required: ["text"] }
server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [{ name: "alpha", description: "Alpha", inputSchema: schema }, { name: "beta", description: "Beta", inputSchema: schema }]
}))
server.setRequestHandler(CallToolRequestSchema, async (request) => {
  Fs.appendFileSync(process.env.LOG, request.params.name + "\\n")
  return { content: [{ type: "text", text: request.params.name.toUpperCase() + ":" + request.params.arguments?.text }] }
})
await server.connect(new StdioServerTransport())
`

const modelOf = () =>
  GeminiServer.make({
    respond: GeminiServer.roundTrip((request) => {
      const prompt = GeminiServer.transcript(request).filter(([role]) => role === "user").at(-1)?.[1] ?? ""
      const tool = /CALL: (\S+)$/m.exec(prompt)?.[1]
      return tool === undefined ? GeminiServer.reply("No call.") : GeminiServer.callTool(tool, { text: "x" })
    }, (responses) => GeminiServer.reply(`TOOL: ${responses.map((r) => JSON.stringify(r.output)).join("|")}`))
  })

describe("Gemini MCP tools under approvals (real CLI)", () => {
  it.live(
    "declared source: not asked; profile's server: allowForSession is that tool only",
    () =>
      Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        const script = Path.join(sandbox.base, "mine-server.mjs")
        const log = Path.join(sandbox.base, "mine.log")
        Fs.writeFileSync(script, serverSource())
        Fs.writeFileSync(log, "")
        Fs.mkdirSync(Path.join(sandbox.source, ".gemini"), { recursive: true, mode: 0o700 })
        Fs.writeFileSync(
          Path.join(sandbox.source, ".gemini", "settings.json"),
          JSON.stringify({ mcpServers: { mine: { command: process.execPath, args: [script], env: { LOG: log } } } })
        )
        const stampLog = Path.join(sandbox.base, "stamp.log")
        const asked: Array<Approval.ApprovalRequest> = []
        const texts: Array<string> = []
        yield* Effect.gen(function*() {
          const server = yield* modelOf()
          const agent = yield* Agent.make({
            driver: Gemini.driver({
              model: "gemini-2.5-flash",
              env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
            }),
            definition: {
              instructions: "",
              tools: Toolkit.empty,
              mcp: [McpStdioServer.source("decl", { log: stampLog })]
            },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            approvals: {
              handler: (request) =>
                Effect.sync(() => {
                  asked.push(request)
                  return request.toolName.includes("alpha") ? Approval.allowForSession : Approval.deny("No.")
                })
            }
          })
          const thread = yield* agent.thread("gemini-mcp")
          for (const tool of ["mcp_decl_stamp", "mcp_mine_alpha", "mcp_mine_alpha", "mcp_mine_beta"]) {
            texts.push((yield* thread.run(`CALL: ${tool}`)).text)
          }
          yield* agent.close()
        }).pipe(Effect.scoped, Effect.provide(Harness.layer))
        const ran = Fs.readFileSync(log, "utf8").trim().split("\n").filter((l) => l !== "")
        expect({
          stamped: Fs.existsSync(stampLog) && Fs.readFileSync(stampLog, "utf8").includes("tools/call"),
          asked: asked.map((r) => r.toolName),
          ran
        }).toEqual({
          stamped: true,
          asked: [expect.stringContaining("alpha"), expect.stringContaining("beta")],
          ran: ["alpha", "alpha"]
        })
      }).pipe(Effect.scoped),
    240_000
  )
})
