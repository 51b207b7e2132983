/**
 * The ACP driver's pure parts: permission decisions onto the options each agent offers (as
 * recorded from Gemini CLI, claude-agent-acp and codex-acp), tool naming per agent, tool calls
 * announced before their input, the one-shot parse of a resumed session, and the turn runner's
 * failure line.
 */
import type * as AcpSdk from "@agentclientprotocol/sdk"
import { describe, expect, it } from "@effect/vitest"
import * as Approval from "@tether/core/Approval"
import type * as Driver from "@tether/core/Driver"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as AcpApproval from "../src/internal/acpApproval.js"
import * as AcpDriver from "../src/internal/acpDriver.js"
import * as AcpMap from "../src/internal/acpMap.js"
import { claudeAgentDriver, codexAgentDriver } from "./AcpHarness.js"
import * as OneEdit from "./OneEdit.js"

const options = (...pairs: ReadonlyArray<readonly [string, AcpSdk.PermissionOptionKind]>) =>
  pairs.map(([optionId, kind]) => ({ optionId, kind, name: optionId }))

/** As recorded from each agent (provider-samples/live, LIVE.md and this driver's tests), labels included. */
const offered: { readonly [agent: string]: Array<AcpSdk.PermissionOption> } = {
  gemini: [
    { optionId: "proceed_always", name: "Allow for this session", kind: "allow_always" },
    { optionId: "proceed_once", name: "Allow", kind: "allow_once" },
    { optionId: "cancel", name: "Reject", kind: "reject_once" }
  ],
  claude: [
    { optionId: "allow_always", name: "Always Allow", kind: "allow_always" },
    { optionId: "allow", name: "Allow", kind: "allow_once" },
    { optionId: "reject", name: "Reject", kind: "reject_once" }
  ],
  codex: [
    { optionId: "approved", name: "Yes, proceed", kind: "allow_once" },
    {
      optionId: "approved-execpolicy-amendment",
      name: "Yes, and don't ask again for commands that start with `/bin/bash -lc echo ran > shell.txt`",
      kind: "allow_always"
    },
    { optionId: "abort", name: "No, and tell Codex what to do differently", kind: "reject_once" }
  ]
}

const selected = (decision: AcpApproval.Decision, given: ReadonlyArray<AcpSdk.PermissionOption>) => {
  const answer = AcpApproval.outcomeOf(decision, given).outcome
  return answer.outcome === "selected" ? answer.optionId : "cancelled"
}

