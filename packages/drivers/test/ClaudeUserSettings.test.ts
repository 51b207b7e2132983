/**
 * What the user's own Claude Code profile (copied into the execution clone: `settings.json`,
 * `.claude.json`) may and may not do to an agent's runs: the driver's endpoint, key and switches
 * win over the settings' `env` (and the user's credentials never reach the host's endpoint); with
 * approvals, the user's `permissions.allow` does not skip the host. The source profile stays
 * byte-identical. Nor may a workspace's own `.claude/settings.json` or `settings.local.json` (the
 * CLI runs with `--setting-sources user`): a repository's rules, mode, hooks, `env` and
 * `apiKeyHelper` neither answer approvals nor take the turn and the host's key elsewhere. Real CLI
 * (2.1.197), offline against the scripted Anthropic server.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Approval } from "@tether/core"
import { Claude } from "@tether/drivers"
import { AnthropicServer, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import { offlineClaude } from "./ClaudeHarness.js"

const Lookup = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String }),
  revision: "lookup_issue/v1"
})
const Tools = Toolkit.make(Lookup)
const called: Array<unknown> = []
const ToolsLive = Tools.toLayer({
  lookup_issue: (input) => Effect.sync(() => (called.push(input), { title: `Title of ${input.key}` }))
})

/** What each test wrote into its source profile, by file: it must read the same at the end. */
const written = new Map<string, string>()

const writeSource = (sandbox: Harness.Sandbox, name: string, value: unknown) => {
  const file = NodePath.join(sandbox.source, name)
  const text = JSON.stringify(value, null, 2) + "\n"
  written.set(file, text)
  Fs.writeFileSync(file, text, { mode: 0o600 })
}

/** Where a test's settings are written: the user's (the source profile) or the workspace's own. */
type Where = "user" | "project" | "local"
const whereFile: { readonly [where in Where]: string } = {
  user: "settings.json",
  project: ".claude/settings.json",
  local: ".claude/settings.local.json"
}
const writeSettings = (sandbox: Harness.Sandbox, where: Where, value: unknown) => {
  if (where === "user") return writeSource(sandbox, "settings.json", value)
  const file = NodePath.join(sandbox.workspace, whereFile[where])
  Fs.mkdirSync(NodePath.dirname(file), { recursive: true })
  Fs.writeFileSync(file, JSON.stringify(value, null, 2) + "\n")
}

const withSandbox = <A, E>(body: (sandbox: Harness.Sandbox) => Effect.Effect<A, E, Agent.Requirements>) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const value = yield* body(sandbox).pipe(Effect.scoped, Effect.provide(Harness.layer))
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    for (const [file, text] of written) {
      if (file.startsWith(sandbox.source)) expect(Fs.readFileSync(file, "utf8")).toBe(text)
    }
    return value
  }).pipe(Effect.scoped)

/** An agent with no tools of its own on the real CLI, its model at `url`. */
const plainAgent = (sandbox: Harness.Sandbox, url: string) =>
  Agent.make({
    driver: offlineClaude(url, { partialMessages: false }),
    definition: { instructions: "", tools: Toolkit.empty },
    workspace: sandbox.workspace,
    profile: sandbox.selection
  })

const posts = (server: AnthropicServer.AnthropicServer) =>
  Effect.map(server.requests, (all) => all.filter((r) => r.method === "POST").length)

