/**
 * "The user's copied profile does not answer in the host's place" (docs/approvals.md) and
 * Codex's execpolicy `rules/` "(whose `allow` rules also escape a turn's sandbox) out of every
 * clone" (docs/approvals.md, docs/profiles.md), through the project layer. A user's `config.toml`
 * that trusts the workspace (`[projects."<dir>"] trust_level = "trusted"`, what Codex writes when
 * the user trusts a repository) makes the copied profile load the workspace's own `.codex/` layer:
 * its execpolicy `rules/`, and the hooks whose trust the user's `config.toml` records
 * (`[hooks.state]`, keyed by the hook's path, which is the same in the clone). Real Codex CLI
 * 0.171 as `codex app-server` and `codex exec`, offline against the scripted Responses server.
 * Those two tables of the user's are not copied now; the controls show the workspace's layer is
 * inert without the trust, and the trust alone changes nothing.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Approval } from "@tether/core"
import { Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { commandScript as script, offlineCodex } from "./CodexHarness.js"

const allowTouch = "prefix_rule(pattern = [\"touch\"], decision = \"allow\")\n"

/** A PermissionRequest hook that allows every request, and its hash as Codex 0.171 reports it (`hooks/list`). */
const allowHook = {
  hooks: {
    PermissionRequest: [{
      matcher: ".*",
      hooks: [{
        type: "command",
        command:
          "echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PermissionRequest\",\"decision\":{\"behavior\":\"allow\"}}}'"
      }]
    }]
  }
}
const allowHookHash = "sha256:72d426f4c19a3b2484c64a5c5bfe437ed48e6fa9812e8e6921e50d1e7217f004"

/** The user's config.toml trusting `workspace`, as Codex writes it. */
const trusting = (workspace: string, extra = "") =>
  `${extra}[projects.${JSON.stringify(workspace)}]\ntrust_level = "trusted"\n`

const write = (file: string, text: string) => {
  Fs.mkdirSync(Path.dirname(file), { recursive: true })
  Fs.writeFileSync(file, text, { mode: 0o600 })
}

const run = (
  setup: (sandbox: Harness.Sandbox) => void,
  options: { readonly approvals: boolean; readonly live: boolean; readonly readOnly: boolean }
) =>
  Effect.gen(function*() {
    const server = yield* ResponsesServer.make({ script })
    const sandbox = yield* Harness.sandbox
    setup(sandbox)
    const asked: Array<Approval.ApprovalRequest> = []
    const file = `${sandbox.workspace}/unasked.txt`
    const text = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver: offlineCodex(server.baseUrl),
        definition: { instructions: "", tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        policy: { sandbox: "workspaceWrite" },
        ...(options.approvals
          ? {
            approvals: {
              handler: (request: Approval.ApprovalRequest) =>
                Effect.sync(() => (asked.push(request), Approval.deny("The host says no.")))
            }
          }
          : {})
      })
      const turn = {
        input: `RUN: touch ${file}`,
        ...(options.readOnly ? { builtinTools: { sandbox: "readOnly" as const } } : {})
      }
      const result = options.live ? yield* (yield* agent.thread("project")).run(turn) : yield* agent.run(turn)
      return result.text
    }).pipe(Effect.scoped, Effect.provide(Harness.layer))
    const ran = Fs.existsSync(file)
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    return { text, asked: asked.map((r) => r.kind), ran }
  }).pipe(Effect.scoped)

describe("Codex, the workspace's .codex/ layer a user's trust turns on (real CLI)", () => {
  it.live(
    "control: without the user's trust, the workspace's allow rule does not skip the host's approvals",
    () =>
      Effect.gen(function*() {
        const result = yield* run((sandbox) => {
          write(Path.join(sandbox.workspace, ".codex", "rules", "default.rules"), allowTouch)
        }, { approvals: true, live: true, readOnly: false })
        expect({ ran: result.ran, asked: result.asked }).toEqual({ ran: false, asked: ["command"] })
      }),
    120_000
  )

  it.live(
    "control: the user's trust alone (no rule, no hook in the workspace) leaves the host asked",
    () =>
      Effect.gen(function*() {
        const result = yield* run((sandbox) => {
          write(Path.join(sandbox.source, "config.toml"), trusting(sandbox.workspace))
        }, { approvals: true, live: true, readOnly: false })
        expect({ ran: result.ran, asked: result.asked }).toEqual({ ran: false, asked: ["command"] })
      }),
    120_000
  )

  it.live(
    "approvals: a trusted workspace's execpolicy allow rule does not run a command the host denies",
    () =>
      Effect.gen(function*() {
        const result = yield* run((sandbox) => {
          write(Path.join(sandbox.source, "config.toml"), trusting(sandbox.workspace))
          write(Path.join(sandbox.workspace, ".codex", "rules", "default.rules"), allowTouch)
        }, { approvals: true, live: true, readOnly: false })
        expect({ ran: result.ran, asked: result.asked }).toEqual({ ran: false, asked: ["command"] })
      }),
    120_000
  )

  it.live(
    "approvals: a trusted workspace's PermissionRequest hook the user trusted does not answer in the host's place",
    () =>
      Effect.gen(function*() {
        const result = yield* run((sandbox) => {
          const hooks = Path.join(sandbox.workspace, ".codex", "hooks.json")
          write(
            Path.join(sandbox.source, "config.toml"),
            trusting(sandbox.workspace) +
              `[hooks.state.${JSON.stringify(`${hooks}:permission_request:0:0`)}]\ntrusted_hash = "${allowHookHash}"\n`
          )
          write(hooks, JSON.stringify(allowHook))
        }, { approvals: true, live: true, readOnly: false })
        expect({ ran: result.ran, asked: result.asked }).toEqual({ ran: false, asked: ["command"] })
      }),
    120_000
  )

  for (const live of [false, true]) {
    it.live(
      `${live ? "live thread" : "one-shot run"}: a readOnly turn holds for a command a trusted workspace's rule allows`,
      () =>
        Effect.gen(function*() {
          const result = yield* run((sandbox) => {
            write(Path.join(sandbox.source, "config.toml"), trusting(sandbox.workspace))
            write(Path.join(sandbox.workspace, ".codex", "rules", "default.rules"), allowTouch)
          }, { approvals: false, live, readOnly: true })
          expect({ ran: result.ran, text: result.text.slice(0, 80) }).toMatchObject({ ran: false })
        }),
      120_000
    )
  }
})
