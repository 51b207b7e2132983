/**
 * The process runner: spawns a driver's `Invocation` with `@effect/platform` `Command` in its
 * own process group, splits stdout into bounded lines, drains and keeps stderr (bounded), and
 * kills the whole group with escalation.
 *
 * @internal
 */
import * as Command from "@effect/platform/Command"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"
import type { Invocation } from "../Driver.js"
import * as Handoff from "./handoff.js"
import { groupAlive, signalGroup } from "./procfs.js"

/** @internal */
export { findMarked, makeMarker, markerVariable, reapMarked, reapOrphans } from "./procfs.js"

/** @internal */
export interface Limits {
  readonly maxLineBytes: number
  readonly maxRawBytes: number
  /** How long stdout may stay open after the process exited (held by a descendant). */
  readonly afterExit: Duration.Duration
}

/** @internal */
export interface ProcessExit {
  readonly exitCode: number | undefined
  readonly signal: string | undefined
}

/** @internal */
export class LineTooLong {
  readonly _tag = "LineTooLong"
  constructor(readonly limit: number) {}
}

/** @internal */
export interface RawOutput {
  readonly stdout: string
  readonly stderr: string
  readonly stdoutBytes: number
  readonly stderrBytes: number
}

/** @internal */
export interface Running {
  readonly pid: number
  readonly command: string
  /** Complete stdout lines (blank lines skipped) until end of file. Consumable once, then `drain`. */
  readonly lines: Stream.Stream<string, LineTooLong>
  /** Keeps reading (and discarding) the remaining lines so the child never blocks on a full pipe. */
  readonly drain: Effect.Effect<void>
  /** Waits for the process to exit. */
  readonly exit: Effect.Effect<ProcessExit>
  readonly poll: Effect.Effect<Option.Option<ProcessExit>>
  /** Waits until stderr reached its end (every byte is in `raw`). */
  readonly stderrEnded: Effect.Effect<void>
  readonly raw: () => RawOutput
  /**
   * SIGTERM the group, wait up to `grace`, SIGKILL the group; also after a clean exit, for the
   * grandchildren left in the group. Never fails; bounded by about twice `grace`.
   */
  readonly terminate: (grace: Duration.DurationInput) => Effect.Effect<void>
  /** Terminates, then releases the platform process. Idempotent. */
  readonly close: (grace: Duration.DurationInput) => Effect.Effect<void>
  /**
   * The process's stdin, when it was spawned with `input: "open"` (a live process): each write
   * is one chunk of bytes; `closeInput` ends stdin (idempotent). `write` returns `false` once
   * stdin is closed.
   */
  readonly input: {
    readonly write: (text: string) => Effect.Effect<boolean>
    readonly close: Effect.Effect<void>
  } | undefined
}

class RawBuffer {
  chunks: Array<Uint8Array> = []
  kept = 0
  total = 0
  constructor(readonly limit: number) {}
  push(bytes: Uint8Array) {
    this.total += bytes.length
    if (this.limit <= 0) return
    this.chunks.push(bytes)
    this.kept += bytes.length
    while (this.kept - this.chunks[0]!.length >= this.limit) {
      this.kept -= this.chunks.shift()!.length
    }
  }
  text(): string {
    const all = Buffer.concat(this.chunks)
    const start = Math.max(0, all.length - this.limit)
    return all.subarray(start).toString("utf8")
  }
}

const exitOf = (exit: Exit.Exit<number, unknown>): ProcessExit =>
  Exit.isSuccess(exit)
    ? { exitCode: exit.value, signal: undefined }
    : { exitCode: undefined, signal: /signal: (SIG[A-Z0-9]+)/.exec(Cause.pretty(exit.cause))?.[1] ?? "unknown" }

const decoder = new TextDecoder()

/**
 * Spawns the invocation. `env` is complete (nothing is inherited): the invocation's env plus
 * `extraEnv` (the token variable, the marker).
 *
 * @internal
 */
export const spawn = (
  invocation: Invocation,
  extraEnv: { readonly [name: string]: string },
  limits: Limits,
  options: { readonly input?: "open" } = {}
): Effect.Effect<
  Running,
  { readonly _tag: "SpawnFailed"; readonly message: string },
  CommandExecutor.CommandExecutor
