/**
 * Concurrent first turns of a fresh Codex agent. The driver keeps the user's own
 * `config.toml` as `.tether-user-config.toml`, "saved by the first turn of a clone so every later
 * turn merges into the user's settings, never into the previous turn's rendering"
 * (src/internal/codexConfig.ts). `prepare` (which decides "first turn" and reads the clone's
 * `config.toml`) runs outside the agent's materialize lock, so a turn that starts while an earlier
 * first turn writes the clone takes that turn's *rendering* for the user's settings and saves it
 * over the user's copy: every later turn of the agent renders over a rendering (the real Codex
 * then sent the agent's instructions twice). `prepare` reads `config.toml` before it looks for the
 * saved copy, which a first turn writes before it renders `config.toml`.
 *
 * The CLI is a launcher that fails at once (cheap turns) until `real` exists, then runs the real
 * Codex CLI (0.171.0) offline against the scripted Responses server, which shows what it loaded.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Harness, ResponsesServer } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Binary from "../src/internal/binary.js"
import * as CodexInternal from "../src/internal/codex.js"
import { offlineCodex } from "./CodexHarness.js"

const developerText = (request: ResponsesServer.RecordedRequest) =>
  ResponsesServer.inputItems(request).flatMap((item) =>
    item["type"] === "message" && item["role"] === "developer" ? [JSON.stringify(item["content"])] : []
  ).join("\n")

const count = (text: string, needle: string) => text.split(needle).length - 1

const userConfig = "developer_instructions = \"USER-OWN-INSTRUCTIONS\"\n"

/** Every file named `name` under `dir`. */
const find = (dir: string, name: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = Path.join(dir, entry.name)
    if (entry.isDirectory() && !entry.isSymbolicLink()) return find(full, name)
    return entry.name === name ? [full] : []
  })

describe("concurrent first turns of a fresh Codex agent (real CLI)", () => {
  it.live(
    "the saved copy stays the user's config.toml, and a later turn renders the agent's instructions once",
    () =>
      Effect.gen(function*() {
        const server = yield* ResponsesServer.make({ script: (r) => ResponsesServer.text(`answer ${r.index}`) })
        const sandbox = yield* Harness.sandbox
        Fs.writeFileSync(Path.join(sandbox.source, "config.toml"), userConfig, { mode: 0o600 })
        const codex = Binary.resolve(CodexInternal.binarySpec, undefined)
        const flag = Path.join(sandbox.base, "real")
        const launcher = Path.join(sandbox.base, "launcher")
        const quoted = [codex.command, ...codex.prefix].map((part) => `'${part.replace(/'/g, `'\\''`)}'`).join(" ")
        Fs.writeFileSync(launcher, `#!/bin/sh\n[ -e '${flag}' ] || exit 1\nexec ${quoted} "$@"\n`, { mode: 0o700 })
        const savedCopies: Array<string> = []
        let later: string | undefined
        yield* Effect.gen(function*() {
          for (let round = 0; round < 60 && later === undefined; round++) {
            yield* Effect.gen(function*() {
              const agent = yield* Agent.make({
                driver: offlineCodex(server.baseUrl, { binary: launcher }),
                definition: { instructions: "AGENT-INSTRUCTIONS-MARKER", tools: Toolkit.empty },
                workspace: sandbox.workspace,
                profile: sandbox.selection
              })
              // Eight first turns, staggered by a few milliseconds (each fails at once: no CLI yet).
              yield* Effect.all(
                [0, 1, 2, 3, 4, 5, 6, 7].map((i) => Effect.delay(Effect.either(agent.run(`t${i}`)), (i * round) % 7)),
                { concurrency: "unbounded" }
              )
              const saved = find(sandbox.root, ".tether-user-config.toml").map((f) => Fs.readFileSync(f, "utf8"))
              savedCopies.push(...saved)
              if (saved.every((text) => text === userConfig)) return
              // This agent's saved copy is not the user's: a later turn, with the real CLI.
              Fs.writeFileSync(flag, "")
              const result = yield* agent.run("later turn")
              const request = (yield* server.requests).at(-1)!
              later = /USER-OWN-INSTRUCTIONS[^"]*/.exec(developerText(request))?.[0] ?? `(${result.text})`
            }).pipe(Effect.scoped)
          }
        }).pipe(Effect.provide(Harness.layer))
        expect.soft(savedCopies.filter((text) => text !== userConfig).map((text) => text.slice(0, 120))).toEqual([])
        if (later !== undefined) {
          expect(count(later, "AGENT-INSTRUCTIONS-MARKER"), later).toBe(1)
        }
      }).pipe(Effect.scoped),
    300_000
  )
})
