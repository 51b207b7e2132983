/** The compatibility fingerprints of agents on one sandbox, one per driver (no process starts). */
import { Agent } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import { Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"

export const fingerprints = (drivers: ReadonlyArray<Driver.Driver>) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const out: Array<string> = []
    for (const driver of drivers) {
      const agent = yield* Agent.make({
        driver,
        definition: { instructions: "", tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        live: { threads: false }
      })
      out.push(agent.fingerprint)
    }
    return out
  }).pipe(Effect.scoped, Effect.provide(Harness.layer))
