/**
 * Reaping what a dead host left (its processes and its clones, in whatever root) and closing
 * without `/proc`. Real processes: a host SIGKILLed for real, a second host starting after it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Agent } from "@tether/core"
import * as Unstable from "@tether/core/Unstable"
import { FakeCli, Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as NodePath from "node:path"
import * as Readline from "node:readline"
import { makeMarker, setProcfs, startTime } from "../src/internal/procfs.js"

const fixture = (name: string) => NodePath.join(import.meta.dirname, "fixtures", name)

/** Runs a fixture host; resolves with its first stdout line (parsed) and the child. */
const startHost = (name: string, args: ReadonlyArray<string>, state: string) =>
  Effect.async<{ readonly line: unknown; readonly child: ChildProcess.ChildProcess }, Error>((resume) => {
    const child = ChildProcess.spawn(
      process.execPath,
      ["--conditions=@tether/source", "--import", "tsx", fixture(name), ...args],
      { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, XDG_STATE_HOME: state } }
    )
    let stderr = ""
    child.stderr!.on("data", (chunk) => (stderr += chunk))
    let answered = false
    Readline.createInterface({ input: child.stdout! }).once("line", (line) => {
      answered = true
      resume(Effect.succeed({ line: JSON.parse(line), child }))
    })
    child.on("exit", (code) => {
      if (!answered) resume(Effect.fail(new Error(`${name} exited with ${code} before answering: ${stderr}`)))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

const exited = (child: ChildProcess.ChildProcess) =>
  Effect.async<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
    child.once("exit", () => resume(Effect.void))
  })

const spawnMarked = (marker: string) =>
  Effect.acquireRelease(
    Effect.sync(() =>
      ChildProcess.spawn("sleep", ["600"], {
        detached: true,
        stdio: "ignore",
        env: { PATH: process.env["PATH"], [Unstable.markerVariable]: marker }
      })
    ),
    (child) => Effect.sync(() => child.kill("SIGKILL"))
  )

describe("a host's leftovers", () => {
  it.live("a marker names its host by pid and start time: a reused pid does not hide the orphans", () =>
    Effect.gen(function*() {
      // A pid above pid_max never names a live process.
      const deadPid = Number(Fs.readFileSync("/proc/sys/kernel/pid_max", "utf8")) + 1
      const ours = startTime(process.pid)!
      const dead = yield* spawnMarked(`${deadPid}-${ours}-dead-host`)
      // This process's pid, but another start time: a dead host whose pid was reused by us.
      const reused = yield* spawnMarked(`${process.pid}-${Number(ours) + 1}-reused-pid`)
      const owned = yield* spawnMarked(makeMarker("owned"))
      // Not a marker this library writes: never touched.
      const foreign = yield* spawnMarked(`${deadPid}-foreign`)
      yield* Effect.sleep("100 millis")
      const reaped = yield* Unstable.reapOrphans
      // (Another host's first Agent.make on this machine may have reaped them a moment earlier.)
      expect(reaped.filter((pid) => [dead.pid, reused.pid, owned.pid, foreign.pid].includes(pid))).toEqual(
        reaped.filter((pid) => pid === dead.pid || pid === reused.pid)
      )
      yield* Effect.sleep("100 millis")
      expect(yield* Harness.isAlive(dead.pid!)).toBe(false)
      expect(yield* Harness.isAlive(reused.pid!)).toBe(false)
      expect(yield* Harness.isAlive(owned.pid!)).toBe(true)
      expect(yield* Harness.isAlive(foreign.pid!)).toBe(true)
    }).pipe(Effect.scoped))

  it.live(
    "a SIGKILLed host: the next host's first Agent.make reaps its CLI, grandchildren and clone, in another root",
    () =>
      Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        const state = NodePath.join(sandbox.base, "state")
        const deadRoot = NodePath.join(sandbox.base, "dead-host-clones")
        const newRoot = NodePath.join(sandbox.base, "new-host-clones")
        const before = yield* Harness.treeDigest(sandbox.source)
        const { child, line } = yield* startHost("deadHost.ts", [deadRoot, sandbox.source, sandbox.workspace], state)
        const dead = line as { readonly marker: string; readonly pids: ReadonlyArray<number> }
        expect(dead.pids).toHaveLength(3)
        // What the host is about to leave: its CLI (ignoring SIGTERM), both grandchildren (one in
        // its own session), its clone. (Checked before the kill: from then on the first
        // Agent.make of any other host on the machine may already reap the processes.)
        for (const pid of dead.pids) expect(yield* Harness.isAlive(pid)).toBe(true)
        expect((yield* Harness.markedProcesses(dead.marker)).length).toBeGreaterThanOrEqual(3)
        child.kill("SIGKILL")
        yield* exited(child)
        expect(yield* Harness.entries(deadRoot)).toHaveLength(1)
        expect(yield* Harness.entries(NodePath.join(state, "tether", "hosts"))).toHaveLength(1)

        const next = yield* startHost("newHost.ts", [newRoot, sandbox.source, sandbox.workspace], state)
        yield* exited(next.child)
        expect(next.child.exitCode).toBe(0)
        yield* Effect.sleep("100 millis")
        for (const pid of dead.pids) expect(yield* Harness.isAlive(pid)).toBe(false)
        expect(yield* Harness.markedProcesses(dead.marker)).toEqual([])
        expect(yield* Harness.entries(deadRoot)).toEqual([])
        expect(yield* Harness.entries(newRoot)).toEqual([])
        // The dead host is forgotten; only the record of the host that just exited remains.
        const hosts = yield* Harness.entries(NodePath.join(state, "tether", "hosts"))
        expect(hosts).toHaveLength(1)
        expect(hosts[0]).toMatch(new RegExp(`^${next.child.pid}-`))
        expect(yield* Harness.treeDigest(sandbox.source)).toBe(before)
      }).pipe(Effect.scoped),
    60_000
  )
})

