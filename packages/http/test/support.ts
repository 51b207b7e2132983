/**
 * The HTTP tests' fixture: a real Claude Code CLI (offline, against the scripted Anthropic
 * server) behind `AgentHttp.router`, mounted in a real `@effect/platform-node` server on
 * 127.0.0.1; and a small SSE reader over `fetch`.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpRouter from "@effect/platform/HttpRouter"
import { Agent } from "@tether/core"
import { Claude } from "@tether/drivers"
import { AgentHttp } from "@tether/http"
import { AnthropicServer, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Http from "node:http"

export const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String, state: Schema.String }),
  revision: "lookup_issue/v1"
})
export const IssueTools = Toolkit.make(LookupIssue)
export const IssueToolsLive = IssueTools.toLayer({
  lookup_issue: ({ key }) => Effect.succeed({ title: `Title of ${key}`, state: "open" })
})

/** The prompt of the request's turn: the last user message that is not a tool result. */
const promptOf = (request: AnthropicServer.MessagesRequest): string => {
  for (let i = request.messages.length - 1; i >= 0; i--) {
    const message = request.messages[i]!
    if (message.role !== "user") continue
    if (typeof message.content === "string") return message.content
    const blocks = Array.isArray(message.content) ? message.content as ReadonlyArray<Record<string, unknown>> : []
    if (blocks.some((block) => block["type"] === "tool_result")) continue
    return blocks.map((block) => typeof block["text"] === "string" ? block["text"] : "").join("")
  }
  return ""
}

/**
 * The scripted model: `[hang]` never answers in time, `[slow]` answers after a second, `[fail]`
 * is a provider error, `[bash] <command>` runs the command with Bash (asked of the host's
 * approvals) and reports the tool result; anything else looks up ISSUE-42 and then answers with its state.
 */
export const respond: AnthropicServer.Responder = (request) => {
  const prompt = promptOf(request)
  if (prompt.includes("[hang]")) return AnthropicServer.delayed(60_000, AnthropicServer.reply("too late"))
  if (prompt.includes("[slow]")) return AnthropicServer.delayed(1_000, AnthropicServer.reply("slow answer"))
  if (prompt.includes("[fail]")) return AnthropicServer.fail(400, "scripted failure")
  const results = AnthropicServer.toolResults(request)
  const bash = /\[bash\] (.*)$/.exec(prompt)?.[1]
  if (bash !== undefined) {
    return results.length > 0
      ? AnthropicServer.reply(`TOOL ${results[0]!.isError ? "ERROR" : "OK"}: ${results[0]!.text}`)
      : AnthropicServer.callTool("Bash", { command: bash, description: "Run it" })
  }
  if (results.length > 0) {
    const state = /"state"\s*:\s*"(\w+)"/.exec(results[0]!.text)?.[1] ?? "unknown"
    return AnthropicServer.reply(`ISSUE-42 is ${state}.`, { usage: { inputTokens: 30, outputTokens: 7 } })
  }
  return AnthropicServer.callTool("lookup_issue", { key: "ISSUE-42" }, {
    text: "Let me look it up.",
    usage: { inputTokens: 20, outputTokens: 5 }
  })
}

/** `Bearer alice` may use `alice/…` threads, `Bearer bob` `bob/…`; nothing else is authenticated. */
export const authorize = (request: { readonly headers: { readonly [name: string]: string | undefined } }) => {
  const match = /^Bearer (alice|bob)$/.exec(request.headers["authorization"] ?? "")
  return match === null
    ? Effect.fail(new AgentHttp.Unauthorized())
    : Effect.succeed({ principal: match[1]!, threads: (key: string) => key.startsWith(`${match[1]}/`) })
}

export class Fixture extends Context.Tag("test/Fixture")<Fixture, {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string
  readonly agent: Agent.Agent
  readonly anthropic: AnthropicServer.AnthropicServer
}>() {}

/**
 * One agent and one HTTP server for a test file: the router at `/agent` (heartbeat 200 ms,
 * reconnect grace 300 ms, a thread's handle and warm process kept 1 s after its last use), and a
 * second router at `/small` that keeps only 3 events per run.
 */
