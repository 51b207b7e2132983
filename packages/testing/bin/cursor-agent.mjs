#!/usr/bin/env node
// A fake Cursor CLI (`agent`), protocol-faithful for the parts Tether uses. The real CLI is not
// published on npm; this program stands in for it in hermetic tests.
//
// Invocation (as the real one): agent -p|--print --output-format stream-json --workspace <dir>
//   [--resume <session_id>] [--model <m>] [--force|-f] [--approve-mcps] [--trust]
//   [--stream-partial-output] [prompt]        (no positional prompt: the prompt is read from stdin)
//
// Profile: `$CURSOR_CONFIG_DIR` (default `$HOME/.cursor`) holds `mcp.json`
//   {"mcpServers": {"<name>": {"url", "headers": {"Authorization": "Bearer ${env:VAR}"}}}};
//   `${env:VAR}` is resolved from this process's environment. Chats are stored under
//   `$CURSOR_DATA_DIR` (default: the config dir) in `chats/<md5(workspace)>/<session_id>.json`.
//
// Project MCP configuration: `.cursor/mcp.json` in the workspace and each directory above it is
// read too, and a project's entry replaces the configuration directory's under the same name (the
// nearest project first), as the real CLI's project > global precedence.
//
// Permissions: headless, an MCP tool call runs only under `--force` or an allow rule of
// `$CURSOR_CONFIG_DIR/cli-config.json` (`permissions.allow`: `Mcp(<server>:<tool>)`, either part
// may be `*`); otherwise it ends `rejected`, as the real CLI's does ("All the MCP tool calls were
// rejected"), and a deny rule wins over an allow rule.
//
// MCP (only with --approve-mcps, as headless Cursor requires): for each URL server it first
// sends `initialize` WITHOUT the Authorization header and requires a 401 (an endpoint that
// accepts an unauthenticated request fails the turn: that is the security oracle of the tests),
// then connects with the official SDK client (initialize, tools/list) with the resolved headers.
// A server that fails (unset variable, 401, network) is reported on stderr and its tools are
// missing, as with the real CLI.
//
// The "model" is scripted by the prompt, one directive per line (other lines are plain text):
//   @call <tool> <json-args>   call an MCP tool (`<tool>` or `<server>.<tool>`)
//   @say <text>                the final assistant text (default: "turn <n>", plus each tool's
//                              result as "; <tool> -> <text>")
//   @think <text>              a thinking delta
//   @fail <message>            end with a failed result record (exit 1)
//   @sleep <ms>                wait
//   @crash <code>              exit at once with <code>, no result record
//
// stdout: stream-json records `system/init`, `user`, `thinking`, `assistant`,
// `tool_call` (`started` / `completed`, `mcpToolCall`), `result`.
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { createHash, randomUUID } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"

const started = Date.now()
const write = (record) => process.stdout.write(JSON.stringify(record) + "\n")
const fail = (message, code = 1) => {
  process.stderr.write(`Error: ${message}\n`)
  process.exit(code)
}

// ---- argv ----------------------------------------------------------------------------------
const options = { print: false, format: "text", workspace: process.cwd(), resume: undefined, model: undefined }
const flags = new Set()
const positional = []
const argv = process.argv.slice(2)
for (let i = 0; i < argv.length; i++) {
  const arg = argv[i]
  const value = () => {
    const next = argv[++i]
    if (next === undefined) fail(`option '${arg}' argument missing`)
    return next
  }
  switch (arg) {
    case "-p":
    case "--print":
      options.print = true
      break
    case "--output-format":
      options.format = value()
      break
    case "--workspace":
      options.workspace = value()
      break
    case "--resume":
      options.resume = value()
      break
    case "--model":
    case "-m":
      options.model = value()
      break
    case "-f":
    case "--force":
    case "--approve-mcps":
    case "--trust":
    case "--stream-partial-output":
      flags.add(arg === "-f" ? "--force" : arg)
      break
    default:
      if (arg.startsWith("-")) fail(`unknown option '${arg}'`)
      positional.push(arg)
  }
}
if (!options.print) fail("this fake only implements the headless mode (-p)")
if (options.format !== "stream-json") fail("this fake only implements --output-format stream-json")
if (!flags.has("--trust")) fail("Workspace Trust Required: pass --trust to trust this workspace in headless mode")
if (!Path.isAbsolute(options.workspace) || !Fs.statSync(options.workspace, { throwIfNoEntry: false })?.isDirectory()) {
  fail(`workspace ${options.workspace} is not a directory`)
}

const configDir = process.env.CURSOR_CONFIG_DIR ?? Path.join(process.env.HOME ?? "/", ".cursor")
const dataDir = process.env.CURSOR_DATA_DIR ?? configDir

