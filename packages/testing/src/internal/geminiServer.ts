/** @internal */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Http from "node:http"
import type * as Net from "node:net"
import type {
  GeminiServer,
  GenerateRequest,
  Options,
  Part,
  RecordedRequest,
  Responder,
  Step,
  StepUsage
} from "../GeminiServer.js"
import { GeminiServerError } from "../GeminiServer.js"

type FunctionResponse = { readonly name: string; readonly id: string | undefined; readonly output: string }

const statusNames: { readonly [status: number]: string } = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  429: "RESOURCE_EXHAUSTED",
  500: "INTERNAL",
  503: "UNAVAILABLE"
}

const isRecord = (u: unknown): u is { readonly [key: string]: unknown } =>
  typeof u === "object" && u !== null && !Array.isArray(u)

const partText = (parts: ReadonlyArray<Part> | undefined): string =>
  (parts ?? []).flatMap((p) => typeof p.text === "string" && p.thought !== true ? [p.text] : []).join("")

/** @internal */
export const functionResponses = (request: GenerateRequest): ReadonlyArray<FunctionResponse> => {
  const last = request.contents.at(-1)
  if (last === undefined) return []
  return last.parts.flatMap((part) => {
    const fr = part.functionResponse
    if (fr === undefined) return []
    const response = fr.response
    const output = isRecord(response) && typeof response["output"] === "string"
      ? response["output"]
      : JSON.stringify(response ?? null)
    return [{ name: fr.name, id: fr.id, output }]
  })
}

/** @internal */
export const transcript = (request: GenerateRequest): ReadonlyArray<readonly [string, string]> =>
  request.contents.map((c) => [c.role, partText(c.parts)] as const)

/** @internal */
export const systemText = (request: GenerateRequest): string => partText(request.systemInstruction?.parts)

/** @internal */
export const declaredTools = (request: GenerateRequest): ReadonlyArray<string> =>
  (request.tools ?? []).flatMap((t) => (t.functionDeclarations ?? []).map((d) => d.name))

/** @internal */
export const roundTrip = (
  first: (request: GenerateRequest) => Step,
  after: (responses: ReadonlyArray<FunctionResponse>) => Step
): Responder =>
(request) => {
  const responses = functionResponses(request)
  return responses.length > 0 ? after(responses) : first(request)
}

/** A step the request cannot be answered with (e.g. an ambiguous tool name): answered 400. */
class ScriptError {
  constructor(readonly message: string) {}
}

/**
 * The declaration a `FunctionCall` names: the exact name, else the one `mcp_<server>_<name>`
 * with a single server segment, else the one ending in `_<name>`; several → `ScriptError`.
 */
const resolveToolName = (name: string, request: GenerateRequest): string | ScriptError => {
  const names = declaredTools(request)
  if (names.includes(name)) return name
  const pick = (candidates: ReadonlyArray<string>): string | ScriptError | undefined =>
    candidates.length === 1
      ? candidates[0]
      : candidates.length > 1
      ? new ScriptError(`GeminiServer: the tool name ${name} is ambiguous: ${candidates.join(", ")}`)
      : undefined
  const exact = names.filter((n) => /^mcp_[^_]+_/.test(n) && n.slice(n.indexOf("_", 4) + 1) === name)
  return pick(exact) ?? pick(names.filter((n) => n.endsWith(`_${name}`))) ?? name
}

const functionCallOf = (step: Step, request: GenerateRequest): Part | ScriptError | undefined => {
  if (step._tag !== "FunctionCall") return undefined
  const name = resolveToolName(step.name, request)
  return typeof name === "string" ? { functionCall: { name, args: step.args ?? {} } } : name
}

const chunks = (text: string, size: number): Array<string> => {
  const out: Array<string> = []
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size))
  return out
}