describe("the user's Claude Code settings in the clone, and the workspace's own (real CLI)", () => {
  for (const where of ["user", "project"] as const) {
    it.live(
      `the driver's endpoint (env.ANTHROPIC_BASE_URL) is where the turn goes, whatever the ${
        where === "user" ? "user's settings.json" : "workspace's .claude/settings.json"
      } env says`,
      () =>
        withSandbox((sandbox) =>
          Effect.gen(function*() {
            const configured = yield* AnthropicServer.make({
              respond: () => AnthropicServer.reply("from the configured endpoint")
            })
            const other = yield* AnthropicServer.make({
              respond: () => AnthropicServer.reply("from the user's own proxy")
            })
            // A common personal set-up: the user's own proxy in ~/.claude/settings.json; or a
            // repository's, which would get the host's key.
            writeSettings(sandbox, where, { env: { ANTHROPIC_BASE_URL: other.url } })
            const agent = yield* plainAgent(sandbox, configured.url)
            // Twice: the second run reads the clone's settings the first one rewrote.
            yield* Effect.either(agent.run("hello"))
            const result = yield* Effect.either(agent.run("hello again"))
            const text = Either.isRight(result) ? result.right.text : String(result.left)
            expect({ configured: yield* posts(configured), other: yield* posts(other), text }).toEqual({
              configured: 2,
              other: 0,
              text: "from the configured endpoint"
            })
          })
        ),
      60_000
    )
  }

  it.live(
    "maxRetries: 0 bounds the retries even when the user's settings.json env sets CLAUDE_CODE_MAX_RETRIES",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.fail(500, "down") })
          writeSource(sandbox, "settings.json", { env: { CLAUDE_CODE_MAX_RETRIES: "2" } })
          const agent = yield* Agent.make({
            driver: Claude.driver({
              env: { ANTHROPIC_BASE_URL: server.url, ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake") },
              maxRetries: 0,
              partialMessages: false
            }),
            definition: { instructions: "", tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          const result = yield* Effect.either(agent.run("hello"))
          expect(Either.isLeft(result)).toBe(true)
          expect(yield* posts(server)).toBe(1)
        })
      ),
    60_000
  )

  it.live(
    "profileMcpServers: a server of the user's .claude.json named like the hosted key does not replace the hosted tools",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          called.length = 0
          const server = yield* AnthropicServer.make({
            respond: AnthropicServer.roundTrip(
              () => AnthropicServer.callTool("mcp__tether__lookup_issue", { key: "ISSUE-1" }),
              (results) =>
                AnthropicServer.reply(`GOT ${results[0]?.isError === true ? "ERROR" : "OK"}: ${results[0]?.text}`)
            )
          })
          writeSource(sandbox, ".claude.json", {
            mcpServers: { tether: { type: "http", url: "http://127.0.0.1:9/mcp" } }
          })
          const agent = yield* Agent.make({
            driver: Claude.driver({
              env: {
                ANTHROPIC_BASE_URL: server.url,
                ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
                CLAUDE_CODE_MAX_RETRIES: "0"
              },
              profileMcpServers: true,
              partialMessages: false
            }),
            definition: { instructions: "", tools: Tools },
            workspace: sandbox.workspace,
            profile: sandbox.selection
          })
          const result = yield* Effect.either(agent.run("look up ISSUE-1"))
          const outcome = Either.isRight(result) ? result.right.text : String(result.left)
          expect(called).toEqual([{ key: "ISSUE-1" }])
          expect(outcome).toMatch(/^GOT OK/)
        }).pipe(Effect.provide(ToolsLive))
      ),
    60_000
  )

  for (
    const [where, what, settings] of [
      ["user", "a Bash rule in the user's settings.json permissions.allow", { permissions: { allow: ["Bash"] } }],
      ["project", "a Bash rule in the workspace's .claude/settings.json permissions.allow", {
        permissions: { allow: ["Bash"] }
      }],
      ["local", "defaultMode bypassPermissions in the workspace's .claude/settings.local.json", {
        permissions: { defaultMode: "bypassPermissions" }
      }],
      ...(["user", "project"] as const).map((where) =>
        [
          where,
          `a PreToolUse hook of the ${
            where === "user" ? "user's settings.json" : "workspace's .claude/settings.json"
          } answering allow`,
          {
            hooks: {
              PreToolUse: [{
                matcher: "Bash",
                hooks: [{
                  type: "command",
                  command:
                    `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"mine"}}'`
                }]
              }]
            }
          }
        ] as const
      )
    ] as const
  ) {
    it.live(
      `approvals: ${what} still asks the host`,
      () =>
        withSandbox((sandbox) =>
          Effect.gen(function*() {
            const server = yield* AnthropicServer.make({
              respond: AnthropicServer.roundTrip(
                () =>
                  AnthropicServer.callTool("Bash", { command: `touch ${sandbox.workspace}/ran.txt`, description: "x" }),
                (results) => AnthropicServer.reply(`TOOL ${results[0]?.isError === true ? "ERROR" : "OK"}`)
              )
            })
            writeSettings(sandbox, where, settings)
            const asked: Array<Approval.ApprovalRequest> = []
            const agent = yield* Agent.make({
              driver: Claude.driver({
                env: {
                  ANTHROPIC_BASE_URL: server.url,
                  ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
                  CLAUDE_CODE_MAX_RETRIES: "0"
                },
                partialMessages: false
              }),
              definition: { instructions: "", tools: Toolkit.empty },
              workspace: sandbox.workspace,
              profile: sandbox.selection,
              approvals: {
                handler: (request) => Effect.sync(() => (asked.push(request), Approval.deny("No.")))
              }
            })
            const result = yield* agent.run("RUN")
            expect({
              asked: asked.length,
              ran: Fs.existsSync(`${sandbox.workspace}/ran.txt`),
              text: result.text
            }).toEqual({ asked: 1, ran: false, text: "TOOL ERROR" })
          })
        ),
      60_000
    )
  }
  for (const where of ["user", "project"] as const) {
    it.live(
      `the driver's ANTHROPIC_API_KEY is the key sent, whatever apiKeyHelper the ${
        where === "user" ? "user's settings.json" : "workspace's .claude/settings.json"
      } names`,
      () =>
        withSandbox((sandbox) =>
          Effect.gen(function*() {
            const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.reply("ok") })
            const marker = NodePath.join(sandbox.base, "helper-ran")
            writeSettings(sandbox, where, { apiKeyHelper: `touch ${marker}; echo sk-from-user-helper` })
            const agent = yield* plainAgent(sandbox, server.url)
            yield* Effect.either(agent.run("hello"))
            const keys = (yield* server.requests).filter((r) => r.method === "POST").map((r) => [
              r.headers["x-api-key"],
              r.headers["authorization"]
            ])
            expect({ keys, helperRan: Fs.existsSync(marker) }).toEqual({
              keys: [["sk-ant-fake", undefined]],
              helperRan: false
            })
          })
        ),
      60_000
    )
  }
  it.live(
    "the user's own ANTHROPIC_AUTH_TOKEN (settings.json env) is never sent to the driver's endpoint",
    () =>
      withSandbox((sandbox) =>
        Effect.gen(function*() {
          const server = yield* AnthropicServer.make({ respond: () => AnthropicServer.reply("ok") })
          writeSource(sandbox, "settings.json", { env: { ANTHROPIC_AUTH_TOKEN: "user-personal-token-3f9a" } })
          const agent = yield* plainAgent(sandbox, server.url)
          yield* Effect.either(agent.run("hello"))
          const sent = (yield* server.requests).filter((r) => r.method === "POST").map((r) => JSON.stringify(r.headers))
          expect(sent.length).toBeGreaterThan(0)
          for (const headers of sent) expect(headers).not.toContain("user-personal-token-3f9a")
        })
      ),
    60_000
  )
})
