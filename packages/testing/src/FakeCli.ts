/**
 * The scriptable fake provider CLI (`bin/fake-cli.mjs`, a real Node program) and its driver.
 *
 * The program reads its turn from stdin as JSONL script operations (see `op`), acts as an MCP
 * client of the gateway exactly as a real CLI does (reads `mcp.json` from its profile directory
 * `$FAKE_CLI_HOME`, expands the bearer variable from its environment, initializes, lists and
 * calls tools with the official SDK client) and writes a JSONL protocol the driver parses. Like a
 * real CLI it keeps one transcript per session in its profile (`sessions/<id>.jsonl`, the layout's
 * `sessions` class, its last line written after the terminal record) and refuses to resume or fork
 * a session whose transcript is missing (`classifyExit` reports it as `ResumeRejected`). Each
 * process also writes a log of its own in its `home` sibling (the layout's `logs`), as Claude
 * Code does for its MCP servers.
 *
 * @since 0.1.0
 */
import type { Driver } from "@tether/core"
import * as DriverModule from "@tether/core/Driver"
import * as Effect from "effect/Effect"
import { createRequire } from "node:module"
import * as NodePath from "node:path"
import * as NodeProcess from "node:process"

/**
 * Absolute path of the fake CLI program (run it with `node`).
 *
 * @since 0.1.0
 * @category constants
 */
export const programPath: string = NodePath.join(
  NodePath.dirname(createRequire(import.meta.url).resolve("@tether/testing/package.json")),
  "bin",
  "fake-cli.mjs"
)

/**
 * One script operation of the fake CLI.
 *
 * @since 0.1.0
 * @category models
 */
export type Op =
  | { readonly op: "text"; readonly text: string }
  | { readonly op: "deltas"; readonly count: number; readonly size?: number }
  | { readonly op: "list" }
  | { readonly op: "call"; readonly tool: string; readonly input?: unknown }
  | {
    readonly op: "result"
    readonly text?: string
    readonly ok?: boolean
    readonly error?: string
    readonly usage?: { readonly input_tokens?: number; readonly output_tokens?: number }
  }
  | { readonly op: "no-result" }
  | { readonly op: "sleep"; readonly ms: number }
  | { readonly op: "crash"; readonly code?: number }
  | { readonly op: "hang" }
  | { readonly op: "grandchild"; readonly setsid?: boolean; readonly holdStdout?: boolean }
  | { readonly op: "stderr"; readonly bytes: number }
  | { readonly op: "malformed" }
  | { readonly op: "huge"; readonly bytes: number }
  | { readonly op: "exit-early"; readonly code?: number }
  | { readonly op: "linger"; readonly ms: number }

/**
 * Renders a script as the turn input.
 *
 * @since 0.1.0
 * @category constructors
 */
export const script = (...ops: ReadonlyArray<Op>): string => ops.map((op) => JSON.stringify(op)).join("\n")

/**
 * The selector variable of the fake CLI's profile directory.
 *
 * @since 0.1.0
 * @category constants
 */
export const selectorEnv = "FAKE_CLI_HOME"

/**
 * How the fake CLI driver runs: its capabilities (to exercise capability errors) and the node
 * executable.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Override the capabilities (to exercise capability errors). */
  readonly capabilities?: Partial<Driver.Capabilities>
  /** Command to run (default: the current `node` executable). */
  readonly node?: string
}

const record = (value: unknown): { readonly [key: string]: unknown } | undefined =>
  value !== null && typeof value === "object" && !Array.isArray(value)
    ? value as { readonly [key: string]: unknown }
    : undefined

const toolName = (name: string, hostedKey: string): { readonly name: string; readonly source: "host" | "builtin" } => {
  const prefix = `mcp__${hostedKey}__`
  return name.startsWith(prefix) ? { name: name.slice(prefix.length), source: "host" } : { name, source: "builtin" }
}

/**
 * One line of the fake CLI protocol as outputs (a line that is not JSON is a warning `Notice`).
 * `parse` adds the tool names of calls' ends.
 *
 * @since 0.3.0
 * @category parsing
 */
