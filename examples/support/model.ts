/**
 * The examples' model: offline, the scripted model servers of `@tether/testing` (Anthropic
 * Messages for Claude Code, OpenAI Responses for Codex, Gemini for the Gemini CLI) on
 * 127.0.0.1, driven by one provider-neutral script; live, the user's own CLI and login.
 *
 * Nothing here is Tether API: it is how the examples stand in for a real model.
 */
import type * as Driver from "@tether/core/Driver"
import { Claude, Codex, Gemini } from "@tether/drivers"
import { AnthropicServer, GeminiServer, ResponsesServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Fs from "node:fs"
import * as Path from "node:path"

/** The drivers the examples can run offline against a real CLI from node_modules. */
export const driverNames = ["claude", "codex", "gemini"] as const
export type DriverName = (typeof driverNames)[number]

/** A tool result the CLI sent back to the model in this turn. */
export interface ToolResult {
  readonly text: string
}

/** What the scripted model sees of a request: the turn's prompt and the tool results since. */
export interface Turn {
  readonly prompt: string
  readonly results: ReadonlyArray<ToolResult>
  /** The tool names the CLI offered the model in this request (as the CLI spells them). */
  readonly offered: ReadonlyArray<string>
  /** The text of the whole conversation the CLI sent (earlier turns of a resumed session included). */
  readonly history: string
}

/** One model reply: call a tool (by its own name; `server` for an external MCP source), or answer. */
export type Reply =
  | {
    readonly _tag: "Call"
    readonly tool: string
    readonly input: unknown
    readonly text?: string
    readonly server?: string
  }
  | { readonly _tag: "Text"; readonly text: string }

export const call = (
  tool: string,
  input: unknown,
  options: { readonly text?: string; readonly server?: string } = {}
): Reply => ({
  _tag: "Call",
  tool,
  input,
  ...options
})
export const answer = (text: string): Reply => ({ _tag: "Text", text })

export type Model = (turn: Turn) => Reply

const parseDriverArg = (argv: ReadonlyArray<string>): DriverName => {
  const at = argv.indexOf("--driver")
  const name = at === -1 ? "claude" : argv[at + 1]
  if (!driverNames.includes(name as DriverName)) {
    console.error(`--driver must be one of ${driverNames.join(", ")}`)
    process.exit(2)
  }
  return name as DriverName
}

// Checked as this module loads, before an example acquires anything: `process.exit` inside a
// running program skips every finalizer (its temp directories stayed behind).
const requested = parseDriverArg(process.argv.slice(2))

/** The driver named by `--driver <name>` on the command line (default `claude`). */
export const driverArg = (argv?: ReadonlyArray<string>): DriverName =>
  argv === undefined ? requested : parseDriverArg(argv)

const usage = { inputTokens: 412, outputTokens: 38 }

const isRecord = (u: unknown): u is { readonly [key: string]: unknown } => typeof u === "object" && u !== null

const textOf = (content: unknown): string => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return isRecord(content) ? JSON.stringify(content) : ""
  return content.map((part) =>
    isRecord(part) && typeof part["text"] === "string"
      ? part["text"]
      : isRecord(part) && part["type"] === "tool_result"
      ? textOf(part["content"])
      : ""
  ).join("")
}

// --- Anthropic Messages (Claude Code) -----------------------------------------------------

const anthropicTurn = (request: AnthropicServer.MessagesRequest): Turn => {
  const results: Array<ToolResult> = []
  let prompt = ""
  for (let i = request.messages.length - 1; i >= 0; i--) {
    const message = request.messages[i]!
    if (message.role !== "user") continue
    const blocks = Array.isArray(message.content) ? message.content : []
    const toolResults = blocks.filter((b: unknown) => isRecord(b) && b["type"] === "tool_result")
    if (toolResults.length === 0) {
      prompt = textOf(message.content)
      break
    }
    results.unshift(
      ...toolResults.map((b: { readonly [key: string]: unknown }) => ({ text: textOf(b["content"]) }))
    )
  }
  return {
    prompt,
    results,
    offered: (request.tools ?? []).map((t) => t.name),
    history: request.messages.map((m) => textOf(m.content)).join("\n")
  }
}

const anthropicStep = (reply: Reply): AnthropicServer.Step =>
  reply._tag === "Text"
    ? AnthropicServer.reply(reply.text, { usage })
    : AnthropicServer.callTool(
      reply.server === undefined ? reply.tool : `mcp__${reply.server}__${reply.tool}`,
      reply.input,
      { usage, ...(reply.text === undefined ? {} : { text: reply.text }) }
    )

// --- OpenAI Responses (Codex) -------------------------------------------------------------

const responsesTurn = (request: ResponsesServer.RecordedRequest): Turn => {
  const items = ResponsesServer.inputItems(request)
  const results: Array<ToolResult> = []
  let prompt = ""
  for (let i = items.length - 1; i >= 0; i--) {
    const item = items[i]!
    if (item["type"] === "function_call_output") {
      results.unshift({ text: typeof item["output"] === "string" ? item["output"] : textOf(item["output"]) })
    } else if (item["type"] === "message" && item["role"] === "user") {
      prompt = textOf(item["content"])
      break
    }
  }
  const offered = Object.entries(ResponsesServer.namespaceTools(request)).flatMap(([ns, tools]) =>
    tools.map((t) => `${ns}__${t}`)
  )
  return { prompt, results, offered, history: items.map((item) => textOf(item["content"])).join("\n") }
}