describe("ACP permission decisions", () => {
  it("allow, allowForSession and deny pick the agent's own option of that kind", () => {
    const allow = { _tag: "Allow" } as const
    const session = { _tag: "AllowForSession" } as const
    expect([selected(allow, offered.gemini), selected(session, offered.gemini)]).toEqual([
      "proceed_once",
      "proceed_always"
    ])
    // claude-agent-acp's "Always Allow" saves Claude Code's own suggestion, for a command to the
    // workspace's .claude/settings.local.json: past the session, so this call only.
    expect([selected(allow, offered.claude), selected(session, offered.claude)]).toEqual(["allow", "allow"])
    expect([selected(allow, offered.codex), selected(AcpApproval.denied, offered.codex)]).toEqual([
      "approved",
      "abort"
    ])
    expect(selected(AcpApproval.denied, offered.claude)).toBe("reject")
  })

  it("never broader than decided: allow without allow_once is a refusal; allowForSession falls back to once", () => {
    const onlyAlways = options(["always", "allow_always"], ["no", "reject_always"])
    expect(selected({ _tag: "Allow" }, onlyAlways)).toBe("cancelled")
    expect(selected({ _tag: "AllowForSession" }, options(["once", "allow_once"]))).toBe("once")
    expect(selected(AcpApproval.denied, onlyAlways)).toBe("no")
    expect(selected(AcpApproval.denied, options(["once", "allow_once"]))).toBe("cancelled")
  })

  it("of several session-wide allows, the one for the call: never all of an MCP server's tools", () => {
    // Gemini CLI 0.61's options for an MCP tool, as recorded (provider-samples/live/F-mcp.txt).
    const geminiMcp: ReadonlyArray<AcpSdk.PermissionOption> = [
      { optionId: "proceed_always_server", name: "Allow all server tools for this session", kind: "allow_always" },
      { optionId: "proceed_always_tool", name: "Allow tool for this session", kind: "allow_always" },
      { optionId: "proceed_once", name: "Allow", kind: "allow_once" },
      { optionId: "cancel", name: "Reject", kind: "reject_once" }
    ]
    const session = { _tag: "AllowForSession" } as const
    expect(selected(session, geminiMcp)).toBe("proceed_always_tool")
    expect(selected(session, [...geminiMcp].reverse())).toBe("proceed_always_tool")
    // Several that cannot be told apart: this call only.
    const twoAlways = options(["session_a", "allow_always"], ["session_b", "allow_always"], ["once", "allow_once"])
    expect(selected(session, twoAlways)).toBe("once")
    expect(selected(session, options(["all_session", "allow_always"], ["server_session", "allow_always"]))).toBe(
      "cancelled"
    )
    // One offered alone that names a wider reach: this call only.
    expect(selected(session, options(["all_tools_this_session", "allow_always"], ["once", "allow_once"]))).toBe("once")
  })

  it("allowForSession never picks an option that outlives the session", () => {
    const session = { _tag: "AllowForSession" } as const
    // codex-acp 0.16 for a command: its one "always" writes an allow rule into Codex's rules/.
    expect(selected(session, offered.codex)).toBe("approved")
    // codex-acp 0.16 for a file change (provider-samples/live): the session's, not "don't ask again".
    const codexFileChange: ReadonlyArray<AcpSdk.PermissionOption> = [
      { optionId: "approved", name: "Allow", kind: "allow_once" },
      { optionId: "approved-for-session", name: "Allow for this session", kind: "allow_always" },
      { optionId: "approved-always", name: "Allow and don't ask again", kind: "allow_always" },
      { optionId: "cancel", name: "Cancel", kind: "reject_once" }
    ]
    expect(selected(session, codexFileChange)).toBe("approved-for-session")
  })

  it("the request reads as an approval: kind, input, the diff and paths, the options", () => {
    const ask = AcpApproval.askOf({
      sessionId: "s",
      options: offered.gemini,
      toolCall: {
        toolCallId: "write_file__1",
        title: "Write notes.md",
        kind: "edit",
        rawInput: { path: "notes.md" },
        content: [{ type: "diff", path: "/w/notes.md", oldText: "a", newText: "b" }],
        locations: [{ path: "/w/notes.md" }]
      }
    })
    expect(ask).toMatchObject({
      toolName: "Write notes.md",
      kind: "fileChange",
      input: { path: "notes.md" },
      callId: "write_file__1",
      paths: ["/w/notes.md"]
    })
    expect(ask.diff).toContain("+++ /w/notes.md\nb")
    expect(ask.options.map((o) => o.kind)).toEqual(["allow_always", "allow_once", "reject_once"])
    const command = AcpApproval.askOf({
      sessionId: "s",
      options: offered.codex,
      toolCall: { toolCallId: "call_3", title: "echo x", kind: "execute" }
    })
    expect(command.kind).toBe("command")
  })

  it("the one-shot approver tool: the ask travels as its input, core's decision back as its answer", () => {
    const ask = AcpApproval.askOf({
      sessionId: "s",
      options: offered.codex,
      toolCall: { toolCallId: "call_3", title: "echo x", kind: "execute", rawInput: { cwd: "/w", command: ["echo"] } }
    })
    // What the turn runner sends is JSON; the gateway hands the tool the parsed arguments.
    expect(AcpApproval.approverTool.ask(JSON.parse(JSON.stringify(ask)))).toEqual(ask)
    expect(typeof AcpApproval.approverTool.ask({ toolName: "x", kind: "shell", callId: "c", options: [] })).toBe(
      "string"
    )
    expect(typeof AcpApproval.approverTool.ask({ kind: "command", callId: "c", options: [] })).toBe("string")
    for (const decision of [Approval.allow, Approval.allowForSession, Approval.deny("No.")]) {
      const text = JSON.stringify(AcpApproval.approverTool.answer(decision, ask))
      expect(AcpApproval.decisionOf(text)).toEqual(decision)
    }
    expect(AcpApproval.decisionOf("Not an approval request.")).toBeUndefined()
    expect(AcpApproval.decisionOf(JSON.stringify({ decision: { _tag: "AllowAlways" } }))).toBeUndefined()
    expect(AcpApproval.decisionOf(JSON.stringify({ decision: { _tag: "Deny" } }))).toBeUndefined()
  })
})

