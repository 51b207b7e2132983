/**
 * Guide snippets that type-check (scripts/docs/check.ts) but no example runs, run as written.
 *
 * - docs/threads.md:85-109, the live-thread snippet: `thread.send` right after forking the second
 *   turn, commented `// "Injected" | "Queued"`.
 * - docs/testing.md:7-45, the offline test of an agent on the real Claude Code CLI.
 */
import { expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type { Driver } from "@tether/core"
import { Claude } from "@tether/drivers"
import { AnthropicServer, Harness, Reference } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import { Effect, Redacted, Schema } from "effect"
import * as Deferred from "effect/Deferred"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"

it.live(
  "docs/threads.md live snippet: send right after forking a turn is delivered (Injected | Queued)",
  () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      // A live driver whose second turn works for a while (the snippet's Claude/Codex/Gemini stand-in).
      const driver: Driver.Driver = Reference.driver({
        live: true,
        respond: (prompt) =>
          prompt === "Now fix it."
            ? [{ _tag: "$sleep", ms: 3_000, untilInput: true }, ...Reference.answer("fixed")]
            : Reference.answer(prompt)
      })
      const workspace = sandbox.workspace
      // --- the snippet, as written (but for the profile, kept in the sandbox) ---
      const program = Effect.gen(function*() {
        const agent = yield* Agent.make({
          driver,
          definition: { instructions: "", skills: [], tools: Toolkit.empty },
          workspace,
          profile: sandbox.selection,
          live: { idleTimeout: "5 minutes", maxProcesses: 8 } // the defaults; `threads: false` opts out
        })
        const thread = yield* agent.thread("tenant-42/issue-123")
        yield* thread.run("Triage ISSUE-42.") // starts the thread's live process
        const running = yield* Deferred.make<void>()
        const fiber = yield* thread.stream("Now fix it.").pipe( // same process (ProcessStarted.reused)
          Stream.runForEach((event) =>
            event._tag === "ProcessStarted" ? Deferred.succeed(running, undefined) : Effect.void
          ),
          Effect.fork
        )
        yield* Deferred.await(running) // `send` reaches a running turn only (else `NoActiveTurn`)
        const delivery = yield* thread.send("Also add a test.") // "Injected" | "Queued"
        yield* Fiber.interrupt(fiber) // RunFinished(canceled); the process stays warm
        return delivery
      })
      // ---
      const outcome = yield* Effect.either(program.pipe(Effect.scoped))
      const tag = outcome._tag === "Right" ? outcome.right : `failed ${outcome.left._tag}`
      expect(tag).toMatch(/^(Injected|Queued)$/)
    }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
  60_000
)

// --- docs/testing.md:15-44, verbatim ---
const LookupIssue = Tool.make("lookup_issue", {
  description: "Look up one issue by key.",
  input: { key: Schema.String },
  output: Schema.Struct({ title: Schema.String }),
  revision: "lookup_issue/v1"
})
const IssueTools = Toolkit.make(LookupIssue)
const IssueToolsLive = IssueTools.toLayer({ lookup_issue: ({ key }) => Effect.succeed({ title: `Issue ${key}` }) })

it.live(
  "docs/testing.md snippet: the agent looks the issue up and answers with its title",
  () =>
    Effect.gen(function*() {
      // The model is scripted: first a tool call, then an answer built from the tool's result.
      const server = yield* AnthropicServer.make({
        respond: AnthropicServer.roundTrip(
          () => AnthropicServer.callTool("lookup_issue", { key: "ISSUE-42" }),
          (results) => AnthropicServer.reply(`The tool said ${results[0]!.text}`)
        )
      })
      const sandbox = yield* Harness.sandbox // temp profile, clone root and workspace, removed after
      const agent = yield* Agent.make({
        driver: Claude.driver({
          env: { ANTHROPIC_BASE_URL: server.url, ANTHROPIC_API_KEY: Redacted.make("sk-ant-fake") }
        }),
        definition: { instructions: "", skills: [], tools: IssueTools },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      const result = yield* agent.run("What is ISSUE-42 about?")
      expect(result.text).toContain("Issue ISSUE-42")
    }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.layer])),
  120_000
)
