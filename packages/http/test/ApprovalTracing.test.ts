/**
 * An approvals handler that dies, with an error quoting the tool input it was asked
 * about (a Bash command), on a thread of the real Claude Code CLI (offline, the scripted
 * Anthropic server). docs/tracing.md: tool arguments are never recorded on a span, and a host
 * handler's failure (the gateway's) is kept out of span events because "Effect's tracer logger
 * would record them with the cause's text, which may quote the call's arguments". The same must
 * hold for an approval's input.
 */
import { expect, it } from "@effect/vitest"
import { Agent, Approval } from "@tether/core"
import { Claude } from "@tether/drivers"
import { AnthropicServer, Harness } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Tracer from "effect/Tracer"
import * as Fs from "node:fs"
import * as Os from "node:os"
import { IssueTools, IssueToolsLive, respond } from "./support.js"

const secret = "ARGUMENT-SECRET-5a7c"

it.live(
  "an approvals handler that dies quoting the command: no span event holds the command",
  () =>
    Effect.gen(function*() {
      const spans: Array<Tracer.Span> = []
      const native = yield* Effect.tracer
      const recording = Tracer.make({
        span: (...args) => {
          const span = native.span(...args)
          spans.push(span)
          return span
        },
        context: native.context
      })
      const dir = Fs.mkdtempSync(`${Os.tmpdir()}/tether-audit-approval-`)
      const file = `${dir}/${secret}`
      let asked = 0
      const result = yield* Effect.gen(function*() {
        const anthropic = yield* AnthropicServer.make({ respond })
        const sandbox = yield* Harness.sandbox
        const agent = yield* Agent.make({
          driver: Claude.driver({
            env: {
              ANTHROPIC_BASE_URL: anthropic.url,
              ANTHROPIC_API_KEY: Redacted.make("sk-ant-offline-test"),
              CLAUDE_CODE_MAX_RETRIES: "0"
            }
          }),
          definition: { instructions: "", skills: [], tools: IssueTools },
          workspace: sandbox.workspace,
          profile: sandbox.selection,
          processes: { killGrace: "500 millis" },
          approvals: {
            handler: (request: Approval.ApprovalRequest) =>
              Effect.sync(() => asked++).pipe(
                Effect.zipRight(Effect.die(new Error(`policy service refused ${JSON.stringify(request.input)}`)))
              )
          }
        })
        const thread = yield* agent.thread("alice/approval-trace")
        return yield* thread.run(`[bash] touch ${file}`)
      }).pipe(Effect.scoped, Effect.provide([IssueToolsLive, Harness.layer]), Effect.withTracer(recording))
      const created = Fs.existsSync(file)
      Fs.rmSync(dir, { recursive: true, force: true })
      // The handler was asked, and its death is a deny: the command did not run.
      expect(asked).toBe(1)
      expect(created).toBe(false)
      expect(result.text).toContain("TOOL ERROR")
      const eventTexts = (span: Tracer.Span) =>
        (span as unknown as { events: Array<[string, bigint, Record<string, unknown>]> }).events.flatMap((
          [name, , attributes]
        ) => [name, ...Object.values(attributes).map(String)])
      const leaking = spans
        .filter((span) => eventTexts(span).some((text) => text.includes(secret)))
        .map((span) => `${span.name}: ${eventTexts(span).find((text) => text.includes(secret))!.slice(0, 160)}`)
      expect(leaking).toEqual([])
    }),
  90_000
)
