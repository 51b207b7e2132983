/**
 * Approvals over HTTP (SSE and AG-UI) in front of the real Claude Code CLI (offline, the
 * scripted Anthropic server), in a real server on 127.0.0.1.
 */
import { type BaseEvent, type CustomEvent, EventType, HttpAgent } from "@ag-ui/client"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { describe, expect, it, layer } from "@effect/vitest"
import { AgentHttp } from "@tether/http"
import { Harness } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Os from "node:os"
import {
  authorize,
  events,
  Fixture,
  issueAgent,
  IssueToolsLive,
  layer as fixture,
  readReacting,
  readUntil
} from "./support.js"
import type { Frame } from "./support.js"

const alice = { authorization: "Bearer alice" }
const json = { "content-type": "application/json" }

const answer = (origin: string, key: string, run: string, id: string, body: unknown) =>
  fetch(`${origin}/threads/${encodeURIComponent(key)}/runs/${run}/approvals/${id}`, {
    method: "POST",
    headers: { ...json, ...alice },
    body: JSON.stringify(body)
  }).then(async (response) => [response.status, await response.text()] as const)

layer(fixture, { excludeTestServices: true, timeout: 90_000 })("HTTP approvals", (it) => {
  it.effect("an approval is answered only through its own run's URL: another (ended) run of the thread is 404", () =>
    Effect.gen(function*() {
      const { origin } = yield* Fixture
      const base = `${origin}/agent`
      const key = "alice/approvals-run-scope"
      const sandbox = yield* Effect.sync(() => Fs.mkdtempSync(`${Os.tmpdir()}/tether-approvals-approval-`))
      const file = `${sandbox}/approved.txt`
      // Run 1: an ordinary turn, ended (its run stays addressable for the retention).
      const first = yield* Effect.promise(() =>
        fetch(`${base}/threads/${encodeURIComponent(key)}/turns`, {
          method: "POST",
          headers: { ...json, ...alice },
          body: JSON.stringify({ input: "Is ISSUE-42 open?" })
        })
      )
      const firstFrames = events(yield* Effect.promise(() => readUntil(first)))
      const run1 = firstFrames.find((frame) => frame.event === "RunStarted")!.data.runId as string
      expect(firstFrames.at(-1)!.data.outcome).toBe("success")
      // Run 2 asks for an approval; it is answered through run 1's URL.
      const second = yield* Effect.promise(() =>
        fetch(`${base}/threads/${encodeURIComponent(key)}/turns`, {
          method: "POST",
          headers: { ...json, ...alice },
          body: JSON.stringify({ input: `[bash] touch ${file}` })
        })
      )
      let viaOtherRun: readonly [number, string] | undefined
      let viaOwnRun: readonly [number, string] | undefined
      const frames = yield* readReacting(second, async (frames) => {
        const requested = frames.find((frame) => frame.event === "ApprovalRequested")
        if (requested === undefined || viaOtherRun !== undefined) return
        const { id, runId } = requested.data.request
        viaOtherRun = await answer(base, key, run1, id, { decision: "allow" })
        // Whatever happened, make sure the run ends.
        viaOwnRun = await answer(base, key, runId, id, { decision: "deny", message: "no" })
      })
      Fs.rmSync(sandbox, { recursive: true, force: true })
      const resolved = frames.filter((frame) => frame.event === "ApprovalResolved").map((frame) => frame.data)
      expect({
        viaOtherRun: viaOtherRun?.[0],
        viaOwnRun: viaOwnRun?.[0],
        decidedAs: resolved.map((r) => r.decision._tag)
      }).toEqual({ viaOtherRun: 404, viaOwnRun: 204, decidedAs: ["Deny"] })
    }))

  it.effect("an AG-UI run's approval is answered by POST (run id from the snapshot, id from its events)", () =>
    Effect.gen(function*() {
      const { origin } = yield* Fixture
      const base = `${origin}/agent`
      const key = "alice/approvals-agui"
      const sandbox = yield* Effect.sync(() => Fs.mkdtempSync(`${Os.tmpdir()}/tether-approvals-agui-`))
      const file = `${sandbox}/approved.txt`
      const response = yield* Effect.promise(() =>
        fetch(`${base}/agui`, {
          method: "POST",
          headers: { ...json, ...alice, accept: "text/event-stream" },
          body: JSON.stringify({
            threadId: key,
            runId: "agui-run-1",
            messages: [{ id: "m1", role: "user", content: `[bash] touch ${file}` }]
          })
        })
      )
      expect(response.status).toBe(200)
      let answered: readonly [number, string] | undefined
      const frames = yield* readReacting(response, async (frames) => {
        if (answered !== undefined || !frames.some((frame) => frame.data?.type === "TOOL_CALL_START")) return
        answered = [0, "pending"]
        const snapshot = await fetch(`${base}/threads/${encodeURIComponent(key)}`, { headers: alice }).then((r) =>
          r.json() as Promise<{ readonly run: string }>
        )
        const run = snapshot.run as string
        const events = await fetch(`${base}/threads/${encodeURIComponent(key)}/runs/${run}/events`, {
          headers: alice
        })
        const tether = await readUntil(events, (frame) => frame.event === "ApprovalRequested")
        const requested = tether.find((frame) => frame.event === "ApprovalRequested")!
        answered = await answer(base, key, run, requested.data.request.id, { decision: "allow" })
      })
      const types = frames.flatMap((frame) => frame.data?.type === undefined ? [] : [frame.data.type as string])
      expect(answered?.[0]).toBe(204)
      expect(types[0]).toBe("RUN_STARTED")
      expect(types.at(-1)).toBe("RUN_FINISHED")
      expect(Fs.existsSync(file)).toBe(true)
      Fs.rmSync(sandbox, { recursive: true, force: true })
    }))
})

