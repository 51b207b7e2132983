/**
 * The MCP side of one request: a fresh low-level SDK `Server` and a one-request JSON-response
 * transport per request, with the tools/list and tools/call handlers of one credential.
 *
 * @internal
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import type { Transport as SdkTransport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type {
  CallToolResult,
  JSONRPCErrorResponse,
  JSONRPCMessage,
  MessageExtraInfo,
  RequestId,
  Tool as McpTool
} from "@modelcontextprotocol/sdk/types.js"
import {
  CallToolRequestSchema,
  CancelledNotificationSchema,
  ErrorCode,
  isJSONRPCRequest,
  JSONRPCMessageSchema,
  ListToolsRequestSchema,
  McpError
} from "@modelcontextprotocol/sdk/types.js"
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv"
import type * as Catalog from "@tether/tool/Catalog"
import type { IncomingMessage, ServerResponse } from "node:http"

/** @internal */
export const serverInfo = { name: "tether-gateway", version: "0.1.0" } as const

/**
 * Renders descriptors as MCP tools: inputSchema, outputSchema, title and only the
 * annotations that were set (tri-state: an absent key stays absent, `false` stays `false`).
 *
 * @internal
 */
export const toMcpTools = (descriptors: ReadonlyArray<Catalog.Descriptor>): ReadonlyArray<McpTool> =>
  descriptors.map((descriptor) => {
    const annotations: Record<string, boolean> = {}
    for (const key of ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] as const) {
      const value = descriptor.annotations[key]
      if (value !== undefined) annotations[key] = value
    }
    const tool: McpTool = {
      name: descriptor.name,
      description: descriptor.description,
      inputSchema: descriptor.inputSchema as McpTool["inputSchema"],
      ...(descriptor.outputSchema === undefined
        ? {}
        : { outputSchema: descriptor.outputSchema as NonNullable<McpTool["outputSchema"]> }),
      ...(descriptor.title !== undefined ? { title: descriptor.title } : {}),
      ...(Object.keys(annotations).length > 0 ? { annotations } : {})
    }
    return tool
  })

/**
 * Maps an execution outcome to the MCP result: success carries `structuredContent` and its
 * text rendering; a rejection or a generic failure is `isError` with its code and message.
 *
 * @internal
 */
export const toCallToolResult = (outcome: Catalog.Outcome): CallToolResult => {
  switch (outcome._tag) {
    case "Success":
      return {
        content: [{ type: "text", text: outcome.text }],
        ...(outcome.structuredContent === undefined
          ? {}
          : { structuredContent: outcome.structuredContent as Record<string, unknown> })
      }
    case "Rejected":
    case "Failed":
      return { content: [{ type: "text", text: `${outcome.code}: ${outcome.message}` }], isError: true }
  }
}

/** The fixed JSON-RPC error a call gets when it is canceled (registration closed, client gone). @internal */
export const canceledError = (): McpError => new McpError(ErrorCode.InternalError, "canceled")

/** The fixed JSON-RPC error for a tool outside the credential's effective set. @internal */
export const unknownToolError = (): McpError => new McpError(ErrorCode.InvalidParams, "Unknown tool")

/**
 * What one request may do: the tools it lists, how it calls one of them, and how it cancels a
 * call of the same credential. `call` is only given names from the effective set and never sees
 * the request headers; `id` is the call's JSON-RPC request id.
 *
 * @internal
 */
export interface Handlers {
  readonly tools: ReadonlyArray<McpTool>
  readonly has: (name: string) => boolean
  /**
   * Runs a call. `hold` keeps the request's concurrency slot while the call's handler runs (past
   * the exchange's end: a handler's finalizers may outlast its answer); it returns the release.
   */
  readonly call: (
    name: string,
    input: unknown,
    id: RequestId,
    signal: AbortSignal,
    hold: () => () => void
  ) => Promise<CallToolResult>
  /** Cancels the calls in flight with JSON-RPC request id `id`, if any (a `notifications/cancelled`). */
  readonly cancel: (id: RequestId) => void
}

/**
 * The SDK server builds a fresh Ajv instance per `Server` unless given one; it only uses it to
 * check elicitation results, which the gateway never requests. One stateless instance per
 * gateway avoids compiling Ajv's keyword tables on every request.
 *
 * @internal
 */
export const makeValidator = (): AjvJsonSchemaValidator => new AjvJsonSchemaValidator()

/**
 * The fixed text of each JSON-RPC error code the SDK may answer with. The SDK's own texts can
 * carry request details (a validation failure's issue list): only these, and the gateway's own
 * fixed errors, ever reach the client.
 */
const fixedErrors: { readonly [code: number]: string } = {
  [ErrorCode.ParseError]: "Parse error",
  [ErrorCode.InvalidRequest]: "Invalid request",
  [ErrorCode.MethodNotFound]: "Method not found",
  [ErrorCode.InvalidParams]: "Invalid params",
  [ErrorCode.InternalError]: "Internal error"
}

/** The gateway's own error texts (already fixed). */
const ownErrors: ReadonlySet<string> = new Set([canceledError().message, unknownToolError().message])

const isErrorResponse = (message: JSONRPCMessage): message is JSONRPCErrorResponse =>
  typeof (message as { readonly error?: unknown }).error === "object"

const invalidParams = { code: ErrorCode.InvalidParams, message: fixedErrors[ErrorCode.InvalidParams]! }

