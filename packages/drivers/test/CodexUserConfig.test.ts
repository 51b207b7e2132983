/**
 * The clone's `config.toml` rendered from the user's own settings, run with the real Codex
 * CLI (0.171.0) through the public Agent API, offline against the scripted Responses server.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { offlineCodex } from "./CodexHarness.js"

const developerTexts = (request: ResponsesServer.RecordedRequest) =>
  ResponsesServer.inputItems(request).flatMap((item) =>
    item["type"] === "message" && item["role"] === "developer" ? [JSON.stringify(item["content"])] : []
  )

const withUserConfig = <A, E>(
  userConfig: string,
  server: ResponsesServer.ResponsesServer,
  body: (agent: Agent.Agent) => Effect.Effect<A, E>
) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const source = Path.join(sandbox.source, "config.toml")
    Fs.writeFileSync(source, userConfig, { mode: 0o600 })
    const before = yield* Harness.treeDigest(sandbox.source)
    const value = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver: offlineCodex(server.baseUrl),
        definition: { instructions: "AGENT-INSTRUCTIONS-MARKER", tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      return yield* body(agent)
    }).pipe(Effect.scoped, Effect.provide(Harness.layer))
    expect(yield* Harness.treeDigest(sandbox.source)).toBe(before)
    expect(Fs.readFileSync(source, "utf8")).toBe(userConfig)
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    return value
  }).pipe(Effect.scoped)

describe("Codex config.toml from the user's settings (real CLI)", () => {
  it.live(
    "CRLF, comments, inline tables, the user's own [mcp_servers.tether] and other servers",
    () =>
      Effect.gen(function*() {
        const server = yield* ResponsesServer.make({ script: (r) => ResponsesServer.text(`answer ${r.index}`) })
        const userConfig = [
          "# my settings",
          "personality = \"pragmatic\" # trailing comment",
          "developer_instructions = '''",
          "USER-OWN-INSTRUCTIONS",
          "'''",
          "",
          "[mcp_servers.tether]",
          "command = \"/nonexistent/tether-mcp\"",
          "required = true",
          "",
          "[mcp_servers.other]",
          "command = \"/nonexistent/other\"",
          "enabled = false",
          "env = { A = \"1\", B = \"two\" }",
          "",
          "[model_providers.corp]",
          "name = \"corp\"",
          "base_url = \"http://127.0.0.1:1/v1\"",
          "wire_api = \"responses\"",
          ""
        ].join("\r\n")
        const [first, second] = yield* withUserConfig(
          userConfig,
          server,
          (agent) => Effect.all([agent.run("one"), agent.run("two")], { concurrency: 1 })
        )
        expect([first.text, second.text]).toEqual(["answer 0", "answer 1"])
        for (const request of yield* server.requests) {
          const developer = developerTexts(request).join("\n")
          expect(developer).toContain("USER-OWN-INSTRUCTIONS")
          expect(developer.split("AGENT-INSTRUCTIONS-MARKER").length - 1).toBe(1)
        }
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "a config.toml that is not TOML: a typed RunError before spawn, the source untouched",
    () =>
      Effect.gen(function*() {
        const server = yield* ResponsesServer.make()
        const error = yield* withUserConfig(
          "model = \"unterminated\n[broken\n",
          server,
          (agent) => Effect.flip(agent.run("x"))
        )
        expect(error).toMatchObject({ _tag: "RunError", reason: "PrepareFailed" })
        expect(yield* server.requests).toEqual([])
      }).pipe(Effect.scoped),
    120_000
  )
})
