/**
 * A non-Effect host over a `ManagedRuntime` (docs/effect-apps-and-other-hosts.md,
 * examples/managed-runtime.ts): dispose while work is in flight, for-await over a run's and a
 * thread's streams, dispose twice / use after dispose. (A failed run's rejection with the typed
 * error is the example's own claim, run by test/examples.test.ts.)
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import { Profile } from "@tether/profile"
import { FakeCli, Harness, Reference } from "@tether/testing"
import { Tool, Toolkit } from "@tether/tool"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as NodePath from "node:path"

class Assistant extends Context.Tag("host/Assistant")<Assistant, Agent.Agent>() {}

interface Dirs {
  readonly base: string
  readonly root: string
  readonly workspace: string
  readonly selection: Profile.Selection
}

const makeDirs = (): Dirs => {
  const base = Fs.realpathSync(Fs.mkdtempSync(NodePath.join(Os.tmpdir(), "tether-mr-")))
  const source = NodePath.join(base, "source")
  const root = NodePath.join(base, "clones")
  const workspace = NodePath.join(base, "workspace")
  Fs.mkdirSync(source, { mode: 0o700 })
  Fs.mkdirSync(workspace)
  Fs.writeFileSync(NodePath.join(source, "settings.json"), "{}\n", { mode: 0o600 })
  return {
    base,
    root,
    workspace,
    selection: Profile.cloneFrom(source, root, { sessions: NodePath.join(base, "sessions") })
  }
}

const runtimeFor = (dirs: Dirs, driver: Parameters<typeof Agent.make>[0]["driver"] = FakeCli.driver()) =>
  ManagedRuntime.make(
    Agent.layer(Assistant, {
      driver,
      definition: { instructions: "", skills: [], tools: Toolkit.empty },
      workspace: dirs.workspace,
      profile: dirs.selection,
      processes: { killGrace: "300 millis", exitGrace: "300 millis" }
    }).pipe(
      Layer.provide(Harness.layer),
      Layer.provide(Logger.minimumLogLevel(LogLevel.None))
    )
  )

/** A runtime over a fresh agent for `body`; afterwards disposed, its directories removed. */
const hosted = (
  driver: Parameters<typeof Agent.make>[0]["driver"],
  body: (dirs: Dirs, runtime: ReturnType<typeof runtimeFor>) => Promise<void>
) =>
async () => {
  const dirs = makeDirs()
  const runtime = runtimeFor(dirs, driver)
  try {
    await body(dirs, runtime)
  } finally {
    await runtime.dispose()
    Fs.rmSync(dirs.base, { recursive: true, force: true })
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
const marked = (marker: string) => Effect.runSync(Harness.markedProcesses(marker))
const clones = (dirs: Dirs) => (Fs.existsSync(dirs.root) ? Fs.readdirSync(dirs.root) : [])
const waitFor = async (predicate: () => boolean, ms = 10_000) => {
  const until = Date.now() + ms
  while (!predicate()) {
    if (Date.now() > until) throw new Error("timed out waiting")
    await sleep(20)
  }
}
/** Settles `promise` within `ms`: "pending" when it did not. */
const settled = <A>(promise: Promise<A>, ms: number) =>
  Promise.race([
    promise.then((value) => ({ status: "resolved" as const, value }), (error: unknown) => ({
      status: "rejected" as const,
      error
    })),
    sleep(ms).then(() => ({ status: "pending" as const }))
  ])

/** The reference provider's answer: the prompt back, or for `hang` a delta and then nothing. */
const hangOr = (prompt: string): ReadonlyArray<Reference.Step> =>
  prompt === "hang" ? [{ _tag: "TextDelta", text: "before" }, { _tag: "$hang" }] : Reference.answer(prompt)
const liveDriver = () => Reference.driver({ live: true, respond: hangOr })

const hanging = FakeCli.script({ op: "text", text: "before" }, { op: "hang" })

describe("a non-Effect host over a ManagedRuntime", () => {
  it(
    "dispose while a run is pending: the promise settles, no process, no clone",
    hosted(FakeCli.driver(), async (dirs, runtime) => {
      const agent = await runtime.runPromise(Assistant)
      const pending = runtime.runPromise(Effect.flatMap(Assistant, (a) => a.run(hanging)))
      pending.catch(() => undefined)
      await waitFor(() => marked(agent.marker).length > 0)
      expect(clones(dirs)).toHaveLength(1)
      const disposed = await settled(runtime.dispose(), 10_000)
      expect(disposed.status).toBe("resolved")
      const outcome = await settled(pending, 3_000)
      expect(outcome.status).toBe("rejected")
      expect(String((outcome as { error: unknown }).error)).toMatch(/RunError|Canceled|interrupt/i)
      expect(marked(agent.marker)).toEqual([])
      expect(clones(dirs)).toEqual([])
    }),
    30_000
  )

  it(
    "dispose while a for-await over Stream.toAsyncIterable is reading: the loop ends, no process, no clone",
    hosted(FakeCli.driver(), async (dirs, runtime) => {
      const agent = await runtime.runPromise(Assistant)
      const seen: Array<string> = []
      const loop = (async () => {
        for await (const event of Stream.toAsyncIterable(agent.stream(hanging))) seen.push(event._tag)
      })()
      loop.catch(() => undefined)
      await waitFor(() => marked(agent.marker).length > 0 && seen.length > 0)
      const disposed = await settled(runtime.dispose(), 10_000)
      expect(disposed.status).toBe("resolved")
      const outcome = await settled(loop, 3_000)
      expect(outcome.status).toBe("rejected")
      expect(seen[seen.length - 1]).toBe("RunFinished")
      expect(marked(agent.marker)).toEqual([])
      expect(clones(dirs)).toEqual([])
    }),
    30_000
  )

  it(
    "breaking out of a for-await over a run's stream cancels its CLI; the agent runs on",
    hosted(FakeCli.driver(), async (_dirs, runtime) => {
      const agent = await runtime.runPromise(Assistant)
      for await (const event of Stream.toAsyncIterable(agent.stream(hanging))) {
        if (event._tag === "Notice" || event._tag === "TextDelta" || event._tag === "Message") break
      }
      // The break returned: the process is gone (or goes within its kill grace).
      await waitFor(() => marked(agent.marker).length === 0, 3_000)
      const result = await settled(
        runtime.runPromise(agent.run(FakeCli.script({ op: "result", text: "next" }))),
        10_000
      )
      expect(result).toMatchObject({ status: "resolved", value: { text: "next" } })
    }),
    30_000
  )

  it(
    "dispose twice resolves; a run after dispose rejects (AgentClosed on a kept agent), never hangs",
    hosted(FakeCli.driver(), async (dirs, runtime) => {
      const agent = await runtime.runPromise(Assistant)
      expect(await settled(runtime.dispose(), 10_000)).toMatchObject({ status: "resolved" })
      expect(await settled(runtime.dispose(), 3_000)).toMatchObject({ status: "resolved" })
      const viaRuntime = await settled(runtime.runPromise(Effect.flatMap(Assistant, (a) => a.run("x"))), 3_000)
      expect(viaRuntime.status).toBe("rejected")
      const kept = await settled(Effect.runPromise(Effect.flip(agent.run("x"))), 3_000)
      expect(kept).toMatchObject({ status: "resolved", value: { _tag: "AgentClosed" } })
      const keptStream = await settled(
        (async () => {
          for await (const _ of Stream.toAsyncIterable(agent.stream("x"))) void _
        })(),
        3_000
      )
      expect(keptStream.status).toBe("rejected")
      expect(clones(dirs)).toEqual([])
    }),
    30_000
  )

  it(
    "dispose while a live thread's turn is pending: the promise settles, no process, no clone",
    hosted(liveDriver(), async (dirs, runtime) => {
      const agent = await runtime.runPromise(Assistant)
      const thread = await runtime.runPromise(agent.thread("t-1"))
      expect((await runtime.runPromise(thread.run("hello"))).text).toBe("hello")
      const pending = runtime.runPromise(thread.run("hang"))
      pending.catch(() => undefined)
      await sleep(300)
      expect(marked(agent.marker).length).toBeGreaterThan(0)
      const disposed = await settled(runtime.dispose(), 15_000)
      expect(disposed.status).toBe("resolved")
      const outcome = await settled(pending, 3_000)
      expect(outcome.status).toBe("rejected")
      expect(marked(agent.marker)).toEqual([])
      expect(clones(dirs)).toEqual([])
      const after = await settled(Effect.runPromise(Effect.flip(thread.run("again"))), 3_000)
      expect(after.status).toBe("resolved")
    }),
    40_000
  )

  it(
    "a host that stops pulling a for-await iterator never holds dispose",
    hosted(FakeCli.driver(), async (dirs, runtime) => {
      const agent = await runtime.runPromise(Assistant)
      const iterator = Stream.toAsyncIterable(
        agent.stream(FakeCli.script({ op: "deltas", count: 2000 }, { op: "hang" }))
      )
        [Symbol.asyncIterator]()
      await iterator.next()
      await iterator.next()
      await waitFor(() => marked(agent.marker).length > 0)
      const started = Date.now()
      expect(await settled(runtime.dispose(), 10_000)).toMatchObject({ status: "resolved" })
      expect(Date.now() - started).toBeLessThan(5_000)
      expect(marked(agent.marker)).toEqual([])
      expect(clones(dirs)).toEqual([])
    }),
    30_000
  )

  it(
    "dispose while runAs is pending: it settles, no repair turn runs, nothing left",
    hosted(FakeCli.driver(), async (dirs, runtime) => {
      const agent = await runtime.runPromise(Assistant)
      const pending = runtime.runPromise(agent.runAs(Schema.Struct({ n: Schema.Number }), hanging))
      pending.catch(() => undefined)
      await waitFor(() => marked(agent.marker).length > 0)
      expect(await settled(runtime.dispose(), 10_000)).toMatchObject({ status: "resolved" })
      const outcome = await settled(pending, 3_000)
      expect(outcome.status).toBe("rejected")
      expect(marked(agent.marker)).toEqual([])
      expect(clones(dirs)).toEqual([])
    }),
    30_000
  )

  it(
    "dispose while the layer is still being built: the pending promise settles, nothing left",
    hosted(FakeCli.driver(), async (dirs, runtime) => {
      const pending = runtime.runPromise(Assistant)
      pending.catch(() => undefined)
      const disposed = await settled(runtime.dispose(), 10_000)
      expect(disposed.status).toBe("resolved")
      const outcome = await settled(pending, 3_000)
      expect(outcome.status).not.toBe("pending")
      if (outcome.status === "resolved") {
        expect(await settled(Effect.runPromise(Effect.flip(outcome.value.run("x"))), 3_000)).toMatchObject({
          status: "resolved",
          value: { _tag: "AgentClosed" }
        })
      }
      await sleep(200)
      expect(clones(dirs)).toEqual([])
    }),
    30_000
  )

  it(
    "an AbortSignal cancels a live thread's turn; the thread answers the next turn",
    hosted(liveDriver(), async (_dirs, runtime) => {
      const agent = await runtime.runPromise(Assistant)
      const thread = await runtime.runPromise(agent.thread("t-abort"))
      expect((await runtime.runPromise(thread.run("hello"))).text).toBe("hello")
      const controller = new AbortController()
      const pending = runtime.runPromise(thread.run("hang"), { signal: controller.signal })
      pending.catch(() => undefined)
      await sleep(300)
      controller.abort()
      expect((await settled(pending, 5_000)).status).toBe("rejected")
      const next = await settled(runtime.runPromise(thread.run("again")), 10_000)
      expect(next).toMatchObject({ status: "resolved", value: { text: "again" } })
    }),
    30_000
  )

  it("dispose is bounded by closeTimeout even when a tool handler ignores interruption", async () => {
    const dirs = makeDirs()
    const Stuck = Tool.make("stuck", {
      description: "Never returns.",
      input: {},
      output: Schema.Struct({ ok: Schema.Boolean }),
      revision: "stuck/v1"
    })
    const Tools = Toolkit.make(Stuck)
    let called = false
    const runtime = ManagedRuntime.make(
      Agent.layer(Assistant, {
        driver: FakeCli.driver(),
        definition: { instructions: "", skills: [], tools: Tools },
        workspace: dirs.workspace,
        profile: dirs.selection,
        processes: { killGrace: "300 millis", exitGrace: "300 millis" },
        closeTimeout: "1 second"
      }).pipe(
        Layer.provide(Tools.toLayer({
          stuck: () =>
            Effect.uninterruptible(Effect.zipRight(Effect.sync(() => (called = true)), Effect.never)).pipe(
              Effect.as({ ok: true })
            )
        })),
        Layer.provide(Harness.layer),
        Layer.provide(Logger.minimumLogLevel(LogLevel.None))
      )
    )
    try {
      const agent = await runtime.runPromise(Assistant)
      const pending = runtime.runPromise(agent.run(FakeCli.script({ op: "call", tool: "stuck" }, { op: "hang" })))
      pending.catch(() => undefined)
      await waitFor(() => called)
      const started = Date.now()
      const disposed = await settled(runtime.dispose(), 8_000)
      expect({ status: disposed.status, fast: Date.now() - started < 5_000 }).toEqual({
        status: "resolved",
        fast: true
      })
      expect((await settled(pending, 3_000)).status).toBe("rejected")
      expect(marked(agent.marker)).toEqual([])
    } finally {
      await runtime.dispose()
      Fs.rmSync(dirs.base, { recursive: true, force: true })
    }
  }, 30_000)

  it(
    "breaking out of a for-await over a live thread's stream cancels the turn; the thread runs on; dispose leaves nothing",
    hosted(liveDriver(), async (dirs, runtime) => {
      const agent = await runtime.runPromise(Assistant)
      const thread = await runtime.runPromise(agent.thread("t-break"))
      expect((await runtime.runPromise(thread.run("hello"))).text).toBe("hello")
      const broke = await settled(
        (async () => {
          for await (const event of Stream.toAsyncIterable(thread.stream("hang"))) {
            if (event._tag === "TextDelta") break
          }
        })(),
        10_000
      )
      expect(broke.status).toBe("resolved")
      const next = await settled(runtime.runPromise(thread.run("again")), 10_000)
      expect(next).toMatchObject({ status: "resolved", value: { text: "again" } })
      // An idle warm process: dispose stops it.
      expect(marked(agent.marker).length).toBeGreaterThan(0)
      expect(await settled(runtime.dispose(), 10_000)).toMatchObject({ status: "resolved" })
      expect(marked(agent.marker)).toEqual([])
      expect(clones(dirs)).toEqual([])
    }),
    40_000
  )

  it(
    "cancelling a ReadableStream reader of a run's stream stops its CLI",
    hosted(FakeCli.driver(), async (_dirs, runtime) => {
      const agent = await runtime.runPromise(Assistant)
      const reader = Stream.toReadableStream(agent.stream(hanging)).getReader()
      await reader.read()
      await waitFor(() => marked(agent.marker).length > 0)
      await reader.cancel()
      await waitFor(() => marked(agent.marker).length === 0, 3_000)
    }),
    30_000
  )

  for (const live of [false, true]) {
    it(
      `a for-await over a ${live ? "live" : "one-shot"} thread's events ends at dispose, after the turn's RunFinished`,
      hosted(
        live ? liveDriver() : Reference.driver({
          capabilities: { resume: true },
          respond: hangOr
        }),
        async (dirs, runtime) => {
          const agent = await runtime.runPromise(Assistant)
          const thread = await runtime.runPromise(agent.thread("t-events"))
          const seen: Array<string> = []
          const loop = (async () => {
            for await (const event of Stream.toAsyncIterable(thread.events)) seen.push(event._tag)
            return "ended"
          })()
          loop.catch(() => undefined)
          await sleep(200)
          const pending = runtime.runPromise(thread.run("hang"))
          pending.catch(() => undefined)
          await waitFor(() => seen.includes("TextDelta"))
          expect(await settled(runtime.dispose(), 10_000)).toMatchObject({ status: "resolved" })
          expect(await settled(loop, 3_000)).toMatchObject({ status: "resolved", value: "ended" })
          expect(seen[seen.length - 1]).toBe("RunFinished")
          expect(marked(agent.marker)).toEqual([])
          expect(clones(dirs)).toEqual([])
        }
      ),
      30_000
    )
  }

  it(
    "a thread-events subscriber that stopped pulling never holds dispose",
    hosted(liveDriver(), async (dirs, runtime) => {
      const agent = await runtime.runPromise(Assistant)
      const thread = await runtime.runPromise(agent.thread("t-stalled"))
      const iterator = Stream.toAsyncIterable(thread.events)[Symbol.asyncIterator]()
      const first = iterator.next()
      await sleep(200)
      const pending = runtime.runPromise(thread.run("hang"))
      pending.catch(() => undefined)
      await first
      await sleep(500)
      const started = Date.now()
      expect(await settled(runtime.dispose(), 10_000)).toMatchObject({ status: "resolved" })
      expect(Date.now() - started).toBeLessThan(5_000)
      expect((await settled(pending, 3_000)).status).toBe("rejected")
      expect(marked(agent.marker)).toEqual([])
      expect(clones(dirs)).toEqual([])
    }),
    30_000
  )
})