> =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    // A live process keeps its stdin open: frames go through this queue until it is closed.
    const input = options.input === "open" ? yield* Queue.unbounded<Take.Take<Uint8Array>>() : undefined
    let inputOpen = input !== undefined
    const stdin = input !== undefined
      ? Stream.flattenTake(Stream.fromQueue(input))
      : invocation.stdin === undefined
      ? Stream.empty
      : Stream.make(new TextEncoder().encode(invocation.stdin))
    const command = Command.make(invocation.command, ...invocation.args).pipe(
      Command.env({ ...invocation.env, ...extraEnv }, { extendEnv: false }),
      Command.workingDirectory(invocation.cwd),
      Command.stdin(stdin)
    )
    // `spawn` runs inside `acquireRelease` (uninterruptible): every fiber forked below is made
    // interruptible, or closing the process scope would wait on it forever.
    const started = yield* Command.start(command).pipe(
      Scope.extend(scope),
      Effect.mapError((error) => ({ _tag: "SpawnFailed" as const, message: error.message })),
      Effect.onError(() => Scope.close(scope, Exit.void))
    )
    const pid = started.pid
    const stdout = new RawBuffer(limits.maxRawBytes)
    const stderr = new RawBuffer(limits.maxRawBytes)
    const exited = yield* Deferred.make<ProcessExit>()
    let hasExited = false
    const queue = Handoff.make<string, LineTooLong>(64)

    yield* started.exitCode.pipe(
      Effect.exit,
      Effect.flatMap((exit) => {
        hasExited = true
        return Deferred.succeed(exited, exitOf(exit))
      }),
      Effect.interruptible,
      Effect.forkIn(scope)
    )
    const stderrEnded = yield* Deferred.make<void>()
    yield* Stream.runForEach(started.stderr, (bytes) => Effect.sync(() => stderr.push(bytes))).pipe(
      Effect.ignore,
      Effect.ensuring(Deferred.succeed(stderrEnded, undefined)),
      Effect.interruptible,
      Effect.forkIn(scope)
    )

    let pending: Array<Uint8Array> = []
    let pendingBytes = 0
    let overflowed = false
    const lineOf = (bytes: Uint8Array): string | undefined => {
      let end = bytes.length
      if (end > 0 && bytes[end - 1] === 13) end--
      if (end === 0) return undefined
      return decoder.decode(end === bytes.length ? bytes : bytes.subarray(0, end))
    }
    const onChunk = (bytes: Uint8Array): Effect.Effect<void> => {
      stdout.push(bytes)
      if (overflowed) return Effect.void
      if (pendingBytes + bytes.length <= limits.maxLineBytes) {
        // No line of this chunk can exceed the bound: decode once, split the text. A newline
        // byte never occurs inside a multi-byte UTF-8 sequence, so the split is exact.
        const last = bytes.lastIndexOf(10)
        if (last === -1) {
          pending.push(bytes)
          pendingBytes += bytes.length
          return Effect.void
        }
        const head = bytes.subarray(0, last)
        const text = decoder.decode(pendingBytes === 0 ? head : Buffer.concat([...pending, head]))
        // The split's own array is kept, the lines that stay moved to its front (no second array).
        const lines = text.split("\n")
        let kept = 0
        for (let i = 0; i < lines.length; i++) {
          const line = lines[i]!
          const cut = line.charCodeAt(line.length - 1) === 13 ? line.slice(0, -1) : line
          if (cut.length > 0 && (cut.charCodeAt(0) > 32 || cut.trim() !== "")) lines[kept++] = cut
        }
        lines.length = kept
        pending = last + 1 < bytes.length ? [bytes.subarray(last + 1)] : []
        pendingBytes = bytes.length - last - 1
        return kept === 0 ? Effect.void : queue.offerNow(Take.chunk(Chunk.unsafeFromArray(lines)))
      }
      const lines: Array<string> = []
      let start = 0
      while (start <= bytes.length) {
        const index = bytes.indexOf(10, start)
        if (index === -1) break
        const segment = bytes.subarray(start, index)
        if (pendingBytes + segment.length > limits.maxLineBytes) {
          overflowed = true
          return queue.offer(Take.fail(new LineTooLong(limits.maxLineBytes)))
        }
        const line = lineOf(pendingBytes === 0 ? segment : Buffer.concat([...pending, segment]))
        pending = []
        pendingBytes = 0
        if (line !== undefined && line.trim() !== "") lines.push(line)
        start = index + 1
      }
      if (start < bytes.length) {
        const rest = bytes.subarray(start)
        pending.push(rest)
        pendingBytes += rest.length
        if (pendingBytes > limits.maxLineBytes) {
          overflowed = true
          pending = []
          return queue.offer(Take.fail(new LineTooLong(limits.maxLineBytes)))
        }
      }
      return lines.length === 0 ? Effect.void : queue.offerNow(Take.chunk(Chunk.unsafeFromArray(lines)))
    }
    const onEnd = Effect.suspend(() => {
      if (overflowed) return Effect.void
      const last = pendingBytes === 0 ? undefined : lineOf(Buffer.concat(pending))
      pending = []
      return (last === undefined || last.trim() === "" ? Effect.void : queue.offer(Take.of(last))).pipe(
        Effect.zipRight(queue.offer(Take.end))
      )
    })
    const reader = yield* Stream.runForEach(started.stdout, onChunk).pipe(
      Effect.ignore,
      Effect.zipRight(onEnd),
      Effect.interruptible,
      Effect.forkIn(scope)
    )
    // A descendant that inherited stdout keeps the pipe open after the CLI exited: give it the
    // grace period, then kill the group, and if the pipe is still held (by a process that left
    // the group) end the lines anyway; the marker sweep at close takes care of that process.
    yield* Deferred.await(exited).pipe(
      Effect.zipRight(Effect.sleep(limits.afterExit)),
      Effect.zipRight(Effect.suspend(() => {
        if (reader.unsafePoll() !== null) return Effect.void
        signalGroup(pid, "SIGKILL")
        return Effect.sleep("200 millis").pipe(
          Effect.zipRight(
            Effect.suspend(() => reader.unsafePoll() !== null || overflowed ? Effect.void : queue.offer(Take.end))
          )
        )
      })),
      Effect.interruptible,
      Effect.forkIn(scope)
    )

    const lines = queue.stream
    const poll = Deferred.poll(exited).pipe(
      Effect.flatMap(Option.match({
        onNone: () => Effect.succeed(Option.none<ProcessExit>()),
        onSome: (done) => Effect.map(done, Option.some)
      }))
    )
    // Bounded waits on the Clock: interruptible, so the timeout also works inside a finalizer,
    // and a caller that is interrupted (a close past its deadline) stops waiting at once.
    const bounded = (wait: Effect.Effect<void>, millis: number): Effect.Effect<boolean> =>
      wait.pipe(
        Effect.interruptible,
        Effect.timeout(Duration.millis(millis)),
        Effect.match({ onFailure: () => false, onSuccess: () => true })
      )
    // A group's liveness has no event to wait for: poll it.
    const groupGone = () => !groupAlive(pid)
    const untilGroupGone: Effect.Effect<void> = Effect.suspend(() =>
      groupGone() ? Effect.void : Effect.zipRight(Effect.sleep("10 millis"), untilGroupGone)
    )
    const leaderExited = Effect.asVoid(Deferred.await(exited))
    const terminate = (grace: Duration.DurationInput): Effect.Effect<void> =>
      Effect.gen(function*() {
        const millis = Duration.toMillis(grace)
        if (hasExited && groupGone()) return
        signalGroup(pid, "SIGTERM")
        yield* bounded(leaderExited, millis)
        if (!(yield* bounded(untilGroupGone, Math.min(millis, 50)))) {
          signalGroup(pid, "SIGKILL")
          yield* bounded(Effect.zipRight(leaderExited, untilGroupGone), millis)
        }
      })
    const close = (grace: Duration.DurationInput) =>
      terminate(grace).pipe(
        Effect.zipRight(
          // The platform release waits for the exit: only run it once the leader is gone.
          Effect.suspend(() => hasExited ? Scope.close(scope, Exit.void) : Effect.void)
        ),
        Effect.zipRight(queue.shutdown)
      )
    // Registered after start, so it runs before the platform's release (which would wait
    // forever on a child that ignores SIGTERM).
    yield* Scope.addFinalizer(scope, terminate(Duration.seconds(2)))

    return {
      pid,
      command: invocation.command,
      lines,
      drain: Stream.runDrain(lines).pipe(Effect.ignore),
      exit: Deferred.await(exited),
      poll,
      stderrEnded: Deferred.await(stderrEnded),
      raw: () => ({
        stdout: stdout.text(),
        stderr: stderr.text(),
        stdoutBytes: stdout.total,
        stderrBytes: stderr.total
      }),
      terminate,
      close,
      input: input === undefined ? undefined : {
        write: (text) =>
          Effect.suspend(() =>
            inputOpen
              ? Effect.as(Queue.offer(input, Take.of(new TextEncoder().encode(text))), true)
              : Effect.succeed(false)
          ),
        close: Effect.suspend(() => {
          if (!inputOpen) return Effect.void
          inputOpen = false
          return Effect.asVoid(Queue.offer(input, Take.end))
        })
      }
    } satisfies Running
  })
