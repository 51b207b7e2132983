/** @internal */
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Ref from "effect/Ref"
import type * as Scope from "effect/Scope"
import * as Http from "node:http"
import type {
  AnthropicServer,
  MessagesRequest,
  Options,
  RecordedRequest,
  Responder,
  Step,
  StepUsage
} from "../AnthropicServer.js"
import { AnthropicServerError } from "../AnthropicServer.js"
import { mcpToolsNamed } from "./scriptedHttp.js"

type ToolResult = { readonly toolUseId: string; readonly text: string; readonly isError: boolean }

const errorTypes: { readonly [status: number]: string } = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  500: "api_error",
  529: "overloaded_error"
}

const isRecord = (u: unknown): u is { readonly [key: string]: unknown } =>
  typeof u === "object" && u !== null && !Array.isArray(u)

const blockText = (content: unknown): string => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return ""
  return content.map((block: unknown) => {
    if (!isRecord(block)) return ""
    if (block["type"] === "text" && typeof block["text"] === "string") return block["text"]
    if (block["type"] === "tool_result") return blockText(block["content"])
    if (block["type"] === "tool_use") return `tool_use ${String(block["name"])} ${JSON.stringify(block["input"])}`
    return ""
  }).filter((s) => s.length > 0).join("\n")
}

/** @internal */
export const toolResults = (request: MessagesRequest): ReadonlyArray<ToolResult> => {
  const last = request.messages.at(-1)
  if (last === undefined || last.role !== "user" || !Array.isArray(last.content)) return []
  return last.content.flatMap((block: unknown) =>
    isRecord(block) && block["type"] === "tool_result"
      ? [{
        toolUseId: String(block["tool_use_id"]),
        text: blockText(block["content"]),
        isError: block["is_error"] === true
      }]
      : []
  )
}

/** @internal */
export const transcript = (request: MessagesRequest): ReadonlyArray<readonly [string, string]> =>
  request.messages.filter((m) => m.role !== "system").map((m) => [m.role, blockText(m.content)] as const)

/** @internal */
export const roundTrip = (
  first: (request: MessagesRequest) => Step,
  after: (results: ReadonlyArray<ToolResult>) => Step
): Responder =>
(request) => {
  const results = toolResults(request)
  return results.length > 0 ? after(results) : first(request)
}

/**
 * The tool a `ToolUse` names: itself when a tool is named so or it has the `mcp__` prefix, else
 * the `mcp__<server>__<name>` (`name` written as Claude writes tool names: each character outside
 * `[A-Za-z0-9_-]` becomes `_`) with a single server segment; several → a message (answered 500).
 */
const resolveToolName = (name: string, request: MessagesRequest): { readonly name: string } | string => {
  const names = (request.tools ?? []).map((t) => t.name)
  if (names.includes(name) || name.startsWith("mcp__")) return { name }
  const matches = mcpToolsNamed(name, names)
  if (matches.length > 1) return `AnthropicServer: the tool name ${name} is ambiguous: ${matches.join(", ")}`
  return { name: matches[0] ?? name }
}

/** Splits text into a few chunks so a stream has several deltas. */
const chunks = (text: string, size: number): Array<string> => {
  if (text.length === 0) return [""]
  const out: Array<string> = []
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size))
  return out
}