/**
 * The SDK's `StreamableHTTPServerTransport` turns every Node request into a Web `Request` and
 * its answer back from a Web `Response` (through `@hono/node-server`): most of a call's cost.
 * The gateway has already done everything that transport checks before its JSON-RPC handling
 * (method, content type, protocol version header, body size, JSON, batches) and needs none of
 * its streaming, so one request is carried by this transport instead: the SDK `Server` still
 * parses, validates and dispatches the message; the answer is written to the Node response.
 *
 * Every JSON-RPC error it sends gets a fixed text: the request's params failed the SDK's
 * validation (`invalidParams`) → `Invalid params`; one of the gateway's own errors →
 * unchanged; anything else → the fixed text of its code.
 */
class Transport implements SdkTransport {
  onclose?: (() => void) | undefined
  onerror?: ((error: Error) => void) | undefined
  onmessage?: ((message: JSONRPCMessage, extra?: MessageExtraInfo) => void) | undefined
  /** Set once the answer is written (or the exchange ended): nothing more is sent. */
  answered = false

  constructor(
    private readonly id: RequestId,
    /** Whether the request's params fail the SDK's validation: asked only for an error answer. */
    private readonly invalidParams: () => boolean,
    private readonly answer: (body: string) => void
  ) {}

  start(): Promise<void> {
    return Promise.resolve()
  }

  send(message: JSONRPCMessage): Promise<void> {
    // Only the answer to this request is sent; notifications a handler may emit while it runs
    // have no stream to go to in a JSON response, as in the SDK's JSON-response mode.
    if (this.answered || !("id" in message) || message.id !== this.id || "method" in message) return Promise.resolve()
    this.answered = true
    if (!isErrorResponse(message)) {
      this.answer(JSON.stringify(message))
    } else {
      const error = this.invalidParams()
        ? invalidParams
        : ownErrors.has(message.error.message)
        ? { code: message.error.code, message: message.error.message }
        : { code: message.error.code, message: fixedErrors[message.error.code] ?? "Internal error" }
      this.answer(JSON.stringify({ jsonrpc: message.jsonrpc, id: message.id, error }))
    }
    return Promise.resolve()
  }

  close(): Promise<void> {
    this.answered = true
    const onclose = this.onclose
    this.onclose = undefined
    onclose?.()
    return Promise.resolve()
  }
}

const writeJson = (res: ServerResponse, status: number, body: string): void => {
  if (res.headersSent || res.destroyed) return
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) })
  res.end(body)
}

const transportError = (code: number, message: string): string =>
  JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null })

// The SDK transport's own answers (fixed texts, nothing from the request), kept as they were.
const notAcceptable = transportError(
  -32000,
  "Not Acceptable: Client must accept both application/json and text/event-stream"
)
const invalidMessage = transportError(ErrorCode.ParseError, "Parse error: Invalid JSON-RPC message")

const acceptsBoth = (req: IncomingMessage): boolean => {
  const accept = req.headers.accept
  return accept !== undefined && accept.includes("application/json") && accept.includes("text/event-stream")
}

/**
 * Serves one already-validated, already-authenticated request through a fresh SDK server;
 * the server is closed when the exchange ends (`onEnd`: the response is flushed or the
 * connection is gone), which aborts a handler still running.
 *
 * @internal
 */
export const serve = (
  handlers: Handlers,
  req: IncomingMessage,
  res: ServerResponse,
  body: unknown,
  validator: AjvJsonSchemaValidator,
  onEnd: (callback: () => void) => void,
  /** Called when a `tools/list` request is answered with the tools. */
  onListed: () => void,
  /** Holds the request's concurrency slot for a call's handler (see `Handlers.call`). */
  hold: () => () => void
): Promise<void> => {
  // As the SDK transport: Accept must name both media types a Streamable HTTP client takes.
  if (!acceptsBoth(req)) return Promise.resolve(writeJson(res, 406, notAcceptable))
  const parsed = JSONRPCMessageSchema.safeParse(body)
  if (!parsed.success) return Promise.resolve(writeJson(res, 400, invalidMessage))
  const message = parsed.data
  const server = new Server(serverInfo, { capabilities: { tools: {} }, jsonSchemaValidator: validator })
  const tools = { tools: handlers.tools as Array<McpTool> }
  server.setRequestHandler(ListToolsRequestSchema, () => {
    onListed()
    return tools
  })
  // Only the request id and abort signal of `extra` are read; the transport gives no request
  // headers at all.
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
    const name = request.params.name
    if (!handlers.has(name)) return Promise.reject(unknownToolError())
    return handlers.call(name, request.params.arguments ?? {}, extra.requestId, extra.signal, hold)
  })
  const isRequest = isJSONRPCRequest(message)
  // This fresh server never saw the call a `notifications/cancelled` names (it came in its own
  // request): the credential's handlers look it up. The notification is still answered 202.
  if (!isRequest && (message as { readonly method?: unknown }).method === "notifications/cancelled") {
    const cancelled = CancelledNotificationSchema.safeParse(message)
    if (cancelled.success && cancelled.data.params.requestId !== undefined) {
      handlers.cancel(cancelled.data.params.requestId)
    }
  }
  const transport = new Transport(
    isRequest ? message.id : "",
    // Classified from the request itself, not from the SDK's own validation text.
    () => isRequest && message.method === "tools/call" && !CallToolRequestSchema.safeParse(message).success,
    (answer) => writeJson(res, 200, answer)
  )
  // Closing the server aborts a handler still running (the client went away before its answer).
  // Once the answer is written nothing runs any more, and a close would only build the SDK's
  // "Connection closed" error (a stack trace per request) for no one.
  onEnd(() => {
    if (!transport.answered) void server.close()
  })
  return server.connect(transport).then(() => {
    transport.onmessage?.(message)
    // A notification or a response gets no JSON-RPC answer: 202, as in the SDK transport.
    if (!isRequest) {
      transport.answered = true
      res.writeHead(202).end()
    }
  })
}