const info = (fields: Partial<AcpMap.ToolCallInfo>): AcpMap.ToolCallInfo => ({
  toolCallId: "c",
  name: undefined,
  title: undefined,
  kind: undefined,
  meta: undefined,
  input: undefined,
  ...fields
})

describe("ACP tool naming per agent", () => {
  it("claude-agent-acp: the tool name in _meta.claudeCode, not the display title", () => {
    const meta = (toolName: string) => ({ claudeCode: { toolName } })
    expect(AcpMap.claudeNaming(info({ title: "Terminal", meta: meta("Bash") }), "tether")).toEqual({
      name: "Bash",
      source: "builtin"
    })
    expect(AcpMap.claudeNaming(info({ title: "x", meta: meta("mcp__tether__echo") }), "tether")).toEqual({
      name: "echo",
      source: "host"
    })
    expect(AcpMap.claudeNaming(info({ name: "mcp__docs__find" }), "tether")).toEqual({
      name: "mcp__docs__find",
      source: "mcp"
    })
  })

  it("held to the process's hosted tools: their catalog names; another server named like the key is not the host", () => {
    const meta = (toolName: string) => ({ claudeCode: { toolName } })
    const naming = AcpMap.hostedNaming(AcpMap.claudeNaming, ["issue.lookup", "echo"])
    // Claude Code names `issue.lookup` `mcp__tether__issue_lookup`.
    expect(naming(info({ meta: meta("mcp__tether__issue_lookup") }), "tether")).toEqual({
      name: "issue.lookup",
      source: "host"
    })
    expect(naming(info({ meta: meta("mcp__tether__echo") }), "tether")).toEqual({ name: "echo", source: "host" })
    // A server `tether__x` of the agent's own configuration.
    expect(naming(info({ name: "mcp__tether__x__find", meta: meta("mcp__tether__x__find") }), "tether")).toEqual({
      name: "mcp__tether__x__find",
      source: "mcp"
    })
    expect(naming(info({ meta: meta("Bash") }), "tether")).toEqual({ name: "Bash", source: "builtin" })
    // Without the process's tools: as the agent's naming says.
    expect(AcpMap.hostedNaming(AcpMap.claudeNaming, undefined)).toBe(AcpMap.claudeNaming)
  })

  it("codex-acp: MCP calls by their {server, tool} input; the title is only for display", () => {
    const mcp = (server: string) =>
      info({ title: `Tool: ${server}/echo`, input: { server, tool: "echo", arguments: {} } })
    expect(AcpMap.codexNaming(mcp("tether"), "tether")).toEqual({ name: "echo", source: "host", wrapped: true })
    expect(AcpMap.codexNaming(mcp("docs"), "tether")).toEqual({ name: "mcp__docs__echo", source: "mcp", wrapped: true })
    expect(AcpMap.codexNaming(info({ title: "ls -la", kind: "execute", input: { command: ["ls"] } }), "tether"))
      .toEqual({ name: "ls -la", source: "builtin" })
  })

  it("a title never makes a call hosted: it is display text, often the model's own command", () => {
    expect(AcpMap.genericNaming(info({ title: "mcp__tether__echo" }), "tether")).toEqual({
      name: "mcp__tether__echo",
      source: "builtin"
    })
    expect(AcpMap.genericNaming(info({ name: "mcp__tether__echo", title: "Echo" }), "tether")).toEqual({
      name: "echo",
      source: "host"
    })
    // claude-agent-acp's Bash titled with a command that looks like a hosted tool stays Bash.
    expect(
      AcpMap.claudeNaming(info({ title: "mcp__tether__echo", meta: { claudeCode: { toolName: "Bash" } } }), "tether")
    )
      .toEqual({ name: "Bash", source: "builtin" })
    expect(AcpMap.namingId(AcpMap.codexNaming)).toBe("codex")
    expect(AcpMap.namingId(() => ({ name: "x", source: "host" }))).toBeUndefined()
  })
})

