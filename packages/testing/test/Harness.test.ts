import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { FakeCli, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"

const runOnce = (observed: Array<Harness.Observed>, options?: Harness.RecordingOptions) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const agent = yield* Agent.make({
      driver: FakeCli.driver(),
      definition: { instructions: "", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection
    })
    yield* agent.run(FakeCli.script({ op: "list" }, { op: "text", text: "listed" }))
  }).pipe(Effect.scoped, Effect.provide(Harness.recordingLayer(observed, options)))

describe("Harness.recordingLayer", () => {
  it.live("records each registration, and each credential minted from it (the tokens CLIs use)", () =>
    Effect.gen(function*() {
      const observed: Array<Harness.Observed> = []
      const credentials: Array<Harness.Observed> = []
      yield* runOnce(observed, { credentials })
      // One registration, one credential per provider process.
      expect(observed).toHaveLength(1)
      expect(credentials).toHaveLength(1)
      expect(Redacted.value(credentials[0]!.token)).not.toBe(Redacted.value(observed[0]!.token))
      expect(credentials[0]!.url).toBe(observed[0]!.url)
    }))

  it.live("wraps a given layer's gateway, so a subject's own layer is recorded too", () =>
    Effect.gen(function*() {
      const observed: Array<Harness.Observed> = []
      const credentials: Array<Harness.Observed> = []
      yield* runOnce(observed, { credentials, base: Harness.layer })
      expect(observed).toHaveLength(1)
      expect(credentials).toHaveLength(1)
    }))
})
