/**
 * Tether's ACP client at its edges, against a scripted agent built on the official SDK's agent
 * side (`fixtures/acp-agent/agent.mjs`, a real process speaking ACP over stdio): what Gemini CLI
 * never does here (no `loadSession`, no HTTP MCP, another protocol version, 200 updates written
 * right before the prompt's result, a turn abandoned by its reader).
 */
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import type * as Driver from "@tether/core/Driver"
import { Usage } from "@tether/core/Result"
import { LiveChannel } from "@tether/testing"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as Path from "node:path"
import * as Acp from "../src/internal/acp.js"
import * as AcpMap from "../src/internal/acpMap.js"

const agentScript = Path.join(import.meta.dirname, "fixtures", "acp-agent", "agent.mjs")

const options: Acp.Options = {
  naming: AcpMap.genericNaming,
  startTimeout: "20 seconds",
  hostedToolsTimeout: "5 seconds",
  cancelTimeout: "10 seconds",
  permission: Acp.denyPermission,
  sources: false
}

const request = (tools: ReadonlyArray<string>, session: Driver.SessionRequest): Driver.InvocationRequest => ({
  runId: "run",
  prompt: "",
  model: undefined,
  profileDir: "/nonexistent",
  siblings: {},
  workspace: process.cwd(),
  hosted: { key: "tether", url: "http://127.0.0.1:9/mcp", tokenVariable: "TETHER_TEST_TOKEN_5F0C2A9B", tools },
  instructions: "",
  skills: [],
  mcp: [],
  session,
  sandbox: undefined,
  hostEnv: {}
})

/** The scripted agent with these capabilities, attached. */
const attach = (
  capabilities: object,
  setup: {
    readonly tools?: ReadonlyArray<string>
    readonly session?: Driver.SessionRequest
    readonly version?: number
  } = {}
) =>
  Effect.gen(function*() {
    const session = setup.session ?? { _tag: "New", id: "unused" }
    const process_ = yield* LiveChannel.spawn({
      command: process.execPath,
      args: [agentScript],
      env: {
        PATH: process.env["PATH"] ?? "",
        ACP_FAKE_CAPABILITIES: JSON.stringify(capabilities),
        ACP_FAKE_VERSION: String(setup.version ?? 1)
      },
      cwd: process.cwd(),
      stdin: undefined,
      files: []
    })
    const live = yield* Acp.attach(options, process_.channel, {
      hostedKey: "tether",
      session,
      request: request(setup.tools ?? [], session),
      hostedToken: Redacted.make("token-value"),
      hostedToolsListed: Effect.never
    })
    return { process: process_, live }
  }).pipe(Effect.provide(NodeContext.layer))

const collect = (stream: Stream.Stream<Driver.Output, Driver.ProtocolError>) =>
  stream.pipe(Stream.runCollect, Effect.map(Chunk.toReadonlyArray))

const text = (outputs: ReadonlyArray<Driver.Output>) =>
  outputs.flatMap((o) => o._tag === "TextDelta" ? [o.text] : []).join("")

const expected = Array.from({ length: 200 }, (_, i) => `${i},`).join("")

describe("ACP client edges (scripted SDK agent)", () => {
  it.live("200 updates written right before the prompt's result all land in the turn, in order", () =>
    Effect.gen(function*() {
      const { live } = yield* attach({ loadSession: true, mcpCapabilities: { http: true } })
      for (const runId of ["a", "b"]) {
        const outputs = yield* collect(live.turn({ runId, prompt: "count" }))
        expect(text(outputs)).toBe(expected)
        expect(outputs.at(-1)).toMatchObject({
          _tag: "Terminal",
          ok: true,
          text: expected,
          session: "fake-session",
          usage: new Usage({ inputTokens: 2, outputTokens: 1 })
        })
      }
    }).pipe(Effect.scoped))

  it.live("a turn its reader abandons is cancelled; the next turn waits for it and runs", () =>
    Effect.gen(function*() {
      const { live, process: agent } = yield* attach({})
      const first = yield* live.turn({ runId: "a", prompt: "hang" }).pipe(Stream.take(1), collect)
      expect(first).toEqual([{ _tag: "SessionStarted", sessionId: "fake-session", model: undefined }])
      const next = yield* collect(live.turn({ runId: "b", prompt: "count" }))
      expect(text(next)).toBe(expected)
      expect(agent.frames.filter((f) => f.dir === "in").map((f) => JSON.parse(f.line).method)).toEqual([
        "initialize",
        "session/new",
        "session/prompt",
        "session/cancel",
        "session/prompt"
      ])
      // Idle: an interrupt writes nothing.
      yield* live.interrupt
      expect(agent.frames.filter((f) => f.dir === "in")).toHaveLength(5)
    }).pipe(Effect.scoped))

  it.live("refused before any session: a resume without loadSession, hosted tools without HTTP MCP, ACP v2", () =>
    Effect.gen(function*() {
      const resume = yield* Effect.flip(attach({}, { session: { _tag: "Resume", id: "s1" } }).pipe(Effect.as("ok")))
      expect(resume).toMatchObject({ reason: "ResumeRejected" })
      expect(resume.detail).toContain("loadSession")
      const hosted = yield* Effect.flip(
        attach({ mcpCapabilities: { sse: true } }, { tools: ["echo"] }).pipe(
          Effect.as("ok")
        )
      )
      expect(hosted).toMatchObject({ reason: "HostedToolsUnavailable" })
      expect(hosted.detail).toContain("mcpCapabilities.http")
      const version = yield* Effect.flip(attach({}, { version: 2 }).pipe(Effect.as("ok")))
      expect(version).toMatchObject({ reason: "ProviderError" })
      expect(version.detail).toContain("ACP version 2")
    }).pipe(Effect.scoped))
})
