/**
 * The ACP turn runner: the program a one-shot turn of the ACP driver runs (`acpDriver.ts`). It
 * reads the turn's spec on stdin, spawns the agent as its child (same process group: core's
 * group kill reaches both), drives one turn with Tether's ACP client (`acp.ts`), relays every
 * line the agent prints to its own stdout unchanged (the driver's `parse` reads them), then ends
 * the agent: stdin closed, SIGTERM, SIGKILL after a grace (ACP adapters do not exit at EOF).
 *
 * The hosted token is read from the variable the spec names and removed from the agent's
 * environment: it goes to the agent only inside `session/new`. A turn that could not run ends
 * with one stderr line `tether-acp-turn: <reason>: <detail>` and exit code 2. Permission requests
 * for the hosted tools are allowed when the driver's naming is one of the known ones (the spec
 * names it: a function cannot be passed), all others denied (a one-shot run has nobody to ask).
 *
 * @internal
 */
import type * as Driver from "@tether/core/Driver"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import { spawn } from "node:child_process"
import * as Readline from "node:readline"
import * as Acp from "./acp.js"
import { failurePrefix, type TurnSpec } from "./acpDriver.js"
import * as AcpMap from "./acpMap.js"

const noHostedTools: AcpMap.Naming = (call) => ({ name: call.name ?? call.title ?? "", source: "builtin" })

const readStdin = Effect.async<string>((resume) => {
  const parts: Array<Buffer> = []
  process.stdin.on("data", (chunk: Buffer) => parts.push(chunk))
  process.stdin.on("end", () => resume(Effect.succeed(Buffer.concat(parts).toString("utf8"))))
})

const reveal = (frame: Driver.SecretFrame): string =>
  frame.secrets.reduce((text, secret) => text.split(secret.placeholder).join(Redacted.value(secret.value)), frame.text)

const program = Effect.gen(function*() {
  const spec = JSON.parse(yield* readStdin) as TurnSpec
  const tokenVariable = spec.request.hosted.tokenVariable
  const token = process.env[tokenVariable] ?? ""
  const env: { [name: string]: string } = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (value !== undefined && name !== tokenVariable) env[name] = value
  }
  const child = yield* Effect.acquireRelease(
    Effect.sync(() => spawn(spec.command, [...spec.args], { cwd: spec.request.workspace, env, stdio: "pipe" })),
    (child) =>
      Effect.async<void>((resume) => {
        if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
        child.stdin.end()
        const kill = setTimeout(() => child.kill("SIGKILL"), 1500)
        child.once("exit", () => {
          clearTimeout(kill)
          resume(Effect.void)
        })
        child.kill("SIGTERM")
      })
  )
  const spawned = yield* Deferred.make<void, string>()
  child.once("spawn", () => Deferred.unsafeDone(spawned, Exit.void))
  child.once(
    "error",
    (error) => Deferred.unsafeDone(spawned, Exit.fail(`cannot start ${spec.command}: ${error.message}`))
  )
  child.stderr.pipe(process.stderr)
  yield* Deferred.await(spawned).pipe(
    Effect.mapError((detail) => ({ _tag: "ProtocolError", reason: "ProviderError", detail }) as const)
  )
  let open = true
  const lines = Stream.async<string>((emit) => {
    const reader = Readline.createInterface({ input: child.stdout, crlfDelay: Infinity })
    reader.on("line", (line) => {
      process.stdout.write(line + "\n")
      void emit.single(line)
    })
    reader.on("close", () => void emit.end())
  })
  const channel: Driver.Channel = {
    write: (frame) =>
      Effect.sync(() => {
        if (open) child.stdin.write((typeof frame === "string" ? frame : reveal(frame)) + "\n")
      }),
    lines,
    closeInput: Effect.sync(() => {
      open = false
      child.stdin.end()
    })
  }
  const request: Driver.InvocationRequest = { ...spec.request, hostEnv: process.env }
  const session = yield* Acp.attach(
    {
      // Only the hosted tools' permission requests depend on it (the driver's `parse` names the
      // outputs with the configured naming); a naming function the runner cannot be given
      // recognizes no hosted tool.
      naming: AcpMap.namings[spec.naming] ?? noHostedTools,
      startTimeout: spec.startTimeoutMs,
      // The runner cannot see the gateway (`hostedToolsListed` below is already complete).
      hostedToolsTimeout: "1 minute",
      cancelTimeout: spec.cancelTimeoutMs,
      permission: Acp.denyPermission,
      sources: true
    },
    channel,
    {
      hostedKey: spec.request.hosted.key,
      session: spec.request.session,
      request,
      hostedToken: Redacted.make(token),
      hostedToolsListed: Effect.void
    }
  )
  yield* Stream.runDrain(session.turn({ runId: spec.request.runId, prompt: spec.request.prompt }))
})

void Effect.runPromiseExit(Effect.scoped(program)).then((exit) => {
  if (Exit.isFailure(exit)) {
    const failure = Cause.failureOption(exit.cause)
    const line = failure._tag === "Some"
      ? `${failure.value.reason}: ${failure.value.detail}`
      : `ProviderError: ${Cause.pretty(exit.cause).split("\n")[0]}`
    process.stderr.write(`${failurePrefix}${line.replace(/\n/g, " ")}\n`)
  }
  process.exitCode = Exit.isSuccess(exit) ? 0 : 2
})