export const parseLine = (line: string, context: Driver.ParseContext): ReadonlyArray<Driver.Output> | Driver.Output => {
  let value: unknown
  try {
    value = JSON.parse(line)
  } catch {
    return [{ _tag: "Notice", level: "warning", kind: "malformed", message: line.slice(0, 200) }]
  }
  const r = record(value)
  switch (r?.["type"]) {
    case "session":
      return [{
        _tag: "SessionStarted",
        sessionId: String(r["session_id"]),
        model: typeof r["model"] === "string" ? r["model"] : undefined
      }]
    case "delta":
      return { _tag: "TextDelta", text: String(r["text"]) }
    case "message":
      return [{ _tag: "Message", role: "assistant", text: String(r["text"]) }]
    case "tool_use": {
      const { name, source } = toolName(String(r["name"]), context.hostedKey)
      return [{ _tag: "ToolCall", phase: "start", callId: String(r["id"]), name, source, input: r["input"] }]
    }
    case "tool_result":
      return [{
        _tag: "ToolCall",
        phase: "end",
        callId: String(r["id"]),
        name: "",
        source: "host",
        output: r["output"],
        isError: r["is_error"] === true
      }]
    case "notice":
      return [{ _tag: "Notice", level: "info", kind: String(r["kind"]), message: String(r["message"]), raw: r }]
    case "result": {
      const usage = record(r["usage"])
      return [{
        _tag: "Terminal",
        ok: r["ok"] === true,
        text: typeof r["text"] === "string" ? r["text"] : undefined,
        usage: usage === undefined ? undefined : {
          ...(typeof usage["input_tokens"] === "number" ? { inputTokens: usage["input_tokens"] } : {}),
          ...(typeof usage["output_tokens"] === "number" ? { outputTokens: usage["output_tokens"] } : {})
        },
        model: undefined,
        session: typeof r["session_id"] === "string" ? r["session_id"] : undefined,
        error: typeof r["error"] === "string" ? r["error"] : undefined,
        raw: value
      }]
    }
    default:
      return [{ _tag: "Notice", level: "warning", kind: "unknown_record", message: line.slice(0, 200), raw: value }]
  }
}

/**
 * Parses the fake CLI protocol (exported for parser tests), a line at a time
 * (`Driver.parseFromLines`): a tool call's end is named after its start.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parse: Driver.Driver["parse"] = DriverModule.parseFromLines((context) => {
  const names = new Map<string, string>()
  return (line) => {
    const parsed = parseLine(line, context)
    if (!Array.isArray(parsed)) return parsed as Driver.Output
    const outputs = parsed as ReadonlyArray<Driver.Output>
    if (!outputs.some((output) => output._tag === "ToolCall")) return outputs
    return outputs.map((output) => {
      if (output._tag !== "ToolCall") return output
      if (output.phase === "start") {
        names.set(output.callId, output.name)
        return output
      }
      return { ...output, name: names.get(output.callId) ?? output.name }
    })
  }
})

/**
 * The fake CLI's driver. `tool` names a hosted tool as `mcp__<hostedKey>__<tool>`; the MCP file
 * `mcp.json` references the token variable, never the token.
 *
 * @since 0.1.0
 * @category constructors
 */
export const driver = (options: Options = {}): Driver.Driver => ({
  name: "fake-cli",
  capabilities: {
    resume: false,
    fork: false,
    mcpTransports: ["http"],
    instructions: true,
    skillsProjection: false,
    sandbox: ["readOnly", "workspaceWrite", "unrestricted"],
    toolAllowList: false,
    streamingInput: false,
    structuredOutput: "instruction",
    persistentProcess: false,
    ...options.capabilities
  },
  layout: {
    provider: "fake-cli",
    selectorEnv: [selectorEnv],
    nativeDefault: (env) => NodePath.join(env["HOME"] ?? "/nonexistent", ".fake-cli"),
    classes: {
      settings: ["settings.json"],
      mcp: [],
      skills: ["skills/**"],
      auth: ["auth.json"],
      sessions: ["sessions/**"]
    },
    sessionOf: (path) => /^sessions\/([0-9a-f-]{36})\.jsonl$/.exec(path)?.[1],
    reserved: ["mcp.json", "instructions.md"],
    siblings: ["home"],
    // Each process's own log (`$HOME/.cache/fake-cli/<start time>-<pid>.log`).
    logs: { home: [".cache/fake-cli/**"] }
  },
  prepare: (request) =>
    Effect.succeed({
      command: options.node ?? NodeProcess.execPath,
      args: [programPath],
      env: {
        PATH: request.hostEnv["PATH"] ?? "/usr/bin:/bin",
        HOME: request.siblings["home"] ?? request.profileDir,
        [selectorEnv]: request.profileDir,
        ...(request.model === undefined ? {} : { FAKE_CLI_MODEL: request.model }),
        ...(request.session._tag === "New" ? {} : { FAKE_CLI_SESSION: request.session.id }),
        ...(request.session._tag === "Resume" ? { FAKE_CLI_RESUME: "1" } : {}),
        ...(request.session._tag === "Fork" ? { FAKE_CLI_FORK_FROM: request.session.from } : {})
      },
      cwd: request.workspace,
      stdin: request.prompt,
      files: [
        {
          path: "mcp.json",
          content: JSON.stringify(
            {
              mcpServers: {
                [request.hosted.key]: {
                  url: request.hosted.url,
                  headers: { Authorization: `Bearer \${${request.hosted.tokenVariable}}` }
                }
              }
            },
            null,
            2
          )
        },
        ...(request.instructions === "" ? [] : [{ path: "instructions.md", content: request.instructions }])
      ]
    }),
  parse,
  classifyExit: (info) => {
    const missing = /no conversation found with session id \S+/.exec(info.stderr)
    return info.session._tag !== "New" && missing !== null
      ? new DriverModule.ProtocolError({ reason: "ResumeRejected", detail: missing[0] })
      : undefined
  }
})
