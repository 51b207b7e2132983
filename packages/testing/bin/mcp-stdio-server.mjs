#!/usr/bin/env node
// A small external MCP server over stdio (official SDK, low-level `Server`), for tests of
// external MCP sources declared beside the hosted tools.
//
// It exposes one tool, `stamp` ({ text: string } → "STAMP:<text>:<suffix>"), where <suffix> is
// the value of the `STAMP_SUFFIX` environment variable (or "none"): a test can prove both that
// the CLI reached the server and that the declared `env` was passed to it.
//
// When `STAMP_LOG` names a file, one JSON line per MCP request is appended to it
// ({ "method", "params"?, "pid" }), so a test can see what the CLI asked for.
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import * as Fs from "node:fs"

const suffix = process.env.STAMP_SUFFIX ?? "none"
const log = (method, params) => {
  const file = process.env.STAMP_LOG
  if (file !== undefined && file !== "") {
    Fs.appendFileSync(file, JSON.stringify({ method, ...(params === undefined ? {} : { params }), pid: process.pid }) + "\n")
  }
}

const server = new Server({ name: "tether-stamp", version: "1.0.0" }, { capabilities: { tools: {} } })

server.setRequestHandler(ListToolsRequestSchema, async () => {
  log("tools/list")
  return {
    tools: [{
      name: "stamp",
      description: "Stamps a text with the server's suffix.",
      inputSchema: {
        type: "object",
        properties: { text: { type: "string", description: "The text to stamp." } },
        required: ["text"],
        additionalProperties: false
      }
      // No annotations on purpose: a CLI must not need a read-only hint to call a declared source.
    }]
  }
})

server.setRequestHandler(CallToolRequestSchema, async (request) => {
  log("tools/call", { name: request.params.name, arguments: request.params.arguments ?? {} })
  const text = request.params.arguments?.text
  if (request.params.name !== "stamp" || typeof text !== "string") {
    return { isError: true, content: [{ type: "text", text: "unknown tool or missing text" }] }
  }
  return { content: [{ type: "text", text: `STAMP:${text}:${suffix}` }] }
})

log("start")
await server.connect(new StdioServerTransport())
// The CLI ends the server by closing stdin (or with a signal).
process.stdin.on("end", () => process.exit(0))
