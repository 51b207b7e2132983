/**
 * Settings the Gemini CLI reads besides the clone's own `settings.json` (the workspace's
 * `.gemini/settings.json`, which the CLI merges over the user's in a trusted workspace, and Tether's
 * workspaces are trusted with `--skip-trust`), and user settings that switch off what the driver
 * projects. The real CLI, offline, against the scripted GeminiServer.
 */
import { NodeContext } from "@effect/platform-node"
import * as FileSystem from "@effect/platform/FileSystem"
import { describe, expect, it } from "@effect/vitest"
import { Gemini } from "@tether/drivers"
import * as GeminiServer from "@tether/testing/GeminiServer"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { baseRequest, mcpServer, runTurn, tempRoot } from "./ClaudeHarness.js"

const marker = "AUDIT-INSTRUCTIONS-3c9e: you triage issues."

const setup = (userSettings: unknown, workspaceSettings?: unknown) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const root = yield* tempRoot
    yield* fs.makeDirectory(`${root.profile}/.gemini`)
    if (userSettings !== undefined) {
      yield* fs.writeFileString(`${root.profile}/.gemini/settings.json`, JSON.stringify(userSettings))
    }
    if (workspaceSettings !== undefined) {
      yield* fs.makeDirectory(`${root.work}/.gemini`)
      yield* fs.writeFileString(`${root.work}/.gemini/settings.json`, JSON.stringify(workspaceSettings))
    }
    const token = `tok-${crypto.randomUUID()}`
    const mcp = yield* mcpServer(token)
    const model = yield* GeminiServer.make({ respond: () => GeminiServer.reply("FINAL") })
    const driver = Gemini.driver({
      model: "gemini-2.5-flash",
      env: { GOOGLE_GEMINI_BASE_URL: model.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
    })
    return { root, token, mcp, model, driver }
  })

describe("Gemini: settings beside the clone's", () => {
  it.live(
    "a workspace's .gemini/settings.json naming its own context files does not drop the agent's instructions",
    () =>
      Effect.gen(function*() {
        // A repository that ships the common `context.fileName` setting for its AGENTS.md.
        const { driver, mcp, model, root, token } = yield* setup({}, {
          context: { fileName: ["AGENTS.md", "GEMINI.md"] }
        })
        const turn = yield* runTurn(driver, baseRequest(root, mcp.url, { instructions: marker }), token)
        const generations = yield* model.generations
        // Either the run refuses (typed) or the instructions reach the model.
        expect(turn.failure).toBeUndefined()
        expect(generations.length).toBeGreaterThan(0)
        expect(GeminiServer.systemText(generations[0]!)).toContain(marker)
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    60_000
  )

  it.live(
    "a workspace's .gemini/settings.json declaring an MCP server under the hosted key does not replace the hosted tools",
    () =>
      Effect.gen(function*() {
        const { driver, mcp, model, root, token } = yield* setup({}, {
          mcpServers: { tether: { httpUrl: "http://127.0.0.1:9/mcp" } }
        })
        const turn = yield* runTurn(driver, baseRequest(root, mcp.url), token)
        const generations = yield* model.generations
        expect(turn.failure).toBeUndefined()
        expect(generations.length).toBeGreaterThan(0)
        expect(GeminiServer.declaredTools(generations[0]!)).toContain("mcp_tether_echo")
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    60_000
  )

  it.live(
    "a user's mcp.allowed list (their own servers) does not silently drop the hosted tools",
    () =>
      Effect.gen(function*() {
        const { driver, mcp, model, root, token } = yield* setup({
          mcp: { allowed: ["github"] },
          mcpServers: { github: { command: "/nonexistent/github-mcp" } }
        })
        const turn = yield* runTurn(driver, baseRequest(root, mcp.url), token)
        const generations = yield* model.generations
        expect(turn.failure).toBeUndefined()
        expect(generations.length).toBeGreaterThan(0)
        expect(GeminiServer.declaredTools(generations[0]!)).toContain("mcp_tether_echo")
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)),
    60_000
  )
})
