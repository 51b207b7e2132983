/**
 * No secret on a command line: claude-agent-acp hands the MCP servers of `session/new` to the
 * Claude Agent SDK, which starts Claude Code with `--mcp-config <json>` in its argv, readable by
 * any local user in `/proc/<pid>/cmdline`. The hosted tools' session token and an MCP source's
 * bearer therefore go there as `${VAR}` references, their values in the agent's environment
 * (`headerSecrets: "environment"`, the default with `claudeNaming`). Checked during a hosted tool
 * call (the handler reads every process's command line), one-shot (the turn runner) and on a live
 * thread (core's warm process).
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Mcp, ThreadStore } from "@tether/core"
import { AnthropicServer, Harness } from "@tether/testing"
import * as Effect from "effect/Effect"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as H from "./AcpHarness.js"

/** Every process's command line, its arguments joined by spaces. */
const commandLines = (): ReadonlyArray<string> =>
  Fs.readdirSync("/proc").flatMap((entry) => {
    if (!/^\d+$/.test(entry)) return []
    try {
      return [Fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ")]
    } catch {
      return []
    }
  })

/** A gateway token (32 random bytes, base64url) after `Bearer `, not a `${VAR}` reference. */
const literalToken = /Bearer [A-Za-z0-9_-]{43}/

describe("ACP driver with claude-agent-acp: secrets stay off command lines", () => {
  it.live(
    "one-shot and live: during a hosted tool call no argv holds the hosted token or the source's bearer",
    () =>
      Effect.gen(function*() {
        const sourceSecret = `argv-source-${randomBytes(12).toString("hex")}`
        const model = yield* AnthropicServer.make({
          respond: AnthropicServer.roundTrip(
            (request) =>
              (AnthropicServer.transcript(request).at(-1)?.[1] ?? "").includes("[echo]")
                ? AnthropicServer.callTool("mcp__tether__echo", { text: "argv" })
                : AnthropicServer.reply("plain"),
            (results) => AnthropicServer.reply(`FINAL: ${results.map((r) => r.text).join("|")}`)
          )
        })
        const sandbox = yield* Harness.sandbox
        /** The command lines seen during each hosted call. */
        const scans: Array<ReadonlyArray<string>> = []
        const result = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: H.claudeAgentDriver(model.url),
            definition: {
              instructions: "",
              skills: [],
              tools: H.Tools,
              mcp: [Mcp.http("ext", "http://127.0.0.1:9/mcp", { bearerTokenEnv: "ARGV_SOURCE_TOKEN" })]
            },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            env: { ...process.env, ARGV_SOURCE_TOKEN: sourceSecret }
          })
          const oneShot = yield* agent.run("one-shot [echo]")
          const thread = yield* agent.thread("argv")
          const live = yield* thread.run("live [echo]")
          return [oneShot.text, live.text]
        }).pipe(
          Effect.scoped,
          Effect.provide(H.Tools.toLayer({
            echo: ({ text }) =>
              Effect.sync(() => {
                scans.push(commandLines())
                return { echoed: `ECHO:${text}` }
              }),
            slow_wait: () => Effect.succeed({ done: true })
          }))
        )
        expect(result.map((text) => text.includes("ECHO:argv"))).toEqual([true, true])
        expect(scans).toHaveLength(2)
        const leaks = scans.flatMap((lines, i) =>
          lines.flatMap((line) => [
            ...(literalToken.test(line) ? [`${i === 0 ? "one-shot" : "live"}: the hosted token`] : []),
            ...(line.includes(sourceSecret) ? [`${i === 0 ? "one-shot" : "live"}: the source's bearer`] : [])
          ])
        )
        expect(leaks).toEqual([])
        for (const lines of scans) {
          // Claude Code was running, its MCP headers on its command line as references it expands.
          const configs = lines.filter((line) => line.includes("--mcp-config"))
          expect(configs.some((line) => line.includes("Bearer ${TETHER_"))).toBe(true)
          expect(configs.some((line) => line.includes("Bearer ${ARGV_SOURCE_TOKEN}"))).toBe(true)
        }
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
      }).pipe(Effect.scoped, Effect.provide([Harness.layer, ThreadStore.layerMemory])),
    120_000
  )
})
