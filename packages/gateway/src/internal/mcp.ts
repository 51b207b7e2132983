/**
 * The MCP side of one request: a fresh low-level SDK `Server` and a stateless JSON-response
 * transport per request, with the tools/list and tools/call handlers of one credential.
 *
 * @internal
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import type {
  CallToolResult,
  JSONRPCErrorResponse,
  JSONRPCMessage,
  Tool as McpTool
} from "@modelcontextprotocol/sdk/types.js"
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js"
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
      outputSchema: descriptor.outputSchema as NonNullable<McpTool["outputSchema"]>,
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
        structuredContent: outcome.structuredContent as Record<string, unknown>
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
 * What one request may do: the tools it lists, and how it calls one of them. `call` is only
 * given names from the effective set and never sees the request headers.
 *
 * @internal
 */
export interface Handlers {
  readonly tools: ReadonlyArray<McpTool>
  readonly has: (name: string) => boolean
  readonly call: (name: string, input: unknown, signal: AbortSignal) => Promise<CallToolResult>
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
 * The transport of one request. Every JSON-RPC error it sends gets a fixed text: the request's
 * params failed the SDK's validation (`invalidParams`) → `Invalid params`; one of the gateway's
 * own errors → unchanged; anything else → the fixed text of its code.
 */
class Transport extends StreamableHTTPServerTransport {
  invalidParams = false

  override send(
    message: JSONRPCMessage,
    options?: Parameters<StreamableHTTPServerTransport["send"]>[1]
  ): Promise<void> {
    if (!isErrorResponse(message)) return super.send(message, options)
    const error = this.invalidParams
      ? invalidParams
      : ownErrors.has(message.error.message)
      ? { code: message.error.code, message: message.error.message }
      : { code: message.error.code, message: fixedErrors[message.error.code] ?? "Internal error" }
    return super.send({ jsonrpc: message.jsonrpc, id: message.id, error }, options)
  }
}

/**
 * Serves one already-validated, already-authenticated request through a fresh SDK server
 * and transport; both are closed when the exchange ends (`onEnd`: the response is flushed or
 * the connection is gone).
 *
 * @internal
 */
export const serve = (
  handlers: Handlers,
  req: IncomingMessage,
  res: ServerResponse,
  body: unknown,
  validator: AjvJsonSchemaValidator,
  onEnd: (callback: () => void) => void
): Promise<void> => {
  const server = new Server(serverInfo, { capabilities: { tools: {} }, jsonSchemaValidator: validator })
  const tools = { tools: handlers.tools as Array<McpTool> }
  server.setRequestHandler(ListToolsRequestSchema, () => tools)
  // Only the abort signal of `extra` is read: requestInfo (the headers) is never forwarded.
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
    const name = request.params.name
    if (!handlers.has(name)) return Promise.reject(unknownToolError())
    return handlers.call(name, request.params.arguments ?? {}, extra.signal)
  })
  const transport = new Transport({ enableJsonResponse: true })
  // Classified here, before the SDK answers with its own validation text.
  transport.invalidParams = typeof body === "object" && body !== null &&
    (body as { readonly method?: unknown }).method === "tools/call" && !CallToolRequestSchema.safeParse(body).success
  onEnd(() => {
    void transport.close()
    void server.close()
  })
  return server.connect(transport).then(() => transport.handleRequest(req, res, body))
}
