/**
 * The request checks that run before authentication and before the MCP SDK sees a request
 * (SECURITY.md "Request shape" and "Limits"), and the fixed responses they produce.
 *
 * @internal
 */
import { SUPPORTED_PROTOCOL_VERSIONS } from "@modelcontextprotocol/sdk/types.js"
import type { IncomingMessage, ServerResponse } from "node:http"

/** @internal */
export type Refusal =
  | "bad_request"
  | "forbidden"
  | "not_found"
  | "method_not_allowed"
  | "unsupported_media_type"
  | "unauthorized"
  | "too_large"
  | "header_too_large"
  | "timeout"
  | "parse_error"
  | "batch"
  | "busy"

const refusals: Record<Refusal, { readonly status: number; readonly code: number; readonly message: string }> = {
  bad_request: { status: 400, code: -32600, message: "Bad Request" },
  forbidden: { status: 403, code: -32000, message: "Forbidden" },
  not_found: { status: 404, code: -32000, message: "Not Found" },
  method_not_allowed: { status: 405, code: -32000, message: "Method Not Allowed" },
  unsupported_media_type: { status: 415, code: -32000, message: "Unsupported Media Type" },
  unauthorized: { status: 401, code: -32001, message: "Unauthorized" },
  too_large: { status: 413, code: -32000, message: "Payload Too Large" },
  header_too_large: { status: 431, code: -32000, message: "Request Header Fields Too Large" },
  timeout: { status: 408, code: -32000, message: "Request Timeout" },
  parse_error: { status: 400, code: -32700, message: "Parse error" },
  batch: { status: 400, code: -32600, message: "Batches are not supported" },
  busy: { status: 503, code: -32000, message: "Service Unavailable" }
}

/** The fixed body of a refusal: never contains request data. @internal */
export const refusalBody = (refusal: Refusal): string =>
  JSON.stringify({
    jsonrpc: "2.0",
    error: { code: refusals[refusal].code, message: refusals[refusal].message },
    id: null
  })

/** The status of a refusal. @internal */
export const refusalStatus = (refusal: Refusal): number => refusals[refusal].status

const extraHeaders = (refusal: Refusal): Record<string, string> => {
  switch (refusal) {
    case "unauthorized":
      // `invalid_token` tells an MCP client the credential is wrong, not that it should start an
      // OAuth flow (a bare `Bearer` challenge makes some clients, e.g. the MCP Inspector, try one).
      return { "WWW-Authenticate": "Bearer error=\"invalid_token\"" }
    case "method_not_allowed":
      return { Allow: "POST" }
    case "busy":
      return { "Retry-After": "1" }
    default:
      return {}
  }
}

/**
 * Whether a request carries a body (a `Transfer-Encoding`, or a `Content-Length` other than 0):
 * a refusal sent before reading it leaves it unread on the connection.
 *
 * @internal
 */
export const hasBody = (req: IncomingMessage): boolean => {
  const length = req.headers["content-length"]
  return req.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0")
}

/**
 * Writes a refusal to an HTTP response. Refusals that leave the request body unread close
 * the connection so no unread bytes are parsed as a next request.
 *
 * @internal
 */
export const refuse = (res: ServerResponse, refusal: Refusal, close = false): void => {
  if (res.headersSent) {
    res.destroy()
    return
  }
  const body = refusalBody(refusal)
  res.writeHead(refusals[refusal].status, {
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(body),
    ...extraHeaders(refusal),
    ...(close ? { Connection: "close" } : {})
  })
  res.end(body)
}

/**
 * A raw HTTP response for errors raised before a `ServerResponse` exists (header overflow,
 * timeouts, malformed requests): written straight to the socket.
 *
 * @internal
 */
export const rawRefusal = (refusal: Refusal): string => {
  const body = refusalBody(refusal)
  const reason = refusals[refusal].message
  return `HTTP/1.1 ${refusals[refusal].status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${
    Buffer.byteLength(body)
  }\r\nConnection: close\r\n\r\n${body}`
}

