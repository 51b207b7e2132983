/**
 * A turn's sandbox level against the user's own permission settings in the copied
 * `config.toml` (real Codex CLI 0.171.0, offline against the scripted Responses server).
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import type * as Event from "@tether/core/Event"
import { Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { commandScript, offlineCodex } from "./CodexHarness.js"

const withUserConfig = (userConfig: string, live: boolean) =>
  Effect.gen(function*() {
    const server = yield* ResponsesServer.make({ script: commandScript })
    const sandbox = yield* Harness.sandbox
    Fs.writeFileSync(Path.join(sandbox.source, "config.toml"), userConfig, { mode: 0o600 })
    const file = `${sandbox.workspace}/refused`
    const text = yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver: offlineCodex(server.baseUrl),
        definition: { instructions: "", tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        policy: { sandbox: "workspaceWrite" }
      })
      const turn = { input: `RUN: touch ${file}`, builtinTools: { sandbox: "readOnly" } } as const
      if (!live) return (yield* agent.run(turn)).text
      const thread = yield* agent.thread("sandbox")
      const events = Array.from(yield* Stream.runCollect(thread.stream(turn)))
      return (events.at(-1) as Event.RunFinished).result.text
    }).pipe(Effect.scoped, Effect.provide(Harness.layer))
    return { written: Fs.existsSync(file), text }
  }).pipe(Effect.scoped)

describe("Codex sandbox level vs the user's permission settings (real CLI)", () => {
  it.live(
    "one-shot: a readOnly turn cannot write even when the user's config.toml sets default_permissions",
    () =>
      Effect.gen(function*() {
        const { text, written } = yield* withUserConfig("default_permissions = \":danger-full-access\"\n", false)
        expect(text).toMatch(/Read-only file system/)
        expect(written).toBe(false)
      }),
    120_000
  )

  it.live(
    "live: a readOnly turn cannot write even when the user's config.toml sets default_permissions",
    () =>
      Effect.gen(function*() {
        const { text, written } = yield* withUserConfig("default_permissions = \":danger-full-access\"\n", true)
        expect(text).toMatch(/Read-only file system/)
        expect(written).toBe(false)
      }),
    120_000
  )
})

describe("Codex sandbox level of a resumed thread (one-shot `codex exec resume`)", () => {
  it.live(
    "a thread turn narrowed to readOnly cannot write, after a workspaceWrite turn of the same thread",
    () =>
      Effect.gen(function*() {
        const server = yield* ResponsesServer.make({ script: commandScript })
        const sandbox = yield* Harness.sandbox
        const file = (name: string) => `${sandbox.workspace}/${name}`
        const texts = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: offlineCodex(server.baseUrl),
            definition: { instructions: "", tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            policy: { sandbox: "workspaceWrite" },
            live: { threads: false }
          })
          const thread = yield* agent.thread("resume-sandbox")
          const first = yield* thread.run(`RUN: touch ${file("first")}`)
          const second = yield* thread.run({
            input: `RUN: touch ${file("second")}`,
            builtinTools: { sandbox: "readOnly" }
          })
          return [first.text, second.text]
        }).pipe(Effect.scoped, Effect.provide(Harness.layer))
        expect(Fs.existsSync(file("first"))).toBe(true)
        expect(texts[1]).toMatch(/Read-only file system/)
        expect(Fs.existsSync(file("second"))).toBe(false)
      }).pipe(Effect.scoped),
    120_000
  )
})
