/**
 * The gateway fuzz harness: generated connections over raw sockets. A connection carries one
 * to four requests (valid calls, pings, lists; early refusals; malformed params, batches, bad
 * JSON, `1e309`; smuggling attempts: both lengths, two lengths, a length shorter or longer than
 * the body, odd transfer codings, bare LF; garbage bytes), written in one write or split with
 * gaps (a slow client), then half-closed, destroyed, or left open until a short wait ends.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Net from "node:net"

/** Where the requests go and what they may present. */
export interface Target {
  readonly port: number
  readonly token: string
}

type Framing =
  | "length"
  | "chunked"
  | "none"
  | "length-and-chunked"
  | "two-lengths"
  | "length-short"
  | "length-long"
  | "chunked-obs-fold"
  | "chunked-identity"
  | "chunked-bad-size"

interface RequestSpec {
  readonly method: string
  readonly target: string
  readonly host: "good" | "other-port" | "localhost" | "twice" | "absent"
  readonly contentType: "json" | "json-charset" | "text" | "absent" | "twice"
  readonly auth: "good" | "wrong" | "absent" | "twice" | "basic" | "lowercase"
  readonly origin: "absent" | "good" | "evil"
  readonly connection: "absent" | "close" | "keep-alive"
  readonly expectContinue: boolean
  readonly protocolVersion: "absent" | "good" | "bad"
  readonly body: string
  readonly framing: Framing
  readonly lineEnd: "\r\n" | "\n"
}

const rpc = (method: string, params?: unknown, id: unknown = 1) =>
  JSON.stringify({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) })

const call = (name: string, args: unknown = { text: "x" }) => rpc("tools/call", { name, arguments: args })

const validBodies: FastCheck.Arbitrary<string> = FastCheck.oneof(
  { arbitrary: FastCheck.constant(call("echo")), weight: 6 },
  { arbitrary: FastCheck.constant(call("block")), weight: 1 },
  {
    arbitrary: FastCheck.constantFrom(
      rpc("ping"),
      rpc("tools/list", {}),
      rpc("initialize", {
        protocolVersion: "2025-06-18",
        capabilities: {},
        clientInfo: { name: "fuzz", version: "1" }
      }),
      JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })
    ),
    weight: 3
  }
)

