/**
 * A turn's `builtinTools.deny` against the user's own Gemini profile, through the real Gemini CLI
 * (pinned 0.61.0) offline against the scripted GeminiServer: whatever the copied profile allows
 * (`tools.allowed`, a user policy file, a policy path promoted to the admin tier), a denied
 * built-in is neither offered nor run, one-shot (`gemini -p`) and on a live thread
 * (`gemini --acp`).
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Gemini } from "@tether/drivers"
import { GeminiServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Fs from "node:fs"
import * as Path from "node:path"

const secret = "TOP-SECRET-42"

const allowBoth = "[[rule]]\ntoolName = [\"read_file\", \"glob\"]\ndecision = \"allow\"\npriority = 999\n"

/** Profiles that allow `read_file` and `glob` in each way a user's Gemini profile can. */
const profiles: ReadonlyArray<readonly [string, ReadonlyArray<readonly [path: string, content: string]>]> = [
  ["settings.json tools.allowed", [[
    ".gemini/settings.json",
    JSON.stringify({ tools: { allowed: ["read_file", "glob"] } })
  ]]],
  ["a user policy (priority 500)", [[
    ".gemini/policies/mine.toml",
    "[[rule]]\ntoolName = [\"read_file\", \"glob\"]\ndecision = \"allow\"\npriority = 500\n"
  ]]],
  ["a user policy at the highest priority (999)", [[".gemini/policies/mine.toml", allowBoth]]],
  ["a policy path the user's settings promote to the admin tier", [
    [".gemini/settings.json", JSON.stringify({ adminPolicyPaths: ["ADMIN_DIR"] })],
    [".gemini/admin/mine.toml", allowBoth]
  ]]
]

const deny = { deny: ["read_file", "glob"] } as const

/**
 * One turn denying `read_file` and `glob` under `profile`, whose model calls `read_file` on the
 * secret anyway: one-shot, or on a live thread.
 */
const deniedTurn = (profile: (typeof profiles)[number][1], mode: "one-shot" | "live") =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const secretFile = Path.join(sandbox.workspace, "secret.txt")
    Fs.writeFileSync(secretFile, secret)
    for (const [file, content] of profile) {
      const target = Path.join(sandbox.source, file)
      Fs.mkdirSync(Path.dirname(target), { recursive: true, mode: 0o700 })
      Fs.writeFileSync(
        target,
        content.replace("ADMIN_DIR", Path.join(sandbox.source, ".gemini", "admin").replaceAll("\\", "/")),
        { mode: 0o600 }
      )
    }
    const server = yield* GeminiServer.make({
      script: [GeminiServer.callTool("read_file", { file_path: secretFile })],
      respond: () => GeminiServer.reply("done")
    })
    yield* Effect.gen(function*() {
      const agent = yield* Agent.make({
        driver: Gemini.driver({
          model: "gemini-2.5-flash",
          env: { GOOGLE_GEMINI_BASE_URL: server.url, GEMINI_API_KEY: Redacted.make("fake-gemini-key") }
        }),
        definition: { instructions: "", tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection
      })
      if (mode === "one-shot") {
        yield* agent.run({ input: "List the files.", builtinTools: deny })
      } else {
        const thread = yield* agent.thread("denied")
        yield* thread.run({ input: "List the files.", builtinTools: deny })
      }
    }).pipe(Effect.scoped, Effect.provide(Harness.layer))
    const [first, second] = yield* server.generations
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    return { first: first!, second: second! }
  }).pipe(Effect.scoped)

describe("Gemini built-in deny against the user's profile (real CLI)", () => {
  for (const [name, profile] of profiles) {
    for (const mode of ["one-shot", "live"] as const) {
      it.live(`${mode}: ${name} neither offers nor runs a denied built-in`, () =>
        Effect.gen(function*() {
          const { first, second } = yield* deniedTurn(profile, mode)
          const offered = GeminiServer.declaredTools(first)
          expect(offered).toContain("list_directory")
          expect(offered).not.toContain("read_file")
          expect(offered).not.toContain("glob")
          const responses = GeminiServer.functionResponses(second)
          expect(responses.map((r) => r.name)).toEqual(["read_file"])
          // Refused: the CLI has no such tool for this turn.
          expect(responses[0]!.output).toContain("not found")
          expect(JSON.stringify(responses)).not.toContain(secret)
        }), 120_000)
    }
  }
})
