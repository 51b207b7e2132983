/**
 * A narrowing policy on a warm Claude Code process (live thread): reused while the
 * policy is the same, the denied tool is neither offered nor run even when the model asks for it
 * by its CLI name; a turn without the policy gets a fresh process with every tool.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Event from "@tether/core/Event"
import { AnthropicServer, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { offlineClaude } from "./ClaudeHarness.js"

const tool = (name: string) =>
  Tool.make(name, {
    description: `Tool ${name}.`,
    input: { key: Schema.String },
    output: Schema.Struct({ ok: Schema.Boolean }),
    revision: `${name}/v1`
  })
const Tools = Toolkit.make(tool("lookup_issue"), tool("close_issue"))
const ran: Array<string> = []
const ToolsLive = Tools.toLayer({
  lookup_issue: ({ key }) => Effect.sync(() => (ran.push(`lookup:${key}`), { ok: true })),
  close_issue: ({ key }) => Effect.sync(() => (ran.push(`close:${key}`), { ok: true }))
})

describe("Claude live thread: a narrowing policy holds on a warm process", () => {
  it.live(
    "reused under the same policy, the denied tool is never run; no policy restarts with every tool",
    () =>
      Effect.gen(function*() {
        const server = yield* AnthropicServer.make({
          respond: AnthropicServer.roundTrip(
            () => AnthropicServer.callTool("mcp__tether__close_issue", { key: "ISSUE-1" }),
            () => AnthropicServer.reply("done")
          )
        })
        const sandbox = yield* Harness.sandbox
        const pids = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: offlineClaude(server.url),
            definition: { instructions: "", skills: [], tools: Tools },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          const thread = yield* agent.thread("narrow")
          const started: Array<Event.ProcessStarted> = []
          for (
            const turn of [
              { input: "one", toolPolicy: { allow: ["lookup_issue"] } },
              { input: "two", toolPolicy: { deny: ["close_issue"] } },
              { input: "three" }
            ]
          ) {
            const events = Array.from(yield* Stream.runCollect(thread.stream(turn)))
            started.push(...events.filter((e): e is Event.ProcessStarted => e._tag === "ProcessStarted"))
            if (turn.input !== "three") expect(ran).toEqual([])
          }
          return started.map((e) => [e.pid, e.reused])
        }).pipe(Effect.scoped, Effect.provide([Harness.layer, ToolsLive]))
        // allow [lookup] and deny [close] are the same effective set: the warm process is reused.
        expect(pids[1]).toEqual([pids[0]![0], true])
        expect(pids[2]![0]).not.toBe(pids[0]![0])
        expect(ran).toEqual(["close:ISSUE-1"])
        const offered = (yield* server.messages).map((m) =>
          (m.tools ?? []).map((t) => t.name).filter((n) => n.startsWith("mcp__tether__")).sort().join()
        )
        expect(offered.slice(0, 4)).toEqual(Array(4).fill("mcp__tether__lookup_issue"))
        expect(offered.at(-1)).toBe("mcp__tether__close_issue,mcp__tether__lookup_issue")
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
      }).pipe(Effect.scoped),
    90_000
  )
})