// ---- prompt ---------------------------------------------------------------------------------
const readStdin = () =>
  new Promise((resolve) => {
    const chunks = []
    process.stdin.on("data", (chunk) => chunks.push(chunk))
    process.stdin.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
  })
const prompt = positional.length > 0 ? positional.join(" ") : await readStdin()
if (prompt.trim().length === 0) fail("no prompt given (positional or stdin)")

// ---- session --------------------------------------------------------------------------------
const chatDir = Path.join(dataDir, "chats", createHash("md5").update(options.workspace).digest("hex"))
let session
if (options.resume !== undefined) {
  const file = Path.join(chatDir, `${options.resume}.json`)
  if (!/^[0-9a-f-]{36}$/.test(options.resume) || !Fs.existsSync(file)) {
    fail(`session ${options.resume} not found for workspace ${options.workspace}`)
  }
  session = JSON.parse(Fs.readFileSync(file, "utf8"))
} else {
  session = { session_id: randomUUID(), workspace: options.workspace, turns: [] }
}
const sessionId = session.session_id
const model = options.model ?? "Auto"

write({
  type: "system",
  subtype: "init",
  apiKeySource: process.env.CURSOR_API_KEY ? "env" : "login",
  cwd: options.workspace,
  session_id: sessionId,
  model,
  permissionMode: flags.has("--force") ? "bypassPermissions" : "default"
})
write({ type: "user", message: { role: "user", content: [{ type: "text", text: prompt }] }, session_id: sessionId })

// ---- MCP ------------------------------------------------------------------------------------
const resolveEnv = (text, missing) =>
  text.replace(/\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name) => {
    const value = process.env[name]
    if (value === undefined) missing.push(name)
    return value ?? ""
  })

const servers = new Map()
const readServers = (file) => (Fs.existsSync(file) ? JSON.parse(Fs.readFileSync(file, "utf8")).mcpServers ?? {} : {})
const declared = readServers(Path.join(configDir, "mcp.json"))
const projects = []
for (let dir = options.workspace;; dir = Path.dirname(dir)) {
  projects.push(readServers(Path.join(dir, ".cursor", "mcp.json")))
  if (Path.dirname(dir) === dir) break
}
for (const project of projects.reverse()) Object.assign(declared, project)

const cliConfigFile = Path.join(configDir, "cli-config.json")
const permissions = Fs.existsSync(cliConfigFile) ? JSON.parse(Fs.readFileSync(cliConfigFile, "utf8")).permissions ?? {} : {}
const ruleCovers = (rule, server, tool) => {
  const match = /^Mcp\(([^:()]+)(?::([^()]+))?\)$/.exec(rule)
  return match !== null && (match[1] === "*" || match[1] === server) &&
    (match[2] === undefined || match[2] === "*" || match[2] === tool)
}
const permitted = (server, tool) =>
  !(permissions.deny ?? []).some((rule) => ruleCovers(rule, server, tool)) &&
  (flags.has("--force") || (permissions.allow ?? []).some((rule) => ruleCovers(rule, server, tool)))
for (const [name, entry] of Object.entries(declared)) {
  if (typeof entry.url !== "string") {
    process.stderr.write(`MCP server ${name}: only URL servers are implemented by this fake\n`)
    continue
  }
  if (!flags.has("--approve-mcps")) {
    process.stderr.write(`MCP server ${name} needs approval (--approve-mcps)\n`)
    continue
  }
  const missing = []
  const headers = Object.fromEntries(Object.entries(entry.headers ?? {}).map(([k, v]) => [k, resolveEnv(String(v), missing)]))
  if (missing.length > 0) {
    process.stderr.write(`MCP server ${name}: environment variable ${missing.join(", ")} is not set\n`)
    continue
  }
  if (/\$\{/.test(JSON.stringify(entry.headers ?? {}).replace(/\$\{env:[A-Za-z_][A-Za-z0-9_]*\}/g, ""))) {
    process.stderr.write(`MCP server ${name}: unsupported variable syntax in headers (use \${env:VAR})\n`)
  }
  for (const value of Object.values(headers)) {
    const secret = String(value).replace(/^Bearer /, "")
    if (secret.length > 0 && process.argv.some((arg) => arg.includes(secret))) {
      fail(`MCP server ${name}: its credential appears in the command line`)
    }
  }
  // The oracle: the same request without the credential must be refused.
  const anonymous = await fetch(entry.url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "cursor-fake-probe", version: "0" } }
    })
  }).catch((error) => ({ status: `network error: ${error.message}` }))
  if (anonymous.status !== 401) {
    write({
      type: "result",
      subtype: "error",
      duration_ms: Date.now() - started,
      duration_api_ms: 0,
      is_error: true,
      result: `MCP server ${name} answered ${anonymous.status} to a request without credentials (expected 401)`,
      session_id: sessionId
    })
    process.exit(1)
  }
  const client = new Client({ name: "cursor-agent-fake", version: "0.0.0" })
  const transport = new StreamableHTTPClientTransport(new URL(entry.url), { requestInit: { headers } })
  try {
    await client.connect(transport)
    const { tools } = await client.listTools()
    servers.set(name, { client, tools: tools.map((t) => t.name) })
  } catch (error) {
    process.stderr.write(`MCP server ${name} failed: ${error?.message ?? String(error)}\n`)
    await client.close().catch(() => undefined)
  }
}

