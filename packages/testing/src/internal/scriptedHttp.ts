/**
 * The HTTP plumbing the OpenAI-shaped scripted servers share: reading and decoding a request
 * body, recording it, the scripted steps' real-time waits, OpenAI's error body, and a server on
 * 127.0.0.1 whose close also ends every pending wait.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Http from "node:http"
import * as Zlib from "node:zlib"
import type { RecordedRequest } from "../ResponsesServer.js"

/** A recorded request, as both servers describe it. */
type Recorded = RecordedRequest

/**
 * The offered tools named `mcp__<server>__<name>` with a single server segment (Claude Code's and
 * CodeBuddy Code's names of MCP tools): what a scripted short `name` resolves to (never a longer
 * name ending in it; several is the script's ambiguity). `name` is written as those CLIs write
 * tool names: each character outside `[A-Za-z0-9_-]` becomes `_` (`issue.lookup` → `issue_lookup`).
 *
 * @internal
 */
export const mcpToolsNamed = (name: string, offered: ReadonlyArray<string>): ReadonlyArray<string> => {
  const written = name.replace(/[^A-Za-z0-9_-]/g, "_")
  return offered.filter((n) => {
    if (!n.startsWith("mcp__")) return false
    const end = n.indexOf("__", 5)
    return end > 5 && n.slice(end + 2) === written
  })
}

/** @internal */
export const readBody = (req: Http.IncomingMessage): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => resolve(Buffer.concat(chunks)))
    req.on("error", reject)
  })

/** The body as text, inflated per `content-encoding`; a body that does not inflate reads as empty. */
const decodeBody = (raw: Buffer, encoding: string | undefined): string => {
  try {
    switch (encoding) {
      case "gzip":
        return Zlib.gunzipSync(raw).toString("utf8")
      case "deflate":
        return Zlib.inflateSync(raw).toString("utf8")
      case "br":
        return Zlib.brotliDecompressSync(raw).toString("utf8")
      default:
        return raw.toString("utf8")
    }
  } catch {
    return ""
  }
}

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** @internal */
export const headersOf = (req: Http.IncomingMessage): { readonly [name: string]: string } => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(", ") : value
  }
  return out
}

/** The request as the servers record it: headers lower-cased, the body decoded and parsed. */
export const record = (req: Http.IncomingMessage, raw: Buffer, index: number, path: string): Recorded => ({
  index,
  method: req.method ?? "GET",
  path,
  headers: headersOf(req),
  body: parseJson(decodeBody(raw, req.headers["content-encoding"])),
  receivedAt: Date.now()
})

/** OpenAI's error body; `rateLimitCode` names a 429 as Chat Completions providers do. */
export const openAiErrorBody = (status: number, message: string, options?: { readonly rateLimitCode?: boolean }) =>
  JSON.stringify({
    error: {
      message,
      type: status === 401 ? "invalid_request_error" : status >= 500 ? "server_error" : "invalid_request_error",
      code: status === 401
        ? "invalid_api_key"
        : status === 429 && options?.rateLimitCode === true
        ? "rate_limit_exceeded"
        : null,
      param: null
    }
  })

/** Real-time waits of `Delayed` steps, all ended when the server closes. */
export interface Waits {
  /** Resolves after `millis`, or as soon as the client goes away (writing to it is then a no-op). */
  readonly wait: (millis: number, res: Http.ServerResponse) => Promise<void>
}

/**
 * A server on 127.0.0.1 (port chosen by the system) answering with `handle`; a handler that
 * throws answers 500. Closing the scope ends every pending wait and every connection.
 */
export const listen = <E>(
  handle: (req: Http.IncomingMessage, res: Http.ServerResponse, waits: Waits) => Promise<void>,
  onError: (detail: string) => E
): Effect.Effect<Http.Server, E, Scope.Scope> => {
  const timers = new Set<ReturnType<typeof setTimeout>>()
  const waits: Waits = {
    wait: (millis, res) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          timers.delete(timer)
          resolve()
        }, millis)
        timers.add(timer)
        res.once("close", () => {
          clearTimeout(timer)
          timers.delete(timer)
          resolve()
        })
      })
  }
  return Effect.acquireRelease(
    Effect.async<Http.Server, E>((resume) => {
      const server = Http.createServer((req, res) => {
        handle(req, res, waits).catch(() => {
          if (!res.headersSent) res.writeHead(500).end()
          else res.end()
        })
      })
      server.once("error", (cause) => resume(Effect.fail(onError(String(cause)))))
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) =>
      Effect.async<void>((resume) => {
        for (const timer of timers) clearTimeout(timer)
        timers.clear()
        server.close(() => resume(Effect.void))
        server.closeAllConnections()
      })
  )
}
