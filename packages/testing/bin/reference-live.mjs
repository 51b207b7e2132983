#!/usr/bin/env node
// The reference driver's live CLI (`Reference.driver({ live: true })`): one long-lived process
// serving the turns of one session over its own JSON-lines protocol.
//
// stdin, one frame per line:
//   {"type":"turn","turn":n,"steps":[...]}   run the steps of turn n (`Reference.Step`s), after
//                                            any turn before it
//   {"type":"steer","id":k,"text":...}       input into the running turn
//   {"type":"interrupt","id":k}              stop the running turn (and the turns queued behind it)
// stdout, one record per line:
//   {"turn":n,"output":<Driver.Output>}      an output of turn n (the first turn of the process
//                                            starts with SessionStarted; every turn ends with its
//                                            Terminal, `ok: false` when interrupted)
//   {"type":"ack","id":k,"delivery":"Injected"|null}   a steer taken into the running turn (null:
//                                            no turn was running); an interrupt once its turn's
//                                            Terminal is written
//
// Steps: a `Driver.Output` is written as is (its Terminal carries the session); `$sleep {ms}`
// waits (an interrupt cuts it short, and with `untilInput` a steered input too); `$call {tool, input}` calls a hosted tool through the
// gateway with the official MCP client, as its `mcp.json` in `$REFERENCE_HOME` declares it;
// `$exit {code}` exits at once (a crash mid-turn); `$hang` ignores SIGTERM and never ends.
// The session is `$REFERENCE_SESSION`. The end of stdin is the graceful shutdown: exit 0.
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { createInterface } from "node:readline"

const session = process.env.REFERENCE_SESSION ?? "reference-session"
const out = (record) => process.stdout.write(JSON.stringify(record) + "\n")
const exitFlushed = (code) => process.stdout.write("", () => process.exit(code))

let client
const connect = async () => {
  if (client !== undefined) return client
  const config = JSON.parse(readFileSync(join(process.env.REFERENCE_HOME, "mcp.json"), "utf8"))
  const [, server] = Object.entries(config.mcpServers)[0]
  const headers = {}
  for (const [name, value] of Object.entries(server.headers ?? {})) {
    headers[name] = value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, variable) => process.env[variable] ?? "")
  }
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js")
  const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js")
  const next = new Client({ name: "reference-live", version: "1.0.0" })
  await next.connect(new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers } }))
  client = next
  return client
}

let started = false
let hanging = false
let calls = 0
/** The running turn: its number, whether it was interrupted, how to cut its wait short. */
let current
const pending = []
let working = false

const runTurn = async (frame) => {
  const abort = new AbortController()
  const state = { turn: frame.turn, abort, done: undefined, wake: () => {} }
  let finish
  state.done = new Promise((resolve) => (finish = resolve))
  current = state
  const emit = (output) => out({ turn: frame.turn, output })
  if (!started) {
    started = true
    emit({ _tag: "SessionStarted", sessionId: session, model: "reference-model" })
  }
  const aborted = new Promise((resolve) => abort.signal.addEventListener("abort", resolve))
  for (const step of frame.steps) {
    if (abort.signal.aborted) break
    if (step._tag === "$sleep") {
      let timer
      await Promise.race([
        new Promise((resolve) => {
          timer = setTimeout(resolve, step.ms)
          if (step.untilInput === true) state.wake = resolve
        }),
        aborted
      ])
      clearTimeout(timer)
      state.wake = () => {}
    } else if (step._tag === "$exit") {
      exitFlushed(step.code)
      await new Promise(() => {})
    } else if (step._tag === "$hang") {
      hanging = true
      process.on("SIGTERM", () => {})
      setInterval(() => {}, 1 << 30)
      await new Promise(() => {})
    } else if (step._tag === "$call") {
      const callId = `call-${++calls}`
      emit({ _tag: "ToolCall", phase: "start", callId, name: step.tool, source: "host", input: step.input })
      const call = connect().then((mcp) =>
        mcp.callTool({ name: step.tool, arguments: step.input }, undefined, { signal: abort.signal })
      )
      const outcome = await Promise.race([call.then((result) => ({ result }), (error) => ({ error })), aborted])
      if (abort.signal.aborted || outcome === undefined) break
      emit({
        _tag: "ToolCall",
        phase: "end",
        callId,
        name: step.tool,
        source: "host",
        output: outcome.error === undefined ? outcome.result.structuredContent ?? outcome.result.content : String(outcome.error),
        isError: outcome.error !== undefined || outcome.result.isError === true
      })
    } else if (step._tag === "SessionStarted") {
      // the process reports its own session, once
    } else emit(step._tag === "Terminal" ? { ...step, session } : step)
  }
  if (abort.signal.aborted) {
    emit({ _tag: "Terminal", ok: false, model: "reference-model", session, error: "interrupted", raw: {} })
  }
  current = undefined
  finish()
}

const work = async () => {
  if (working) return
  working = true
  while (pending.length > 0) await runTurn(pending.shift())
  working = false
}

const lines = createInterface({ input: process.stdin })
lines.on("line", async (line) => {
  if (line.trim() === "") return
  const frame = JSON.parse(line)
  if (frame.type === "turn") {
    pending.push(frame)
    void work()
  } else if (frame.type === "steer") {
    current?.wake()
    out({ type: "ack", id: frame.id, delivery: current !== undefined && !current.abort.signal.aborted ? "Injected" : null })
  } else if (frame.type === "interrupt") {
    pending.length = 0
    const running = current
    if (running !== undefined) {
      running.abort.abort()
      await running.done
    }
    out({ type: "ack", id: frame.id, delivery: null })
  }
})
lines.on("close", () => {
  if (!hanging) exitFlushed(0)
})
