/**
 * A fleet: PostgreSQL (the run's throwaway server) and runner processes on 127.0.0.1, each running
 * real agents, driven from this process as a client-only member of the cluster, with the tuned
 * timing (`Runner.tuned`, 5 s thread leases). First the fake CLI through each runner's own gateway;
 * then the real Claude Code CLI (pinned in node_modules) offline, against the scripted Anthropic
 * server in this process. One file, so its runner processes never compete with each other's.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { PgClient } from "@effect/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import { Runner, ThreadEntity } from "@tether/cluster"
import type { Result, ThreadStore } from "@tether/core"
import { Profile } from "@tether/profile"
import { AnthropicServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as Fixture from "./fixtures/agent.js"
import {
  fleetState,
  freePort,
  ownerOf,
  reservePort,
  type RunnerProcess,
  startRunner,
  waitForShares,
  waitUntil
} from "./fixtures/fleet.js"
import * as Postgres from "./fixtures/postgres.js"

const timing = "tuned"
const leaseTtl = "5 seconds"

const sandbox = Effect.acquireRelease(
  Effect.sync(Fixture.makeDirs),
  (dirs) => Effect.sync(() => Fixture.removeDirs(dirs))
)

/** This process as a client-only member of the fleet on `url`. */
const member = (url: string) =>
  Runner.layerClient({ timing: Runner.tuned }).pipe(
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: 4 }).pipe(Layer.orDie))
  )

/** The agent processes (CLIs and their children) of the runner process `pid`, found by marker. */
const markedBy = (pid: number) => Fixture.processesMentioning(`TETHER_AGENT_MARKER=${pid}-`)

/** The execution clones under the fleet's root whose owner is the runner process `pid`. */
const clonesOf = (dirs: Fixture.Dirs, pid: number) =>
  Effect.map(
    Effect.orDie(Profile.inspect(Profile.cloneFrom(dirs.source, dirs.root), Fixture.driver.layout)),
    (inspection) => inspection.clones.filter((clone) => clone.pid === pid)
  ).pipe(Effect.provide(NodeContext.layer))

/** Runners on the ports reserved for them, each reservation released just before its runner starts. */
const startFleet = (
  dirs: Fixture.Dirs,
  url: string,
  members: ReadonlyArray<{ readonly name: string; readonly port: Reserved }>
) =>
  Effect.all(
    members.map(({ name, port }) =>
      Effect.zipRight(
        Effect.promise(port.release),
        startRunner({ name, port: port.port, databaseUrl: url, dirs, timing, leaseTtl, reapInterval: "1 second" })
      )
    ),
    { concurrency: "unbounded" }
  )

/** A failure shows what the runners said. */
const showingOutput = (runners: ReadonlyArray<RunnerProcess>) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.tapErrorCause(
    effect,
    () => Effect.sync(() => runners.forEach((runner) => console.log(`--- ${runner.name}:\n${runner.output()}`)))
  )

type Reserved = Effect.Effect.Success<ReturnType<typeof reserve>>
const reserve = () => Effect.acquireRelease(Effect.promise(reservePort), (port) => Effect.promise(port.release))

/**
 * Ten thread keys for runners on `ports` (r1, r2, then r3 joining): 3 whose shards move to r3 when
 * it joins, and 7 that stay, 4 of them on r1 and 3 on r2 before r3 joins. Which runner serves which
 * shard hangs on the runners' addresses (a hash ring over them), so fixed keys would all stay on
 * r1 and r2 in about (2/3)^10 of runs; keys picked for the ports the runners will have never do.
 */
const keysFor = (ports: readonly [number, number, number]) => {
  const before = ownerOf([ports[0], ports[1]])
  const after = ownerOf(ports)
  const moving: Array<string> = []
  const onFirst: Array<string> = []
  const onSecond: Array<string> = []
  for (let i = 0; moving.length < 3 || onFirst.length < 4 || onSecond.length < 3; i++) {
    const key = `tenant-${i}/issue-${100 + i}`
    const [list, room] = after(key) === ports[2]
      ? [moving, 3]
      : before(key) === ports[0]
      ? [onFirst, 4]
      : [onSecond, 3]
    if (list.length < room) list.push(key)
  }
  return { keys: [...moving, ...onFirst, ...onSecond], moving }
}

