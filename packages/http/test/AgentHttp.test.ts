/**
 * `AgentHttp.router` in a real server on 127.0.0.1 in front of the real Claude Code CLI
 * (offline, the scripted Anthropic server as the model), read with `fetch` as a browser would.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { describe, expect, it, layer } from "@effect/vitest"
import { AgentHttp } from "@tether/http"
import { Harness } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Scope from "effect/Scope"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Os from "node:os"
import { authorize, events, Fixture, layer as fixture, parseFrames, readReacting, readUntil } from "./support.js"

const alice = { authorization: "Bearer alice" }
const json = { "content-type": "application/json" }

const request = (path: string, init: RequestInit = {}) =>
  Effect.flatMap(Fixture, ({ origin }) => Effect.promise(() => fetch(`${origin}${path}`, init)))

const postTurn = (key: string, body: unknown, headers: Record<string, string> = alice, signal?: AbortSignal) =>
  request(`/agent/threads/${encodeURIComponent(key)}/turns`, {
    method: "POST",
    headers: { ...json, ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...(signal === undefined ? {} : { signal })
  })

const readAll = (response: Response) => Effect.promise(() => readUntil(response))

const errorOf = (response: Response) =>
  Effect.promise(async () => ({ status: response.status, body: await response.text() }))

/** Raw HTTP, to send what `fetch` will not (a body larger than declared, chunked bodies). */
const raw = (options: Http.RequestOptions, body: Buffer) =>
  Effect.flatMap(Fixture, ({ origin }) =>
    Effect.async<{ readonly status: number; readonly body: string }>((resume) => {
      const url = new URL(origin)
      const req = Http.request({ host: url.hostname, port: url.port, ...options }, (res) => {
        let text = ""
        res.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")))
        res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, body: text })))
      })
      req.on("error", () => resume(Effect.succeed({ status: 0, body: "" })))
      req.end(body)
    }))

/**
 * A POST of `total` bytes written in chunks of 16 KiB as the server takes them, chunked (no
 * declared length) unless `declared`; its answer, or status 0 when the connection failed before
 * one arrived. The client stops sending once answered, as a browser does.
 */
const largePost = (path: string, total: number, declared = false) =>
  Effect.flatMap(Fixture, ({ origin }) =>
    Effect.async<{ readonly status: number; readonly body: string }>((resume) => {
      const url = new URL(origin)
      let answered = false
      const req = Http.request({
        host: url.hostname,
        port: url.port,
        method: "POST",
        path,
        headers: {
          ...alice,
          ...json,
          ...(declared ? { "content-length": String(total) } : { "transfer-encoding": "chunked" })
        }
      }, (res) => {
        answered = true
        let text = ""
        res.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")))
        res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, body: text })))
        res.on("error", () => resume(Effect.succeed({ status: res.statusCode ?? 0, body: text })))
      })
      // Writes after the answer may fail (the server stops reading): only a missing answer counts.
      req.on("error", () => {
        if (!answered) resume(Effect.succeed({ status: 0, body: "" }))
      })
      const chunk = Buffer.alloc(16 * 1024, "a")
      let sent = 0
      const write = () => {
        while (sent < total && !answered && !req.destroyed) {
          sent += chunk.length
          if (!req.write(chunk)) return void req.once("drain", write)
        }
        if (!req.destroyed) req.end()
      }
      write()
      return Effect.sync(() => req.destroy())
    }))

/**
 * Polls until no process of the agent is left: a canceled run's CLI is stopped in the background,
 * and a thread's warm process once the router closed the thread's idle handle (1 s after its last
 * use in the fixture).
 */
const noProcessLeft = Effect.gen(function*() {
  const { agent } = yield* Fixture
  for (let i = 0; i < 200; i++) {
    if ((yield* Harness.markedProcesses(agent.marker)).length === 0) return true
    yield* Effect.sleep("50 millis")
  }
  return false
})

