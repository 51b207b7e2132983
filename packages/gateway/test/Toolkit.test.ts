import { afterAll, describe, expect, it } from "@effect/vitest"
import { Gateway } from "@tether/gateway"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { connect, expectNoTokenInLogs, logLayer, portOf, remember } from "./fixtures/harness.js"
import { rawRequest } from "./fixtures/raw.js"

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String, state: Schema.String }),
  title: "Issue lookup",
  revision: "lookup_issue/v1",
  annotations: { readOnly: true, idempotent: true, openWorld: false }
})

const CountOpen = Tool.make("count_open", {
  description: "Count the open issues.",
  input: {},
  output: Schema.Number
})

const IssueTools = Toolkit.make(LookupIssue, CountOpen)

const IssueToolsLive = IssueTools.toLayer({
  lookup_issue: ({ key }) =>
    key === "ISSUE-42"
      ? Effect.succeed({ title: "Login is broken", state: "open" })
      : Tool.reject("not_found", "Choose an issue key that exists in this repository."),
  count_open: () => Effect.succeed(3)
})

describe("Gateway with a real Toolkit executor", () => {
  it.live("through Gateway.layer(), publishes the toolkit's catalog and runs its handlers through the official client", () =>
    Effect.gen(function*() {
      const executor = yield* Toolkit.executor(IssueTools)
      const gateway = yield* Gateway.Gateway
      const registration = yield* gateway.register(executor)
      remember(registration.token)
      const client = yield* connect(registration.url, registration.token)

      const { tools } = yield* Effect.promise(() => client.listTools())
      const lookup = tools.find((tool) => tool.name === "lookup_issue")!
      expect(tools.map((tool) => tool.name).sort()).toEqual(["count_open", "lookup_issue"])
      expect(lookup.title).toBe("Issue lookup")
      expect(lookup.annotations).toEqual({ readOnlyHint: true, idempotentHint: true, openWorldHint: false })
      expect(lookup.inputSchema.type).toBe("object")
      expect(lookup.outputSchema?.type).toBe("object")

      const found = yield* Effect.promise(() =>
        client.callTool({ name: "lookup_issue", arguments: { key: "ISSUE-42" } })
      )
      expect(found.isError).toBeFalsy()
      expect(found.structuredContent).toEqual({ title: "Login is broken", state: "open" })

      const count = yield* Effect.promise(() => client.callTool({ name: "count_open", arguments: {} }))
      expect(count.structuredContent).toEqual({ result: 3 })

      const missing = yield* Effect.promise(() =>
        client.callTool({ name: "lookup_issue", arguments: { key: "NOPE-1" } })
      )
      expect(missing.isError).toBe(true)
      expect(missing.content).toEqual([{
        type: "text",
        text: "not_found: Choose an issue key that exists in this repository."
      }])

      const invalid = yield* Effect.promise(() =>
        client.callTool({ name: "lookup_issue", arguments: { key: 7, extra: "VALUE-NEVER-ECHOED" } })
      )
      expect(invalid.isError).toBe(true)
      const text = (invalid.content as Array<{ readonly text: string }>)[0]!.text
      expect(text).toMatch(/^invalid_input: /)
      expect(text).not.toContain("VALUE-NEVER-ECHOED")
    }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Gateway.layer()]), Effect.provide(logLayer)))
})

const Scale = Tool.make("scale", {
  description: "Scale by a factor.",
  input: { factor: Schema.Number },
  output: Schema.Number
})

describe("Gateway with a real Toolkit executor: numbers JSON cannot carry", () => {
  it.live("1e309 in the arguments is invalid_input naming the field; the handler never runs", () =>
    Effect.gen(function*() {
      let ran = 0
      const ScaleTools = Toolkit.make(Scale)
      const executor = yield* Toolkit.executor(ScaleTools).pipe(
        Effect.provide(ScaleTools.toLayer({ scale: ({ factor }) => Effect.sync(() => (ran++, factor * 2)) }))
      )
      const gateway = yield* Gateway.Gateway
      const registration = yield* gateway.register(executor)
      const port = portOf(registration.url)
      const headers = [
        ["Host", `127.0.0.1:${port}`],
        ["Content-Type", "application/json"],
        ["Accept", "application/json, text/event-stream"],
        ["Authorization", `Bearer ${remember(registration.token)}`]
      ] as const
      // `JSON.stringify` cannot write it: the body is written by hand, as a client could send it.
      const body = (factor: string) =>
        `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"scale","arguments":{"factor":${factor}}}}`
      for (const factor of ["1e309", "-1e309"]) {
        const response = yield* rawRequest(port, { headers, body: body(factor) })
        expect(JSON.parse(response.body).result).toEqual({
          content: [{ type: "text", text: "invalid_input: The tool input is invalid at factor." }],
          isError: true
        })
      }
      expect(ran).toBe(0)
      const finite = yield* rawRequest(port, { headers, body: body("1.5e300") })
      expect(JSON.parse(finite.body).result.structuredContent).toEqual({ result: 3e300 })
      expect(ran).toBe(1)
    }).pipe(Effect.scoped, Effect.provide(Gateway.layer()), Effect.provide(logLayer)))
})

afterAll(() => expectNoTokenInLogs())