const malformedBodies = (maxBodyBytes: number): FastCheck.Arbitrary<string> =>
  FastCheck.oneof(
    FastCheck.constantFrom(
      rpc("tools/call", { name: 5 }),
      rpc("tools/call", { arguments: {} }),
      rpc("tools/call", { name: "echo", arguments: "SECRET-ARG" }),
      rpc("tools/call", "SECRET-PARAMS"),
      rpc("tools/list", { cursor: 5 }),
      rpc("tools/call", { name: "echo" }, { id: "object-id" }),
      rpc("tools/call", { name: "missing", arguments: {} }),
      rpc("resources/list", {}),
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":1e309}}}`,
      `{"jsonrpc":"2.0","id":1e309,"method":"ping"}`,
      `[${call("echo")},${call("echo")}]`,
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":${"[".repeat(2000)}${
        "]".repeat(2000)
      }}}`,
      `{"jsonrpc":"2.0","id":1,"method":"tools/call",`,
      "null",
      "",
      "\u0000\u0001",
      "x".repeat(maxBodyBytes + 1)
    ),
    FastCheck.json({ maxDepth: 2 })
  )

const valid = (body: string): RequestSpec => ({
  method: "POST",
  target: "/mcp",
  host: "good",
  contentType: "json",
  auth: "good",
  origin: "absent",
  connection: "absent",
  expectContinue: false,
  protocolVersion: "absent",
  body,
  framing: "length",
  lineEnd: "\r\n"
})

/** A valid request with harmless variations: framing, connection, protocol version, origin. */
const validArb: FastCheck.Arbitrary<RequestSpec> = FastCheck.record({
  body: validBodies,
  framing: FastCheck.constantFrom("length" as const, "length" as const, "chunked" as const),
  contentType: FastCheck.constantFrom("json" as const, "json-charset" as const),
  connection: FastCheck.constantFrom(
    "absent" as const,
    "absent" as const,
    "absent" as const,
    "keep-alive" as const,
    "close" as const
  ),
  protocolVersion: FastCheck.constantFrom("absent" as const, "good" as const),
  origin: FastCheck.constantFrom("absent" as const, "absent" as const, "good" as const),
  expectContinue: FastCheck.oneof(
    { arbitrary: FastCheck.constant(false), weight: 5 },
    { arbitrary: FastCheck.constant(true), weight: 1 }
  )
}).map((variation) => ({ ...valid(variation.body), ...variation }))

/** One thing wrong with an otherwise valid request. */
const defectArb = (maxBodyBytes: number): FastCheck.Arbitrary<Partial<RequestSpec>> =>
  FastCheck.oneof(
    FastCheck.record({ method: FastCheck.constantFrom("GET", "PUT", "OPTIONS", "post", "POST /mcp") }),
    FastCheck.record({
      target: FastCheck.constantFrom("/", "/mcp/", "/.well-known/oauth", "//mcp", "*", "http://evil/mcp", "/mcp?x=1")
    }),
    FastCheck.record({
      host: FastCheck.constantFrom("other-port" as const, "localhost" as const, "twice" as const, "absent" as const)
    }),
    FastCheck.record({ contentType: FastCheck.constantFrom("text" as const, "absent" as const, "twice" as const) }),
    FastCheck.record({
      auth: FastCheck.constantFrom(
        "wrong" as const,
        "absent" as const,
        "twice" as const,
        "basic" as const,
        "lowercase" as const
      )
    }),
    FastCheck.record({ origin: FastCheck.constant("evil" as const) }),
    FastCheck.record({ protocolVersion: FastCheck.constant("bad" as const) }),
    FastCheck.record({
      framing: FastCheck.constantFrom(
        "none" as const,
        "length-and-chunked" as const,
        "two-lengths" as const,
        "length-short" as const,
        "length-long" as const,
        "chunked-obs-fold" as const,
        "chunked-identity" as const,
        "chunked-bad-size" as const
      )
    }),
    FastCheck.record({ lineEnd: FastCheck.constant("\n" as const) }),
    FastCheck.record({ body: malformedBodies(maxBodyBytes) })
  )

const requestArb = (maxBodyBytes: number): FastCheck.Arbitrary<RequestSpec> =>
  FastCheck.oneof(
    { arbitrary: validArb, weight: 3 },
    {
      arbitrary: FastCheck.tuple(validArb, defectArb(maxBodyBytes)).map(([request, defect]) => ({
        ...request,
        ...defect
      })),
      weight: 1
    }
  )

const chunked = (body: string, lineEnd: string, size = (n: number) => n.toString(16)): string => {
  const bytes = Buffer.from(body)
  const half = Math.floor(bytes.length / 2)
  const parts = [bytes.subarray(0, half), bytes.subarray(half)].filter((part) => part.length > 0)
  return parts.map((part) => `${size(part.length)}${lineEnd}${part.toString("latin1")}${lineEnd}`).join("") +
    `0${lineEnd}${lineEnd}`
}

/** The bytes of a request (latin1: every char one byte). */
export const render = (spec: RequestSpec, target: Target): string => {
  const authority = `127.0.0.1:${target.port}`
  const headers: Array<string> = []
  switch (spec.host) {
    case "good":
      headers.push(`Host: ${authority}`)
      break
    case "other-port":
      headers.push(`Host: 127.0.0.1:${target.port + 1}`)
      break
    case "localhost":
      headers.push(`Host: localhost:${target.port}`)
      break
    case "twice":
      headers.push(`Host: ${authority}`, `Host: 127.0.0.1:1`)
      break
    case "absent":
      break
  }
  const json = "application/json"
  if (spec.contentType === "json") headers.push(`Content-Type: ${json}`)
  if (spec.contentType === "json-charset") headers.push(`Content-Type: ${json}; charset=utf-8`)
  if (spec.contentType === "text") headers.push("Content-Type: text/plain")
  if (spec.contentType === "twice") headers.push(`Content-Type: ${json}`, `Content-Type: ${json}`)
  headers.push("Accept: application/json, text/event-stream")
  if (spec.auth === "good") headers.push(`Authorization: Bearer ${target.token}`)
  if (spec.auth === "lowercase") headers.push(`authorization: bearer ${target.token}`)
  if (spec.auth === "wrong") headers.push(`Authorization: Bearer ${"A".repeat(43)}`)
  if (spec.auth === "twice") {
    headers.push(`Authorization: Bearer ${target.token}`, `Authorization: Bearer ${target.token}`)
  }
  if (spec.auth === "basic") headers.push(`Authorization: Basic ${Buffer.from(`u:${target.token}`).toString("base64")}`)
  if (spec.origin === "good") headers.push(`Origin: http://${authority}`)
  if (spec.origin === "evil") headers.push("Origin: http://evil.example")
  if (spec.connection !== "absent") headers.push(`Connection: ${spec.connection}`)
  if (spec.expectContinue) headers.push("Expect: 100-continue")
  if (spec.protocolVersion === "good") headers.push("MCP-Protocol-Version: 2025-06-18")
  if (spec.protocolVersion === "bad") headers.push("MCP-Protocol-Version: 1999-01-01")
  const body = Buffer.from(spec.body).toString("latin1")
  const length = Buffer.byteLength(spec.body)
  const end = spec.lineEnd
  let payload = body
  switch (spec.framing) {
    case "length":
      headers.push(`Content-Length: ${length}`)
      break
    case "chunked":
      headers.push("Transfer-Encoding: chunked")
      payload = chunked(spec.body, end)
      break
    case "none":
      break
    case "length-and-chunked":
      headers.push(`Content-Length: ${length}`, "Transfer-Encoding: chunked")
      payload = chunked(spec.body, end)
      break
    case "two-lengths":
      headers.push(`Content-Length: ${length}`, `Content-Length: ${length + 5}`)
      break
    case "length-short":
      headers.push(`Content-Length: ${length + 7}`)
      break
    case "length-long":
      headers.push(`Content-Length: ${Math.max(0, length - 7)}`)
      break
    case "chunked-obs-fold":
      headers.push(`Transfer-Encoding:${end} chunked`)
      payload = chunked(spec.body, end)
      break
    case "chunked-identity":
      headers.push("Transfer-Encoding: chunked, identity")
      payload = chunked(spec.body, end)
      break
    case "chunked-bad-size":
      headers.push("Transfer-Encoding: chunked")
      payload = chunked(spec.body, end, (n) => `${n.toString(16)};ext=${"f".repeat(20)}`)
      break
  }
  return `${spec.method} ${spec.target} HTTP/1.1${end}${headers.join(end)}${end}${end}${payload}`
}

