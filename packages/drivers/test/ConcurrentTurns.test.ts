/**
 * Runs of one agent may overlap: a turn's tool allow-list must never reach another turn's CLI
 * through a file of the shared clone. Two overlapping turns with different tool policies, on
 * the real Codex CLI and the real Gemini CLI (offline, scripted model servers), each offer the
 * model exactly their own tools.
 *
 * Each CLI is started through a wrapper that waits a second before exec'ing it: both turns have
 * written everything they write into the clone before either CLI reads its configuration (the
 * worst case for a shared file), and the two turns are in flight at the same time.
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Event from "@tether/core/Event"
import { Codex, Gemini } from "@tether/drivers"
import { GeminiServer, Harness, ResponsesServer } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Binary from "../src/internal/binary.js"
import * as CodexInternal from "../src/internal/codex.js"
import * as GeminiInternal from "../src/internal/gemini.js"

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String }),
  revision: "lookup_issue/v1"
})
const CloseIssue = Tool.make("close_issue", {
  description: "Close one issue.",
  input: { key: Schema.String },
  output: Schema.Struct({ closed: Schema.Boolean }),
  revision: "close_issue/v1"
})
const IssueTools = Toolkit.make(LookupIssue, CloseIssue)
const IssueToolsLive = IssueTools.toLayer({
  lookup_issue: ({ key }) => Effect.succeed({ title: `Title of ${key}` }),
  close_issue: () => Effect.succeed({ closed: true })
})

/** A shell script that waits a second, then execs `command` with its own arguments. */
const delayedLauncher = (dir: string, command: ReadonlyArray<string>): string => {
  const file = Path.join(dir, "delayed-cli")
  const quoted = command.map((part) => `'${part.replace(/'/g, `'\\''`)}'`).join(" ")
  Fs.writeFileSync(file, `#!/bin/sh\nsleep 1\nexec ${quoted} "$@"\n`, { mode: 0o700 })
  return file
}

const turns = [
  { input: "TURN-A: look it up.", toolPolicy: { allow: ["lookup_issue"] } },
  { input: "TURN-B: close it.", toolPolicy: { allow: ["close_issue"] } }
] as const

/** Runs both turns at once on one agent; returns each turn's events. */
const overlapping = (agent: Agent.Agent) =>
  Effect.forEach(
    turns,
    (turn) => agent.stream(turn).pipe(Stream.runCollect, Effect.map((chunk) => Array.from(chunk))),
    { concurrency: 2 }
  )

/** The two runs were in flight at the same time (each started before the other finished). */
const overlapped = (runs: ReadonlyArray<ReadonlyArray<Event.Event>>) => {
  const span = (events: ReadonlyArray<Event.Event>) => [events[0]!.time, events.at(-1)!.time] as const
  const [a, b] = [span(runs[0]!), span(runs[1]!)]
  return a[0] < b[1] && b[0] < a[1]
}

describe("concurrent turns of one agent do not share per-turn state", () => {
  it.live("Codex: each overlapping turn offers the model exactly its own tools", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const server = yield* ResponsesServer.make({
        script: () => ResponsesServer.delayed(500, ResponsesServer.text("done"))
      })
      const codex = Binary.resolve(CodexInternal.binarySpec, undefined)
      const binary = delayedLauncher(sandbox.base, [codex.command, ...codex.prefix])
      const runs = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver: Codex.driver({
            binary,
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
          definition: { instructions: "", skills: [], tools: IssueTools },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        return yield* overlapping(agent)
      }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.layer]))
      expect(overlapped(runs)).toBe(true)
      for (const events of runs) {
        expect(events.at(-1)?._tag === "RunFinished" && events.at(-1)).toMatchObject({ outcome: "success" })
      }
      const requests = yield* server.requests
      expect(requests).toHaveLength(2)
      const offered = (marker: string) => {
        const request = requests.find((r) => ResponsesServer.userTexts(r).some((text) => text.includes(marker)))!
        return ResponsesServer.namespaceTools(request)["mcp__tether"]
      }
      expect(offered("TURN-A")).toEqual(["lookup_issue"])
      expect(offered("TURN-B")).toEqual(["close_issue"])
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 120_000)

  it.live("Gemini: each overlapping turn offers the model exactly its own tools", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      Fs.mkdirSync(Path.join(sandbox.source, ".gemini"), { mode: 0o700 })
      const server = yield* GeminiServer.make({ respond: () => GeminiServer.reply("done") })
      const cli = Binary.resolve(GeminiInternal.binarySpec, undefined)
      const binary = delayedLauncher(sandbox.base, [cli.command, ...cli.prefix])
      const runs = yield* Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver: Gemini.driver({
            binary,
            model: "gemini-2.5-flash",
            env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
          }),
          definition: { instructions: "", skills: [], tools: IssueTools },
          workspace: sandbox.workspace,
          profile: sandbox.selection
        })
        return yield* overlapping(agent)
      }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.layer]))
      expect(overlapped(runs)).toBe(true)
      for (const events of runs) {
        expect(events.at(-1)?._tag === "RunFinished" && events.at(-1)).toMatchObject({ outcome: "success" })
      }
      const generations = yield* server.generations
      expect(generations).toHaveLength(2)
      const offered = (marker: string) => {
        const request = generations.find((g) => GeminiServer.transcript(g).some(([, text]) => text.includes(marker)))!
        return GeminiServer.declaredTools(request).filter((name) => name.startsWith("mcp_"))
      }
      expect(offered("TURN-A")).toEqual(["mcp_tether_lookup_issue"])
      expect(offered("TURN-B")).toEqual(["mcp_tether_close_issue"])
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 120_000)
})
