import { afterAll, describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { expectNoTokenInLogs, logLayer, portOf, remember } from "./fixtures/harness.js"
import { rawRequest } from "./fixtures/raw.js"

// DESIGN.md §3: "Inputs are decoded before the handler runs (excess properties are an error)".
// SECURITY.md: "what a tool receives from the model is untrusted input". Tether's own JSON copies
// keep `__proto__` as data ("`__proto__` as an own key must stay data, never become the prototype").
// A record key `__proto__` in the model's arguments (nested: the MCP SDK keeps it there) reached
// the handler as the record's prototype, the key itself gone (Effect's decoder writes each key back
// with `output[key] =`). It is invalid input now, and the handler never runs.

const headersOf = (url: string, token: string) =>
  [
    ["Host", `127.0.0.1:${portOf(url)}`],
    ["Content-Type", "application/json"],
    ["Accept", "application/json, text/event-stream"],
    ["Authorization", `Bearer ${token}`]
  ] as const

/** A raw `tools/call` whose arguments are written by hand (JSON any client may send). */
const rawCall = (name: string, args: string) =>
  `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"${name}","arguments":${args}}}`

const Label = Tool.make("label", {
  description: "Set labels (a record of label name to color) on an issue.",
  input: { labels: Schema.Record({ key: Schema.String, value: Schema.Struct({ color: Schema.String }) }) },
  output: Schema.Struct({
    keys: Schema.Array(Schema.String),
    inherited: Schema.Array(Schema.String),
    prototypeIsObject: Schema.Boolean
  })
})
const Labels = Toolkit.make(Label)
let ran = 0
const LabelsLive = Labels.toLayer({
  label: ({ labels }) =>
    Effect.sync(() => {
      ran++
      const inherited: Array<string> = []
      for (const key in labels) if (!Object.hasOwn(labels, key)) inherited.push(key)
      return {
        keys: Object.keys(labels),
        inherited,
        prototypeIsObject: Object.getPrototypeOf(labels) === Object.prototype
      }
    })
})

describe("a __proto__ key in the model's arguments", () => {
  it.live("a record key __proto__ sent by the model is invalid_input at its path; the handler never runs", () =>
    Effect.gen(function*() {
      const registration = yield* (yield* Gateway.Gateway).register(yield* Toolkit.executor(Labels))
      const token = remember(registration.token)
      const port = portOf(registration.url)
      const response = yield* rawRequest(port, {
        headers: headersOf(registration.url, token),
        body: rawCall("label", `{"labels":{"bug":{"color":"red"},"__proto__":{"color":"blue"}}}`)
      })
      const result = JSON.parse(response.body).result
      expect({ isError: result.isError, text: result.content[0].text, ran }).toEqual({
        isError: true,
        text: expect.stringMatching(/^invalid_input: .* at labels\.__proto__/),
        ran: 0
      })
    }).pipe(Effect.scoped, Effect.provide([LabelsLive, Gateway.layer()]), Effect.provide(logLayer)))
})

afterAll(() => expectNoTokenInLogs())
