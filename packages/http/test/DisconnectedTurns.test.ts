/**
 * A long-running host: an HTTP router over an agent that serves many keys whose clients go
 * away mid-turn (a browser tab closed): once the reconnect grace is over the run is canceled, as
 * `DELETE` would. What is left behind per such turn: the router's runs and thread handles, the
 * agent's processes, and the provider transcript the CLI wrote in the agent's clone (the fake CLI
 * keeps one per session, `sessions/<id>.jsonl`, as the real CLIs do). Nothing was committed.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpRouter from "@effect/platform/HttpRouter"
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { AgentHttp } from "@tether/http"
import { FakeCli, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as NodePath from "node:path"

const authorize = () => Effect.succeed({ principal: "p", threads: () => true })

const transcripts = (dir: string): ReadonlyArray<string> => Fs.existsSync(dir) ? Fs.readdirSync(dir).sort() : []

const processes = () => process.getActiveResourcesInfo().filter((name) => name === "ProcessWrap").length

const keys = 8

describe("HTTP turns whose clients disconnect", () => {
  it.live("leave no process, no run and no transcript behind once canceled", () =>
    Effect.gen(function*() {
      const sandbox = yield* Harness.sandbox
      const agent = yield* Agent.make({
        driver: FakeCli.driver({ capabilities: { resume: true } }),
        definition: { instructions: "", skills: [], tools: Toolkit.empty },
        workspace: sandbox.workspace,
        profile: sandbox.selection,
        processes: { killGrace: "500 millis", exitGrace: "500 millis" }
      })
      const clones = yield* Harness.entries(sandbox.root)
      const sessions = NodePath.join(sandbox.root, clones[0]!, "profile", "sessions")
      const server = yield* NodeHttpServer.make(() => Http.createServer(), { host: "127.0.0.1", port: 0 })
      const router = yield* AgentHttp.router({
        agent,
        authorize,
        heartbeat: "200 millis",
        reconnectGrace: "100 millis",
        retention: "200 millis",
        threads: { idleTimeout: "100 millis", max: 2 }
      })
      yield* server.serve(HttpRouter.empty.pipe(HttpRouter.mount("/agent", router)))
      const address = server.address
      if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("not a TCP address")
      const origin = `http://127.0.0.1:${address.port}`
      const baseline = processes()

      const runIds: Array<{ readonly key: string; readonly run: string }> = []
      for (let i = 0; i < keys; i++) {
        const key = `tab-${i}`
        const run = yield* Effect.promise(async () => {
          const controller = new AbortController()
          const response = await fetch(`${origin}/agent/threads/${key}/turns`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({
              input: FakeCli.script({ op: "text", text: "working" }, { op: "sleep", ms: 20_000 })
            }),
            signal: controller.signal
          })
          // The tab closes once the turn is under way (its first text delta).
          const reader = response.body!.getReader()
          const decoder = new TextDecoder()
          let text = ""
          while (!text.includes("event: TextDelta")) {
            const { done, value } = await reader.read()
            if (done) break
            text += decoder.decode(value, { stream: true })
          }
          controller.abort()
          return /"runId":"([^"]+)"/.exec(text)?.[1] ?? ""
        })
        runIds.push({ key, run })
      }
      expect(runIds.every(({ run }) => run !== "")).toBe(true)

      // Each run is canceled after the grace; then retention passes.
      // Past the reconnect grace: every run was canceled by it (not by the DELETEs below).
      yield* Effect.sleep("500 millis")
      const statuses = Effect.promise(async () => {
        const found: Array<number> = []
        for (const { key, run } of runIds) {
          const response = await fetch(`${origin}/agent/threads/${key}/runs/${run}`, { method: "DELETE" })
          found.push(response.status)
        }
        return found
      })
      yield* statuses.pipe(
        Effect.repeat({
          until: (found) => found.every((status) => status === 404),
          schedule: Schedule.spaced("100 millis").pipe(Schedule.upTo("10 seconds"))
        })
      )
      expect(yield* statuses).toEqual(runIds.map(() => 404))
      yield* Effect.sync(() => processes() - baseline).pipe(
        Effect.repeat({
          until: (n) => n <= 0,
          schedule: Schedule.spaced("100 millis").pipe(Schedule.upTo("5 seconds"))
        })
      )
      expect(processes() - baseline).toBeLessThanOrEqual(0)
      // Nothing of these turns was committed ...
      for (const { key } of runIds) {
        const snapshot = yield* Effect.promise(() => fetch(`${origin}/agent/threads/${key}`).then((r) => r.status))
        expect(snapshot).toBe(404)
      }
      // ... and nothing of theirs should stay in the agent's clone for its lifetime: one transcript
      // per canceled turn stays there (nothing removes them: no record refers to them).
      expect(transcripts(sessions)).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(Harness.layer)), 60_000)
})