const update = (sessionUpdate: string, fields: object) => ({
  sessionId: "s",
  update: { sessionUpdate, ...fields }
})

describe("ACP update mapping", () => {
  it("codex-acp: an MCP call's events carry the tool's own arguments and output, not the wrapper", () => {
    const mapper = AcpMap.makeMapper("tether", AcpMap.codexNaming)
    mapper.session = "s"
    const start = mapper.update(update("tool_call", {
      toolCallId: "call_0",
      status: "in_progress",
      title: "Tool: tether/count",
      rawInput: { server: "tether", tool: "count", arguments: { word: "abc" } }
    }))
    const structured = mapper.update(update("tool_call_update", {
      toolCallId: "call_0",
      status: "completed",
      rawOutput: { content: [{ type: "text", text: "{\"result\":3}" }], structuredContent: { result: 3 } }
    }))
    mapper.update(update("tool_call", {
      toolCallId: "call_1",
      status: "in_progress",
      rawInput: { server: "docs", tool: "read", arguments: { path: "a" } }
    }))
    const text = mapper.update(update("tool_call_update", {
      toolCallId: "call_1",
      status: "completed",
      rawOutput: { content: [{ type: "text", text: "line 1" }, { type: "text", text: " and 2" }] }
    }))
    expect([start, structured, text]).toEqual([
      [{ _tag: "ToolCall", phase: "start", callId: "call_0", name: "count", source: "host", input: { word: "abc" } }],
      [{
        _tag: "ToolCall",
        phase: "end",
        callId: "call_0",
        name: "count",
        source: "host",
        output: { result: 3 },
        isError: false
      }],
      [{
        _tag: "ToolCall",
        phase: "end",
        callId: "call_1",
        name: "mcp__docs__read",
        source: "mcp",
        output: "line 1 and 2",
        isError: false
      }]
    ])
  })

  it("a call announced pending with an empty input starts when its input arrives", () => {
    const mapper = AcpMap.makeMapper("tether", AcpMap.claudeNaming)
    mapper.session = "s"
    const meta = { claudeCode: { toolName: "Bash" } }
    expect(mapper.update(update("tool_call", {
      toolCallId: "t1",
      status: "pending",
      rawInput: {},
      title: "Terminal",
      kind: "execute",
      _meta: meta
    }))).toEqual([])
    expect(mapper.identity("t1")).toEqual({ name: "Bash", source: "builtin" })
    expect(mapper.update(update("tool_call_update", {
      toolCallId: "t1",
      rawInput: { command: "ls" },
      title: "ls",
      _meta: meta
    }))).toEqual([{
      _tag: "ToolCall",
      phase: "start",
      callId: "t1",
      name: "Bash",
      source: "builtin",
      input: { command: "ls" }
    }])
    expect(mapper.update(update("tool_call_update", { toolCallId: "t1", status: "failed", rawOutput: "refused" })))
      .toEqual([{
        _tag: "ToolCall",
        phase: "end",
        callId: "t1",
        name: "Bash",
        source: "builtin",
        output: "refused",
        isError: true
      }])
  })

  it("a call announced and never heard of again still starts before the terminal", () => {
    const mapper = AcpMap.makeMapper("tether", AcpMap.genericNaming)
    mapper.session = "s"
    mapper.update(update("tool_call", { toolCallId: "t2", status: "pending", rawInput: {}, title: "Read" }))
    const out = mapper.finish({ stopReason: "cancelled" })
    expect(out.map((o) => o._tag)).toEqual(["ToolCall", "Terminal"])
    expect(out[0]).toMatchObject({ phase: "start", callId: "t2", name: "Read", input: {} })
  })

  it("a refused call the agent reported nowhere is a failed call once; one it announced is its own to end", () => {
    const mapper = AcpMap.makeMapper("tether", AcpMap.genericNaming)
    mapper.session = "s"
    const asked = { toolCallId: "r1", title: "Shell", kind: "execute", rawInput: { command: "rm -r x" } }
    expect(mapper.refused(asked, "No.")).toEqual([
      {
        _tag: "ToolCall",
        phase: "start",
        callId: "r1",
        name: "Shell",
        source: "builtin",
        input: { command: "rm -r x" }
      },
      { _tag: "ToolCall", phase: "end", callId: "r1", name: "Shell", source: "builtin", output: "No.", isError: true }
    ])
    // The agent's own later word on it is not a second call.
    expect(mapper.update(update("tool_call_update", { toolCallId: "r1", status: "failed" }))).toEqual([])
    // Announced first (a call, or one held for its input): the agent's update ends it.
    mapper.update(update("tool_call", { toolCallId: "a1", status: "in_progress", title: "Edit" }))
    mapper.update(update("tool_call", { toolCallId: "h1", status: "pending", rawInput: {}, title: "Read" }))
    expect([mapper.refused({ toolCallId: "a1" }, "No."), mapper.refused({ toolCallId: "h1" }, "No.")]).toEqual([[], []])
    expect(mapper.update(update("tool_call_update", { toolCallId: "a1", status: "failed" }))).toMatchObject([
      { phase: "end", callId: "a1", isError: true }
    ])
  })
})

