#!/usr/bin/env node
// A scriptable fake provider CLI: a real Node process that behaves like a coding-agent CLI.
//
// - Its profile directory is `$FAKE_CLI_HOME`; like a real CLI it reads the MCP declarations
//   materialized there (`mcp.json`: `{ "mcpServers": { "<key>": { "url", "headers" } } }`),
//   expands `${VAR}` references from its own environment (the bearer token variable), and talks
//   to the server with the official MCP SDK client (initialize, tools/list, tools/call).
// - Its stdin is the turn: JSONL script operations, one per line (a line that is not JSON is
//   the prompt of a plain turn that echoes it back).
// - Its stdout is the fake provider protocol (JSONL):
//     {"type":"session","session_id","model"}       {"type":"delta","text"}
//     {"type":"message","text"}                     {"type":"tool_use","id","name","input"}
//     {"type":"tool_result","id","output","is_error"}  {"type":"notice","kind","message",...}
//     {"type":"result","ok","text","usage","session_id","error"}   <- the terminal record
//
// Script operations ({"op": ...}):
//   text {text}              one delta and one message
//   deltas {count, size?}    `count` deltas (benchmarks)
//   list                     tools/list through the gateway, reported as a notice
//   call {tool, input}       tools/call through the gateway (tool_use + tool_result)
//   result {text?, ok?, usage?, error?}   terminal record (default: one is printed at the end)
//   no-result                do not print a terminal record at the end
//   sleep {ms}
//   crash {code?}            exit at once (mid-turn) with `code` (default 3)
//   hang                     ignore SIGTERM and never exit
//   grandchild {setsid?, holdStdout?}  spawn a sleeping grandchild (own session when `setsid`,
//                            inheriting stdout when `holdStdout`), report its pid
//   stderr {bytes}           write `bytes` of noise to stderr
//   malformed                print a line that is not JSON
//   huge {bytes}             print one line of `bytes` characters
//   exit-early {code?}       exit before any output (only meaningful as the first operation)
//   linger {ms}              after the terminal record, keep running `ms` before exiting
//
// Like a real CLI it keeps a transcript of each session in its profile directory,
// `$FAKE_CLI_HOME/sessions/<session id>.jsonl` (a `turn` line, one line per message, and a
// `closed` line written last, after the terminal record and any linger). The session id is
// `$FAKE_CLI_SESSION` or a fresh UUID. A resume (`FAKE_CLI_RESUME=1`) or a fork
// (`FAKE_CLI_FORK_FROM=<id>`) of a session without a transcript exits 1 before any output with
// "no conversation found with session id <id>" on stderr; a fork starts from a copy of it.
// Like Claude Code's MCP log, each process also keeps a log of its own under `$HOME`,
// `$HOME/.cache/fake-cli/<start time>-<pid>.log` (a line when it starts, one when it ends).
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { appendFileSync, copyFileSync, existsSync, mkdirSync, readFileSync } from "node:fs"
import { join } from "node:path"

const out = (record) => process.stdout.write(JSON.stringify(record) + "\n")
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
// Exits once everything written so far reached the pipe: `process.exit` drops queued writes.
const exitFlushed = (code) => {
  let pending = 2
  const done = () => {
    if (--pending === 0) process.exit(code)
  }
  process.stdout.write("", done)
  process.stderr.write("", done)
  return new Promise(() => {})
}

const readStdin = async () => {
  const chunks = []
  for await (const chunk of process.stdin) chunks.push(chunk)
  return Buffer.concat(chunks).toString("utf8")
}

const parseScript = (text) => {
  const lines = text.split("\n").filter((line) => line.trim() !== "")
  const ops = []
  for (const line of lines) {
    try {
      const value = JSON.parse(line)
      if (value !== null && typeof value === "object" && typeof value.op === "string") {
        ops.push(value)
        continue
      }
    } catch {
      // not a script line: plain prompt text
    }
    ops.push({ op: "text", text: `echo: ${line}` })
  }
  return ops
}

const expand = (value, env) =>
  value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name) => {
    const resolved = env[name]
    if (resolved === undefined) throw new Error(`unresolved variable ${name}`)
    return resolved
  })

let client
let serverKey
const connect = async () => {
  if (client !== undefined) return client
  const home = process.env.FAKE_CLI_HOME
  if (home === undefined) throw new Error("FAKE_CLI_HOME is not set")
  const config = JSON.parse(readFileSync(join(home, "mcp.json"), "utf8"))
  const entries = Object.entries(config.mcpServers ?? {})
  if (entries.length === 0) throw new Error("no MCP server declared")
  const [key, server] = entries[0]
  const headers = {}
  for (const [name, value] of Object.entries(server.headers ?? {})) headers[name] = expand(value, process.env)
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js")
  const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js")
  const next = new Client({ name: "fake-cli", version: "1.0.0" })
  await next.connect(new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers } }))
  serverKey = key
  client = next
  return client
}

