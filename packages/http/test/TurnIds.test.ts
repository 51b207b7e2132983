/**
 * A turn's `id` in `POST …/turns`: a client (or its browser, which resends a POST whose reused
 * connection dropped before any answer) that sends the same request again reads the turn the first
 * one started, instead of `409 thread_busy` while that turn runs on unread until the reconnect
 * grace cancels it. Real HTTP on 127.0.0.1, the fake CLI as the provider.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpRouter from "@effect/platform/HttpRouter"
import { describe, expect, it } from "@effect/vitest"
import { Agent, ThreadStore } from "@tether/core"
import { AgentHttp } from "@tether/http"
import { FakeCli, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Http from "node:http"
import { events, parseFrames, readUntil } from "./support.js"

type ErrorBody = { readonly error: { readonly code: string } }

const authorize = () => Effect.succeed({ principal: "p", threads: () => true })

/**
 * A router over a fresh agent (resumable fake CLI) on a real server; its origin. `delay`: the
 * store takes that long to grant a thread's lease (a remote store), so a turn starts that late.
 */
const serve = (
  options: {
    readonly retention?: Duration.DurationInput
    readonly delay?: Duration.DurationInput
    readonly grace?: Duration.DurationInput
  } = {}
) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const memory = Context.get(yield* Layer.build(ThreadStore.layerMemory), ThreadStore.ThreadStore)
    const delay = options.delay
    const store: Context.Tag.Service<ThreadStore.ThreadStore> = delay === undefined ? memory : {
      ...memory,
      acquire: (key, ttl) => Effect.zipRight(Effect.sleep(delay), memory.acquire(key, ttl))
    }
    const agent = yield* Agent.make({
      driver: FakeCli.driver({ capabilities: { resume: true } }),
      definition: { instructions: "", skills: [], tools: Toolkit.empty },
      workspace: sandbox.workspace,
      profile: sandbox.selection
    }).pipe(Effect.provideService(ThreadStore.ThreadStore, store))
    const server = yield* NodeHttpServer.make(() => Http.createServer(), { host: "127.0.0.1", port: 0 })
    const router = yield* AgentHttp.router({
      agent,
      authorize,
      reconnectGrace: options.grace ?? "3 seconds",
      retention: options.retention ?? "30 seconds"
    })
    yield* server.serve(HttpRouter.empty.pipe(HttpRouter.mount("/agent", router)))
    const address = server.address
    if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("not a TCP address")
    return `http://127.0.0.1:${address.port}/agent`
  })

const post = (url: string, body: unknown) =>
  Effect.promise(() =>
    fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
  )

/** The events of a whole SSE answer. */
const read = (response: Response) => Effect.map(Effect.promise(() => readUntil(response)), events)

/** The thread's snapshot. */
const snapshot = (origin: string) => Effect.promise(() => fetch(`${origin}/threads/t`).then((r) => r.json()))

/**
 * Sends the POST and drops its connection before the client read a byte of the answer: once the
 * server has started answering (the run started), or after `after` ms (the run may not have
 * started yet); whether an answer had begun. What a browser meets when a reused connection resets.
 */
const postAndDrop = (url: string, body: unknown, after?: number) =>
  Effect.async<boolean>((resume) => {
    let answered = false
    const request = Http.request(url, { method: "POST", headers: { "content-type": "application/json" } })
    request.on("response", (response) => {
      answered = true
      response.destroy()
      if (after === undefined) {
        request.destroy()
        resume(Effect.succeed(true))
      }
    })
    request.on("error", () => undefined)
    request.end(JSON.stringify(body))
    if (after === undefined) return
    const timer = setTimeout(() => {
      request.destroy()
      resume(Effect.succeed(answered))
    }, after)
    return Effect.sync(() => clearTimeout(timer))
  })

const slow = FakeCli.script({ op: "text", text: "part-A" }, { op: "sleep", ms: 1_500 }, { op: "text", text: "part-B" })

const text = (frames: ReadonlyArray<{ readonly event: string | undefined; readonly data: any }>) =>
  frames.filter((f) => f.event === "TextDelta").map((f) => f.data.text).join("")