/** A router of the fixture's agent in a server of its own on 127.0.0.1, both in the current scope. */
const serve = (options: Omit<AgentHttp.Options<string, never>, "agent" | "authorize">) =>
  Effect.gen(function*() {
    const { agent } = yield* Fixture
    // The router inside the server's lifetime, as the fixture's.
    const server = yield* NodeHttpServer.make(() => Http.createServer(), { host: "127.0.0.1", port: 0 })
    yield* server.serve(yield* AgentHttp.router({ ...options, agent, authorize }))
    return `http://127.0.0.1:${(server.address as { readonly port: number }).port}`
  })

/** The `ProcessStarted` of a turn's frames. */
const processOf = (frames: ReadonlyArray<{ readonly event: string | undefined; readonly data: any }>) =>
  frames.find((frame) => frame.event === "ProcessStarted")!.data as { readonly pid: number; readonly reused?: boolean }

/** Polls until the process is gone. */
const gone = (pid: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 200; i++) {
      if (!(yield* Harness.isAlive(pid))) return true
      yield* Effect.sleep("50 millis")
    }
    return false
  })

/** Polls a thread until no run of it is going on (its snapshot has no `run`, or there is none). */
const runEnded = (path: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 600; i++) {
      const response = yield* request(path, { headers: alice })
      const body = yield* Effect.promise(() => response.text())
      if (response.status === 404 || (response.status === 200 && JSON.parse(body).run === undefined)) return
      yield* Effect.sleep("50 millis")
    }
    return yield* Effect.dieMessage(`a run of ${path} did not end`)
  })

