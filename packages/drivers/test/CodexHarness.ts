/**
 * The Codex driver the tests run offline: the pinned CLI against a scripted Responses server on
 * 127.0.0.1 (`baseUrl`), a fake key, no retries (a failure shows at once), Codex's offline settings;
 * and the scripted model and set-up the approvals tests share.
 */
import { expect } from "@effect/vitest"
import type { Agent } from "@tether/core"
import type * as Result from "@tether/core/Result"
import { Codex } from "@tether/drivers"
import { Harness, ResponsesServer } from "@tether/testing"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"

export const offlineCodex = (baseUrl: string, options: { readonly binary?: string } = {}) =>
  Codex.driver({
    model: "fake-model",
    ...(options.binary === undefined ? {} : { binary: options.binary }),
    modelProvider: {
      id: "fake",
      baseUrl,
      apiKey: Redacted.make("sk-fake-codex"),
      requestMaxRetries: 0,
      streamMaxRetries: 0
    },
    settings: Codex.offlineSettings
  })

/** What the model reads in the same turn after a call the host denied (`turn/steer`). */
export const denied = "The host denied that action: "

/** A patch adding `path` (with `hello`), or replacing its `hello` by `world`, run through exec_command. */
export const patch = (path: string, update: boolean) =>
  `apply_patch <<'EOF'\n*** Begin Patch\n` +
  (update ? `*** Update File: ${path}\n@@\n-hello\n+world\n` : `*** Add File: ${path}\n+hello\n`) +
  `*** End Patch\nEOF\n`

/**
 * The model runs the command after `RUN: ` with exec_command (or applies a patch adding the file
 * after `ADD: `, or updating the one after `UPDATE: `: Codex turns it into a file change), then
 * reports the command's output (`TOOL: `), or what it was told after a denied call (`TOLD: `);
 * anything else it answers `PLAIN: <the input>`.
 */
export const commandScript: ResponsesServer.Script = (request) => {
  const last = ResponsesServer.userTexts(request).at(-1) ?? ""
  if (last.startsWith(denied)) return ResponsesServer.text(`TOLD: ${last}`)
  const output = ResponsesServer.lastFunctionCallOutput(request)
  if (output !== undefined) return ResponsesServer.text(`TOOL: ${output.text}`)
  const file = /(ADD|UPDATE): (.*)$/m.exec(last)
  const command = file === null ? /RUN: (.*)$/m.exec(last)?.[1] : patch(file[2]!, file[1] === "UPDATE")
  return command === undefined
    ? ResponsesServer.text(`PLAIN: ${last}`)
    // The command's output is awaited (up to 10 s) before the call returns: on a loaded machine the
    // default wait could end the turn before `touch` ran.
    : ResponsesServer.callTool({ name: "exec_command", input: { cmd: command, yield_time_ms: 10_000 } })
}

/** Runs `body` with a fresh sandbox and the harness's services; nothing may be left in it after. */
export const withSandbox = <A, E>(body: (sandbox: Harness.Sandbox) => Effect.Effect<A, E, Agent.Requirements>) =>
  Effect.gen(function*() {
    const sandbox = yield* Harness.sandbox
    const value = yield* body(sandbox).pipe(Effect.scoped, Effect.provide(Harness.layer))
    expect(yield* Harness.entries(sandbox.root)).toEqual([])
    return value
  }).pipe(Effect.scoped)

/** The approvals a run's transcript holds. */
export const approvalsOf = (transcript: ReadonlyArray<Result.TranscriptEntry>) =>
  transcript.filter((entry): entry is Result.TranscriptApproval => entry._tag === "Approval")