const main = async () => {
  const ops = parseScript(await readStdin())
  if (ops[0]?.op === "exit-early") {
    process.stderr.write("fake-cli: exiting before output\n")
    await exitFlushed(ops[0].code ?? 1)
  }
  const sessionId = process.env.FAKE_CLI_SESSION ?? randomUUID()
  const home = process.env.FAKE_CLI_HOME
  const transcript = (id) => join(home, "sessions", `${id}.jsonl`)
  const forkFrom = process.env.FAKE_CLI_FORK_FROM
  const continued = forkFrom ?? (process.env.FAKE_CLI_RESUME === "1" ? sessionId : undefined)
  if (home !== undefined && continued !== undefined && !existsSync(transcript(continued))) {
    process.stderr.write(`fake-cli: no conversation found with session id ${continued}\n`)
    await exitFlushed(1)
  }
  const record = (line) => {
    if (home === undefined) return
    mkdirSync(join(home, "sessions"), { recursive: true, mode: 0o700 })
    appendFileSync(transcript(sessionId), JSON.stringify(line) + "\n", { mode: 0o600 })
  }
  if (home !== undefined && forkFrom !== undefined) copyFileSync(transcript(forkFrom), transcript(sessionId))
  const logDir = process.env.HOME === undefined ? undefined : join(process.env.HOME, ".cache", "fake-cli")
  const logFile = logDir === undefined ? undefined : join(logDir, `${Date.now()}-${process.pid}.log`)
  const log = (line) => {
    if (logDir === undefined) return
    mkdirSync(logDir, { recursive: true, mode: 0o700 })
    appendFileSync(logFile, `${new Date().toISOString()} ${line}\n`, { mode: 0o600 })
  }
  log(`started, session ${sessionId}`)
  record({ type: "turn", pid: process.pid })
  const model = process.env.FAKE_CLI_MODEL ?? "fake-model"
  out({ type: "session", session_id: sessionId, model })
  let finalText = ""
  let printedResult = false
  let wantResult = true
  let linger = 0
  let callCounter = 0
  for (const op of ops) {
    switch (op.op) {
      case "text": {
        out({ type: "delta", text: op.text })
        out({ type: "message", text: op.text })
        record({ type: "message", text: op.text })
        finalText = op.text
        break
      }
      case "deltas": {
        // Ends outside base64url: a run never holds one back as the possible start of a token.
        const text = "x".repeat(Math.max(0, (op.size ?? 8) - 1)) + "."
        const count = op.count ?? 0
        let batch = ""
        for (let i = 0; i < count; i++) {
          batch += `{"type":"delta","text":"${text}"}\n`
          if (batch.length > 65536) {
            if (!process.stdout.write(batch)) await new Promise((resolve) => process.stdout.once("drain", resolve))
            batch = ""
          }
        }
        if (batch !== "") process.stdout.write(batch)
        break
      }
      case "list": {
        const mcp = await connect()
        const listed = await mcp.listTools()
        out({ type: "notice", kind: "tools", message: listed.tools.map((tool) => tool.name).join(",") })
        break
      }
      case "call": {
        const id = `call-${++callCounter}`
        let mcp
        try {
          mcp = await connect()
        } catch (error) {
          out({ type: "notice", kind: "mcp_unavailable", message: String(error?.message ?? error) })
          out({ type: "result", ok: false, error: "hosted tools unavailable", session_id: sessionId })
          printedResult = true
          break
        }
        out({ type: "tool_use", id, name: `mcp__${serverKey}__${op.tool}`, input: op.input ?? {} })
        try {
          const result = await mcp.callTool({ name: op.tool, arguments: op.input ?? {} })
          out({
            type: "tool_result",
            id,
            output: result.structuredContent ?? result.content,
            is_error: result.isError === true
          })
        } catch (error) {
          out({ type: "tool_result", id, output: String(error?.message ?? error), is_error: true })
        }
        break
      }
      case "result": {
        out({
          type: "result",
          ok: op.ok ?? true,
          text: op.text ?? finalText,
          usage: op.usage ?? { input_tokens: 1, output_tokens: 1 },
          session_id: sessionId,
          ...(op.error === undefined ? {} : { error: op.error })
        })
        printedResult = true
        break
      }
      case "no-result":
        wantResult = false
        break
      case "sleep":
        await sleep(op.ms ?? 0)
        break
      case "crash":
        process.stderr.write("fake-cli: crashing mid-turn\n")
        await exitFlushed(op.code ?? 3)
        break
      case "hang":
        process.on("SIGTERM", () => {})
        out({ type: "notice", kind: "hanging", message: "ignoring SIGTERM" })
        setInterval(() => {}, 1 << 30)
        await new Promise(() => {})
        break
      case "grandchild": {
        const child = spawn("sleep", ["600"], {
          detached: op.setsid === true,
          stdio: op.holdStdout === true ? ["ignore", "inherit", "ignore"] : "ignore"
        })
        child.unref()
        out({ type: "notice", kind: "grandchild", message: String(child.pid), pid: child.pid, setsid: op.setsid === true })
        break
      }
      case "stderr": {
        const chunk = "e".repeat(1023) + "\n"
        let left = op.bytes ?? 0
        while (left > 0) {
          if (!process.stderr.write(chunk)) await new Promise((resolve) => process.stderr.once("drain", resolve))
          left -= chunk.length
        }
        break
      }
      case "malformed":
        process.stdout.write("this is {not json\n")
        break
      case "huge": {
        const size = op.bytes ?? 1 << 20
        const piece = "h".repeat(65536)
        let left = size
        while (left > 0) {
          const part = left >= piece.length ? piece : piece.slice(0, left)
          if (!process.stdout.write(part)) await new Promise((resolve) => process.stdout.once("drain", resolve))
          left -= part.length
        }
        process.stdout.write("\n")
        break
      }
      case "linger":
        linger = op.ms ?? 0
        break
      default:
        out({ type: "notice", kind: "unknown_op", message: String(op.op) })
    }
  }
  if (wantResult && !printedResult) {
    out({
      type: "result",
      ok: true,
      text: finalText,
      usage: { input_tokens: 1, output_tokens: 1 },
      session_id: sessionId
    })
  }
  if (client !== undefined) await client.close().catch(() => {})
  if (linger > 0) await sleep(linger)
  record({ type: "closed", pid: process.pid })
  log("closed")
}

main().then(
  () => exitFlushed(0),
  (error) => {
    process.stderr.write(`fake-cli: ${error?.stack ?? error}\n`)
    return exitFlushed(2)
  }
)