layer(fixture, { excludeTestServices: true, timeout: 60_000 })(
  "AgentHttp over a real server and the real Claude CLI",
  (it) => {
    it.effect("a turn streams one SSE event per Tether event: id = sequence, ends after RunFinished", () =>
      Effect.gen(function*() {
        const response = yield* postTurn("alice/first", { input: "Is ISSUE-42 open?" })
        expect(response.status).toBe(200)
        expect(response.headers.get("content-type")).toBe("text/event-stream")
        const frames = events(yield* readAll(response))
        const tags = frames.map((frame) => frame.event)
        expect(tags[0]).toBe("RunStarted")
        expect(tags[tags.length - 1]).toBe("RunFinished")
        expect(tags.filter((tag) => tag === "RunFinished")).toHaveLength(1)
        for (const frame of frames) {
          expect(frame.event).toBe(frame.data._tag)
          expect(frame.id).toBe(String(frame.data.sequence))
        }
        const calls = frames.filter((frame) => frame.event === "ToolCall").map((frame) => frame.data)
        expect(calls.map((call) => [call.phase, call.name, call.source])).toEqual([
          ["start", "lookup_issue", "host"],
          ["end", "lookup_issue", "host"]
        ])
        expect(calls[0].input).toEqual({ key: "ISSUE-42" })
        expect(JSON.stringify(calls[1].output)).toContain("open")
        const finished = frames[frames.length - 1]!.data
        expect(finished.outcome).toBe("success")
        expect(finished.result.text).toBe("ISSUE-42 is open.")
        // What stays with the host: instructions and the provider's raw output.
        expect(frames[0]!.data.instructions).toBeUndefined()
        expect(finished.result.instructions).toBeUndefined()
        expect(Object.keys(finished.result.raw).sort()).toEqual(["stderrBytes", "stdoutBytes"])
        expect(JSON.stringify(frames)).not.toContain("You triage issues")
      }))

    it.effect("GET a thread's snapshot after a turn; a missing or foreign thread is the same 404", () =>
      Effect.gen(function*() {
        const snapshot = yield* request("/agent/threads/alice%2Ffirst", { headers: alice })
        expect(snapshot.status).toBe(200)
        expect(yield* Effect.promise(() => snapshot.json())).toMatchObject({
          key: "alice/first",
          provider: "claude",
          turns: 1
        })
        const missing = yield* errorOf(yield* request("/agent/threads/alice%2Fnever", { headers: alice }))
        const foreign = yield* errorOf(
          yield* request("/agent/threads/alice%2Ffirst", { headers: { authorization: "Bearer bob" } })
        )
        expect(missing.status).toBe(404)
        expect(foreign).toEqual(missing)
        const anonymous = yield* errorOf(yield* request("/agent/threads/alice%2Ffirst"))
        expect(anonymous.status).toBe(401)
        const forged = yield* errorOf(
          yield* request("/agent/threads/alice%2Ffirst", { headers: { authorization: "Bearer mallory" } })
        )
        expect(forged).toEqual(anonymous)
      }))

    it.effect("Last-Event-ID replays exactly the missed events of the run; a bad id is 400", () =>
      Effect.gen(function*() {
        const original = events(yield* readAll(yield* postTurn("alice/replay", { input: "Is ISSUE-42 open?" })))
        const runId = original[0]!.data.runId as string
        const path = `/agent/threads/alice%2Freplay/runs/${runId}/events`
        const cut = original.findIndex((frame) => frame.event === "ToolCall")
        const lastSeen = original[cut]!.id!
        const replayed = events(
          yield* readAll(yield* request(path, { headers: { ...alice, "last-event-id": lastSeen } }))
        )
        expect(replayed.map((frame) => frame.id)).toEqual(original.slice(cut + 1).map((frame) => frame.id))
        expect(replayed.map((frame) => frame.data)).toEqual(original.slice(cut + 1).map((frame) => frame.data))
        const whole = events(yield* readAll(yield* request(path, { headers: alice })))
        expect(whole.map((frame) => frame.id)).toEqual(original.map((frame) => frame.id))
        const bad = yield* errorOf(yield* request(path, { headers: { ...alice, "last-event-id": "seven" } }))
        expect(bad.status).toBe(400)
        expect(bad.body).not.toContain("seven")
        // Another principal, or another thread's path, cannot see the run.
        const foreign = yield* errorOf(yield* request(path, { headers: { authorization: "Bearer bob" } }))
        expect(foreign.status).toBe(404)
        const elsewhere = yield* errorOf(
          yield* request(`/agent/threads/alice%2Ffirst/runs/${runId}/events`, { headers: alice })
        )
        expect(elsewhere).toEqual(foreign)
      }))

    it.effect("a reader behind a 3-event buffer still gets the whole run; a reconnect after the buffer dropped the missed events is 410 (so is a read from the start), one within it gets the rest", () =>
      Effect.gen(function*() {
        const original = events(
          yield* readAll(
            yield* request("/small/threads/alice%2Fsmall/turns", {
              method: "POST",
              headers: { ...json, ...alice },
              body: JSON.stringify({ input: "Is ISSUE-42 open?" })
            })
          )
        )
        // The run waited for its reader: every event, in order, to its RunFinished.
        expect(original.at(-1)?.event).toBe("RunFinished")
        const ids = original.map((frame) => Number(frame.id))
        expect(ids).toEqual(ids.map((_, i) => i))
        const runId = original[0]!.data.runId as string
        yield* runEnded("/small/threads/alice%2Fsmall")
        // Its reader gone, the buffer keeps the last 3 events.
        const path = `/small/threads/alice%2Fsmall/runs/${runId}/events`
        const after = (id: number) => request(path, { headers: { ...alice, "last-event-id": String(id) } })
        const last = ids.at(-1)!
        const expired = yield* errorOf(yield* after(last - 4))
        expect(expired.status).toBe(410)
        expect(JSON.parse(expired.body).error.code).toBe("events_expired")
        const rest = events(yield* readAll(yield* after(last - 3)))
        expect(rest).toEqual(original.slice(-3))
        const tail = events(yield* readAll(yield* after(last - 1)))
        expect(tail.map((frame) => frame.event)).toEqual(["RunFinished"])
        // Without Last-Event-ID a reader asks for the run from its start, which left the buffer.
        const fromStart = yield* errorOf(yield* request(path, { headers: alice }))
        expect(fromStart.status).toBe(410)
        expect(JSON.parse(fromStart.body).error.code).toBe("events_expired")
      }))

    it.effect("an idle stream carries heartbeat comments", () =>
      Effect.gen(function*() {
        const frames = yield* readAll(yield* postTurn("alice/slow", { input: "[slow] take your time" }))
        expect(frames.some((frame) => frame.comment === "heartbeat")).toBe(true)
        expect(events(frames).at(-1)!.data.result.text).toBe("slow answer")
      }))

    it.effect("a second concurrent turn is 409 thread_busy; DELETE cancels the run, which ends with RunFinished(canceled)", () =>
      Effect.gen(function*() {
        const response = yield* postTurn("alice/busy", { input: "[hang] wait" })
        expect(response.status).toBe(200)
        const reading = yield* Effect.fork(readAll(response))
        const second = yield* errorOf(yield* postTurn("alice/busy", { input: "again" }))
        expect(second.status).toBe(409)
        expect(JSON.parse(second.body)).toEqual({
          error: { code: "thread_busy", message: "A turn is already running on this thread." }
        })
        const current = yield* request("/agent/threads/alice%2Fbusy", { headers: alice })
        const snapshot = yield* Effect.promise(() => current.json() as Promise<{ readonly run?: string }>)
        const runId = snapshot.run as string
        expect(typeof runId).toBe("string")
        const deleted = yield* request(`/agent/threads/alice%2Fbusy/runs/${runId}`, {
          method: "DELETE",
          headers: alice
        })
        expect(deleted.status).toBe(204)
        const frames = events(yield* Fiber.join(reading))
        const finished = frames.at(-1)!
        expect(finished.event).toBe("RunFinished")
        expect(finished.data.outcome).toBe("canceled")
        expect(yield* noProcessLeft).toBe(true)
        // The thread is free again.
        const after = events(yield* readAll(yield* postTurn("alice/busy", { input: "Is ISSUE-42 open?" })))
        expect(after.at(-1)!.data.outcome).toBe("success")
      }))

    it.effect("a client that disconnects mid-run: after the grace the run is canceled and nothing is left", () =>
      Effect.gen(function*() {
        const abort = new AbortController()
        const response = yield* postTurn("alice/gone", { input: "[hang] wait" }, alice, abort.signal)
        const seen = yield* Effect.promise(() => readUntil(response, (frame) => frame.event === "ProcessStarted"))
        const runId = seen[0]!.data.runId as string
        abort.abort()
        // Within the grace a reconnect still finds the running run…
        const path = `/agent/threads/alice%2Fgone/runs/${runId}/events`
        const again = yield* request(path, { headers: { ...alice, "last-event-id": seen.at(-1)!.id! } })
        expect(again.status).toBe(200)
        const resumed = yield* Effect.promise(() => readUntil(again, (frame) => frame.comment === "heartbeat"))
        expect(events(resumed).map((frame) => frame.event)).not.toContain("RunStarted")
        // …and once the last reader has gone for the grace, the run is canceled.
        const snapshotRun = Effect.flatMap(
          request("/agent/threads/alice%2Fgone", { headers: alice }),
          (r) =>
            Effect.promise(() =>
              r.status === 404
                ? Promise.resolve(undefined)
                : (r.json() as Promise<{ readonly run?: string }>).then((s) => s.run)
            )
        )
        let run: unknown = runId
        for (let i = 0; i < 100 && run !== undefined; i++) {
          yield* Effect.sleep("50 millis")
          run = yield* snapshotRun
        }
        expect(run).toBeUndefined()
        expect(yield* noProcessLeft).toBe(true)
        const ended = events(yield* readAll(yield* request(path, { headers: alice })))
        expect(ended.at(-1)!.data.outcome).toBe("canceled")
      }))

    it.effect("bad input gets a clear status and a fixed body that never echoes the request", () =>
      Effect.gen(function*() {
        const marker = "ECHO-MARKER-4d2c"
        const malformed = yield* errorOf(yield* postTurn("alice/bad", `{"input": "${marker}"`))
        expect(malformed.status).toBe(400)
        expect(JSON.parse(malformed.body).error.code).toBe("invalid_json")
        const shape = yield* errorOf(yield* postTurn("alice/bad", { inputs: marker }))
        expect(shape.status).toBe(400)
        expect(JSON.parse(shape.body).error.code).toBe("invalid_request")
        const form = yield* errorOf(
          yield* postTurn("alice/bad", `input=${marker}`, { ...alice, "content-type": "text/plain" })
        )
        expect(form.status).toBe(415)
        const large = yield* errorOf(yield* postTurn("alice/bad", { input: marker.repeat(1000) }))
        expect(large.status).toBe(413)
        // A chunked body (no declared length) is cut at the limit too.
        const chunked = yield* raw({
          method: "POST",
          path: "/agent/threads/alice%2Fbad/turns",
          headers: { ...alice, ...json, "transfer-encoding": "chunked" }
        }, Buffer.from(JSON.stringify({ input: marker.repeat(1000) })))
        expect(chunked.status).toBe(413)
        const unknown = yield* errorOf(yield* postTurn("alice/never", { input: marker, resumeOnly: true }))
        expect(unknown.status).toBe(404)
        const foreign = yield* errorOf(yield* postTurn("bob/x", { input: marker }))
        expect(foreign).toEqual(unknown)
        const anonymous = yield* errorOf(yield* postTurn("alice/bad", { input: marker }, {}))
        expect(anonymous.status).toBe(401)
        for (const answer of [malformed, shape, form, large, chunked, unknown, foreign, anonymous]) {
          expect(answer.body).not.toContain(marker)
          expect(answer.body).not.toContain("alice")
        }
        // Nothing ran: the thread has no record and no process is left.
        expect((yield* request("/agent/threads/alice%2Fbad", { headers: alice })).status).toBe(404)
        expect(yield* noProcessLeft).toBe(true)
      }))

    it.effect("a body far past the limit, chunked or declared, gets its 413 answer, not a reset", () =>
      Effect.gen(function*() {
        // The fixture's limit is 4 KiB: from past it to far past the hard cap and any socket buffer.
        for (const declared of [false, true]) {
          for (const total of [16 * 1024, 512 * 1024, 8 * 1024 * 1024]) {
            const answer = yield* largePost("/agent/threads/alice%2Fhuge/turns", total, declared)
            expect({ declared, total, status: answer.status }).toEqual({ declared, total, status: 413 })
            expect(JSON.parse(answer.body).error.code).toBe("body_too_large")
          }
        }
        // Nothing ran.
        expect((yield* request("/agent/threads/alice%2Fhuge", { headers: alice })).status).toBe(404)
      }))

    it.effect("a client that goes on sending after its 413 has the connection closed after a bounded time", () =>
      Effect.gen(function*() {
        const { origin } = yield* Fixture
        const url = new URL(origin)
        const keepAlive = yield* Effect.acquireRelease(
          Effect.sync(() => new Http.Agent({ keepAlive: true })),
          (agent) => Effect.sync(() => agent.destroy())
        )
        const outcome = yield* Effect.async<{ readonly status: number; readonly closedAfterMs: number }>((resume) => {
          let status = 0
          let answeredAt = 0
          const req = Http.request({
            host: url.hostname,
            port: url.port,
            method: "POST",
            path: "/agent/threads/alice%2Fendless/turns",
            // Keep-alive, as a browser's: the client does not close the connection itself.
            agent: keepAlive,
            headers: { ...alice, ...json, "transfer-encoding": "chunked" }
          }, (res) => {
            status = res.statusCode ?? 0
            answeredAt = Date.now()
            res.resume()
          })
          // Ignores the answer: 16 KiB every 20 ms, until the server closes the connection.
          const chunk = Buffer.alloc(16 * 1024, "a")
          const timer = setInterval(() => req.write(chunk), 20)
          req.on("socket", (socket) =>
            socket.on("close", () => {
              clearInterval(timer)
              resume(Effect.succeed({ status, closedAfterMs: answeredAt === 0 ? -1 : Date.now() - answeredAt }))
            }))
          req.on("error", () => undefined)
          return Effect.sync(() => {
            clearInterval(timer)
            req.destroy()
          })
        })
        expect(outcome.status).toBe(413)
        // Read and dropped for 5 seconds after the answer, then closed.
        expect(outcome.closedAfterMs).toBeGreaterThan(4_000)
        expect(outcome.closedAfterMs).toBeLessThan(15_000)
      }).pipe(Effect.scoped))

    it.effect("closing the router's scope cancels its runs and ends their streams", () =>
      Effect.gen(function*() {
        const { agent } = yield* Fixture
        const scope = yield* Scope.make()
        const origin = yield* Effect.gen(function*() {
          // The router inside the server's lifetime: closing cancels the runs, so the server's
          // close does not wait for their open event streams.
          const server = yield* NodeHttpServer.make(() => Http.createServer(), { host: "127.0.0.1", port: 0 })
          yield* server.serve(yield* AgentHttp.router({ agent, authorize }))
          return `http://127.0.0.1:${(server.address as { readonly port: number }).port}`
        }).pipe(Scope.extend(scope))
        const response = yield* Effect.promise(() =>
          fetch(`${origin}/threads/alice%2Fclosing/turns`, {
            method: "POST",
            headers: { ...json, ...alice },
            body: JSON.stringify({ input: "[hang] wait" })
          })
        )
        const reader = response.body!.getReader()
        const decoder = new TextDecoder()
        let text = ""
        while (!text.includes("event: ProcessStarted")) {
          text += decoder.decode((yield* Effect.promise(() => reader.read())).value)
        }
        yield* Scope.close(scope, Exit.void)
        // The stream ends (the connection closes) and the CLI is gone.
        for (;;) {
          const chunk = yield* Effect.promise(() => reader.read().catch(() => ({ done: true, value: undefined })))
          if (chunk.done) break
        }
        expect(yield* noProcessLeft).toBe(true)
      }))

    it.effect("a provider failure streams RunFinished(failure) and the stream still ends cleanly", () =>
      Effect.gen(function*() {
        const frames = events(yield* readAll(yield* postTurn("alice/fail", { input: "[fail] now" })))
        const finished = frames.at(-1)!
        expect(finished.event).toBe("RunFinished")
        expect(finished.data.outcome).toBe("failure")
      }))

    it.effect("an approval answered by POST: foreign or unknown ids are 404, the first answer wins, a second is 409", () =>
      Effect.gen(function*() {
        const { origin } = yield* Fixture
        const sandbox = yield* Effect.sync(() => Fs.mkdtempSync(`${Os.tmpdir()}/tether-http-approval-`))
        const file = `${sandbox}/approved.txt`
        const answers: Array<readonly [string, number, string]> = []
        const answer = (key: string, run: string, id: string, body: unknown, headers: Record<string, string>) =>
          fetch(`${origin}/agent/threads/${encodeURIComponent(key)}/runs/${run}/approvals/${id}`, {
            method: "POST",
            headers: { ...json, ...headers },
            body: JSON.stringify(body)
          }).then(async (response) => [response.status, await response.text()] as const)
        const response = yield* postTurn("alice/approvals", { input: `[bash] touch ${file}` })
        expect(response.status).toBe(200)
        // Keep reading while answering: the run belongs to a reader.
        const frames = yield* readReacting(response, async (frames) => {
          const requested = frames.find((frame) => frame.event === "ApprovalRequested")
          if (requested === undefined || answers.length > 0) return
          const { id, runId } = requested.data.request
          const attempts: ReadonlyArray<readonly [string, string, unknown, Record<string, string>]> = [
            ["bob", id, { decision: "allow" }, { authorization: "Bearer bob" }],
            ["unknown id", "not-an-id", { decision: "allow" }, alice],
            ["bad body", id, { decision: "maybe" }, alice],
            ["alice", id, { decision: "allow" }, alice],
            ["alice again", id, { decision: "deny", message: "no" }, alice]
          ]
          for (const [label, approval, body, headers] of attempts) {
            const [status, reply] = await answer("alice/approvals", runId, approval, body, headers)
            answers.push([label, status, reply])
          }
        })
        expect(answers.map(([label, status]) => [label, status])).toEqual([
          ["bob", 404],
          ["unknown id", 404],
          ["bad body", 400],
          ["alice", 204],
          ["alice again", 409]
        ])
        expect(answers[4]![2]).toContain("approval_resolved")
        const resolved = frames.filter((frame) => frame.event === "ApprovalResolved").map((frame) => frame.data)
        expect(resolved.map((r) => [r.decision._tag, r.by])).toEqual([["Allow", "host"]])
        expect(frames.at(-1)!.data.result.text).toMatch(/^TOOL OK/)
        expect(Fs.existsSync(file)).toBe(true)
        Fs.rmSync(sandbox, { recursive: true, force: true })
      }))

    it.effect("input POSTed into a running turn reaches it; a foreign, unknown or ended run and a bad body are refused", () =>
      Effect.gen(function*() {
        const { origin } = yield* Fixture
        const send = (key: string, run: string, body: unknown, headers: Record<string, string> = alice) =>
          fetch(`${origin}/agent/threads/${encodeURIComponent(key)}/runs/${run}/input`, {
            method: "POST",
            headers: { ...json, ...headers },
            body: JSON.stringify(body)
          }).then(async (response) => [response.status, await response.text()] as const)
        const replies: Array<readonly [string, number, string]> = []
        const response = yield* postTurn("alice/steer", { input: "[slow] Hello." })
        expect(response.status).toBe(200)
        let runId = ""
        // Keep reading while sending: the run belongs to a reader. The model takes a second to
        // answer the first prompt: input sent meanwhile is queued into the same turn.
        const frames = events(
          yield* readReacting(response, async (frames) => {
            if (replies.length > 0 || !frames.some((frame) => frame.event === "SessionStarted")) return
            runId = frames.find((frame) => frame.event === "RunStarted")!.data.runId
            const attempts: ReadonlyArray<readonly [string, string, string, unknown, Record<string, string>]> = [
              ["bob", "alice/steer", runId, { input: "x" }, { authorization: "Bearer bob" }],
              ["unknown run", "alice/steer", "not-a-run", { input: "x" }, alice],
              ["other thread", "alice/other", runId, { input: "x" }, alice],
              ["bad body", "alice/steer", runId, { text: "x" }, alice],
              ["alice", "alice/steer", runId, { input: "Is ISSUE-42 open?" }, alice]
            ]
            for (const [label, key, run, body, headers] of attempts) {
              const [status, reply] = await send(key, run, body, headers)
              replies.push([label, status, reply])
            }
          })
        )
        expect(replies.map(([label, status]) => [label, status])).toEqual([
          ["bob", 404],
          ["unknown run", 404],
          ["other thread", 404],
          ["bad body", 400],
          ["alice", 200]
        ])
        expect(JSON.parse(replies[4]![2])).toEqual({ delivery: "Queued" })
        expect(frames.filter((frame) => frame.event === "InputDelivered").map((frame) => frame.data)).toMatchObject([
          { runId, text: "Is ISSUE-42 open?", delivery: "Queued" }
        ])
        // The same turn went on to answer the queued input.
        expect(frames.at(-1)!.data).toMatchObject({ outcome: "success", result: { text: "ISSUE-42 is open." } })
        const [status, reply] = yield* Effect.promise(() => send("alice/steer", runId, { input: "too late" }))
        expect([status, JSON.parse(reply).error.code]).toEqual([409, "no_active_turn"])
      }))

    it.effect("a reconnect grace of 0 still lets the client that started a turn read all of it", () =>
      Effect.gen(function*() {
        // The requester is the run's reader from the start, not from its response's first read.
        const origin = yield* serve({ reconnectGrace: 0 })
        const response = yield* Effect.promise(() =>
          fetch(`${origin}/threads/alice%2Fgrace0/turns`, {
            method: "POST",
            headers: { ...json, ...alice },
            body: JSON.stringify({ input: "Is ISSUE-42 open?" })
          })
        )
        expect(response.status).toBe(200)
        const frames = events(yield* readAll(response))
        expect(frames.map((frame) => frame.event)).toContain("ToolCall")
        expect(frames.at(-1)!.data.outcome).toBe("success")
        expect(frames.at(-1)!.data.result.text).toBe("ISSUE-42 is open.")
      }).pipe(Effect.scoped))

    it.effect("a thread's turns over HTTP run on its warm process, a snapshot between them keeps it, its idle handle closes it", () =>
      Effect.gen(function*() {
        const first = processOf(events(yield* readAll(yield* postTurn("alice/warm", { input: "Is ISSUE-42 open?" }))))
        expect(first.reused).toBeUndefined()
        const snapshot = yield* request("/agent/threads/alice%2Fwarm", { headers: alice })
        expect(yield* Effect.promise(() => snapshot.json())).toMatchObject({ key: "alice/warm", turns: 1 })
        const second = events(yield* readAll(yield* postTurn("alice/warm", { input: "Is ISSUE-42 open?" })))
        expect(processOf(second)).toMatchObject({ pid: first.pid, reused: true })
        expect(second.at(-1)!.data.outcome).toBe("success")
        // Unused for the router's idle timeout (1 s here), the thread's handle closes and its warm
        // process ends.
        expect(yield* gone(first.pid)).toBe(true)
      }))

    it.effect("past threads.max open keys the least recently used idle one is closed, its warm process with it", () =>
      Effect.gen(function*() {
        const origin = yield* serve({ threads: { max: 1 } })
        const turn = (key: string) =>
          Effect.promise(() =>
            fetch(`${origin}/threads/${encodeURIComponent(key)}/turns`, {
              method: "POST",
              headers: { ...json, ...alice },
              body: JSON.stringify({ input: "Is ISSUE-42 open?" })
            }).then((response) => readUntil(response))
          ).pipe(Effect.map((frames) => processOf(events(frames))))
        const a = yield* turn("alice/lru-a")
        expect(yield* turn("alice/lru-a")).toMatchObject({ pid: a.pid, reused: true })
        const b = yield* turn("alice/lru-b")
        expect(b.pid).not.toBe(a.pid)
        // Opening `lru-b` closed the idle `lru-a` (the default idle timeout is minutes).
        expect(yield* gone(a.pid)).toBe(true)
        const again = yield* turn("alice/lru-a")
        expect(again.reused).toBeUndefined()
        expect(again.pid).not.toBe(a.pid)
      }).pipe(Effect.scoped))

    it.effect("thread keys of any length work on every route; a path that does not decode is 400, one that is no route a JSON 404", () =>
      Effect.gen(function*() {
        // Longer than find-my-way's 100-character parameters, with characters that are encoded.
        const key = `alice/long-${"κ/%".repeat(700)}`
        const path = `/agent/threads/${encodeURIComponent(key)}`
        const frames = events(yield* readAll(yield* postTurn(key, { input: "Is ISSUE-42 open?" })))
        expect(frames.at(-1)!.data.outcome).toBe("success")
        const runId = frames[0]!.data.runId as string
        const snapshot = yield* request(path, { headers: alice })
        expect(snapshot.status).toBe(200)
        expect(yield* Effect.promise(() => snapshot.json())).toMatchObject({ key, turns: 1 })
        const replayed = events(yield* readAll(yield* request(`${path}/runs/${runId}/events`, { headers: alice })))
        expect(replayed.map((frame) => frame.id)).toEqual(frames.map((frame) => frame.id))
        const deleted = yield* request(`${path}/runs/${runId}`, { method: "DELETE", headers: alice })
        expect(deleted.status).toBe(204)
        // The key's authorization still applies.
        const foreign = yield* errorOf(yield* request(path, { headers: { authorization: "Bearer bob" } }))
        expect(foreign.status).toBe(404)
        const malformed = yield* errorOf(
          yield* request("/agent/threads/alice%2Fbad%E0%A4/turns", { method: "POST", headers: { ...json, ...alice } })
        )
        expect(malformed.status).toBe(400)
        expect(JSON.parse(malformed.body)).toEqual({
          error: { code: "invalid_path", message: "The request path is not valid percent-encoding." }
        })
        const anonymous = yield* errorOf(yield* request("/agent/threads/alice%2Fbad%E0%A4/turns", { method: "POST" }))
        expect(anonymous.status).toBe(401)
        for (const [method, route] of [["GET", "/alice%2Fx/nope"], ["GET", "/alice%2Fx/turns"], ["POST", ""]]) {
          const none = yield* errorOf(yield* request(`/agent/threads${route}`, { method, headers: alice }))
          expect(none.status).toBe(404)
          expect(JSON.parse(none.body).error.code).toBe("not_found")
        }
      }))
  }
)

describe("parseFrames", () => {
  it("reads ids, events, data and comments", () => {
    expect(parseFrames("id: 3\nevent: TextDelta\ndata: {\"a\":1}\n\n: heartbeat\n\n")).toEqual([
      { id: "3", event: "TextDelta", data: { a: 1 }, comment: undefined },
      { id: undefined, event: undefined, data: undefined, comment: "heartbeat" }
    ])
  })
})
