/**
 * Test harness for driver-level runs of the real Claude Code CLI: a temp root with the
 * layout's siblings, a bearer-protected MCP server speaking the real protocol (official SDK),
 * and a runner that materializes an `Invocation`, spawns it and parses its stdout.
 */
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import type * as Driver from "@tether/core/Driver"
import { Claude } from "@tether/drivers"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as Http from "node:http"
import * as Path from "node:path"

export const claudeBinary = Path.resolve(import.meta.dirname, "../../../node_modules/.bin/claude")

/** The real Claude CLI's driver on a scripted model (`AnthropicServer`'s url), retries off. */
export const offlineClaude = (modelUrl: string, config: Claude.Config = {}) =>
  Claude.driver({
    ...config,
    env: {
      ANTHROPIC_BASE_URL: modelUrl,
      ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
      CLAUDE_CODE_MAX_RETRIES: "0",
      ...config.env
    }
  })

export interface Root {
  readonly root: string
  readonly profile: string
  readonly home: string
  readonly tmp: string
  readonly work: string
}

/** A temp root `{profile,home,tmp,work}`, removed with the scope. */
export const tempRoot = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const root = yield* fs.makeTempDirectoryScoped({ prefix: "tether-claude-" })
  const dirs = {
    root,
    profile: Path.join(root, "profile"),
    home: Path.join(root, "home"),
    tmp: Path.join(root, "tmp"),
    work: Path.join(root, "work")
  }
  for (const dir of [dirs.profile, dirs.home, dirs.tmp, dirs.work]) yield* fs.makeDirectory(dir)
  return dirs satisfies Root
})

export interface McpLog {
  readonly method: string | undefined
  readonly authorization: string | undefined
  readonly body: string
}

/** A bearer-protected MCP Streamable HTTP server on 127.0.0.1 with an `echo` tool. */
/** `initializeDelayMs`: how long the server waits before it answers an `initialize` (a slow start-up). */
export const mcpServer = (token: string, initializeDelayMs = 0) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly log: Array<McpLog>; readonly server: Http.Server }>((resume) => {
      const log: Array<McpLog> = []
      const http = Http.createServer((req, res) => {
        const parts: Array<Buffer> = []
        req.on("data", (c: Buffer) => parts.push(c))
        req.on("end", () => {
          const body = Buffer.concat(parts).toString("utf8")
          log.push({ method: req.method, authorization: req.headers.authorization, body })
          if (req.headers.authorization !== `Bearer ${token}`) {
            res.writeHead(401, { "www-authenticate": "Bearer" }).end()
            return
          }
          if (req.method !== "POST") {
            res.writeHead(405).end()
            return
          }
          const server = new Server({ name: "harness", version: "1.0.0" }, { capabilities: { tools: {} } })
          server.setRequestHandler(ListToolsRequestSchema, () =>
            Promise.resolve({
              tools: [{
                name: "echo",
                description: "Echo text",
                inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] }
              }]
            }))
          server.setRequestHandler(CallToolRequestSchema, (request) =>
            Promise.resolve({
              content: [{ type: "text", text: `ECHO:${String(request.params.arguments?.["text"])}` }]
            }))
          const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true })
          res.on("close", () => {
            void transport.close()
            void server.close()
          })
          const message = JSON.parse(body)
          const delay = message?.method === "initialize" ? initializeDelayMs : 0
          setTimeout(() => void server.connect(transport).then(() => transport.handleRequest(req, res, message)), delay)
        })
      })
      http.listen(0, "127.0.0.1", () => {
        const address = http.address() as { port: number }
        resume(Effect.succeed({ url: `http://127.0.0.1:${address.port}/mcp`, log, server: http }))
      })
    }),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )

export interface TurnResult {
  readonly outputs: ReadonlyArray<Driver.Output>
  readonly failure: Driver.ProtocolError | undefined
  readonly exitCode: number
  readonly stderr: string
  readonly ms: number
  readonly invocation: Driver.Invocation
}

/**
 * Prepares `request` with `driver`, materializes its files into the profile, runs it with
 * `tokenValue` under the hosted token variable, and parses its stdout.
 */
export const runTurn = (driver: Driver.Driver, request: Driver.InvocationRequest, tokenValue: string) =>
  Effect.scoped(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const invocation = yield* driver.prepare(request)
    for (const file of invocation.files) {
      yield* fs.writeFileString(Path.join(request.profileDir, file.path), file.content, { mode: file.mode ?? 0o600 })
    }
    const started = performance.now()
    const command = Command.make(invocation.command, ...invocation.args).pipe(
      Command.workingDirectory(invocation.cwd),
      Command.env({ ...invocation.env, [request.hosted.tokenVariable]: tokenValue }, { extendEnv: false }),
      Command.feed(invocation.stdin ?? "")
    )
    const process = yield* Command.start(command)
    yield* Effect.addFinalizer(() => process.kill("SIGKILL").pipe(Effect.ignore))
    const stderrFiber = yield* process.stderr.pipe(Stream.decodeText(), Stream.mkString, Effect.fork)
    const parsed = yield* driver.parse(
      process.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.orDie),
      { hostedKey: request.hosted.key, session: request.session }
    ).pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray), Effect.either)
    const exitCode = yield* process.exitCode
    const stderr = yield* stderrFiber.await.pipe(Effect.flatMap((exit) => exit), Effect.orDie)
    return {
      outputs: Either.getOrElse(parsed, () => []),
      failure: Either.isLeft(parsed) ? parsed.left : undefined,
      exitCode,
      stderr,
      ms: performance.now() - started,
      invocation
    } satisfies TurnResult
  }))

export const baseRequest = (
  root: Root,
  url: string,
  overrides: Partial<Driver.InvocationRequest> = {}
): Driver.InvocationRequest => ({
  runId: "run",
  prompt: "hello",
  model: undefined,
  profileDir: root.profile,
  siblings: { home: root.home, tmp: root.tmp },
  workspace: root.work,
  hosted: { key: "tether", url, tokenVariable: "TETHER_TEST_TOKEN_5F0C2A9B", tools: ["echo"] },
  instructions: "",
  skills: [],
  mcp: [],
  session: { _tag: "New", id: crypto.randomUUID() },
  sandbox: undefined,
  hostEnv: { PATH: process.env["PATH"] },
  ...overrides
})