describe("a fleet of runner processes on PostgreSQL", () => {
  it.live(
    "runners starting together on an empty database all come up (they race to create the cluster's tables)," +
      " each at the address it was given, never at the environment's PORT/HOST",
    () =>
      Effect.gen(function*() {
        const db = yield* Postgres.database
        const ports = yield* Effect.promise(() => Promise.all(Array.from({ length: 8 }, freePort)))
        // What @effect/cluster's own layers would read as this runner's address and timing.
        const generic = { PORT: "8080", HOST: "wrong.invalid", SHARD_LOCK_EXPIRATION: "not a duration" }
        const saved = Object.keys(generic).map((name) => [name, process.env[name]] as const)
        yield* Effect.acquireRelease(
          Effect.sync(() => Object.assign(process.env, generic)),
          () =>
            Effect.sync(() => {
              for (const [name, value] of saved) {
                if (value === undefined) delete process.env[name]
                else process.env[name] = value
              }
            })
        )
        yield* Effect.forEach(
          ports,
          (port) =>
            Layer.build(
              Runner.layerSocket({ address: { host: "127.0.0.1", port }, timing: Runner.tuned }).pipe(
                Layer.provide(PgClient.layer({ url: Redacted.make(db.url), maxConnections: 3 }).pipe(Layer.orDie))
              )
            ),
          { concurrency: "unbounded", discard: true }
        )
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const addresses = sql<{ address: string }>`SELECT address FROM cluster_runners`
          yield* waitUntil("every runner to register", Effect.map(Effect.orDie(addresses), (rows) => rows.length === 8))
          expect((yield* addresses).map((row) => row.address).sort()).toEqual(
            ports.map((port) => `127.0.0.1:${port}`).sort()
          )
        }).pipe(Effect.provide(member(db.url)))
      }).pipe(Effect.scoped)
  )

  it.live(
    "ten threads over the runners: a runner started under load takes over part of them with no failed turn;" +
      " a runner SIGKILLed mid-turn: every thread goes on from its checkpoint on a survivor, each turn committed once," +
      " nothing of the dead runner left",
    () =>
      Effect.gen(function*() {
        const dirs = yield* sandbox
        const db = yield* Postgres.database
        const [p1, p2, p3] = [yield* reserve(), yield* reserve(), yield* reserve()]
        const { keys, moving } = keysFor([p1.port, p2.port, p3.port])
        const runners = [...yield* startFleet(dirs, db.url, [{ name: "r1", port: p1 }, { name: "r2", port: p2 }])]
        yield* Effect.gen(function*() {
          const threads = yield* ThreadEntity.client({ turnTimeout: "3 minutes" })
          const run = (key: string, turn: { readonly input: string; readonly id: string }) =>
            threads.thread(key).run(turn)
          const committed = (key: string) => Effect.map(threads.thread(key).snapshot, Option.getOrThrow)

          // Both runners hold their shares of the shards before the first round (a round started
          // before that lands on one runner; once, under the whole suite's load, a round started
          // when the second runner held only its first few locks). Then a refresh of this
          // client's assignments (`Runner.tuned`: every second) after that.
          const locks = yield* SqlClient.SqlClient
          yield* waitForShares(locks)
          yield* Effect.sleep("2 seconds")

          // Round 1: every thread starts, spread over the two runners.
          const first = new Map<string, Result.Result>()
          yield* Effect.forEach(
            keys,
            (key) =>
              Effect.map(run(key, { input: Fixture.turn(`${key} #1`), id: `${key}#1` }), (r) => first.set(key, r)),
            { concurrency: "unbounded" }
          )
          expect(new Set(keys.map((key) => Fixture.runnerOf(first.get(key)!))).size).toBe(2)

          // Scale-out: turns keep coming on every thread while a third runner starts; it takes
          // over part of the threads and no turn fails.
          const served = new Map<string, string>()
          const done = new Map<string, number>(keys.map((key) => [key, 1]))
          let stop = false
          const load = Effect.forEach(keys, (key) =>
            Effect.gen(function*() {
              for (let n = 0; !stop; n++) {
                const result = yield* run(key, { input: Fixture.turn(`${key} load ${n}`, 100), id: `${key}#load-${n}` })
                served.set(key, Fixture.runnerOf(result))
                done.set(key, done.get(key)! + 1)
                yield* Effect.sleep("500 millis")
              }
            }), { concurrency: "unbounded", discard: true })
          const loading = yield* Effect.fork(load)
          const started = Date.now()
          runners.push(...yield* startFleet(dirs, db.url, [{ name: "r3", port: p3 }]))
          // Alone this takes 13–35 s (r1 and r2 see r3, end their entities of the moved shards,
          // release the locks; r3 takes them); under the whole suite's load it has taken over 60 s.
          // A timeout says who held which locks then.
          yield* waitUntil(
            "the new runner to serve threads",
            Effect.sync(() => Array.from(served.values()).includes("r3")),
            150_000
          ).pipe(Effect.tapDefect(() => fleetState(locks)))
          const tookOver = Date.now() - started
          yield* Effect.sleep("2 seconds")
          stop = true
          yield* Fiber.join(loading)
          const moved = keys.filter((key) => served.get(key) === "r3")
          console.log(`scale-out: r3 served threads ${tookOver} ms after its start; it took over ${moved.length} of 10`)
          expect(moved.length).toBeGreaterThan(0)
          for (const key of moved) expect(moving).toContain(key)
          for (const key of keys) expect((yield* committed(key)).turns).toBe(done.get(key))

          // Each runner registered at the address it was given, not at its environment's PORT/HOST.
          const sql = yield* SqlClient.SqlClient
          const registered = yield* sql<{ address: string }>`SELECT address FROM cluster_runners`
          expect(registered.map((row) => row.address).sort()).toEqual(
            runners.map((runner) => `127.0.0.1:${runner.port}`).sort()
          )

          // Failover: the runner serving the most threads is SIGKILLed while its turns run; one of
          // its threads is idle then (the probe of the failover time), the others are mid-turn.
          const owner = new Map(keys.map((key) => [key, served.get(key)!]))
          const counts = new Map<string, number>()
          for (const name of owner.values()) counts.set(name, (counts.get(name) ?? 0) + 1)
          const victim: RunnerProcess = runners.find((runner) =>
            counts.get(runner.name) === Math.max(...counts.values())
          )!
          const victimKeys = keys.filter((key) => owner.get(key) === victim.name)
          const [probe, ...inFlight] = victimKeys
          expect(inFlight.length).toBeGreaterThanOrEqual(1)
          const before = new Map<string, ThreadStore.ThreadRecord>()
          for (const key of keys) before.set(key, yield* committed(key))
          // Each CLI answers, leaves a sleeping grandchild in its process group, and stays 3 s.
          const fibers = yield* Effect.forEach(
            keys.filter((key) => key !== probe),
            (key) =>
              Effect.fork(Effect.map(
                run(key, { input: Fixture.turn(`${key} #2`, 3_000, true), id: `${key}#2` }),
                (result) => [key, result] as const
              ))
          )
          yield* waitUntil(
            "the victim's turns to run",
            Effect.sync(() => markedBy(victim.pid).length >= 2 * inFlight.length)
          )
          const killedAt = Date.now()
          process.kill(victim.pid, "SIGKILL")
          const probed = yield* run(probe!, { input: Fixture.turn(`${probe} #2`), id: `${probe}#2` })
          const failover = Date.now() - killedAt
          const second = new Map(yield* Fiber.joinAll(fibers))
          second.set(probe!, probed)
          console.log(
            `failover (${timing}, lease ${leaseTtl}): a thread of the SIGKILLed runner answered again after ${failover} ms;` +
              ` its ${inFlight.length} in-flight turns finished ${Date.now() - killedAt} ms after the kill`
          )
          for (const key of keys) {
            const result = second.get(key)!
            // On a survivor for the dead runner's threads, on the same runner for the others.
            if (victimKeys.includes(key)) expect(Fixture.runnerOf(result)).not.toBe(victim.name)
            else expect(Fixture.runnerOf(result)).toBe(owner.get(key))
            // From the last checkpoint (its session resumed), committed exactly once.
            expect(result.session).toBe(before.get(key)!.session)
            expect(yield* committed(key)).toMatchObject({
              key,
              session: before.get(key)!.session,
              turns: before.get(key)!.turns + 1,
              turn: `${key}#2`
            })
          }

          // Nothing of the dead runner is left once the survivors' reapers ran: no process, no clone.
          yield* waitUntil(
            "the survivors to reap the dead runner's processes and clones",
            Effect.map(clonesOf(dirs, victim.pid), (clones) => clones.length === 0 && markedBy(victim.pid).length === 0)
          )

          // Round 3: every thread goes on.
          yield* Effect.forEach(keys, (key) => run(key, { input: Fixture.turn(`${key} #3`), id: `${key}#3` }), {
            concurrency: "unbounded"
          })
          for (const key of keys) {
            expect(yield* committed(key)).toMatchObject({ turns: before.get(key)!.turns + 2, turn: `${key}#3` })
          }
        }).pipe(
          Effect.provide(member(db.url)),
          showingOutput(runners)
        )
      }).pipe(Effect.scoped),
    300_000
  )

  it.live(
    "a turn whose caller timed out on a runner then SIGKILLed: the calls fail with ThreadCallTimeout in time," +
      " nothing of it commits, and the thread's next turn runs on the survivor (no ThreadBusy)",
    () =>
      Effect.gen(function*() {
        const dirs = yield* sandbox
        const db = yield* Postgres.database
        const [p1, p2] = [yield* reserve(), yield* reserve()]
        const [r1, r2] = yield* startFleet(dirs, db.url, [{ name: "r1", port: p1 }, { name: "r2", port: p2 }])
        yield* Effect.gen(function*() {
          yield* waitForShares(yield* SqlClient.SqlClient)
          yield* Effect.sleep("2 seconds")
          const owner = ownerOf([p1.port, p2.port])
          const onFirst = (prefix: string) => {
            for (let i = 0;; i++) if (owner(`${prefix}-${i}`) === p1.port) return `${prefix}-${i}`
          }
          const threads = yield* ThreadEntity.client({ turnTimeout: "60 seconds" })
          const thread = threads.thread(onFirst("k"))
          const idle = threads.thread(onFirst("idle"))
          expect(Fixture.runnerOf(yield* thread.run({ input: Fixture.turn("warm"), id: "warm" }))).toBe("r1")
          yield* idle.run({ input: Fixture.turn("idle"), id: "idle" })
          const failure = <A, E extends { readonly _tag: string }>(effect: Effect.Effect<A, E>) =>
            Effect.map(Effect.flip(effect), (error) => error._tag)

          const slow = yield* Effect.fork(
            failure(thread.run({ input: Fixture.turn("slow", 6_000), id: "slow" }, { timeout: "3 seconds" }))
          )
          yield* waitUntil("the slow turn to run on r1", Effect.sync(() => markedBy(r1!.pid).length > 0))
          process.kill(r1!.pid, "SIGKILL")
          const killedAt = Date.now()
          // Calls to the dead runner's threads end at their timeouts, before the failover.
          const timeout: ThreadEntity.RunOptions = { timeout: "1 second" }
          expect(yield* failure(idle.run({ input: Fixture.turn("x"), id: "x" }, timeout))).toBe("ThreadCallTimeout")
          expect(yield* failure(Stream.runDrain(idle.stream({ input: Fixture.turn("y"), id: "y" }, timeout)))).toBe(
            "ThreadCallTimeout"
          )
          expect(Date.now() - killedAt).toBeLessThan(3_500)
          expect(yield* Fiber.join(slow)).toBe("ThreadCallTimeout")

          // The survivor takes the thread over with the stored `slow` delivery, which holds the
          // entity while it waits out r1's lease until its caller's interrupt reaches it: the
          // host's next turn waits for it instead of failing with ThreadBusy, and runs.
          const after = yield* thread.run({ input: Fixture.turn("after"), id: "after" })
          console.log(
            `a turn after a timed-out one on a SIGKILLed runner: answered ${Date.now() - killedAt} ms after the kill`
          )
          expect(Fixture.runnerOf(after)).toBe("r2")
          expect(Option.getOrThrow(yield* thread.snapshot)).toMatchObject({ turns: 2, turn: "after" })
          yield* waitUntil(
            "the survivor to reap the dead runner's processes",
            Effect.sync(() => markedBy(r1!.pid).length === 0)
          )
        }).pipe(
          Effect.provide(member(db.url)),
          showingOutput([r1!, r2!])
        )
      }).pipe(Effect.scoped),
    90_000
  )
})

