/**
 * Profiles: a provider's configuration directory (here Claude Code's `CLAUDE_CONFIG_DIR`).
 * An agent never runs in, or writes to, the configured source profile: it runs in an execution
 * clone made for it (0700, random directory, ownership marker) with the source's settings,
 * memory, MCP declarations and skills copied and its login linked; the driver writes its own
 * files (the hosted-tools MCP file, the instructions) into the clone only. Closing the agent
 * removes the clone; the source stays byte-identical. `Profile.inspect` shows both, as observed.
 *
 *   node --conditions=@tether/source --import tsx examples/profiles.ts
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Agent } from "@tether/core"
import { Claude } from "@tether/drivers"
import { Profile } from "@tether/profile"
import { Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Model from "./support/model.js"
import * as View from "./support/view.js"

const program = Effect.gen(function*() {
  const sandbox = yield* Harness.sandbox
  // The user's profile: settings, a memory file, a login (fake here), as Claude Code keeps them.
  const source = Path.join(sandbox.base, "my-claude-profile")
  Fs.mkdirSync(source, { mode: 0o700 })
  Fs.writeFileSync(Path.join(source, "settings.json"), JSON.stringify({ includeCoAuthoredBy: false }))
  Fs.writeFileSync(Path.join(source, "CLAUDE.md"), "Always answer in metric units.\n")
  Fs.writeFileSync(Path.join(source, ".credentials.json"), "{\"note\":\"the user's login\"}\n", { mode: 0o600 })
  const clones = Path.join(sandbox.base, "clones")
  const selection = Profile.cloneFrom(source, clones, { auth: "link" })
  const before = yield* Harness.treeDigest(source)

  let sawMemory = false
  const driver = yield* Model.offline("claude", ({ history }) => {
    sawMemory = history.includes("Always answer in metric units.")
    return Model.answer(sawMemory ? "It is 5 km away." : "It is 3 miles away.")
  })
  const { result, during } = yield* Effect.scoped(Effect.gen(function*() {
    const agent = yield* Agent.make({
      driver,
      definition: { instructions: "You give distances.", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: selection
    })
    const result = yield* agent.run("How far is the station?")
    return { result, during: yield* Profile.inspect(selection, Claude.layout) }
  }))
  const after = yield* Profile.inspect(selection, Claude.layout)

  View.write(`${View.bold("answer")} ${result.text}\n`)
  View.write(`${View.bold("source")} ${during.declared.map((e) => `${e.path} (${e.class})`).join(", ")}\n`)
  for (const clone of during.clones) {
    View.write(
      `${View.bold("clone")}  ${clone.root} · agent ${clone.agentId} · wrote ${
        clone.materialized.map((m) => `${m.path} (${m.state})`).join(", ")
      }\n`
    )
  }
  const check = View.checks()
  check.claim("the CLI read the user's memory through the clone", sawMemory && result.text === "It is 5 km away.")
  check.claim(
    "while the agent lived, one clone held the driver's files",
    during.clones.length === 1 && during.clones[0]!.materialized.length > 0
  )
  check.claim(
    "after close, no clone is left",
    after.clones.length === 0 && (yield* Harness.entries(clones)).length === 0
  )
  check.claim("the source profile is byte-identical", (yield* Harness.treeDigest(source)) === before)
  check.claim("no driver file was ever written to the source", !Fs.existsSync(Path.join(source, Claude.mcpConfigFile)))
  check.conclude("profiles: the agent ran in a clone of the user's profile and left it untouched")
}).pipe(Effect.scoped, Effect.provide(Harness.layer))

// runMain: SIGINT / SIGTERM interrupt the program, so every scope closes (the agent's ordered
// close: processes stopped, clone removed, token revoked) before the process exits.
NodeRuntime.runMain(program)