const parseAll = (lines: ReadonlyArray<string>, session: Driver.SessionRequest) =>
  Effect.runSync(
    AcpDriver.parse(AcpMap.genericNaming)(Stream.fromIterable(lines), { hostedKey: "tether", session }).pipe(
      Stream.runCollect,
      Effect.map(Chunk.toReadonlyArray)
    )
  )

describe("ACP one-shot parse", () => {
  const replayed = JSON.stringify({
    jsonrpc: "2.0",
    method: "session/update",
    params: update("agent_message_chunk", { content: { type: "text", text: "an old answer" } })
  })
  const answer = JSON.stringify({
    jsonrpc: "2.0",
    method: "session/update",
    params: update("agent_message_chunk", { content: { type: "text", text: "new" } })
  })
  const initialized = JSON.stringify({ jsonrpc: "2.0", id: 0, result: { protocolVersion: 1, agentCapabilities: {} } })
  const done = JSON.stringify({ jsonrpc: "2.0", id: 2, result: { stopReason: "end_turn" } })

  const marker = JSON.stringify(AcpMap.replayedMarker)

  it("a resume starts at session/load's result: the history replayed before it is not the turn's", () => {
    const loaded = JSON.stringify({ jsonrpc: "2.0", id: 1, result: { models: { currentModelId: "m1" } } })
    const outputs = parseAll([initialized, replayed, loaded, marker, answer, done], { _tag: "Resume", id: "s" })
    expect(outputs.map((o) => o._tag)).toEqual(["SessionStarted", "TextDelta", "Message", "Terminal"])
    expect(outputs[0]).toEqual({ _tag: "SessionStarted", sessionId: "s", model: "m1" })
    expect(outputs.at(-1)).toMatchObject({ ok: true, text: "new", session: "s" })
  })

  it("a resume's turn starts at the runner's marker: history an agent replays after the load's answer is not the turn's", () => {
    const loaded = JSON.stringify({ jsonrpc: "2.0", id: 1, result: {} })
    const outputs = parseAll([initialized, loaded, replayed, replayed, marker, answer, done], {
      _tag: "Resume",
      id: "s"
    })
    expect(outputs.map((o) => o._tag)).toEqual(["SessionStarted", "TextDelta", "Message", "Terminal"])
    expect(outputs.at(-1)).toMatchObject({ ok: true, text: "new", session: "s" })
  })

  it("a resume whose session/load is answered null (the SDK reads it as {}) starts there too", () => {
    const loaded = JSON.stringify({ jsonrpc: "2.0", id: 1, result: null })
    const outputs = parseAll([initialized, loaded, marker, answer, done], { _tag: "Resume", id: "s" })
    expect(outputs.map((o) => o._tag)).toEqual(["SessionStarted", "TextDelta", "Message", "Terminal"])
    expect(outputs.at(-1)).toMatchObject({ ok: true, text: "new", session: "s" })
  })

  it("a new session starts at session/new's result, with the agent's own id", () => {
    const created = JSON.stringify({ jsonrpc: "2.0", id: 1, result: { sessionId: "s" } })
    const outputs = parseAll([initialized, created, answer, done], { _tag: "New", id: "ours" })
    expect(outputs[0]).toEqual({ _tag: "SessionStarted", sessionId: "s", model: undefined })
    expect(outputs.at(-1)).toMatchObject({ ok: true, session: "s" })
  })

  it("the turn runner's failure line is the run's typed error", () => {
    const classify = (stderr: string) =>
      AcpDriver.classifyExit({ exitCode: 2, stderr, terminal: undefined, session: { _tag: "New", id: "x" } })
    // The agent's own stderr lines (the runner relays them) follow the runner's reason.
    expect(classify(`noise\n${AcpDriver.failurePrefix}HostedToolsUnavailable: no http MCP\n`)).toMatchObject({
      reason: "HostedToolsUnavailable",
      detail: "no http MCP; the end of the agent's stderr:\nnoise"
    })
    expect(classify(`${AcpDriver.failurePrefix}ResumeRejected: session/load failed`)).toMatchObject({
      reason: "ResumeRejected"
    })
    expect(classify("just noise")).toBeUndefined()
  })
})