export type Ending = "half-close" | "destroy" | "wait"

/** One generated connection: its requests, how its bytes are cut, and how it ends. */
export interface ConnectionSpec {
  readonly requests: ReadonlyArray<RequestSpec>
  /** Bytes appended after the requests (garbage a smuggled request would hide in). */
  readonly trailer: Uint8Array | undefined
  /** Cut points (fractions of the bytes, in thousandths) where a write ends. */
  readonly cuts: ReadonlyArray<number>
  /** Pause between writes (a slow client). */
  readonly gapMs: number
  readonly ending: Ending
}

export const connectionArb = (maxBodyBytes: number, maxGapMs: number): FastCheck.Arbitrary<ConnectionSpec> =>
  FastCheck.record({
    requests: FastCheck.array(requestArb(maxBodyBytes), { minLength: 1, maxLength: 4 }),
    trailer: FastCheck.oneof(
      { arbitrary: FastCheck.constant(undefined), weight: 9 },
      { arbitrary: FastCheck.uint8Array({ minLength: 1, maxLength: 48 }), weight: 1 }
    ),
    cuts: FastCheck.array(FastCheck.integer({ min: 0, max: 1000 }), { maxLength: 3 }),
    gapMs: FastCheck.oneof(
      { arbitrary: FastCheck.constant(0), weight: 3 },
      { arbitrary: FastCheck.integer({ min: 1, max: maxGapMs }), weight: 1 }
    ),
    ending: FastCheck.constantFrom("half-close" as const, "destroy" as const, "wait" as const, "wait" as const)
  })

/** What one connection saw. */
export interface Exchanged {
  readonly bytes: Buffer
}

/**
 * Runs a connection: writes its bytes (cut and paced as generated), then ends it as generated
 * (`wait`: reads until the server closes or `waitMs` pass). Always destroys the socket.
 */
export const exchange = (spec: ConnectionSpec, target: Target, waitMs: number): Effect.Effect<Exchanged> =>
  Effect.async<Exchanged>((resume) => {
    const data = Buffer.concat([
      Buffer.from(spec.requests.map((request) => render(request, target)).join(""), "latin1"),
      ...(spec.trailer === undefined ? [] : [Buffer.from(spec.trailer)])
    ])
    const points = [...new Set(spec.cuts.map((cut) => Math.floor((cut / 1000) * data.length)))]
      .filter((point) => point > 0 && point < data.length)
      .sort((a, b) => a - b)
    const parts: Array<Buffer> = []
    let from = 0
    for (const point of [...points, data.length]) {
      parts.push(data.subarray(from, point))
      from = point
    }
    const socket = Net.connect({ host: "127.0.0.1", port: target.port })
    const chunks: Array<Buffer> = []
    let done = false
    let timer: ReturnType<typeof setTimeout> | undefined
    const finish = () => {
      if (done) return
      done = true
      clearTimeout(timer)
      socket.destroy()
      resume(Effect.succeed({ bytes: Buffer.concat(chunks) }))
    }
    socket.on("data", (chunk: Buffer) => chunks.push(chunk))
    socket.on("error", finish)
    socket.on("close", finish)
    socket.on("connect", async () => {
      for (const [i, part] of parts.entries()) {
        if (i > 0 && spec.gapMs > 0) await new Promise((resolve) => setTimeout(resolve, spec.gapMs))
        if (socket.destroyed) return
        socket.write(part)
      }
      if (spec.ending === "destroy") return finish()
      if (spec.ending === "half-close") socket.end()
      timer = setTimeout(finish, waitMs)
    })
    return Effect.sync(finish)
  })
