/**
 * The user's own Codex profile does not answer in the host's place (docs/approvals.md): with
 * `approvals`, the host decides each built-in call on a live thread, whatever the user's execpolicy
 * rules (`rules/*.rules`, an `allow` rule ran the command unasked when they were copied) or
 * `approvals_reviewer` in `config.toml` say; and a turn's `readOnly` sandbox holds for a command
 * those rules allow (one-shot and live). Real Codex CLI as `codex exec` and `codex app-server`,
 * offline against the scripted Responses server on 127.0.0.1.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Approval } from "@tether/core"
import { Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { commandScript as script, denied, offlineCodex } from "./CodexHarness.js"

const withUserProfile = (files: { readonly [path: string]: string }) =>
  Effect.gen(function*() {
    const server = yield* ResponsesServer.make({ script })
    const sandbox = yield* Harness.sandbox
    for (const [path, text] of Object.entries(files)) {
      Fs.mkdirSync(Path.dirname(Path.join(sandbox.source, path)), { recursive: true })
      Fs.writeFileSync(Path.join(sandbox.source, path), text, { mode: 0o600 })
    }
    const asked: Array<Approval.ApprovalRequest> = []
    const file = `${sandbox.workspace}/not-allowed.txt`
    const text = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver: offlineCodex(server.baseUrl),
        definition: { instructions: "", tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        policy: { sandbox: "workspaceWrite" },
        approvals: {
          handler: (request) => Effect.sync(() => (asked.push(request), Approval.deny("The host says no.")))
        }
      })
      const thread = yield* agent.thread("user-rules")
      const result = yield* thread.run(`RUN: touch ${file}`)
      return result.text
    }).pipe(Effect.scoped, Effect.provide(Harness.layer))
    const ran = Fs.existsSync(file)
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    return { text, asked, ran }
  }).pipe(Effect.scoped)

describe("Codex approvals vs the user's own profile (real CLI, live thread)", () => {
  it.live(
    "an execpolicy allow rule in the user's rules/ does not run a command the host denies",
    () =>
      Effect.gen(function*() {
        const { asked, ran, text } = yield* withUserProfile({
          "rules/default.rules": "prefix_rule(pattern = [\"touch\"], decision = \"allow\")\n"
        })
        // The host was asked and denied: the command did not run.
        expect(ran).toBe(false)
        expect(asked.map((r) => r.kind)).toEqual(["command"])
        expect(text).toBe(`TOLD: ${denied}The host says no.`)
      }),
    120_000
  )

  it.live(
    "approvals_reviewer in the user's config.toml does not take the host's decision",
    () =>
      Effect.gen(function*() {
        const { asked, ran, text } = yield* withUserProfile({
          "config.toml": "approvals_reviewer = \"auto_review\"\n"
        })
        expect(ran).toBe(false)
        expect(asked.map((r) => r.kind)).toEqual(["command"])
        expect(text).toBe(`TOLD: ${denied}The host says no.`)
      }),
    120_000
  )
})

describe("Codex readOnly sandbox vs the user's execpolicy rules (real CLI)", () => {
  for (const live of [true, false]) {
    it.live(
      `${live ? "live thread" : "one-shot run"}: a turn's readOnly sandbox holds for a command the user's rules allow`,
      () =>
        Effect.gen(function*() {
          const server = yield* ResponsesServer.make({ script })
          const sandbox = yield* Harness.sandbox
          Fs.mkdirSync(Path.join(sandbox.source, "rules"), { recursive: true })
          Fs.writeFileSync(
            Path.join(sandbox.source, "rules", "default.rules"),
            "prefix_rule(pattern = [\"touch\"], decision = \"allow\")\n"
          )
          const file = `${sandbox.workspace}/read-only-breach.txt`
          const text = yield* Effect.gen(function*() {
            const agent = yield* Agent.make({
              driver: offlineCodex(server.baseUrl),
              definition: { instructions: "", tools: Toolkit.empty },
              workspace: sandbox.workspace,
              profile: sandbox.selection,
              policy: { sandbox: "workspaceWrite" }
            })
            const turn = { input: `RUN: touch ${file}`, builtinTools: { sandbox: "readOnly" as const } }
            const result = live ? yield* (yield* agent.thread("ro")).run(turn) : yield* agent.run(turn)
            return result.text
          }).pipe(Effect.scoped, Effect.provide(Harness.layer))
          const ran = Fs.existsSync(file)
          expect(ran).toBe(false)
          // The command ran in the sandbox and failed there.
          expect(text).toMatch(/^TOOL: [\s\S]*(Read-only file system|Permission denied)/)
          expect(yield* Harness.entries(sandbox.root)).toEqual([])
        }).pipe(Effect.scoped),
      120_000
    )
  }
})
