/**
 * The process runner: spawns a driver's `Invocation` in its own process group, splits stdout
 * into bounded lines, drains and keeps stderr (bounded), and kills the whole group with
 * escalation.
 *
 * @internal
 */
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"
import * as ChildProcess from "node:child_process"
import * as NodeFs from "node:fs"
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
export interface Running {
  readonly pid: number
  readonly command: string
  /** Complete stdout lines (blank lines skipped) until end of file. Consumable once, then `drain`. */
  readonly lines: Stream.Stream<string, LineTooLong>
  /** The next chunk of `lines` (`None` at the end of file, `Some` for an over-long line); `lines` read a chunk at a time. */
  readonly pullLines: Effect.Effect<Chunk.Chunk<string>, Option.Option<LineTooLong>>
  /** Keeps reading (and discarding) the remaining lines so the child never blocks on a full pipe. */
  readonly drain: Effect.Effect<void>
  /** Waits for the process to exit. */
  readonly exit: Effect.Effect<ProcessExit>
  readonly poll: Effect.Effect<Option.Option<ProcessExit>>
  /** Waits until stderr reached its end (every byte is in `stderrTail`). */
  readonly stderrEnded: Effect.Effect<void>
  /** The kept end of stdout, as read (`decodeTail` gives its text). */
  readonly stdoutTail: () => RawTail
  /** The kept end of stderr, as read. */
  readonly stderrTail: () => RawTail
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
  /** The kept bytes as they were read, the first read cut where the last `limit` bytes begin. */
  tail(): RawTail {
    const chunks = this.chunks.slice()
    // `push` keeps no read for a limit of 0 or less, and every read for one that is not a number.
    const cut = this.kept - this.limit
    if (cut > 0 && chunks.length > 0) {
      chunks[0] = chunks[0]!.subarray(cut)
      return { chunks, length: this.kept - cut, total: this.total }
    }
    return { chunks, length: this.kept, total: this.total }
  }
}

/**
 * The kept end of a stream (the last `maxRawBytes`) in the reads that brought it, not yet decoded:
 * a run's result decodes it only when it is read (decoding the tail of a large output is most of
 * what a run's end costs).
 *
 * @internal
 */
export interface RawTail {
  readonly chunks: ReadonlyArray<Uint8Array>
  /** Bytes in `chunks`. */
  readonly length: number
  /** Every byte read from the stream. */
  readonly total: number
}

/** The tail's text: its bytes decoded as UTF-8 as one sequence (a character cut between reads is whole). @internal */
export const decodeTail = (tail: RawTail): string =>
  tail.chunks.length === 1
    ? Buffer.from(tail.chunks[0]!.buffer, tail.chunks[0]!.byteOffset, tail.chunks[0]!.byteLength).toString("utf8")
    : Buffer.concat(tail.chunks).toString("utf8")

const decoder = new TextDecoder()

/** The text of a spawn failure: Node's own message, and a missing working directory named. */
const spawnFailure = (error: unknown, cwd: string): { readonly _tag: "SpawnFailed"; readonly message: string } => {
  const message = error instanceof Error ? error.message : String(error)
  // Node reports a missing working directory as the command's ENOENT.
  const missingCwd = (error as { readonly code?: unknown }).code === "ENOENT" && !NodeFs.existsSync(cwd)
  return {
    _tag: "SpawnFailed",
    message: missingCwd ? `${message} (the working directory ${cwd} does not exist)` : message
  }
}

/**
 * Spawns the invocation with `node:child_process` in its own process group (`detached`). `env`
 * is complete (nothing is inherited): the invocation's env plus `extraEnv` (the token variable,
 * the marker). The child's pipes are read by listeners that hand stdout's lines to a bounded
 * buffer (stdout pauses while it is full) and keep stderr's tail: a spawn costs no fiber and no
 * `Stream` per pipe (`@effect/platform`'s `Command` added an `fs.access` round trip, a `Stream`
 * per pipe and a fiber for stdin to every spawn).
 *
 * @internal
 */
