/**
 * Checks how far `Approval.allowForSession` on a Bash command with a redirect or a pipe reaches on
 * a Claude Code live thread (real pinned CLI, offline). Promise (core/src/Approval.ts: "the same
 * kind of call"; docs/approvals.md: "a Bash command prefix rule (`git init *`) ... no mode, working
 * directory or other tool's rule is passed on"): a later command writing somewhere else — in
 * particular outside the workspace — is asked.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent, Approval } from "@tether/core"
import type * as Driver from "@tether/core/Driver"
import { AnthropicServer, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Live from "./ClaudeLiveHarness.js"

/** The Claude driver, recording the raw `can_use_tool` requests (their permission_suggestions). */
const spied = (server: AnthropicServer.AnthropicServer, seen: Array<unknown>): Driver.Driver => {
  const driver = Live.driverFor(server, { partialMessages: false })
  const live = driver.live!
  return {
    ...driver,
    live: {
      ...live,
      attach: (channel, context) =>
        live.attach({
          ...channel,
          lines: channel.lines.pipe(Stream.tap((line) =>
            Effect.sync(() => {
              if (line.includes("can_use_tool")) seen.push(JSON.parse(line))
            })
          ))
        }, context)
    }
  }
}

describe("Claude allowForSession on a redirect / pipe (real CLI)", () => {
  it.live(
    "a redirect allowed for the session in the workspace: the same command redirecting outside the workspace is asked",
    () =>
      Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        const ws = sandbox.workspace
        const outside = `${sandbox.base}/outside`
        Fs.mkdirSync(outside, { recursive: true })
        Fs.writeFileSync(`${outside}/precious.txt`, "keep")
        Fs.writeFileSync(`${ws}/precious.txt`, "keep")
        Fs.writeFileSync(`${outside}/piped.txt`, "keep")
        const server = yield* Live.callModel()
        const seen: Array<unknown> = []
        const asked: Array<string> = []
        let granting = true
        const agent = yield* Agent.make({
          driver: spied(server, seen),
          definition: { instructions: "", tools: Toolkit.empty },
          workspace: ws,
          profile: sandbox.selection,
          approvals: {
            handler: (request) =>
              Effect.sync(() => {
                asked.push(request.command ?? request.toolName)
                return granting ? Approval.allowForSession : Approval.deny("Not granted.")
              })
          }
        })
        const thread = yield* agent.thread("redirect")
        const bash = (command: string) => thread.run(`CALL: Bash ${JSON.stringify({ command, description: "Run" })}`)
        yield* bash(`echo grant > ${ws}/granted.txt`)
        yield* bash(`echo grant | tee ${ws}/granted-tee.txt`)
        expect(Fs.readFileSync(`${ws}/granted.txt`, "utf8")).toBe("grant\n")
        granting = false
        const log: Array<[string, string, number]> = []
        for (
          const command of [
            `echo grant > ${outside}/precious.txt`,
            `echo grant > ${ws}/precious.txt`,
            `echo grant | tee ${outside}/piped.txt`
          ]
        ) {
          const before = asked.length
          const result = yield* bash(command)
          log.push([
            command.replaceAll(outside, "OUT").replaceAll(ws, "WS"),
            result.text.slice(0, 30),
            asked.length - before
          ])
        }
        yield* agent.close()
        expect({
          outside: Fs.readFileSync(`${outside}/precious.txt`, "utf8"),
          piped: Fs.readFileSync(`${outside}/piped.txt`, "utf8"),
          asked: log.map(([c, , k]) => [c, k])
        }).toEqual({
          outside: "keep",
          piped: "keep",
          asked: [
            ["echo grant > OUT/precious.txt", 1],
            ["echo grant > WS/precious.txt", expect.any(Number)],
            ["echo grant | tee OUT/piped.txt", 1]
          ]
        })
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    240_000
  )
})