describe("closing without /proc", () => {
  it.live(
    "close signals the whole process group and waits for it (kill(-pgid, 0)); a setsid grandchild is out of reach",
    () =>
      Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        yield* Effect.acquireRelease(Effect.sync(() => setProcfs(false)), () => Effect.sync(() => setProcfs(true)))
        const { marker, pids } = yield* Effect.gen(function*() {
          const agent = yield* Agent.make({
            driver: FakeCli.driver(),
            definition: { instructions: "", skills: [], tools: Toolkit.empty },
            workspace: sandbox.workspace,
            profile: sandbox.selection,
            processes: { killGrace: "300 millis" }
          })
          const busy = yield* Deferred.make<void>()
          const pids: { cli?: number; group?: number; setsid?: number } = {}
          const consumer = yield* agent.stream(FakeCli.script(
            { op: "grandchild" },
            { op: "grandchild", setsid: true },
            { op: "text", text: "busy" },
            { op: "hang" }
          )).pipe(
            Stream.runForEach((event) =>
              Effect.sync(() => {
                if (event._tag === "ProcessStarted") pids.cli = event.pid
                if (event._tag === "Notice" && event.kind === "grandchild") {
                  const raw = event.raw as { readonly setsid: boolean }
                  if (raw.setsid) pids.setsid = Number(event.message)
                  else pids.group = Number(event.message)
                }
              }).pipe(Effect.zipRight(event._tag === "Message" ? Deferred.succeed(busy, undefined) : Effect.void))
            ),
            Effect.ignore,
            Effect.fork
          )
          yield* Deferred.await(busy)
          yield* agent.close()
          yield* Fiber.await(consumer)
          return { marker: agent.marker, pids: pids as Required<typeof pids> }
        }).pipe(Effect.scoped, Effect.provide(Harness.layer))
        // The CLI ignored SIGTERM: it and its grandchild in the group are gone (SIGKILL of the group).
        expect(yield* Harness.isAlive(pids.cli)).toBe(false)
        expect(yield* Harness.isAlive(pids.group)).toBe(false)
        // The grandchild that left the group is found only through /proc: it survives (README).
        expect(yield* Harness.isAlive(pids.setsid)).toBe(true)
        expect(yield* Harness.markedProcesses(marker)).toEqual([pids.setsid])
        process.kill(pids.setsid, "SIGKILL")
        expect(yield* Harness.entries(sandbox.root)).toEqual([])
      }).pipe(Effect.scoped),
    30_000
  )
})
