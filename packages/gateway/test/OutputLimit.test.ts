import { afterAll, describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { connect, expectNoTokenInLogs, logLayer, remember } from "./fixtures/harness.js"

// "A success larger than this (JSON bytes) is answered `invalid_output`." (Gateway.ts)
// "An output over the output limit (default 4 MiB) becomes the generic `invalid_output`." (SECURITY.md)
// A success goes out twice (structuredContent and the text block): both were counted, so an output
// of 6,011 JSON bytes was refused under a 10,000-byte limit.
const Blob = Tool.make("blob", {
  description: "Returns `size` characters.",
  input: { size: Schema.Number },
  output: Schema.Struct({ data: Schema.String })
})
const Blobs = Toolkit.make(Blob)
const BlobsLive = Blobs.toLayer({ blob: ({ size }) => Effect.succeed({ data: "x".repeat(size) }) })

const limit = 10_000

describe("the output limit", () => {
  it.live("an output well under the limit (JSON bytes) is returned, one just over it is invalid_output", () =>
    Effect.gen(function*() {
      const gateway = yield* Gateway.make({ maxOutputBytes: limit })
      const registration = yield* gateway.register(yield* Toolkit.executor(Blobs))
      remember(registration.token)
      const client = yield* connect(registration.url, registration.token)
      const call = (size: number) => Effect.promise(() => client.callTool({ name: "blob", arguments: { size } }))

      // Clearly over: refused (the documented behaviour, holds today).
      const over = yield* call(limit + 100)
      expect(over.isError).toBe(true)

      // 6,000 characters: its JSON (`{"data":"xxx…"}`) is 6,011 bytes, 60% of the limit.
      const size = 6_000
      expect(Buffer.byteLength(JSON.stringify({ data: "x".repeat(size) }))).toBeLessThan(limit)
      const under = yield* call(size)
      expect((under.content as Array<{ text: string }>)[0]!.text.slice(0, 40)).not.toMatch(/^invalid_output/)
      expect(under.isError).toBeFalsy()
      expect((under.structuredContent as { data: string }).data.length).toBe(size)
    }).pipe(Effect.scoped, Effect.provide(BlobsLive), Effect.provide(logLayer)))
})

afterAll(() => expectNoTokenInLogs())
