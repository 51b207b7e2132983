import { describe, expect, it } from "@effect/vitest"
import { Profile } from "@tether/profile"
import { Harness } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { canonicalJson, compatibilityFingerprint } from "../src/internal/compatibility.js"
import type { CompatibilityInput } from "../src/internal/compatibility.js"
import * as Threads from "./fixtures/threads.js"

const base: CompatibilityInput = {
  driver: "fake-cli",
  driverConfig: { flags: ["a"] },
  model: "m1",
  workspace: "/srv/repo",
  instructions: "You triage issues.",
  skills: [],
  mcp: [],
  catalogFingerprint: "c".repeat(64),
  policy: { sandbox: "readOnly" },
  profileIdentity: "fake-cli:/home/u/.fake-cli",
  profileFingerprint: "p".repeat(64),
  identity: undefined
}

describe("canonicalJson / compatibilityFingerprint", () => {
  it.prop(
    "canonical JSON is independent of key order and round-trips as JSON",
    [FastCheck.dictionary(FastCheck.string(), FastCheck.jsonValue())],
    ([value]) => {
      const reversed = Object.fromEntries(Object.entries(value).reverse())
      expect(canonicalJson(reversed)).toBe(canonicalJson(value))
      expect(JSON.parse(canonicalJson(value))).toEqual(JSON.parse(JSON.stringify(value)))
    },
    { fastCheck: { numRuns: 200 } }
  )

  it("undefined members are left out; the fingerprint is SHA-256 hex", () => {
    expect(canonicalJson({ b: 1, a: undefined, c: [1, { z: 2, y: undefined }] })).toBe("{\"b\":1,\"c\":[1,{\"z\":2}]}")
    expect(compatibilityFingerprint(base)).toMatch(/^[0-9a-f]{64}$/)
    expect(compatibilityFingerprint({ ...base })).toBe(compatibilityFingerprint(base))
  })

  it("every input changes the fingerprint", () => {
    const variants: ReadonlyArray<Partial<CompatibilityInput>> = [
      { driver: "other" },
      { driverConfig: { flags: ["b"] } },
      { model: "m2" },
      { model: undefined },
      { workspace: "/srv/other" },
      { instructions: "Other." },
      { skills: [{ name: "s", digest: "d" }] },
      { mcp: [{ key: "docs", url: "http://example.invalid" }] },
      { catalogFingerprint: "d".repeat(64) },
      { policy: { sandbox: "workspaceWrite" } },
      { profileIdentity: "fake-cli:/elsewhere" },
      { profileFingerprint: "q".repeat(64) },
      { identity: { id: "u1", tenant: undefined } }
    ]
    const seen = new Set([compatibilityFingerprint(base)])
    for (const variant of variants) seen.add(compatibilityFingerprint({ ...base, ...variant }))
    expect(seen.size).toBe(variants.length + 1)
  })
})

describe("Agent.fingerprint", () => {
  const build = (sandbox: Harness.Sandbox, options: Partial<Parameters<typeof Threads.makeAgent>[2]> = {}) =>
    Threads.makeAgent(sandbox, Threads.driver(Threads.makeControl()), options).pipe(
      Effect.map((agent) => agent.fingerprint),
      Effect.scoped,
      // A fresh gateway each time: a new port and a new token.
      Effect.provide(Layer.merge(Threads.ToolsLive, Harness.layer))
    )

  it.live("ephemeral details are normalized out; what the session depends on is not", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const reference = yield* build(sandbox)
      // New gateway port, new token and variable, new random clone directory: same fingerprint.
      expect(yield* build(sandbox)).toBe(reference)
      // A workspace reached through a symlink resolves to the same directory.
      const link = Path.join(sandbox.base, "workspace-link")
      Fs.symlinkSync(sandbox.workspace, link)
      expect(yield* build(sandbox, { workspace: link })).toBe(reference)
      // Rotating linked auth in the source profile does not matter; settings do.
      Fs.writeFileSync(Path.join(sandbox.source, "auth.json"), "{\"token\":\"rotated\"}\n")
      expect(yield* build(sandbox)).toBe(reference)

      const changed = [
        yield* build(sandbox, { model: "other-model" }),
        yield* build(sandbox, {
          definition: { instructions: "Different.", skills: [], tools: Threads.Tools }
        }),
        yield* build(sandbox, { policy: { sandbox: "readOnly" } }),
        yield* build(sandbox, { identity: { id: "someone" } })
      ]
      const otherWorkspace = Path.join(sandbox.base, "workspace-2")
      Fs.mkdirSync(otherWorkspace)
      changed.push(yield* build(sandbox, { workspace: otherWorkspace }))
      const otherSource = Path.join(sandbox.base, "source-2")
      Fs.cpSync(sandbox.source, otherSource, { recursive: true })
      changed.push(yield* build(sandbox, { profile: Profile.cloneFrom(otherSource, sandbox.root) }))
      Fs.writeFileSync(Path.join(sandbox.source, "settings.json"), "{\"theme\":\"light\"}\n")
      changed.push(yield* build(sandbox))
      expect(new Set([reference, ...changed]).size).toBe(changed.length + 1)
    }).pipe(Effect.scoped))

  it.live("a new tool revision changes the fingerprint, a reordered toolkit does not", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const v2 = Tool.make("lookup_issue", {
        description: "Look up one issue by key.",
        input: { key: Schema.String },
        output: Schema.Struct({ title: Schema.String }),
        revision: "lookup_issue/v2"
      })
      const V2 = Toolkit.make(v2, Threads.DeleteIssue)
      const V2Live = V2.toLayer({
        lookup_issue: ({ key }) => Effect.succeed({ title: key }),
        delete_issue: () => Effect.succeed({ deleted: true })
      })
      const Reordered = Toolkit.make(Threads.DeleteIssue, Threads.LookupIssue)
      const reference = yield* build(sandbox)
      const reordered = yield* Threads.makeAgent(sandbox, Threads.driver(Threads.makeControl()), {
        definition: {
          instructions: "You triage issues.",
          skills: [],
          tools: Reordered as unknown as typeof Threads.Tools
        }
      }).pipe(
        Effect.map((agent) => agent.fingerprint),
        Effect.scoped,
        Effect.provide(Layer.merge(Threads.ToolsLive, Harness.layer))
      )
      expect(reordered).toBe(reference)
      const revised = yield* Threads.makeAgent(sandbox, Threads.driver(Threads.makeControl()), {
        definition: { instructions: "You triage issues.", skills: [], tools: V2 as unknown as typeof Threads.Tools }
      }).pipe(
        Effect.map((agent) => agent.fingerprint),
        Effect.scoped,
        Effect.provide(Layer.merge(V2Live, Harness.layer))
      )
      expect(revised).not.toBe(reference)
    }).pipe(Effect.scoped))
})
