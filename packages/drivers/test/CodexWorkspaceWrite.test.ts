/**
 * A workspaceWrite turn against the user's own `config.toml` permission settings: the
 * copied profile must not widen the host's level (write outside the workspace). Real Codex CLI
 * (0.171.0), offline against the scripted Responses server.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Event from "@tether/core/Event"
import { Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { commandScript, offlineCodex } from "./CodexHarness.js"

const attempt = (userConfig: (outside: string) => string, live: boolean) =>
  Effect.gen(function*() {
    const server = yield* ResponsesServer.make({ script: commandScript })
    const sandbox = yield* Harness.sandbox
    // Outside the workspace and outside /tmp (which Codex's workspace-write level always allows).
    const outside = yield* Effect.acquireRelease(
      Effect.sync(() => Fs.mkdtempSync(Path.join(Os.homedir(), ".tether-test-outside-"))),
      (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
    )
    Fs.writeFileSync(Path.join(sandbox.source, "config.toml"), userConfig(outside), { mode: 0o600 })
    const file = `${outside}/escaped`
    const text = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver: offlineCodex(server.baseUrl),
        definition: { instructions: "", tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        policy: { sandbox: "workspaceWrite" }
      })
      const turn = `RUN: touch ${file}`
      if (!live) return (yield* agent.run(turn)).text
      const thread = yield* agent.thread("ww")
      const events = Array.from(yield* Stream.runCollect(thread.stream(turn)))
      return (events.at(-1) as Event.RunFinished).result.text
    }).pipe(Effect.scoped, Effect.provide(Harness.layer))
    return { written: Fs.existsSync(file), text: text.slice(0, 200) }
  }).pipe(Effect.scoped)

const roots = (outside: string) => `[sandbox_workspace_write]\nwritable_roots = [${JSON.stringify(outside)}]\n`
const danger = () => "default_permissions = \":danger-full-access\"\n"
const none = () => ""

describe("workspaceWrite vs the user's permission settings (real Codex CLI)", () => {
  it.live(
    "control: without user settings, workspaceWrite cannot write outside the workspace",
    () =>
      Effect.gen(function*() {
        expect(yield* attempt(none, false)).toMatchObject({ written: false })
      }),
    120_000
  )
  for (const live of [false, true]) {
    it.live(
      `${live ? "live" : "one-shot"}: the user's writable_roots do not widen workspaceWrite`,
      () =>
        Effect.gen(function*() {
          expect(yield* attempt(roots, live)).toMatchObject({ written: false })
        }),
      120_000
    )
    it.live(
      `${live ? "live" : "one-shot"}: the user's default_permissions do not widen workspaceWrite`,
      () =>
        Effect.gen(function*() {
          expect(yield* attempt(danger, live)).toMatchObject({ written: false })
        }),
      120_000
    )
  }
})