describe("ACP reads a plain message chunk without JSON.parse, as JSON.parse reads it", () => {
  const created = JSON.stringify({ jsonrpc: "2.0", id: 1, result: { sessionId: "s" } })
  const chunk = (sessionId: string, text: string) =>
    JSON.stringify({
      jsonrpc: "2.0",
      method: "session/update",
      params: { sessionId, update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } } }
    })
  const isRecord = (u: unknown): u is { readonly [key: string]: unknown } =>
    typeof u === "object" && u !== null && !Array.isArray(u)
  /**
   * What `JSON.parse` makes of a line that may be a message chunk of session "s" (`undefined`:
   * another message, or an update of another kind).
   */
  const expected = (line: string): ReadonlyArray<Driver.Output> | "non_json" | undefined => {
    const r = OneEdit.parsedRecord(line)
    if (r === "non_json" || r === undefined) return r
    if (r["method"] !== "session/update" || "id" in r) return undefined
    const params = r["params"]
    if (!isRecord(params) || !isRecord(params["update"])) return undefined
    if (params["sessionId"] !== "s") return []
    const update = params["update"]
    if (update["sessionUpdate"] !== "agent_message_chunk") return undefined
    const content = update["content"]
    if (!isRecord(content) || content["type"] !== "text" || typeof content["text"] !== "string") return undefined
    return content["text"] === "" ? [] : [{ _tag: "TextDelta", text: content["text"] }]
  }
  /** The outputs of `line` in a started session, before the turn's end. */
  const read = (line: string) => parseAll([created, line], { _tag: "New", id: "ours" }).slice(1)

  it.effect.prop(
    "any text, and any line one or two edits away from a chunk, gives what JSON.parse reads",
    [FastCheck.string({ unit: "binary" }), FastCheck.constantFrom("s", "t", ""), OneEdit.edits],
    ([text, sessionId, edits]) =>
      Effect.sync(() => {
        const line = OneEdit.edited(chunk(sessionId, text), edits)
        const want = expected(line)
        if (want === undefined) return
        const out = read(line)
        if (want === "non_json") expect(out).toMatchObject([{ _tag: "Notice", kind: "acp.non_json" }])
        else expect(out).toEqual(want)
      }),
    { fastCheck: { numRuns: 300 } }
  )

  it("lines a pattern could misread: a repeated key, escapes, an id, another session, a chunk before the session", () => {
    const head = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":`
    const text = (body: string) => `${head}"agent_message_chunk","content":{"type":"text","text":${body}}}}}`
    expect(read(text(`"a","text":"b"`))).toEqual([{ _tag: "TextDelta", text: "b" }])
    expect(read(text(`"a\\"b"`))).toEqual([{ _tag: "TextDelta", text: `a"b` }])
    expect(read(`${text(`"a"`)} `)).toEqual([{ _tag: "TextDelta", text: "a" }])
    expect(read(`${text(`"a"`)}}`)).toMatchObject([{ _tag: "Notice", kind: "acp.non_json" }])
    // A request with this method is not a notification: the SDK's, not the mapper's.
    expect(read(`{"jsonrpc":"2.0","id":9,${text(`"a"`).slice(17)}`)).toEqual([])
    expect(read(chunk("t", "a"))).toEqual([])
    expect(parseAll([chunk("s", "early"), created, chunk("s", "late")], { _tag: "New", id: "ours" })).toEqual([
      { _tag: "SessionStarted", sessionId: "s", model: undefined },
      { _tag: "TextDelta", text: "late" }
    ])
    // The chunks are the turn's final text.
    const done = JSON.stringify({ jsonrpc: "2.0", id: 2, result: { stopReason: "end_turn" } })
    const turn = parseAll([created, chunk("s", "Hel"), chunk("s", "lo"), done], { _tag: "New", id: "ours" })
    expect(turn.at(-1)).toMatchObject({ _tag: "Terminal", ok: true, text: "Hello" })
  })
})