const responsesStep = (reply: Reply): ResponsesServer.Step =>
  reply._tag === "Text"
    ? ResponsesServer.text(reply.text, { usage })
    : ResponsesServer.mcpTool(reply.server ?? "tether", reply.tool, reply.input)

// --- Gemini (Gemini CLI) ------------------------------------------------------------------

const geminiTurn = (request: GeminiServer.GenerateRequest): Turn => {
  const results: Array<ToolResult> = []
  let prompt = ""
  for (let i = request.contents.length - 1; i >= 0; i--) {
    const content = request.contents[i]!
    if (content.role !== "user") continue
    const responses = content.parts.filter((p) => p.functionResponse !== undefined)
    if (responses.length === 0) {
      prompt = content.parts.map((p) => p.thought === true ? "" : p.text ?? "").join("")
      break
    }
    results.unshift(...responses.map((p) => {
      const response = p.functionResponse?.response
      const output = isRecord(response) ? response["output"] ?? response["error"] : undefined
      return { text: typeof output === "string" ? output : JSON.stringify(response ?? {}) }
    }))
  }
  return {
    prompt,
    results,
    offered: GeminiServer.declaredTools(request),
    history: request.contents.map((c) => c.parts.map((p) => p.text ?? "").join("")).join("\n")
  }
}

const geminiStep = (reply: Reply): GeminiServer.Step =>
  reply._tag === "Text"
    ? GeminiServer.reply(reply.text, { usage })
    : GeminiServer.callTool(
      reply.server === undefined ? reply.tool : `mcp_${reply.server}_${reply.tool}`,
      reply.input,
      reply.text === undefined ? { usage } : { usage, text: reply.text }
    )

/**
 * Starts the scripted model server for `name` (closed with the scope) and returns the driver
 * pointed at it: the real CLI from node_modules, a fake API key, retries off.
 */
export const offline = (
  name: DriverName,
  model: Model,
  options: {
    /**
     * The model Codex is told it talks to (default `gpt-5.5`, one it has metadata for). With a
     * model it has metadata for, Codex may defer MCP tools behind its `tool_search` tool instead of
     * listing them in each request; an unknown name (with a warning) lists them.
     */
    readonly codexModel?: string
  } = {}
): Effect.Effect<Driver.Driver, unknown, Scope.Scope> => {
  switch (name) {
    case "claude":
      return AnthropicServer.make({ respond: (request) => anthropicStep(model(anthropicTurn(request))) }).pipe(
        Effect.map((server) =>
          Claude.driver({
            env: {
              ANTHROPIC_BASE_URL: server.url,
              ANTHROPIC_API_KEY: Redacted.make("sk-ant-offline-example"),
              CLAUDE_CODE_MAX_RETRIES: "0"
            }
          })
        )
      )
    case "codex":
      return ResponsesServer.make({ script: (request) => responsesStep(model(responsesTurn(request))) }).pipe(
        Effect.map((server) =>
          Codex.driver({
            model: options.codexModel ?? "gpt-5.5",
            modelProvider: {
              id: "offline",
              baseUrl: server.baseUrl,
              apiKey: Redacted.make("sk-offline-example"),
              requestMaxRetries: 0,
              streamMaxRetries: 0
            },
            settings: Codex.offlineSettings
          })
        )
      )
    case "gemini":
      return GeminiServer.make({ respond: (request) => geminiStep(model(geminiTurn(request))) }).pipe(
        Effect.map((server) =>
          Gemini.driver({
            model: "gemini-2.5-flash",
            env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("offline-example-key") }
          })
        )
      )
  }
}

/** The first `command` on the user's PATH outside any node_modules (the user's own install). */
export const installed = (command: string): string | undefined => {
  for (const dir of (process.env["PATH"] ?? "").split(Path.delimiter)) {
    if (dir === "" || dir.split(Path.sep).includes("node_modules")) continue
    const candidate = Path.join(dir, command)
    try {
      Fs.accessSync(candidate, Fs.constants.X_OK)
      return candidate
    } catch {
      // not here
    }
  }
  return undefined
}

/**
 * The driver for the user's own CLI and login: the binary installed on their PATH (else the
 * pinned one from node_modules), their native profile (auth linked into the clone), the real
 * model endpoint (no base-URL override), their API key variables passed through when set.
 */
export const live = (name: DriverName): { readonly driver: Driver.Driver; readonly binary: string } => {
  switch (name) {
    case "claude": {
      const binary = installed("claude")
      return {
        driver: Claude.driver({
          ...(binary === undefined ? {} : { binary }),
          passEnv: ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"],
          builtinTools: [] // only the host's tools: the demo touches nothing on disk
        }),
        binary: binary ?? "node_modules/.bin/claude"
      }
    }
    case "codex": {
      const binary = installed("codex")
      return {
        driver: Codex.driver({ ...(binary === undefined ? {} : { binary }), passEnv: ["OPENAI_API_KEY"] }),
        binary: binary ?? "the pinned @openai/codex binary"
      }
    }
    case "gemini": {
      const binary = installed("gemini")
      return {
        driver: Gemini.driver({
          ...(binary === undefined ? {} : { binary }),
          passEnv: ["GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_GENAI_USE_VERTEXAI"]
        }),
        binary: binary ?? "node_modules/.bin/gemini"
      }
    }
  }
}