const headerValues = (req: IncomingMessage, lowerName: string): Array<string> => {
  const values: Array<string> = []
  const raw = req.rawHeaders
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length === lowerName.length && raw[i]!.toLowerCase() === lowerName) values.push(raw[i + 1]!)
  }
  return values
}

/** The outcome of the shape checks: a refusal, or the single Authorization value (if any). @internal */
export type Shape =
  | { readonly _tag: "Refused"; readonly refusal: Refusal }
  | { readonly _tag: "Accepted"; readonly authorization: ReadonlyArray<string> }

const refused = (refusal: Refusal): Shape => ({ _tag: "Refused", refusal })

const isJsonMediaType = (value: string | undefined): boolean => {
  if (value === undefined) return false
  const semi = value.indexOf(";")
  return (semi === -1 ? value : value.slice(0, semi)).trim().toLowerCase() === "application/json"
}

/**
 * Checks, in order: origin-form target, exactly one Host equal to `127.0.0.1:<port>`, Origin,
 * path, method, content type, protocol version header. Reads the raw headers, because Node
 * keeps only the first of duplicate headers.
 *
 * @internal
 */
export const checkShape = (req: IncomingMessage, authority: string, origin: string): Shape => {
  const url = req.url ?? ""
  if (url.charCodeAt(0) !== 47 /* "/" */ || url.startsWith("//")) return refused("bad_request")
  const hosts = headerValues(req, "host")
  if (hosts.length !== 1) return refused("bad_request")
  if (hosts[0] !== authority) return refused("forbidden")
  const origins = headerValues(req, "origin")
  if (origins.length > 1 || (origins.length === 1 && origins[0] !== origin)) return refused("forbidden")
  if (url !== "/mcp") return refused("not_found")
  if (req.method !== "POST") return refused("method_not_allowed")
  const contentTypes = headerValues(req, "content-type")
  if (contentTypes.length !== 1 || !isJsonMediaType(contentTypes[0])) return refused("unsupported_media_type")
  const versions = headerValues(req, "mcp-protocol-version")
  if (versions.length > 1 || (versions.length === 1 && !SUPPORTED_PROTOCOL_VERSIONS.includes(versions[0]!))) {
    return refused("bad_request")
  }
  return { _tag: "Accepted", authorization: headerValues(req, "authorization") }
}

const bearer = /^Bearer +([A-Za-z0-9_-]{1,256})$/i

/**
 * The presented token of a single `Authorization: Bearer <token>` header, or `undefined`
 * (missing, empty, other scheme, several headers).
 *
 * @internal
 */
export const presentedToken = (authorization: ReadonlyArray<string>): string | undefined => {
  if (authorization.length !== 1) return undefined
  const match = bearer.exec(authorization[0]!)
  return match === null ? undefined : match[1]
}

/**
 * Whether the request declares a body larger than `limit` (`Content-Length`): refused before
 * any byte is read, and before an `Expect: 100-continue` is answered.
 *
 * @internal
 */
export const declaresTooLarge = (req: IncomingMessage, limit: number): boolean => {
  const declared = req.headers["content-length"]
  return declared !== undefined && Number(declared) > limit
}

/**
 * Reads the body up to `limit` bytes. A declared length over the limit is refused before any
 * byte is read; a chunked body is refused as soon as it crosses the limit.
 *
 * @internal
 */
export const readBody = (
  req: IncomingMessage,
  limit: number,
  onBody: (body: Buffer) => void,
  onRefusal: (refusal: Refusal) => void
): void => {
  if (declaresTooLarge(req, limit)) {
    onRefusal("too_large")
    return
  }
  const chunks: Array<Buffer> = []
  let size = 0
  let done = false
  const onData = (chunk: Buffer) => {
    size += chunk.length
    if (size > limit) {
      done = true
      req.off("data", onData)
      req.off("end", onEnd)
      onRefusal("too_large")
      return
    }
    chunks.push(chunk)
  }
  const onEnd = () => {
    if (done) return
    done = true
    onBody(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size))
  }
  req.on("data", onData)
  req.on("end", onEnd)
}