const sse = (type: string, data: unknown): string => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`

const usageOf = (usage: StepUsage | undefined, text: string): StepUsage =>
  usage ?? { inputTokens: 10, outputTokens: Math.max(1, Math.ceil(text.length / 4)) }

/**
 * The SSE events of one successful streamed message; with `Pieces`, each text piece is one
 * delta event and the events before each later piece are a separate group (the writer runs
 * `between` before every group but the first).
 */
const streamEvents = (
  step: Extract<Step, { _tag: "Text" | "ToolUse" | "Pieces" }>,
  messageId: string,
  toolId: string,
  model: string,
  toolName: string
): Array<Array<string>> => {
  const text = step._tag === "Pieces" ? step.pieces.join("") : step.text
  const usage = usageOf(step.usage, `${text ?? ""}${step._tag === "ToolUse" ? JSON.stringify(step.input) : ""}`)
  const events: Array<string> = [
    sse("message_start", {
      type: "message_start",
      message: {
        id: messageId,
        type: "message",
        role: "assistant",
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: {
          input_tokens: usage.inputTokens,
          cache_creation_input_tokens: usage.cacheCreationInputTokens ?? 0,
          cache_read_input_tokens: usage.cacheReadInputTokens ?? 0,
          output_tokens: 1
        }
      }
    }),
    sse("ping", { type: "ping" })
  ]
  const groups: Array<Array<string>> = [events]
  let index = 0
  if (text !== undefined) {
    events.push(
      sse("content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } })
    )
    const pieces = step._tag === "Pieces" ? step.pieces : chunks(text, 8)
    for (const [n, piece] of pieces.entries()) {
      const delta = sse("content_block_delta", {
        type: "content_block_delta",
        index,
        delta: { type: "text_delta", text: piece }
      })
      if (step._tag === "Pieces" && n > 0) groups.push([delta])
      else groups.at(-1)!.push(delta)
    }
    groups.at(-1)!.push(sse("content_block_stop", { type: "content_block_stop", index }))
    index++
  }
  const tail = groups.at(-1)!
  if (step._tag === "ToolUse") {
    tail.push(sse("content_block_start", {
      type: "content_block_start",
      index,
      content_block: { type: "tool_use", id: toolId, name: toolName, input: {} }
    }))
    tail.push(
      sse("content_block_delta", {
        type: "content_block_delta",
        index,
        delta: { type: "input_json_delta", partial_json: "" }
      })
    )
    for (const piece of chunks(JSON.stringify(step.input ?? {}), 16)) {
      tail.push(
        sse("content_block_delta", {
          type: "content_block_delta",
          index,
          delta: { type: "input_json_delta", partial_json: piece }
        })
      )
    }
    tail.push(sse("content_block_stop", { type: "content_block_stop", index }))
  }
  tail.push(sse("message_delta", {
    type: "message_delta",
    delta: { stop_reason: step._tag === "ToolUse" ? "tool_use" : "end_turn", stop_sequence: null },
    usage: { output_tokens: usage.outputTokens }
  }))
  tail.push(sse("message_stop", { type: "message_stop" }))
  return groups
}

const headerRecord = (req: Http.IncomingMessage): RecordedRequest["headers"] => ({ ...req.headers })

/** @internal */
export const make = (options: Options = {}): Effect.Effect<AnthropicServer, AnthropicServerError, Scope.Scope> =>
  Effect.gen(function*() {
    const queue = yield* Ref.make<ReadonlyArray<Step>>(options.script ?? [])
    const recorded = yield* Ref.make<ReadonlyArray<RecordedRequest>>([])
    const counter = yield* Ref.make(0)

    const nextStep = (request: MessagesRequest): Effect.Effect<Step | undefined, string> =>
      Ref.modify(
        queue,
        (steps): readonly [Step | undefined, ReadonlyArray<Step>] =>
          steps.length > 0 ? [steps[0], steps.slice(1)] : [undefined, steps]
      ).pipe(
        Effect.flatMap((step) =>
          step !== undefined ? Effect.succeed(step) : Effect.try({
            try: () => options.respond?.(request),
            // A responder that throws is a scripting error, answered 500 with its message.
            catch: (error) => `AnthropicServer: ${error instanceof Error ? error.message : String(error)}`
          })
        )
      )

    const handle = (req: Http.IncomingMessage, res: Http.ServerResponse, body: string): Effect.Effect<void> =>
      Effect.gen(function*() {
        let json: unknown = undefined
        try {
          json = body.length > 0 ? JSON.parse(body) : undefined
        } catch {
          json = undefined
        }
        const path = (req.url ?? "/").split("?")[0]
        const isMessages = req.method === "POST" && path === "/v1/messages" && isRecord(json) &&
          Array.isArray(json["messages"])
        const request = isMessages ? json as MessagesRequest : undefined
        const next = request !== undefined ? yield* Effect.either(nextStep(request)) : undefined
        let step = next?._tag === "Right" ? next.right : undefined
        const n = yield* Ref.updateAndGet(counter, (c) => c + 1)
        yield* Ref.update(recorded, (all) => [
          ...all,
          { method: req.method ?? "", url: req.url ?? "", headers: headerRecord(req), body, json, step }
        ])
        while (step?._tag === "Delayed") {
          yield* Effect.sleep(step.millis)
          step = step.step
        }
        if (req.method === "HEAD" && path === "/") {
          res.writeHead(200, { "content-length": "0" }).end()
          return
        }
        if (request === undefined) {
          const error = { type: "error", error: { type: "not_found_error", message: "Not found" } }
          res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify(error))
          return
        }
        const resolved = step?._tag === "ToolUse" ? resolveToolName(step.name, request) : { name: "" }
        const scriptError = next?._tag === "Left" ? next.left : typeof resolved === "string" ? resolved : undefined
        if (step === undefined || step._tag === "Fail" || scriptError !== undefined) {
          const status = step?._tag === "Fail" && scriptError === undefined ? step.status : 500
          const message = scriptError ?? (step?._tag === "Fail" ? step.message : undefined) ??
            "AnthropicServer: the script is exhausted"
          const error = { type: "error", error: { type: errorTypes[status] ?? "api_error", message } }
          res.writeHead(status, {
            "content-type": "application/json",
            "request-id": `req_${n}`,
            "x-should-retry": "false"
          }).end(JSON.stringify(error))
          return
        }
        const id = step._tag === "ToolUse" && step.id !== undefined ? step.id : `toolu_scripted${n}`
        const model = options.model ?? request.model ?? "claude-scripted"
        res.writeHead(200, {
          "content-type": "text/event-stream; charset=utf-8",
          "cache-control": "no-cache",
          "request-id": `req_${n}`
        })
        const groups = streamEvents(
          step,
          `msg_scripted${n}`,
          id,
          model,
          typeof resolved === "string" ? "" : resolved.name
        )
        for (const [index, group] of groups.entries()) {
          if (index > 0 && step._tag === "Pieces") yield* step.between
          res.write(group.join(""))
        }
        res.end()
      })

    const server = Http.createServer()
    const port = yield* Effect.acquireRelease(
      Effect.async<number, AnthropicServerError>((resume) => {
        server.once("error", (error) => resume(Effect.fail(new AnthropicServerError({ detail: error.message }))))
        server.listen(0, "127.0.0.1", () => {
          const address = server.address()
          if (address !== null && typeof address === "object") resume(Effect.succeed(address.port))
          else resume(Effect.fail(new AnthropicServerError({ detail: "no address" })))
        })
      }),
      () =>
        Effect.async<void>((resume) => {
          server.close(() => resume(Effect.void))
          server.closeAllConnections()
        })
    )
    // Acquired after the listener, so released before it: in-flight handlers (e.g. a delayed
    // step) are interrupted first, then the listener closes with every connection.
    const handlers = yield* FiberSet.make<void>()
    const runHandler = yield* FiberSet.runtime(handlers)<never>()
    server.on("request", (req: Http.IncomingMessage, res: Http.ServerResponse) => {
      const parts: Array<Buffer> = []
      req.on("data", (chunk: Buffer) => parts.push(chunk))
      req.on("end", () => {
        const body = Buffer.concat(parts).toString("utf8")
        runHandler(
          handle(req, res, body).pipe(
            // Any defect still ends the response: a client never waits on a handler that died.
            Effect.catchAllDefect((defect) =>
              Effect.sync(() => {
                if (res.headersSent) return res.destroy()
                const message = `AnthropicServer: ${defect instanceof Error ? defect.message : String(defect)}`
                const error = { type: "error", error: { type: "api_error", message } }
                res.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify(error))
              })
            ),
            Effect.onInterrupt(() => Effect.sync(() => res.destroy()))
          )
        )
      })
    })

    return {
      url: `http://127.0.0.1:${port}`,
      port,
      enqueue: (...steps) => Ref.update(queue, (q) => [...q, ...steps]),
      requests: Ref.get(recorded),
      messages: Ref.get(recorded).pipe(
        Effect.map((all) => all.flatMap((r) => isMessagesJson(r) ? [r.json as MessagesRequest] : []))
      )
    } satisfies AnthropicServer
  })

const isMessagesJson = (r: RecordedRequest): boolean =>
  r.method === "POST" && r.url.split("?")[0] === "/v1/messages" && isRecord(r.json) && Array.isArray(r.json["messages"])
