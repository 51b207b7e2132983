/**
 * AG-UI tool call ids across the turns of one thread, with the real Codex CLI (offline,
 * against the scripted Responses server) on one-shot threads (`live.threads: false`: every turn is
 * `codex exec` / `codex exec resume`), driven by the real `@ag-ui/client` `HttpAgent`. Codex
 * numbers its items per process, so every turn's call was `item_1`: the client appended turn 2's
 * arguments to turn 1's call and lost the second call. A call whose id the client holds gets a
 * fresh AG-UI id.
 */
import { type BaseEvent, EventType, HttpAgent } from "@ag-ui/client"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpRouter from "@effect/platform/HttpRouter"
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Codex } from "@tether/drivers"
import { AgentHttp } from "@tether/http"
import { Harness, ResponsesServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { randomUUID } from "node:crypto"
import * as Http from "node:http"
import { authorize, IssueTools, IssueToolsLive } from "./support.js"

/** The model looks up the issue the user names, then says its state. */
const script: ResponsesServer.Script = (request) => {
  const output = ResponsesServer.lastFunctionCallOutput(request)
  if (output !== undefined) {
    const state = /"state"\s*:\s*"(\w+)"/.exec(output.text)?.[1] ?? "unknown"
    return ResponsesServer.text(`It is ${state}.`)
  }
  const last = ResponsesServer.userTexts(request).at(-1) ?? ""
  const key = /ISSUE-\d+/.exec(last)?.[0] ?? "ISSUE-0"
  return ResponsesServer.mcpTool("tether", "lookup_issue", { key })
}

const runOnce = (agent: HttpAgent) =>
  Effect.promise(async () => {
    const seen: Array<BaseEvent> = []
    const outcome = await agent.runAgent({ runId: randomUUID() }, {
      onEvent: ({ event }) => {
        seen.push(event)
      }
    }).then(() => "ok" as const, (error: unknown) => String(error))
    return { seen, outcome }
  })

describe("AG-UI over Codex one-shot threads (real CLI)", () => {
  it.live(
    "two turns of one thread that each call a tool: distinct toolCallIds, the client's conversation intact",
    () =>
      Effect.gen(function*() {
        const server = yield* ResponsesServer.make({ script })
        const sandbox = yield* Harness.sandbox
        const tether = yield* Agent.make({
          driver: Codex.driver({
            model: "fake-model",
            modelProvider: {
              id: "fake",
              baseUrl: server.baseUrl,
              apiKey: Redacted.make("sk-fake-codex"),
              requestMaxRetries: 0,
              streamMaxRetries: 0
            },
            settings: Codex.offlineSettings
          }),
          definition: { instructions: "You triage issues.", skills: [], tools: IssueTools },
          workspace: sandbox.workspace,
          profile: sandbox.selection,
          live: { threads: false }
        })
        const http = yield* NodeHttpServer.make(() => Http.createServer(), { host: "127.0.0.1", port: 0 })
        const router = yield* AgentHttp.router({ agent: tether, authorize, threads: { idleTimeout: "1 second" } })
        yield* http.serve(HttpRouter.empty.pipe(HttpRouter.mount("/agent", router)))
        const address = http.address
        if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("not a TCP address")
        const client = new HttpAgent({
          url: `http://127.0.0.1:${address.port}/agent/agui`,
          headers: { authorization: "Bearer alice" },
          threadId: "alice/codex-agui"
        })

        client.addMessage({ id: randomUUID(), role: "user", content: "Is ISSUE-42 open?" })
        const first = yield* runOnce(client)
        expect(first.outcome).toBe("ok")
        client.addMessage({ id: randomUUID(), role: "user", content: "And ISSUE-7?" })
        const second = yield* runOnce(client)
        expect(second.outcome).toBe("ok")

        const idsOf = (seen: ReadonlyArray<BaseEvent>) =>
          seen.filter((event) => event.type === EventType.TOOL_CALL_START).map((event) =>
            (event as unknown as { readonly toolCallId: string }).toolCallId
          )
        const firstIds = idsOf(first.seen)
        const secondIds = idsOf(second.seen)
        expect(firstIds).toHaveLength(1)
        expect(secondIds).toHaveLength(1)
        // A tool call of the second turn is a new tool call of the conversation.
        expect.soft(secondIds[0]).not.toBe(firstIds[0])

        // What the client assembled: two tool calls, each with its own JSON arguments and result.
        const calls = client.messages.flatMap((message) => message.role === "assistant" ? message.toolCalls ?? [] : [])
        expect(calls.map((call) => call.function.arguments)).toEqual([
          JSON.stringify({ key: "ISSUE-42" }),
          JSON.stringify({ key: "ISSUE-7" })
        ])
      }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.layer])),
    120_000
  )
})
