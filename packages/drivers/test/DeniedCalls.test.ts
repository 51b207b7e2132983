/**
 * A built-in call the host's approval handler denied is a failed call (docs/concepts.md: a
 * `ToolCall` `end` carries `isError`), on each driver with approvals (real CLIs, offline): Claude
 * Code; Gemini CLI, which reports a call it asks about only in its permission request and nothing
 * once refused (the client reports it from the request); Codex, whose refused command and patch
 * both end `declined`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Approval } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import type * as Event from "@tether/core/Event"
import { Gemini } from "@tether/drivers"
import { AnthropicServer, GeminiServer, Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Live from "./ClaudeLiveHarness.js"
import { commandScript, offlineCodex, withSandbox } from "./CodexHarness.js"

const ends = (events: ReadonlyArray<Event.Event>) =>
  events.filter((e): e is Event.ToolCall => e._tag === "ToolCall").map((e) => [e.phase, e.source, e.isError])

const denyAll = { handler: () => Effect.succeed(Approval.deny("No.")) }

/** One live thread turn whose one call (of `touch <workspace>/x`) the handler denies. */
const deniedTurn = <E>(
  driver: (sandbox: Harness.Sandbox) => Effect.Effect<Driver.Driver, E, Scope.Scope>
) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const agent = yield* Agent.make({
      driver: yield* driver(sandbox),
      definition: { instructions: "", tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection,
      approvals: denyAll
    })
    const events = Array.from(yield* Stream.runCollect((yield* agent.thread("t")).stream("go")))
    yield* agent.close()
    expect(Fs.existsSync(`${sandbox.workspace}/x`)).toBe(false)
    expect(ends(events)).toEqual([["start", "builtin", undefined], ["end", "builtin", true]])
  }).pipe(Effect.scoped, Effect.provide(Harness.layer))

describe("a denied built-in call ends as a failed call", () => {
  it.live("Claude Code live", () =>
    deniedTurn((sandbox) =>
      Effect.map(
        AnthropicServer.make({
          respond: AnthropicServer.roundTrip(
            () => AnthropicServer.callTool("Bash", { command: `touch ${sandbox.workspace}/x`, description: "Run" }),
            () => AnthropicServer.reply("done")
          )
        }),
        (server) => Live.driverFor(server, { partialMessages: false })
      )
    ), 120_000)

  it.live("Gemini CLI live", () =>
    deniedTurn((sandbox) =>
      Effect.map(
        GeminiServer.make({
          respond: GeminiServer.roundTrip(
            () => GeminiServer.callTool("run_shell_command", { command: `touch ${sandbox.workspace}/x` }),
            () => GeminiServer.reply("done")
          )
        }),
        (server) =>
          Gemini.driver({
            model: "gemini-2.5-flash",
            env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
          })
      )
    ), 120_000)

  it.live("Codex live: a refused command and a refused patch", () =>
    withSandbox((sandbox) =>
      Effect.gen(function*() {
        const server = yield* ResponsesServer.make({ script: commandScript })
        const agent = yield* Agent.make({
          driver: offlineCodex(server.baseUrl),
          definition: { instructions: "", tools: Toolkit.empty },
          workspace: sandbox.workspace,
          profile: sandbox.selection,
          policy: { sandbox: "workspaceWrite" },
          approvals: denyAll
        })
        const thread = yield* agent.thread("t")
        const command = Array.from(yield* Stream.runCollect(thread.stream(`RUN: touch ${sandbox.workspace}/c.txt`)))
        const change = Array.from(yield* Stream.runCollect(thread.stream(`ADD: ${sandbox.workspace}/patch.txt`)))
        yield* agent.close()
        expect([Fs.existsSync(`${sandbox.workspace}/c.txt`), Fs.existsSync(`${sandbox.workspace}/patch.txt`)])
          .toEqual([false, false])
        expect([ends(command), ends(change)]).toEqual([
          [["start", "builtin", undefined], ["end", "builtin", true]],
          [["start", "builtin", undefined], ["end", "builtin", true]]
        ])
      })
    ), 120_000)
})