const lastUser = (request: AnthropicServer.MessagesRequest) =>
  AnthropicServer.transcript(request).filter(([role]) => role === "user").at(-1)?.[1] ?? ""

describe("a fleet running the real Claude Code CLI", () => {
  it.live(
    "a runner SIGKILLed while Claude waits for the model: the turn resumes the thread's Claude session on the other runner",
    () =>
      Effect.gen(function*() {
        const dirs = yield* sandbox
        const db = yield* Postgres.database
        let slow = 0
        // Every turn asks the runner who it is (a host tool on its gateway), then answers with it.
        // The first delivery of the "slowly" turn gets no answer before its runner is killed. Each
        // runner's CLI talks to a model server of its own: the server a turn reaches names the
        // runner serving it (the thread's shard may move between turns while the runners settle).
        const respond = AnthropicServer.roundTrip(
          (request) => {
            const ask = AnthropicServer.callTool("whoami", {})
            return lastUser(request).includes("slowly") && slow++ === 0 ? AnthropicServer.delayed(60_000, ask) : ask
          },
          (results) => AnthropicServer.reply(`served by ${JSON.parse(results[0]!.text).runner}`)
        )
        const names = ["c1", "c2"] as const
        const servers = yield* Effect.all(names.map(() => AnthropicServer.make({ respond })))
        const runners = yield* Effect.all(
          names.map((name, index) =>
            startRunner({
              name,
              databaseUrl: db.url,
              dirs,
              timing: "tuned",
              leaseTtl: "5 seconds",
              reapInterval: "1 second",
              claude: { url: servers[index]!.url }
            })
          ),
          { concurrency: "unbounded" }
        )
        const asked = (index: number) =>
          Effect.map(servers[index]!.messages, (requests) => requests.filter((r) => lastUser(r).includes("slowly")))
        yield* Effect.gen(function*() {
          const threads = yield* ThreadEntity.client({ turnTimeout: "3 minutes" })
          const thread = threads.thread("tenant-42/claude")
          const first = yield* thread.run({ input: "Who runs this thread?", id: "c#1" })
          const owner = /served by (c[12])/.exec(first.text)?.[1]
          expect(owner).toBeDefined()
          // Claude Code writes its session file behind its result (up to ~100 ms); the store gets
          // the turn's answer from the late save once the files are quiet. A runner killed inside
          // that window leaves a store copy without the answer (a known limit): this test kills
          // the runner later, during the next turn.
          yield* Effect.sleep("600 millis")

          const second = yield* Effect.fork(thread.run({ input: "Keep going slowly.", id: "c#2" }))
          // The runner whose Claude CLI sent the turn to the model is killed while it waits.
          let serving = -1
          while (serving < 0) {
            yield* Effect.sleep("50 millis")
            for (const index of [0, 1]) if ((yield* asked(index)).length > 0) serving = index
          }
          const victim = runners[serving]!
          const survivor = runners[1 - serving]!
          const marker = `TETHER_AGENT_MARKER=${victim.pid}-`
          expect(Fixture.processesMentioning(marker).length).toBeGreaterThan(0)
          process.kill(victim.pid, "SIGKILL")
          const result = yield* Fiber.join(second)
          expect(result.text).toBe(`served by ${survivor.name}`)
          // The other runner's CLI resumed the committed session: the model saw the first turn.
          const resumed = (yield* asked(1 - serving)).at(-1)!
          const history = AnthropicServer.transcript(resumed).map(([, text]) => text).join("\n")
          expect(history).toContain("Who runs this thread?")
          expect(history).toContain(`served by ${owner}`)
          expect(result.session).toBe(first.session)
          // The dead runner's Claude CLI, still waiting for the model, is reaped by the survivor.
          while (Fixture.processesMentioning(marker).length > 0) {
            yield* Effect.sleep("100 millis")
          }
          expect(Option.getOrThrow(yield* thread.snapshot)).toMatchObject({
            provider: "claude",
            session: first.session,
            turns: 2,
            turn: "c#2"
          })
        }).pipe(
          Effect.provide(
            Runner.layerClient({ timing: Runner.tuned }).pipe(
              Layer.provideMerge(PgClient.layer({ url: Redacted.make(db.url), maxConnections: 4 }).pipe(Layer.orDie))
            )
          ),
          showingOutput(runners)
        )
      }).pipe(Effect.scoped),
    180_000
  )
})
