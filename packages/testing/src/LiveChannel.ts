/**
 * A live CLI process behind a `Driver.Channel`, for driver-level tests of live protocols: spawns
 * an `Invocation` (from `driver.live.open`) in its own process group, writes the session's frames
 * to its stdin, splits its stdout into lines and keeps its stderr. Closing the scope closes stdin,
 * then SIGTERMs and SIGKILLs the group. Agents use core's own process runner instead.
 *
 * @since 0.1.0
 */
import * as Command from "@effect/platform/Command"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import type { Channel, Invocation, InvocationRequest, LiveContext, SecretFrame } from "@tether/core/Driver"
import { ProtocolError } from "@tether/core/Driver"
import * as Chunk from "effect/Chunk"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"

/**
 * A spawned live process.
 *
 * @since 0.1.0
 * @category models
 */
export interface LiveProcess {
  readonly pid: number
  readonly channel: Channel
  /** Everything the process wrote to stderr so far. */
  readonly stderr: () => string
  /**
   * Every frame written to stdin (a `SecretFrame` as its text, never with its secrets) and every
   * line read from stdout, in order (for assertions).
   */
  readonly frames: ReadonlyArray<{ readonly dir: "in" | "out"; readonly line: string }>
  /** Waits for the process to exit; its exit code. */
  readonly exitCode: Effect.Effect<number>
  /** SIGKILLs the process group now (a crash, for tests). */
  readonly kill: Effect.Effect<void>
}

const encoder = new TextEncoder()

const reveal = (frame: SecretFrame): string =>
  frame.secrets.reduce((text, secret) => text.split(secret.placeholder).join(Redacted.value(secret.value)), frame.text)

// The platform's `kill` waits for the exit, which a process ignoring SIGTERM never gives:
// signal the process group directly.
const signalGroup = (pid: number, signal: NodeJS.Signals): void => {
  try {
    process.kill(-pid, signal)
  } catch {
    // already gone
  }
}

/**
 * Spawns the invocation (its `files` must already be in place) with exactly its `env`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const spawn = (
  invocation: Invocation,
  options: { readonly killGrace?: Duration.DurationInput } = {}
): Effect.Effect<LiveProcess, never, Scope.Scope | CommandExecutor.CommandExecutor> =>
  Effect.gen(function*() {
    const input = yield* Queue.unbounded<Take.Take<Uint8Array>>()
    const frames: Array<{ dir: "in" | "out"; line: string }> = []
    let stderr = ""
    let inputOpen = true
    const command = Command.make(invocation.command, ...invocation.args).pipe(
      Command.env(invocation.env, { extendEnv: false }),
      Command.workingDirectory(invocation.cwd),
      Command.stdin(Stream.flattenTake(Stream.fromQueue(input)))
    )
    const proc = yield* Effect.acquireRelease(
      Effect.orDie(Command.start(command)),
      (proc) =>
        Effect.gen(function*() {
          if (inputOpen) {
            inputOpen = false
            yield* Queue.offer(input, Take.end)
          }
          // Finalizers are uninterruptible: a timeout only fires on an interruptible wait.
          const exited = yield* Effect.interruptible(proc.exitCode).pipe(
            Effect.timeoutOption(options.killGrace ?? "2 seconds")
          )
          if (Option.isNone(exited)) {
            signalGroup(proc.pid, "SIGTERM")
            const after = yield* Effect.interruptible(proc.exitCode).pipe(Effect.timeoutOption("2 seconds"))
            if (Option.isNone(after)) signalGroup(proc.pid, "SIGKILL")
          }
        }).pipe(Effect.catchAllCause(() => Effect.void)) // a killed process fails `exitCode`
    )
    yield* proc.stderr.pipe(
      Stream.decodeText(),
      Stream.runForEach((text) => Effect.sync(() => (stderr += text))),
      Effect.forkScoped
    )
    const lines = proc.stdout.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.filter((line) => line.length > 0),
      Stream.orDie,
      Stream.tap((line) => Effect.sync(() => frames.push({ dir: "out", line })))
    )
    const channel: Channel = {
      write: (frame) =>
        Effect.suspend(() => {
          if (!inputOpen) {
            return Effect.fail(new ProtocolError({ reason: "ProviderError", detail: "stdin is closed" }))
          }
          // A secret frame is recorded as its text; the values go only into the bytes for stdin.
          const recorded = typeof frame === "string" ? frame : frame.text
          frames.push({ dir: "in", line: recorded })
          const bytes = encoder.encode((typeof frame === "string" ? frame : reveal(frame)) + "\n")
          return Effect.asVoid(Queue.offer(input, Take.chunk(Chunk.of(bytes))))
        }),
      lines,
      closeInput: Effect.suspend(() => {
        if (!inputOpen) return Effect.void
        inputOpen = false
        return Effect.asVoid(Queue.offer(input, Take.end))
      })
    }
    return {
      pid: proc.pid,
      channel,
      stderr: () => stderr,
      frames,
      exitCode: Effect.orDie(proc.exitCode),
      kill: Effect.sync(() => signalGroup(proc.pid, "SIGKILL"))
    } satisfies LiveProcess
  })

/**
 * The `LiveContext` core gives `live.attach` for a process opened from `request`: its hosted key
 * and session, the request itself, and the session's hosted-tools credential (`hostedToken`,
 * default the empty token; `hostedToolsListed`, default already complete). For driver-level
 * tests; an agent passes a credential of the process's own.
 *
 * @since 0.1.0
 * @category constructors
 */
export const context = (
  request: InvocationRequest,
  credential: {
    readonly hostedToken?: Redacted.Redacted<string>
    readonly hostedToolsListed?: Effect.Effect<void>
  } = {}
): LiveContext => ({
  hostedKey: request.hosted.key,
  session: request.session,
  request,
  hostedToken: credential.hostedToken ?? Redacted.make(""),
  hostedToolsListed: credential.hostedToolsListed ?? Effect.void
})