describe("ACP recorded sessions replayed through the driver's parse", () => {
  const replay = (dir: string, driver: Driver.Driver) => {
    const read = (file: string) =>
      Fs.readFileSync(Path.join(import.meta.dirname, "fixtures", dir, file), "utf8").split("\n").filter((l) => l !== "")
    const outputs = Effect.runSync(
      driver.parse(Stream.fromIterable(read("session.jsonl")), {
        hostedKey: "tether",
        session: { _tag: "New", id: "ours" }
      }).pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray))
    )
    return { outputs, prompts: read("session.stdin.ndjson").filter((l) => l.includes(`"session/prompt"`)).length }
  }

  for (
    const [dir, driver] of [
      ["claude-agent-acp", claudeAgentDriver("http://127.0.0.1:1")],
      ["codex-acp", codexAgentDriver("http://127.0.0.1:1/v1")]
    ] as const
  ) {
    it(`${dir}: one terminal per prompt, the hosted and the MCP source's tool calls named, one session`, () => {
      const { outputs, prompts } = replay(dir, driver)
      const terminals = outputs.filter((o): o is Driver.Terminal => o._tag === "Terminal")
      expect(terminals).toHaveLength(prompts)
      expect(new Set(terminals.map((t) => t.session)).size).toBe(1)
      expect(outputs.filter((o) => o._tag === "SessionStarted")).toHaveLength(1)
      const started = outputs.flatMap((o) => o._tag === "ToolCall" && o.phase === "start" ? [[o.name, o.source]] : [])
      expect(started).toEqual(expect.arrayContaining([["echo", "host"], ["mcp__ext__stamp", "mcp"], [
        "slow_wait",
        "host"
      ]]))
      expect(terminals.filter((t) => !t.ok).map((t) => t.error)).toContain("the turn was cancelled")
    })
  }
})
