import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { LiveChannel } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import { existsSync } from "node:fs"

// A line-echo process: answers every stdin line with "echo:<line>", exits 0 at EOF.
const echo = {
  command: process.execPath,
  args: [
    "-e",
    "require('readline').createInterface({input:process.stdin}).on('line',l=>console.log('echo:'+l)).on('close',()=>process.exit(0))"
  ],
  env: { PATH: process.env.PATH ?? "" },
  cwd: process.cwd(),
  stdin: undefined,
  files: []
}

describe("LiveChannel", () => {
  it.live("writes frames, reads the answers line by line, and ends with stdin", () =>
    Effect.gen(function*() {
      const live = yield* LiveChannel.spawn(echo)
      yield* live.channel.write("one")
      yield* live.channel.write("two")
      yield* live.channel.closeInput
      const lines = yield* Stream.runCollect(live.channel.lines)
      expect(Array.from(lines)).toEqual(["echo:one", "echo:two"])
      expect(yield* live.exitCode).toBe(0)
      expect(live.frames.map((f) => f.dir)).toEqual(["in", "in", "out", "out"])
      const refused = yield* Effect.flip(live.channel.write("three"))
      expect(refused.reason).toBe("ProviderError")
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))

  it.live("a secret frame reaches the process with its secret but is recorded as its text", () =>
    Effect.gen(function*() {
      const live = yield* LiveChannel.spawn(echo)
      const placeholder = "@@secret-1@@"
      yield* live.channel.write({
        _tag: "SecretFrame",
        text: `token=${placeholder};again=${placeholder}`,
        secrets: [{ placeholder, value: Redacted.make("s3cr3t") }]
      })
      yield* live.channel.closeInput
      const lines = yield* Stream.runCollect(live.channel.lines)
      expect(Array.from(lines)).toEqual(["echo:token=s3cr3t;again=s3cr3t"])
      expect(live.frames[0]).toEqual({ dir: "in", line: `token=${placeholder};again=${placeholder}` })
      expect(live.frames.filter((f) => f.dir === "in").some((f) => f.line.includes("s3cr3t"))).toBe(false)
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)))

  it.live("closing the scope after the process was killed by a signal succeeds", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Effect.scoped(Effect.gen(function*() {
        const live = yield* LiveChannel.spawn(echo)
        yield* live.channel.write("one")
        yield* live.kill
        // Its stdout ends with the process.
        yield* Stream.runDrain(live.channel.lines)
      })))
      expect(exit._tag).toBe("Success")
    }).pipe(Effect.provide(NodeContext.layer)), 20_000)

  it.live("closing the scope kills a process that ignores the end of its input", () =>
    Effect.gen(function*() {
      let pid = 0
      yield* Effect.scoped(Effect.gen(function*() {
        const live = yield* LiveChannel.spawn({
          ...echo,
          args: ["-e", "process.on('SIGTERM',()=>{});process.stdin.resume();setInterval(()=>{},1000)"]
        }, { killGrace: "200 millis" })
        pid = live.pid
      }))
      expect(existsSync(`/proc/${pid}`)).toBe(false)
    }).pipe(Effect.provide(NodeContext.layer)), 20_000)
})