export const spawn = (
  invocation: Invocation,
  extraEnv: { readonly [name: string]: string },
  limits: Limits,
  options: { readonly input?: "open" } = {}
): Effect.Effect<Running, { readonly _tag: "SpawnFailed"; readonly message: string }> =>
  Effect.gen(function*() {
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const child = yield* Effect.try({
      try: () =>
        ChildProcess.spawn(invocation.command, [...invocation.args], {
          cwd: invocation.cwd,
          env: { ...invocation.env, ...extraEnv },
          stdio: ["pipe", "pipe", "pipe"],
          detached: true
        }),
      catch: (error) => spawnFailure(error, invocation.cwd)
    })
    // A child that could not be started has no pid; Node tells why in its `error` event.
    if (child.pid === undefined) {
      return yield* Effect.async<never, { readonly _tag: "SpawnFailed"; readonly message: string }>((resume) => {
        child.once("error", (error) => resume(Effect.fail(spawnFailure(error, invocation.cwd))))
      })
    }
    const pid = child.pid
    const childStdin = child.stdin!
    const childStdout = child.stdout!
    const childStderr = child.stderr!
    // Later errors (a signal to a gone process, a write to a closed pipe) are not the run's to
    // throw: a pipe that fails has ended (its `close` follows).
    child.on("error", () => {})
    childStdin.on("error", () => {})
    const scope = yield* Scope.make()
    const stdout = new RawBuffer(limits.maxRawBytes)
    const stderr = new RawBuffer(limits.maxRawBytes)
    const exited = yield* Deferred.make<ProcessExit>()
    let hasExited = false
    child.once("exit", (code, signal) => {
      hasExited = true
      Deferred.unsafeDone(
        exited,
        Exit.succeed(
          code !== null ? { exitCode: code, signal: undefined } : { exitCode: undefined, signal: signal ?? "unknown" }
        )
      )
    })
    const stderrEnded = yield* Deferred.make<void>()
    const endStderr = () => Deferred.unsafeDone(stderrEnded, Exit.void)
    childStderr.on("data", (bytes: Buffer) => stderr.push(bytes))
    childStderr.once("end", endStderr)
    childStderr.on("error", endStderr)
    childStderr.once("close", endStderr)

    const queue = Handoff.make<string, LineTooLong>(64)
    let pending: Array<Uint8Array> = []
    let pendingBytes = 0
    let overflowed = false
    // stdout reached its end (or failed): no more line will come from the pipe.
    let stdoutDone = false
    // The lines were ended (Take.end or the overflow's failure was handed over, or is waiting to be).
    let linesEnded = false
    /**
     * Hands the takes over in order: at once while the buffer has room; otherwise stdout pauses
     * and a fiber offers the rest (waiting for room), then resumes it. No `data` event comes
     * while stdout is paused, so takes never overtake each other.
     */
    const deliver = (takes: ReadonlyArray<Take.Take<string, LineTooLong>>): void => {
      for (let i = 0; i < takes.length; i++) {
        if (queue.unsafeOffer(takes[i]!)) continue
        const rest = takes.slice(i)
        childStdout.pause()
        runFork(
          Effect.forEach(rest, (take) => queue.offer(take), { discard: true }).pipe(
            Effect.ensuring(Effect.sync(() => {
              if (!childStdout.destroyed) childStdout.resume()
            }))
          )
        )
        return
      }
    }
    const lineOf = (bytes: Uint8Array): string | undefined => {
      let end = bytes.length
      if (end > 0 && bytes[end - 1] === 13) end--
      if (end === 0) return undefined
      return decoder.decode(end === bytes.length ? bytes : bytes.subarray(0, end))
    }
    const overflow = () => {
      overflowed = true
      linesEnded = true
      pending = []
      deliver([Take.fail(new LineTooLong(limits.maxLineBytes))])
    }
    // The bytes of a line cut by a pipe read, decoded as they come (a character may be cut too).
    const pendingDecoder = new TextDecoder()
    const onChunk = (bytes: Uint8Array): void => {
      stdout.push(bytes)
      if (overflowed || linesEnded) return
      if (pendingBytes + bytes.length <= limits.maxLineBytes) {
        // No line of this chunk can exceed the bound: decode once, split the text. A newline
        // byte never occurs inside a multi-byte UTF-8 sequence, so the split is exact.
        const last = bytes.lastIndexOf(10)
        if (last === -1) {
          pending.push(bytes)
          pendingBytes += bytes.length
          return
        }
        let lines: Array<string>
        if (pendingBytes === 0) {
          lines = decoder.decode(bytes.subarray(0, last)).split("\n")
        } else {
          // The line the pending bytes begin is decoded apart, so the read is not copied to join
          // them (the stream decoder carries a character they cut).
          const first = bytes.indexOf(10)
          let joined = ""
          for (const piece of pending) joined += pendingDecoder.decode(piece, { stream: true })
          joined += pendingDecoder.decode(bytes.subarray(0, first))
          if (first === last) {
            lines = [joined]
          } else {
            lines = decoder.decode(bytes.subarray(first + 1, last)).split("\n")
            lines.unshift(joined)
          }
        }
        // The lines that stay are moved to the array's front (no second array).
        let kept = 0
        for (let i = 0; i < lines.length; i++) {
          const line = lines[i]!
          const cut = line.charCodeAt(line.length - 1) === 13 ? line.slice(0, -1) : line
          if (cut.length > 0 && (cut.charCodeAt(0) > 32 || cut.trim() !== "")) lines[kept++] = cut
        }
        lines.length = kept
        pending = last + 1 < bytes.length ? [bytes.subarray(last + 1)] : []
        pendingBytes = bytes.length - last - 1
        if (kept > 0) deliver([Take.chunk(Chunk.unsafeFromArray(lines))])
        return
      }
      const lines: Array<string> = []
      let start = 0
      while (start <= bytes.length) {
        const index = bytes.indexOf(10, start)
        if (index === -1) break
        const segment = bytes.subarray(start, index)
        if (pendingBytes + segment.length > limits.maxLineBytes) {
          if (lines.length > 0) deliver([Take.chunk(Chunk.unsafeFromArray(lines))])
          return overflow()
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
          if (lines.length > 0) deliver([Take.chunk(Chunk.unsafeFromArray(lines))])
          return overflow()
        }
      }
      if (lines.length > 0) deliver([Take.chunk(Chunk.unsafeFromArray(lines))])
    }
    const onEnd = () => {
      if (stdoutDone) return
      stdoutDone = true
      if (linesEnded) return
      linesEnded = true
      const last = pendingBytes === 0 ? undefined : lineOf(Buffer.concat(pending))
      pending = []
      deliver(last === undefined || last.trim() === "" ? [Take.end] : [Take.of(last), Take.end])
    }
    childStdout.on("data", onChunk)
    childStdout.once("end", onEnd)
    childStdout.on("error", onEnd)
    childStdout.once("close", onEnd)

    // A live process keeps its stdin open for the frames written to it; a one-shot one gets its
    // whole input at once.
    let inputOpen = options.input === "open"
    if (!inputOpen) {
      if (invocation.stdin === undefined) childStdin.end()
      else childStdin.end(invocation.stdin)
    }

    // A descendant that inherited stdout keeps the pipe open after the CLI exited: give it the
    // grace period, then kill the group, and if the pipe is still held (by a process that left
    // the group) end the lines anyway; the marker sweep at close takes care of that process.
    yield* Deferred.await(exited).pipe(
      Effect.zipRight(Effect.sleep(limits.afterExit)),
      Effect.zipRight(Effect.suspend(() => {
        if (stdoutDone) return Effect.void
        signalGroup(pid, "SIGKILL")
        return Effect.sleep("200 millis").pipe(
          Effect.zipRight(Effect.sync(() => {
            if (stdoutDone || linesEnded) return
            linesEnded = true
            deliver([Take.end])
          }))
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
    // Once the process is terminated its pipes are let go (a descendant that left the group may
    // still hold stdout: the marker sweep at close takes care of it).
    yield* Scope.addFinalizer(
      scope,
      Effect.sync(() => {
        inputOpen = false
        childStdin.destroy()
        childStdout.destroy()
        childStderr.destroy()
      })
    )
    const close = (grace: Duration.DurationInput) =>
      terminate(grace).pipe(
        Effect.zipRight(Scope.close(scope, Exit.void)),
        Effect.zipRight(queue.shutdown)
      )

    return {
      pid,
      command: invocation.command,
      lines,
      pullLines: queue.pull,
      drain: Stream.runDrain(lines).pipe(Effect.ignore),
      exit: Deferred.await(exited),
      poll,
      stderrEnded: Deferred.await(stderrEnded),
      stdoutTail: () => stdout.tail(),
      stderrTail: () => stderr.tail(),
      terminate,
      close,
      input: options.input !== "open" ? undefined : {
        write: (text) =>
          Effect.sync(() => {
            if (!inputOpen) return false
            childStdin.write(text)
            return true
          }),
        close: Effect.sync(() => {
          if (!inputOpen) return
          inputOpen = false
          childStdin.end()
        })
      }
    } satisfies Running
  })