const long = FakeCli.script({ op: "text", text: "A" }, { op: "sleep", ms: 8_000 }, { op: "text", text: "B" })

/** How long (ms) until thread `t` takes a new turn (a busy thread answers 409 thread_busy). */
const freeAfter = (origin: string) =>
  Effect.gen(function*() {
    const since = Date.now()
    for (let i = 0; i < 75; i++) {
      const next = yield* post(`${origin}/threads/t/turns`, {
        input: FakeCli.script({ op: "text", text: "ok" }),
        id: `probe-${i}`
      })
      if (next.status === 200) {
        expect((yield* read(next)).at(-1)!.data.outcome).toBe("success")
        return Date.now() - since
      }
      yield* Effect.promise(() => next.text())
      yield* Effect.sleep("200 millis")
    }
    return Infinity
  })

describe("POST …/turns with the turn's id", () => {
  it.live(
    "sent again while its turn runs: reads that turn from its first event, and it runs once",
    () =>
      Effect.gen(function*() {
        const origin = yield* serve()
        const body = { input: slow, id: "msg-1" }
        expect(yield* postAndDrop(`${origin}/threads/t/turns`, body)).toBe(true)
        const again = yield* post(`${origin}/threads/t/turns`, body)
        expect(again.status).toBe(200)
        const frames = yield* read(again)
        const tags = frames.map((f) => f.event)
        expect(tags[0]).toBe("RunStarted")
        expect(tags.filter((t) => t === "RunStarted")).toHaveLength(1)
        expect(tags.at(-1)).toBe("RunFinished")
        expect(frames.at(-1)!.data.outcome).toBe("success")
        expect(frames.map((f) => Number(f.id))).toEqual(frames.map((_, i) => i))
        expect(text(frames)).toBe("part-Apart-B")
        expect(yield* snapshot(origin)).toMatchObject({ turns: 1 })
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )

  it.live(
    "sent again after its run ended: the same run once more while retained, then 409 turn_committed",
    () =>
      Effect.gen(function*() {
        const origin = yield* serve({ retention: "1 second" })
        const body = { input: FakeCli.script({ op: "text", text: "done" }), id: "msg-2" }
        const first = yield* read(yield* post(`${origin}/threads/t/turns`, body))
        const replayed = yield* read(yield* post(`${origin}/threads/t/turns`, body))
        expect(replayed.map((f) => [f.id, f.event])).toEqual(first.map((f) => [f.id, f.event]))
        expect(replayed[0]!.data.runId).toBe(first[0]!.data.runId)
        // Past the run's retention the router forgot it; the thread's record still carries the id.
        yield* Effect.sleep("1500 millis")
        const late = yield* post(`${origin}/threads/t/turns`, body)
        expect(late.status).toBe(409)
        expect(yield* Effect.promise(() => late.json())).toEqual({
          error: { code: "turn_committed", message: "The turn with this id is already committed." }
        })
        // Another id is another turn.
        const next = yield* post(`${origin}/threads/t/turns`, { ...body, id: "msg-3" })
        expect(next.status).toBe(200)
        expect((yield* read(next)).at(-1)!.data.outcome).toBe("success")
        expect(yield* snapshot(origin)).toMatchObject({ turns: 2 })
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )

  it.live(
    "sent again after a drop before its turn started: reads that turn, which the drop did not cancel",
    () =>
      Effect.gen(function*() {
        const origin = yield* serve({ delay: "1500 millis", grace: "5 seconds" })
        const body = { input: FakeCli.script({ op: "text", text: "answer" }), id: "msg-4" }
        // Dropped while the turn waits for its lease: no answer was written yet.
        expect(yield* postAndDrop(`${origin}/threads/t/turns`, body, 400)).toBe(false)
        const frames = yield* read(yield* post(`${origin}/threads/t/turns`, body))
        expect(frames.at(-1)!.data.outcome).toBe("success")
        expect(text(frames)).toBe("answer")
        expect(yield* snapshot(origin)).toMatchObject({ turns: 1 })
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )

  it.live(
    "a resend waiting for its turn's start is its reader: a start longer than the grace is not canceled",
    () =>
      Effect.gen(function*() {
        // The resend arrives while the first request still waits; then the first one drops.
        const origin = yield* serve({ delay: "2500 millis", grace: "500 millis" })
        const body = { input: FakeCli.script({ op: "text", text: "answer" }), id: "msg-5" }
        const first = yield* Effect.fork(postAndDrop(`${origin}/threads/t/turns`, body, 600))
        yield* Effect.sleep("200 millis")
        const again = yield* post(`${origin}/threads/t/turns`, body)
        expect(yield* first).toBe(false)
        expect(again.status).toBe(200)
        expect((yield* read(again)).at(-1)!.data.outcome).toBe("success")
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )

  it.live(
    "a drop before its turn started, and no resend: the grace cancels the turn (it does not run on)",
    () =>
      Effect.gen(function*() {
        const origin = yield* serve({ delay: "800 millis", grace: "600 millis" })
        expect(yield* postAndDrop(`${origin}/threads/t/turns`, { input: long, id: "m1" }, 300)).toBe(false)
        // The turn (8 s) is canceled once the grace passed: the thread is free well before its end.
        expect(yield* freeAfter(origin)).toBeLessThan(5_000)
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )

  it.live(
    "a resend that waits for the start and then drops too: the grace cancels the turn",
    () =>
      Effect.gen(function*() {
        const origin = yield* serve({ delay: "1500 millis", grace: "400 millis" })
        const body = { input: long, id: "m2" }
        expect(yield* postAndDrop(`${origin}/threads/t/turns`, body, 200)).toBe(false)
        expect(yield* postAndDrop(`${origin}/threads/t/turns`, body, 300)).toBe(false)
        expect(yield* freeAfter(origin)).toBeLessThan(5_000)
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )

  it.live(
    "without an id, a drop before the turn started cancels it at once (as before ids)",
    () =>
      Effect.gen(function*() {
        const origin = yield* serve({ delay: "800 millis", grace: "10 seconds" })
        expect(yield* postAndDrop(`${origin}/threads/t/turns`, { input: long }, 300)).toBe(false)
        expect(yield* freeAfter(origin)).toBeLessThan(5_000)
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )

  it.live(
    "the same id with another request is 409 turn_id_reused; an id that is not printable ASCII is 400",
    () =>
      Effect.gen(function*() {
        const origin = yield* serve()
        const running = yield* post(`${origin}/threads/t/turns`, { input: slow, id: "msg-1" })
        expect(running.status).toBe(200)
        for (const other of [{ input: "other", id: "msg-1" }, { input: slow, id: "msg-1", resumeOnly: true }]) {
          const reused = yield* post(`${origin}/threads/t/turns`, other)
          expect(reused.status).toBe(409)
          expect((yield* Effect.promise(() => reused.json() as Promise<ErrorBody>)).error.code).toBe("turn_id_reused")
        }
        for (const id of ["", "a b", "é", "x".repeat(129), 7]) {
          const invalid = yield* post(`${origin}/threads/u/turns`, { input: "x", id })
          expect(invalid.status).toBe(400)
          expect((yield* Effect.promise(() => invalid.json() as Promise<ErrorBody>)).error.code).toBe("invalid_request")
        }
        expect(text(yield* read(running))).toBe("part-Apart-B")
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )

  it.live(
    "a turn that could not start is forgotten: sent again once the thread is free, it runs",
    () =>
      Effect.gen(function*() {
        const origin = yield* serve()
        const running = yield* post(`${origin}/threads/t/turns`, { input: slow })
        const reader = read(running)
        const busy = yield* post(`${origin}/threads/t/turns`, { input: "x", id: "msg-9" })
        expect(busy.status).toBe(409)
        expect((yield* Effect.promise(() => busy.json() as Promise<ErrorBody>)).error.code).toBe("thread_busy")
        yield* reader
        const later = yield* post(`${origin}/threads/t/turns`, {
          input: FakeCli.script({ op: "text", text: "ok" }),
          id: "msg-9"
        })
        expect(later.status).toBe(200)
        const frames = parseFrames(yield* Effect.promise(() => later.text()))
        expect(text(events(frames))).toBe("ok")
      }).pipe(Effect.scoped, Effect.provide(Harness.layer)),
    60_000
  )
})