const findTool = (spec) => {
  const dot = spec.indexOf(".")
  if (dot > 0 && servers.has(spec.slice(0, dot))) {
    const server = spec.slice(0, dot)
    const tool = spec.slice(dot + 1)
    return servers.get(server).tools.includes(tool) ? { server, tool } : undefined
  }
  for (const [server, { tools }] of servers) if (tools.includes(spec)) return { server, tool: spec }
  return undefined
}

// ---- the scripted model ---------------------------------------------------------------------
const turn = session.turns.length + 1
const results = []
let say
for (const line of prompt.split("\n")) {
  const match = /^@(\w+)\s*(.*)$/.exec(line.trim())
  if (match === null) continue
  const [, directive, rest] = match
  if (directive === "say") say = rest
  else if (directive === "think") {
    write({ type: "thinking", subtype: "delta", text: rest, session_id: sessionId, timestamp_ms: Date.now() })
    write({ type: "thinking", subtype: "completed", session_id: sessionId, timestamp_ms: Date.now() })
  } else if (directive === "sleep") await new Promise((r) => setTimeout(r, Number(rest)))
  else if (directive === "crash") process.exit(Number(rest) || 3)
  else if (directive === "fail") {
    write({
      type: "result",
      subtype: "error",
      duration_ms: Date.now() - started,
      duration_api_ms: 0,
      is_error: true,
      result: rest,
      session_id: sessionId
    })
    process.exit(1)
  } else if (directive === "call") {
    const space = rest.indexOf(" ")
    const spec = space < 0 ? rest : rest.slice(0, space)
    const args = space < 0 ? {} : JSON.parse(rest.slice(space + 1))
    const found = findTool(spec)
    if (found === undefined) {
      results.push(`${spec} -> unavailable`)
      continue
    }
    const callId = `toolu_${randomUUID().replaceAll("-", "").slice(0, 24)}`
    const callArgs = {
      name: `${found.server}-${found.tool}`,
      args,
      toolCallId: callId,
      providerIdentifier: found.server,
      toolName: found.tool
    }
    write({
      type: "tool_call",
      subtype: "started",
      call_id: callId,
      tool_call: { mcpToolCall: { args: callArgs } },
      session_id: sessionId,
      timestamp_ms: Date.now()
    })
    let result
    let text
    if (!permitted(found.server, found.tool)) {
      text = "rejected"
      result = { rejected: { reason: "" } }
    } else {
      try {
        const answer = await servers.get(found.server).client.callTool({ name: found.tool, arguments: args })
        const content = (answer.content ?? []).map((c) => (c.type === "text" ? { text: { text: c.text } } : c))
        text = (answer.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n")
        result = { success: { content, isError: answer.isError === true } }
      } catch (error) {
        text = `error: ${error?.message ?? String(error)}`
        result = { error: { error: error?.message ?? String(error) } }
      }
    }
    results.push(`${found.tool} -> ${text}`)
    write({
      type: "tool_call",
      subtype: "completed",
      call_id: callId,
      tool_call: { mcpToolCall: { args: callArgs, result } },
      session_id: sessionId,
      timestamp_ms: Date.now()
    })
  }
}
const finalText = say ?? [`turn ${turn}`, ...results].join("; ")
write({ type: "assistant", message: { role: "assistant", content: [{ type: "text", text: finalText }] }, session_id: sessionId })

session.turns.push({ prompt, text: finalText, model })
Fs.mkdirSync(chatDir, { recursive: true, mode: 0o700 })
Fs.writeFileSync(Path.join(chatDir, `${sessionId}.json`), JSON.stringify(session, null, 2), { mode: 0o600 })
for (const { client } of servers.values()) await client.close().catch(() => undefined)

write({
  type: "result",
  subtype: "success",
  duration_ms: Date.now() - started,
  duration_api_ms: Date.now() - started,
  is_error: false,
  result: finalText,
  session_id: sessionId,
  request_id: randomUUID()
})
process.exit(0)