const usageOf = (usage: StepUsage | undefined, text: string) => {
  const u = usage ?? { inputTokens: 20, outputTokens: Math.max(1, Math.ceil(text.length / 4)) }
  return {
    promptTokenCount: u.inputTokens,
    candidatesTokenCount: u.outputTokens,
    totalTokenCount: u.inputTokens + u.outputTokens
  }
}

/** The `GenerateContentResponse` chunks of one successful reply. */
const responseChunks = (
  step: Extract<Step, { _tag: "Text" | "FunctionCall" }>,
  call: Part | undefined,
  request: GenerateRequest,
  responseId: string
): Array<unknown> => {
  const text = step.text
  const usage = usageOf(step.usage, `${text ?? ""}${step._tag === "FunctionCall" ? JSON.stringify(step.args) : ""}`)
  const candidate = (parts: Array<Part>, finish: boolean) => ({
    candidates: [{
      content: { parts, role: "model" },
      ...(finish ? { finishReason: "STOP" } : {}),
      index: 0
    }],
    ...(finish ? { usageMetadata: usage } : {}),
    modelVersion: request.model,
    responseId
  })
  const textParts = text === undefined || text.length === 0 ? [] : chunks(text, 8)
  const out: Array<unknown> = []
  if (step._tag === "Text") {
    const pieces = textParts.length > 0 ? textParts : [""]
    pieces.forEach((piece, i) => out.push(candidate([{ text: piece }], i === pieces.length - 1)))
    return out
  }
  for (const piece of textParts) out.push(candidate([{ text: piece }], false))
  if (call !== undefined) out.push(candidate([call], true))
  return out
}

/** The same reply as one non-streamed `GenerateContentResponse`. */
const wholeResponse = (
  step: Extract<Step, { _tag: "Text" | "FunctionCall" }>,
  call: Part | undefined,
  request: GenerateRequest,
  responseId: string
): unknown => {
  const text = step.text ?? ""
  const parts: Array<Part> = text.length > 0 || step._tag === "Text" ? [{ text }] : []
  if (call !== undefined) parts.push(call)
  return {
    candidates: [{ content: { parts, role: "model" }, finishReason: "STOP", index: 0 }],
    usageMetadata: usageOf(step.usage, `${text}${step._tag === "FunctionCall" ? JSON.stringify(step.args) : ""}`),
    modelVersion: request.model,
    responseId
  }
}

// 400: Gemini CLI retries a 5xx with back-off for seconds, calling `respond` again each time.
const scriptError = (res: Http.ServerResponse, message: string): void => {
  const error = { error: { code: 400, message, status: statusNames[400] } }
  res.writeHead(400, { "content-type": "application/json; charset=UTF-8" }).end(JSON.stringify(error))
}

const modelOf = (path: string): { readonly model: string; readonly method: string } | undefined => {
  const match = /^\/v1beta\/models\/([^/:]+):(streamGenerateContent|generateContent)$/.exec(path)
  return match === null ? undefined : { model: decodeURIComponent(match[1]!), method: match[2]! }
}

