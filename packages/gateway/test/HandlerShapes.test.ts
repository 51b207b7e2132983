// Handler shapes a host writes, through the real MCP client and a raw socket: Schema.Class input
// and output, UndefinedOr and optional fields, -0 and unicode (a lone surrogate, U+0000) round-trip;
// tools/list with 3,000 tools is one page the official client takes whole, the last tool callable.
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { connect, expectNoTokenInLogs, logLayer, portOf, remember } from "./fixtures/harness.js"
import { rawRequest } from "./fixtures/raw.js"

const headersOf = (url: string, token: string) =>
  [
    ["Host", `127.0.0.1:${portOf(url)}`],
    ["Content-Type", "application/json"],
    ["Accept", "application/json, text/event-stream"],
    ["Authorization", `Bearer ${token}`]
  ] as const

/** A raw `tools/call` whose arguments are written by hand (JSON a client may send). */
const rawCall = (name: string, args: string) =>
  `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"${name}","arguments":${args}}}`

class Query extends Schema.Class<Query>("Query")({
  key: Schema.String,
  limit: Schema.optional(Schema.Int)
}) {}
class Hit extends Schema.Class<Hit>("Hit")({ key: Schema.String, seen: Schema.Boolean }) {}

const Find = Tool.make("find", {
  description: "Find by key (Schema.Class input and output).",
  input: Query,
  output: Hit
})
const Note = Tool.make("note", {
  description: "An output whose field may be undefined.",
  input: {},
  output: Schema.Struct({ note: Schema.UndefinedOr(Schema.String), n: Schema.optional(Schema.Number) })
})
const Echo = Tool.make("echo", {
  description: "Echo a number and a text.",
  input: { n: Schema.Number, text: Schema.String },
  output: Schema.Struct({ n: Schema.Number, text: Schema.String, negativeZero: Schema.Boolean })
})
const Shapes = Toolkit.make(Find, Note, Echo)
const ShapesLive = Shapes.toLayer({
  find: (query) => Effect.succeed(new Hit({ key: query.key, seen: query instanceof Query })),
  note: () => Effect.succeed({ note: undefined }),
  echo: ({ n, text }) => Effect.succeed({ n, text, negativeZero: Object.is(n, -0) })
})

describe("real handler shapes through the gateway", () => {
  it.live("Schema.Class input and output, UndefinedOr and optional fields, -0 and unicode", () =>
    Effect.gen(function*() {
      const registration = yield* (yield* Gateway.Gateway).register(yield* Toolkit.executor(Shapes))
      const token = remember(registration.token)
      const client = yield* connect(registration.url, registration.token)
      const { tools } = yield* Effect.promise(() => client.listTools())
      expect(tools.map((t) => t.name).sort()).toEqual(["echo", "find", "note"])
      const find = yield* Effect.promise(() => client.callTool({ name: "find", arguments: { key: "k", limit: 3 } }))
      expect(find.structuredContent).toEqual({ key: "k", seen: true })
      const note = yield* Effect.promise(() => client.callTool({ name: "note", arguments: {} }))
      expect(note.isError).toBeFalsy()
      const port = portOf(registration.url)
      const headers = headersOf(registration.url, token)
      const echo = yield* rawRequest(port, {
        headers,
        body: rawCall("echo", `{"n":-0,"text":"\\ud83d\\ude00 \\ud800 \\u0000"}`)
      })
      // The raw client reads latin1: the body is UTF-8.
      const result = JSON.parse(Buffer.from(echo.body, "latin1").toString("utf8")).result
      expect(result.isError).toBeUndefined()
      expect(result.structuredContent).toEqual({ n: 0, text: "\u{1F600} \ud800 \u0000", negativeZero: true })
    }).pipe(Effect.scoped, Effect.provide([ShapesLive, Gateway.layer()]), Effect.provide(logLayer)))

  it.live(
    "tools/list with 3,000 tools lists them all through the official client; the last one is callable",
    () =>
      Effect.gen(function*() {
        const many = Array.from({ length: 3000 }, (_, i) =>
          Tool.make(`tool_${String(i).padStart(4, "0")}`, {
            description: `Tool number ${i}.`,
            input: { q: Schema.String },
            output: Schema.Struct({ i: Schema.Number })
          }))
        const kit = Toolkit.make(...many)
        const handlers = Object.fromEntries(many.map((tool, i) => [tool.name, () => Effect.succeed({ i })]))
        const executor = yield* Toolkit.executor(kit).pipe(Effect.provide(kit.toLayer(handlers as never)))
        const registration = yield* (yield* Gateway.Gateway).register(executor)
        remember(registration.token)
        const client = yield* connect(registration.url, registration.token)
        const { nextCursor, tools } = yield* Effect.promise(() => client.listTools())
        expect(tools.length).toBe(3000)
        expect(nextCursor).toBeUndefined()
        const last = yield* Effect.promise(() => client.callTool({ name: "tool_2999", arguments: { q: "x" } }))
        expect(last.structuredContent).toEqual({ i: 2999 })
      }).pipe(Effect.scoped, Effect.provide(Gateway.layer()), Effect.provide(logLayer)),
    60_000
  )
})

afterAll(() => expectNoTokenInLogs())