layer(fixture, { excludeTestServices: true, timeout: 90_000 })("AG-UI approvals as CUSTOM events", (it) => {
  it.effect("the real @ag-ui/client gets tether.ApprovalRequested, answers it by its runId and id, then tether.ApprovalResolved", () =>
    Effect.gen(function*() {
      const { origin } = yield* Fixture
      const base = `${origin}/agent`
      const key = "alice/approvals-agui-custom"
      const sandbox = yield* Effect.sync(() => Fs.mkdtempSync(`${Os.tmpdir()}/tether-approvals-custom-`))
      const file = `${sandbox}/approved.txt`
      const agent = new HttpAgent({
        url: `${base}/agui`,
        headers: alice,
        threadId: key,
        initialMessages: [{ id: "m1", role: "user", content: `[bash] touch ${file}` }]
      })
      const seen: Array<BaseEvent> = []
      const answers: Array<Promise<readonly [number, string]>> = []
      yield* Effect.promise(() =>
        agent.runAgent({ runId: "agui-run-custom" }, {
          onEvent: ({ event }) => {
            seen.push(event)
            if (event.type !== EventType.CUSTOM) return
            const custom = event as CustomEvent
            if (custom.name !== "tether.ApprovalRequested") return
            const { request } = custom.value as { readonly request: { readonly id: string; readonly runId: string } }
            answers.push(answer(base, key, request.runId, request.id, { decision: "allow" }))
          }
        })
      )
      const answered = yield* Effect.promise(() => Promise.all(answers))
      const custom = seen.flatMap((event) => event.type === EventType.CUSTOM ? [(event as CustomEvent).name] : [])
      const resolved = seen.find((event) =>
        event.type === EventType.CUSTOM && (event as CustomEvent).name === "tether.ApprovalResolved"
      ) as CustomEvent | undefined
      const created = Fs.existsSync(file)
      Fs.rmSync(sandbox, { recursive: true, force: true })
      expect({
        answered: answered.map(([status]) => status),
        custom,
        decision: (resolved?.value as { readonly decision?: { readonly _tag: string } })?.decision?._tag,
        last: seen.at(-1)?.type,
        created
      }).toEqual({
        answered: [204],
        custom: ["tether.ApprovalRequested", "tether.ApprovalResolved"],
        decision: "Allow",
        last: EventType.RUN_FINISHED,
        created: true
      })
    }))
})

layer(fixture, { excludeTestServices: true, timeout: 90_000 })("AG-UI around an approval and cancel", (it) => {
  it.effect("DELETE while an AG-UI run waits on an approval: a well-formed AG-UI run ending RUN_FINISHED(cancelled)", () =>
    Effect.gen(function*() {
      const { origin } = yield* Fixture
      const base = `${origin}/agent`
      const key = "alice/approvals-agui-cancel"
      const response = yield* Effect.promise(() =>
        fetch(`${base}/agui`, {
          method: "POST",
          headers: { ...json, ...alice, accept: "text/event-stream" },
          body: JSON.stringify({
            threadId: key,
            runId: "agui-run-2",
            messages: [{
              id: "m1",
              role: "user",
              content: `[bash] touch ${Os.tmpdir()}/tether-approvals-agui-cancel-${Date.now()}`
            }]
          })
        })
      )
      let deleted: number | undefined
      const frames = yield* readReacting(response, async (frames) => {
        if (deleted !== undefined || !frames.some((frame) => frame.data?.type === "TOOL_CALL_START")) return
        deleted = 0
        const snapshot = await fetch(`${base}/threads/${encodeURIComponent(key)}`, { headers: alice }).then((r) =>
          r.json() as Promise<{ readonly run: string }>
        )
        const events = await fetch(`${base}/threads/${encodeURIComponent(key)}/runs/${snapshot.run}/events`, {
          headers: alice
        })
        await readUntil(events, (frame) => frame.event === "ApprovalRequested")
        deleted = await fetch(`${base}/threads/${encodeURIComponent(key)}/runs/${snapshot.run}`, {
          method: "DELETE",
          headers: alice
        }).then((r) => r.status)
      })
      const sent = frames.flatMap((frame) => frame.data?.type === undefined ? [] : [frame.data])
      const { verifyEvents } = yield* Effect.promise(() => import("@ag-ui/client"))
      const { from, lastValueFrom, toArray } = yield* Effect.promise(() => import("rxjs"))
      const verified = yield* Effect.promise(() =>
        lastValueFrom(from(sent).pipe(verifyEvents(false), toArray())).then(
          () => "ok",
          (error: unknown) => String(error)
        )
      )
      expect(deleted).toBe(204)
      expect(verified).toBe("ok")
      expect(sent[0].type).toBe("RUN_STARTED")
      expect(sent.at(-1)).toMatchObject({ type: "RUN_FINISHED", outcome: { type: "cancelled" } })
    }))
})