/** @internal */
export const make = (options: Options = {}): Effect.Effect<GeminiServer, GeminiServerError, Scope.Scope> =>
  Effect.gen(function*() {
    // Plain state: the HTTP callbacks run outside any fiber and every access is synchronous.
    let queue: ReadonlyArray<Step> = options.script ?? []
    const recorded: Array<RecordedRequest> = []
    const generations: Array<GenerateRequest> = []
    let counter = 0

    const nextStep = (request: GenerateRequest): Step | undefined => {
      const [head, ...rest] = queue
      if (head !== undefined) {
        queue = rest
        return head
      }
      return options.respond?.(request)
    }

    const handle = (req: Http.IncomingMessage, res: Http.ServerResponse, body: string): void => {
      let json: unknown = undefined
      try {
        json = body.length > 0 ? JSON.parse(body) : undefined
      } catch {
        json = undefined
      }
      const [path = "/"] = (req.url ?? "/").split("?")
      const target = req.method === "POST" ? modelOf(path) : undefined
      const request = target !== undefined && isRecord(json) && Array.isArray(json["contents"])
        ? { ...(json as Omit<GenerateRequest, "model">), model: target.model }
        : undefined
      if (request !== undefined) generations.push(request)
      // A responder that throws: the request is recorded like any other, and answered 400 with the
      // message (a failed `expect` in `respond` is then in `requests` to look at).
      let step: Step | undefined
      let thrown: string | undefined
      try {
        step = request !== undefined ? nextStep(request) : undefined
      } catch (error) {
        thrown = `GeminiServer: ${error instanceof Error ? error.message : String(error)}`
      }
      const n = ++counter
      recorded.push({ method: req.method ?? "", url: req.url ?? "", headers: { ...req.headers }, body, json, step })
      if (request === undefined || target === undefined) {
        const error = { error: { code: 404, message: "Not found", status: "NOT_FOUND" } }
        res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify(error))
        return
      }
      if (thrown !== undefined) return scriptError(res, thrown)
      if (step === undefined || step._tag === "Fail") {
        const status = step?.status ?? 400
        const message = step?.message ?? "GeminiServer: the script is exhausted"
        const error = { error: { code: status, message, status: statusNames[status] ?? "UNKNOWN" } }
        res.writeHead(status, { "content-type": "application/json; charset=UTF-8" }).end(JSON.stringify(error))
        return
      }
      // Resolved before any delay, so a scripting error is answered here, not in a timer.
      const call = functionCallOf(step, request)
      if (call instanceof ScriptError) return scriptError(res, call.message)
      const answer = () => {
        if (res.destroyed) return
        const parts = responseChunks(step, call, request, `resp-scripted-${n}`)
        if (target.method === "generateContent") {
          res.writeHead(200, { "content-type": "application/json; charset=UTF-8" })
            .end(JSON.stringify(wholeResponse(step, call, request, `resp-scripted-${n}`)))
          return
        }
        res.writeHead(200, {
          "content-type": "text/event-stream",
          "cache-control": "no-cache",
          "x-content-type-options": "nosniff"
        })
        res.end(parts.map((chunk) => `data: ${JSON.stringify(chunk)}\r\n\r\n`).join(""))
      }
      if (step.delay === undefined || step.delay <= 0) return answer()
      const timer = setTimeout(answer, step.delay)
      res.on("close", () => clearTimeout(timer))
    }

    const server = Http.createServer()
    const sockets = new Set<Net.Socket>()
    server.on("connection", (socket) => {
      sockets.add(socket)
      socket.on("close", () => sockets.delete(socket))
    })
    server.on("request", (req, res) => {
      const parts: Array<Buffer> = []
      req.on("data", (chunk: Buffer) => parts.push(chunk))
      req.on("end", () => {
        try {
          handle(req, res, Buffer.concat(parts).toString("utf8"))
        } catch (error) {
          // A responder that throws.
          if (!res.headersSent) {
            scriptError(res, `GeminiServer: ${error instanceof Error ? error.message : String(error)}`)
          } else res.destroy()
        }
      })
    })

    const port = yield* Effect.acquireRelease(
      Effect.async<number, GeminiServerError>((resume) => {
        server.once("error", (error) => resume(Effect.fail(new GeminiServerError({ detail: error.message }))))
        server.listen(0, "127.0.0.1", () => {
          const address = server.address()
          if (address !== null && typeof address === "object") resume(Effect.succeed(address.port))
          else resume(Effect.fail(new GeminiServerError({ detail: "no address" })))
        })
      }),
      () =>
        Effect.async<void>((resume) => {
          for (const socket of sockets) socket.destroy()
          server.close(() => resume(Effect.void))
        })
    )

    return {
      url: `http://127.0.0.1:${port}`,
      port,
      enqueue: (...steps) =>
        Effect.sync(() => {
          queue = [...queue, ...steps]
        }),
      requests: Effect.sync(() => [...recorded]),
      generations: Effect.sync(() => [...generations])
    } satisfies GeminiServer
  })
