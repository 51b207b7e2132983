/**
 * The committed Codex app-server protocol types (packages/drivers/src/internal/codexProtocol/)
 * are exactly what the pinned binary generates: `scripts/codexProtocol.ts --check` regenerates
 * them with `codex app-server generate-ts` and fails on any difference (a hand edit, or a new pin
 * of @openai/codex without `npm run codex-protocol`).
 */
import { expect, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "..")

it("the generated Codex protocol types match the pinned binary's output", async () => {
  const result = await new Promise<{ readonly code: number | null; readonly output: string }>((resolve) => {
    execFile(
      process.execPath,
      ["--conditions=@tether/source", "--import", "tsx", "scripts/codexProtocol.ts", "--check"],
      { cwd: root, timeout: 60_000 },
      (error, stdout, stderr) =>
        resolve({ code: error === null ? 0 : (error.code as number | null), output: stdout + stderr })
    )
  })
  expect(result.output).toContain("codexProtocol matches Codex")
  expect(result.code).toBe(0)
})