layer(fixture, { excludeTestServices: true, timeout: 90_000 })("SSE cancel during an approval", (it) => {
  it.effect("DELETE while an SSE run waits on an approval: 204 and the run ends RunFinished(canceled)", () =>
    Effect.gen(function*() {
      const { origin } = yield* Fixture
      const base = `${origin}/agent`
      const key = "alice/approvals-sse-cancel"
      const response = yield* Effect.promise(() =>
        fetch(`${base}/threads/${encodeURIComponent(key)}/turns`, {
          method: "POST",
          headers: { ...json, ...alice },
          body: JSON.stringify({ input: `[bash] touch ${Os.tmpdir()}/tether-approvals-sse-cancel-${Date.now()}` })
        })
      )
      let deleted: number | undefined
      const frames = events(
        yield* readReacting(response, async (frames) => {
          const requested = frames.find((frame) => frame.event === "ApprovalRequested")
          if (deleted !== undefined || requested === undefined) return
          deleted = 0
          deleted = await fetch(
            `${base}/threads/${encodeURIComponent(key)}/runs/${requested.data.request.runId}`,
            { method: "DELETE", headers: alice }
          ).then((r) => r.status)
        })
      )
      const finished = frames.at(-1)!.data
      expect({ deleted, last: frames.at(-1)!.event, outcome: finished.outcome }).toEqual({
        deleted: 204,
        last: "RunFinished",
        outcome: "canceled"
      })
    }))
})

describe("an approval's deadline while the SSE client is away", () => {
  it.live(
    "the deadline answers; a reconnect within the grace gets ApprovalResolved(deadline) and the run's end",
    () =>
      Effect.gen(function*() {
        const { anthropic } = yield* Fixture
        const sandbox = yield* Harness.sandbox
        const agent = yield* issueAgent(anthropic.url, sandbox, "1 second")
        const server = yield* NodeHttpServer.make(() => Http.createServer(), { host: "127.0.0.1", port: 0 })
        yield* server.serve(
          yield* AgentHttp.router({
            agent,
            authorize,
            heartbeat: "200 millis",
            reconnectGrace: "15 seconds",
            threads: { idleTimeout: "1 second" }
          })
        )
        const origin = `http://127.0.0.1:${(server.address as { readonly port: number }).port}`
        const key = "alice/approvals-deadline"
        const dir = yield* Effect.sync(() => Fs.mkdtempSync(`${Os.tmpdir()}/tether-approvals-deadline-`))
        const file = `${dir}/approved.txt`
        const controller = new AbortController()
        const response = yield* Effect.promise(() =>
          fetch(`${origin}/threads/${encodeURIComponent(key)}/turns`, {
            method: "POST",
            headers: { ...json, ...alice },
            body: JSON.stringify({ input: `[bash] touch ${file}` }),
            signal: controller.signal
          })
        )
        const before = yield* Effect.promise(() =>
          readUntil(response, (frame) => frame.event === "ApprovalRequested").catch(() => [] as Array<Frame>)
        )
        controller.abort()
        const requested = before.find((frame) => frame.event === "ApprovalRequested")!
        const run = requested.data.request.runId as string
        const last = before.filter((frame) => frame.id !== undefined).at(-1)!.id!
        yield* Effect.sleep("2500 millis")
        const again = yield* Effect.promise(() =>
          fetch(`${origin}/threads/${encodeURIComponent(key)}/runs/${run}/events`, {
            headers: { ...alice, "last-event-id": last }
          })
        )
        expect(again.status).toBe(200)
        const after = events(yield* Effect.promise(() => readUntil(again)))
        Fs.rmSync(dir, { recursive: true, force: true })
        const resolved = after.filter((frame) => frame.event === "ApprovalResolved").map((frame) => frame.data)
        expect(resolved.map((r) => [r.decision._tag, r.by])).toEqual([["Deny", "deadline"]])
        expect(after.at(-1)!.data.outcome).toBe("success")
        expect(after.at(-1)!.data.result.text).toMatch(/^TOOL ERROR/)
      }).pipe(Effect.scoped, Effect.provide([fixture, IssueToolsLive, Harness.layer])),
    90_000
  )
})