/**
 * The fixture's agent: the real Claude CLI against the scripted server at `anthropicUrl`, the
 * issue tools, approvals in event mode (Bash calls wait for an answer by HTTP) with `deadline`.
 */
export const issueAgent = (
  anthropicUrl: string,
  sandbox: Harness.Sandbox,
  deadline: Duration.DurationInput = "30 seconds"
) =>
  Agent.make({
    driver: Claude.driver({
      env: {
        ANTHROPIC_BASE_URL: anthropicUrl,
        ANTHROPIC_API_KEY: Redacted.make("sk-ant-offline-test"),
        CLAUDE_CODE_MAX_RETRIES: "0"
      }
    }),
    definition: { instructions: "You triage issues.", skills: [], tools: IssueTools },
    workspace: sandbox.workspace,
    profile: sandbox.selection,
    processes: { killGrace: "500 millis" },
    approvals: { deadline }
  })

export const layer = Layer.scoped(
  Fixture,
  Effect.gen(function*() {
    const anthropic = yield* AnthropicServer.make({ respond })
    const sandbox = yield* Harness.sandbox
    const agent = yield* issueAgent(anthropic.url, sandbox)
    // The routers inside the server's lifetime: closing cancels their runs before the server closes.
    const server = yield* NodeHttpServer.make(() => Http.createServer(), { host: "127.0.0.1", port: 0 })
    // Warm processes go 1 s after their thread's last use: a test that checks that nothing is left
    // waits for that, not for the 5 minutes of the default.
    const common = {
      agent,
      authorize,
      heartbeat: "200 millis",
      reconnectGrace: "300 millis",
      threads: { idleTimeout: "1 second" }
    } as const
    const main = yield* AgentHttp.router({ ...common, maxBodyBytes: 4096 })
    const small = yield* AgentHttp.router({ ...common, replay: 3 })
    yield* server.serve(HttpRouter.empty.pipe(HttpRouter.mount("/agent", main), HttpRouter.mount("/small", small)))
    const address = server.address
    if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("not a TCP address")
    return { origin: `http://127.0.0.1:${address.port}`, agent, anthropic }
  })
).pipe(Layer.provide([IssueToolsLive, Harness.layer]))

/** One parsed SSE block. */
export interface Frame {
  readonly id: string | undefined
  readonly event: string | undefined
  readonly data: any
  readonly comment: string | undefined
}

export const parseFrames = (text: string): Array<Frame> =>
  text.split("\n\n").filter((block) => block !== "").map((block) => {
    let id: string | undefined
    let event: string | undefined
    let data: string | undefined
    let comment: string | undefined
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) comment = line.slice(1).trim()
      else if (line.startsWith("id: ")) id = line.slice(4)
      else if (line.startsWith("event: ")) event = line.slice(7)
      else if (line.startsWith("data: ")) data = line.slice(6)
    }
    return { id, event, data: data === undefined ? undefined : JSON.parse(data), comment }
  })

/** Reads an SSE response until `until` holds for a frame (then cancels the body) or it ends. */
export const readUntil = async (
  response: Response,
  until: (frame: Frame) => boolean = () => false
): Promise<Array<Frame>> => {
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let buffer = ""
  const frames: Array<Frame> = []
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    buffer += decoder.decode(value, { stream: true })
    const end = buffer.lastIndexOf("\n\n")
    if (end === -1) continue
    const fresh = parseFrames(buffer.slice(0, end + 2))
    buffer = buffer.slice(end + 2)
    frames.push(...fresh)
    if (fresh.some(until)) {
      await reader.cancel()
      break
    }
  }
  return frames
}

export const events = (frames: ReadonlyArray<Frame>) => frames.filter((frame) => frame.event !== undefined)

/**
 * Reads a turn's whole stream, calling `react` with the frames so far after each chunk (the run
 * belongs to a reader: keep reading while acting on it); its frames.
 */
export const readReacting = (response: Response, react: (frames: Array<Frame>) => Promise<void>) =>
  Effect.promise(async () => {
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    let text = ""
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      text += decoder.decode(value, { stream: true })
      await react(parseFrames(text))
    }
    return parseFrames(text)
  })
