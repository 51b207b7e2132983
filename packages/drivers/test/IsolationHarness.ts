/**
 * Shared helpers for the isolation tests (IsolationClaude, IsolationCodex, IsolationGemini): a
 * source profile with links out of it, snapshots of it and of the real HOME taken before a run,
 * and the checks that a run left them, the workspace and the clone root as they should be.
 */
import { expect, it } from "@effect/vitest"
import { Agent, Approval, ThreadStore } from "@tether/core"
import * as Skill from "@tether/core/Skill"
import * as Profile from "@tether/profile/Profile"
import { Harness } from "@tether/testing"
import { Toolkit } from "@tether/tool"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type { YieldWrap } from "effect/Utils"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

/** Everything observable about a tree, without following links: type, mode, content, mtime. */
export const fullSnapshot = (root: string): Record<string, string> => {
  const out: Record<string, string> = {}
  const visit = (dir: string, rel: string) => {
    for (const name of Fs.readdirSync(dir).sort()) {
      const absolute = Path.join(dir, name)
      const relative = rel === "" ? name : `${rel}/${name}`
      const info = Fs.lstatSync(absolute)
      const head = `${(info.mode & 0o7777).toString(8)}:${info.mtimeMs}`
      if (info.isSymbolicLink()) out[relative] = `link:${head}:${Fs.readlinkSync(absolute)}`
      else if (info.isDirectory()) {
        out[relative] = `dir:${head}`
        visit(absolute, relative)
      } else if (info.isFile()) {
        out[relative] = `file:${head}:${Fs.readFileSync(absolute).toString("base64")}`
      } else out[relative] = `other:${head}`
    }
  }
  visit(root, "")
  return out
}

/** Paths under the real HOME a CLI could write to, with their mtimes (missing: "-"). */
export const homeWatch = (): Record<string, string> => {
  const home = Os.homedir()
  const out: Record<string, string> = {}
  for (
    const rel of [
      "",
      ".claude",
      ".claude.json",
      ".codex",
      ".gemini",
      ".codebuddy",
      ".cache",
      ".config",
      ".local",
      ".local/share",
      ".local/state",
      ".npm"
    ]
  ) {
    try {
      out[rel] = String(Fs.lstatSync(Path.join(home, rel)).mtimeMs)
    } catch {
      out[rel] = "-"
    }
  }
  return out
}

/** The structured output the scripted models answer `Judge.` with. */
export const Verdict = Schema.Struct({ ok: Schema.Boolean, label: Schema.String })

/** The agent definition of the isolation tests: brief instructions, one inline skill, no tools. */
export const definition = {
  instructions: "Be brief.",
  skills: [Skill.inline("triage", "---\ndescription: Label issues.\n---\n# Triage\nBody.")],
  tools: Toolkit.empty
}

/** A writer of files under `source` (parent folders made as needed, with the given mode). */
export const writerInto = (source: string) => (rel: string, content: string, mode = 0o644) => {
  Fs.mkdirSync(Path.dirname(Path.join(source, rel)), { recursive: true })
  Fs.writeFileSync(Path.join(source, rel), content, { mode })
}

/**
 * A skill folder in `outside` linked into `skills` as `shared`, and a `loop` link in `skills` to
 * itself: links out of the profile and a cycle that a clone must not follow.
 */
export const linkSkills = (skills: string, outside: string) => {
  Fs.mkdirSync(Path.join(outside, "shared-skill"), { recursive: true })
  Fs.writeFileSync(Path.join(outside, "shared-skill/SKILL.md"), "---\nname: shared\ndescription: Shared.\n---\n")
  Fs.symlinkSync(Path.join(outside, "shared-skill"), Path.join(skills, "shared"))
  Fs.symlinkSync(".", Path.join(skills, "loop"))
}

/** A prepared source profile and what stood before the run. */
export interface Prepared {
  readonly source: string
  readonly outside: string
  /** The selection cloning `source` into the sandbox's clone root. */
  readonly selection: Profile.Selection
  readonly sourceBefore: Record<string, string>
  readonly outsideBefore: Record<string, string>
  readonly homeBefore: Record<string, string>
  readonly tmpBefore: ReadonlySet<string>
}

/**
 * Makes the source profile `name` (mode 700) and a folder outside it in the sandbox, fills them
 * with `populate`, puts `src/app.ts` in the workspace, and records source, outside, HOME and the
 * tmpdir as they stand.
 */
