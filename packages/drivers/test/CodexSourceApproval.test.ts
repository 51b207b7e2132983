/**
 * Checks that on a Codex live thread of an agent with approvals (`approvalPolicy: "untrusted"`),
 * a tool of an MCP source the definition declares is the host's own choice: it runs without being
 * asked (docs/approvals.md: "Permission requests for the hosted tools and the definition's MCP
 * sources are allowed without asking"; codexConfig: `default_tools_approval_mode = "approve"`),
 * and is not declined by an elicitation the driver refuses. Real CLI 0.171, offline.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Approval, Mcp } from "@tether/core"
import type * as Event from "@tether/core/Event"
import { ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as Path from "node:path"
import { offlineCodex, withSandbox } from "./CodexHarness.js"

describe("Codex live, a declared MCP source under approvals", () => {
  it.live(
    "the source's tool runs unasked and its end is not an error",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          const server = yield* ResponsesServer.make({
            script: ResponsesServer.sequence(
              ResponsesServer.mcpTool("local", "echo", { text: "one" }),
              ResponsesServer.text("done")
            )
          })
          const asked: Array<Approval.ApprovalRequest> = []
          const agent = yield* Agent.make({
            driver: offlineCodex(server.baseUrl),
            definition: {
              instructions: "",
              tools: Toolkit.empty,
              mcp: [
                Mcp.stdio("local", process.execPath, [
                  Path.join(import.meta.dirname, "fixtures", "codex", "stdio-echo-server.mjs")
                ], { ECHO_PREFIX: "env" })
              ]
            },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            policy: { sandbox: "workspaceWrite" },
            approvals: {
              handler: (request) => Effect.sync(() => (asked.push(request), Approval.deny("No.")))
            }
          })
          const thread = yield* agent.thread("audit-source")
          const events = Array.from(yield* Stream.runCollect(thread.stream("call echo")))
          yield* agent.close()
          const ends = events.filter((e): e is Event.ToolCall => e._tag === "ToolCall" && e.phase === "end")
          const notices = events.filter((e): e is Event.Notice => e._tag === "Notice").map((n) => n.message)
          expect({
            asked: asked.map((r) => r.toolName),
            ends: ends.map((e) => [e.name, e.source, e.output, e.isError]),
            notices: notices.filter((m) => /declin|elicit/i.test(m))
          }).toEqual({ asked: [], ends: [["echo", "mcp", "STDIO:one:env", false]], notices: [] })
        })
      ),
    120_000
  )
})
