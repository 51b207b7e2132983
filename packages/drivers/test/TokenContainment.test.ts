/**
 * The hosted token stays contained, with the real Claude Code CLI (2.1.197) offline: a scripted
 * model makes the CLI's shell tool print the environment (which carries the process's gateway
 * token, as it does for everything the CLI spawns) and then repeats that output in its answer.
 * The token must appear in no event, no `Result` field, no file of the clone and no saved
 * session file, and once its process is over it is dead (401) while the agent stays registered:
 * for a one-shot turn right after the turn, for a live thread (its warm process keeps its
 * credential between turns) once the thread is closed and its process shut down.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Event from "@tether/core/Event"
import { Claude } from "@tether/drivers"
import { Gateway } from "@tether/gateway"
import { AnthropicServer, Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"

const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ state: Schema.String }),
  revision: "lookup_issue/v1"
})
const IssueTools = Toolkit.make(LookupIssue)
const looked: Array<string> = []
const IssueToolsLive = IssueTools.toLayer({
  lookup_issue: ({ key }) => Effect.sync(() => (looked.push(key), { state: "open" }))
})

/** Every regular file under `dir` (recursive, links not followed) with its content. */
const filesUnder = (dir: string): ReadonlyArray<readonly [string, Buffer]> => {
  if (!Fs.existsSync(dir)) return []
  return Fs.readdirSync(dir, { recursive: true, withFileTypes: true }).flatMap((entry) =>
    entry.isFile()
      ? [[Path.join(entry.parentPath, entry.name), Fs.readFileSync(Path.join(entry.parentPath, entry.name))] as const]
      : []
  )
}

const tokenIn = (files: ReadonlyArray<readonly [string, Buffer]>, token: string) =>
  files.filter(([, content]) => content.includes(token)).map(([file]) => file)

/** The gateway token the shell printed (its variable is `TETHER_MCP_<hex>`), from a tool result. */
const printedToken = (text: string): string | undefined => /TETHER_MCP_[0-9A-F]+=([A-Za-z0-9_-]{43})/.exec(text)?.[1]

describe("Token containment (real Claude Code CLI)", () => {
  for (const live of [false, true]) {
    it.live(
      live
        ? "live thread: a token the shell printed reaches no event, Result or session file; dead, and out of the clone, once the process is shut down"
        : "a token the model makes the shell print reaches no event, Result, clone or session file, and is dead after the turn",
      () => {
        const observed: Array<Harness.Observed> = []
        return Effect.gen(function*() {
          looked.length = 0
          const sandbox = yield* Harness.sandbox
          const server = yield* AnthropicServer.make({
            respond: (request) => {
              const results = AnthropicServer.toolResults(request)
              const history = AnthropicServer.transcript(request).map(([, text]) => text).join("\n")
              if (history.includes("second turn")) return AnthropicServer.reply("second answer")
              if (results.length === 0) return AnthropicServer.callTool("lookup_issue", { key: "ISSUE-42" })
              if (!results[0]!.text.includes("TETHER_MCP_")) {
                return AnthropicServer.callTool("Bash", { command: "env", description: "Print the environment" })
              }
              // The model repeats what the shell printed: streamed in 8-character deltas, so the
              // token is split across deltas.
              return AnthropicServer.reply(`The environment:\n${results[0]!.text}`)
            }
          })
          const sessions = Path.join(sandbox.base, "sessions")
          const { events, first, second, marker, captured } = yield* Effect.gen(function*() {
            const agent = yield* Agent.make({
              driver: Claude.driver({
                env: {
                  ANTHROPIC_BASE_URL: server.url,
                  ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake"),
                  CLAUDE_CODE_MAX_RETRIES: "0"
                },
                allowedTools: ["Bash"]
              }),
              definition: { instructions: "", skills: [], tools: IssueTools },
              workspace: sandbox.workspace,
              profile: sandbox.selection,
              live: { threads: live }
            })
            const thread = yield* agent.thread("containment")
            const events: Array<Event.Event> = []
            yield* thread.stream("Show me the environment.").pipe(
              Stream.runForEach((event) => Effect.sync(() => events.push(event)))
            )
            // The token as the model received it, in the tool result the CLI sent to the provider.
            const messages = yield* server.messages
            const captured = messages.map((m) =>
              printedToken(AnthropicServer.toolResults(m).map((r) => r.text).join("\n"))
            )
              .find((t) => t !== undefined)
            expect(captured).toBeDefined()
            const probe = Harness.probe({ url: observed[0]!.url, token: Redacted.make(captured!) })
            // One-shot: dead right after the turn, while the agent's own registration still serves.
            if (!live) expect(yield* probe).toBe(401)
            expect(yield* Harness.probe(observed[0]!)).toBe(200)
            expect(captured).not.toBe(Redacted.value(observed[0]!.token))
            // One-shot: the next turn of the thread starts after the first turn's process was reaped,
            // its files scrubbed and its session saved; it resumes the scrubbed transcript. Live: the
            // same process answers.
            const second = yield* thread.run("second turn")
            if (live) {
              // The thread's close shuts its live process down: its credential dies, its files are scrubbed.
              yield* thread.close
              expect(yield* probe).toBe(401)
              expect(yield* Harness.probe(observed[0]!)).toBe(200)
            }
            const finished = events.at(-1)
            return {
              events,
              first: finished?._tag === "RunFinished" ? finished.result : undefined,
              second,
              marker: agent.marker,
              captured: captured!
            }
          }).pipe(
            Effect.tap(({ captured }) => {
              // The clone still exists here (the agent is open): none of its files holds the token.
              expect(tokenIn(filesUnder(sandbox.root), captured)).toEqual([])
              expect(filesUnder(sandbox.root).some(([, content]) => content.includes(Gateway.redactionMarker))).toBe(
                true
              )
            }),
            Effect.scoped
          )
          expect(looked).toEqual(["ISSUE-42"])
          expect(first?.text).toContain("The environment:")
          expect(first?.text).toContain(Gateway.redactionMarker)
          expect(second.text).toBe("second answer")
          const everything = JSON.stringify({ events, first, second })
          expect(everything.includes(captured)).toBe(false)
          for (const event of events) {
            if (event._tag === "TextDelta") expect(event.text.includes(captured.slice(0, 12))).toBe(false)
          }
          expect(events.some((e) => e._tag === "ToolCall" && e.name === "Bash")).toBe(true)
          expect(JSON.stringify(first?.raw)).toContain(Gateway.redactionMarker)
          // After close: the session store kept the conversation, without the token.
          const saved = filesUnder(sessions)
          expect(saved.length).toBeGreaterThan(0)
          expect(tokenIn(saved, captured)).toEqual([])
          expect(saved.some(([, content]) => content.includes(Gateway.redactionMarker))).toBe(true)
          expect(yield* Harness.markedProcesses(marker)).toEqual([])
        }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.recordingLayer(observed)]))
      },
      120_000
    )
  }
})