export const prepare = (
  sandbox: Harness.Sandbox,
  name: string,
  populate: (source: string, outside: string) => void
): Prepared => {
  const source = Path.join(sandbox.base, name)
  const outside = Path.join(sandbox.base, "outside")
  Fs.mkdirSync(source, { mode: 0o700 })
  Fs.mkdirSync(outside)
  populate(source, outside)
  Fs.mkdirSync(Path.join(sandbox.workspace, "src"))
  Fs.writeFileSync(Path.join(sandbox.workspace, "src/app.ts"), "export {}\n")
  return {
    source,
    outside,
    selection: Profile.cloneFrom(source, sandbox.root, { sessions: Path.join(sandbox.base, "sessions") }),
    sourceBefore: fullSnapshot(source),
    outsideBefore: fullSnapshot(outside),
    homeBefore: homeWatch(),
    tmpBefore: new Set(Fs.readdirSync(Os.tmpdir()))
  }
}

/**
 * Checks that source, outside and HOME are as `prepare` found them, that the workspace holds
 * exactly `workspace` (sorted names; `src` holding only `app.ts`) and that the clone root is empty.
 * Logs what the run added to the tmpdir.
 */
export const expectUntouched = (sandbox: Harness.Sandbox, prepared: Prepared, workspace: ReadonlyArray<string>) => {
  expect(fullSnapshot(prepared.source)).toEqual(prepared.sourceBefore)
  expect(fullSnapshot(prepared.outside)).toEqual(prepared.outsideBefore)
  expect(Fs.readdirSync(sandbox.workspace).sort()).toEqual(workspace)
  expect(Fs.readdirSync(Path.join(sandbox.workspace, "src"))).toEqual(["app.ts"])
  expect(Fs.readdirSync(sandbox.root)).toEqual([])
  expect(homeWatch()).toEqual(prepared.homeBefore)
  const tmpNew = Fs.readdirSync(Os.tmpdir()).filter((n) => !prepared.tmpBefore.has(n))
  console.log(`[isolation] new in tmpdir: ${JSON.stringify(tmpNew)}`)
}

/** The source profile of one isolation test and the workspace names expected after it. */
export interface Setup {
  /** The source profile's folder name in the sandbox. */
  readonly name: string
  readonly populate: (source: string, outside: string) => void
  /** The workspace's names (sorted) after the run. */
  readonly workspace: ReadonlyArray<string>
}

/** What an isolation test's body may use: its scope, the harness layer and a thread store. */
export type Services = Scope.Scope | Layer.Layer.Success<typeof Harness.layer> | ThreadStore.ThreadStore

/**
 * A live test that prepares a fresh sandbox from `setup` (see `prepare`), runs `body` (a generator
 * as for `Effect.gen`) in its own scope with the harness layer and an in-memory thread store, then
 * checks `expectUntouched`.
 */
export const itIsolated = (
  title: string,
  setup: Setup,
  body: (
    sandbox: Harness.Sandbox,
    prepared: Prepared
  ) => Generator<YieldWrap<Effect.Effect<unknown, unknown, Services>>, void, never>,
  timeout: number
) =>
  it.live(
    title,
    () =>
      Effect.gen(function*() {
        const sandbox = yield* Harness.sandbox
        const prepared = prepare(sandbox, setup.name, setup.populate)
        yield* Effect.gen(() => body(sandbox, prepared)).pipe(
          Effect.scoped,
          Effect.provide([Harness.layer, ThreadStore.layerMemory])
        )
        expectUntouched(sandbox, prepared, setup.workspace)
      }).pipe(Effect.scoped),
    timeout
  )

/** Runs `prompts` in order on a live thread `t` of `agent` and returns the thread. */
export const threadTurns = (agent: Agent.Agent, prompts: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const thread = yield* agent.thread("t")
    for (const prompt of prompts) yield* thread.run(prompt)
    return thread
  })

/** Checks that a structured `Judge.` turn came back as the scripted verdict. */
export const expectVerdict = <E, R>(turn: Effect.Effect<{ readonly value: typeof Verdict.Type }, E, R>) =>
  Effect.map(turn, (verdict) => expect(verdict.value).toEqual({ ok: true, label: "fine" }))

/**
 * The turns for a driver with a one-shot and a live path: a one-shot agent of `options` runs
 * `oneShot` (its answer checked by `check`) and a structured turn, and closes; then an agent of
 * `options` allowing every request for the session runs `prompts` and a structured turn on a live
 * thread, and closes.
 */
export const oneShotThenLive = <Tools extends Toolkit.Any>(
  options: Agent.Options<Tools>,
  oneShot: string,
  check: (text: string) => void,
  prompts: ReadonlyArray<string>
) =>
  Effect.gen(function*() {
    const plain = yield* Agent.make(options)
    check((yield* plain.run(oneShot)).text)
    yield* expectVerdict(plain.runAs(Verdict, "Judge."))
    yield* plain.close()
    const agent = yield* Agent.make({
      ...options,
      approvals: { handler: () => Effect.succeed(Approval.allowForSession) }
    })
    const thread = yield* threadTurns(agent, prompts)
    yield* expectVerdict(thread.runAs(Verdict, "Judge."))
    yield* agent.close()
  })
