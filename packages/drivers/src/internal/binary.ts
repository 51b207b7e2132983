/**
 * Where a driver's CLI comes from. Decided once, when the driver is built: the explicit
 * `binary` option; else the CLI package the app installed, found by Node's module resolution
 * from this package's own location (the app's package graph: never the working directory,
 * which a compiled app may be started from anywhere); else the CLI's name on the `PATH` the
 * process is given.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as NodeFs from "node:fs"
import { createRequire } from "node:module"
import * as NodePath from "node:path"
import { fileURLToPath } from "node:url"

/** @internal */
export interface Binary {
  /** What is spawned: an absolute path, or a bare name looked up on the process's `PATH`. */
  readonly command: string
  /** Arguments before the driver's own (the CLI's script, when it is run with this Node). */
  readonly prefix: ReadonlyArray<string>
  /** How `command` was chosen and what was tried first (the log line, a `SpawnFailed`'s detail). */
  readonly source: string
}

/** One way to run the CLI from its installed package. @internal */
export interface Candidate {
  /** Absolute path of the file that must exist. */
  readonly file: string
  /** `true`: a JavaScript entry point, run as `node <file>` with this process's Node. */
  readonly script: boolean
}

/** @internal */
export interface Spec {
  /** The npm package of the CLI, e.g. `@anthropic-ai/claude-code`. */
  readonly packageName: string
  /** The executable's name on the `PATH`, e.g. `claude`. */
  readonly pathName: string
  /** Candidates inside the installed package, best first. */
  readonly candidates: (installed: Installed) => ReadonlyArray<Candidate>
}

/** The CLI package as the app installed it. @internal */
export interface Installed {
  /** The package's directory. */
  readonly dir: string
  readonly version: string
  readonly bin: { readonly [name: string]: string }
  /** Resolves a package the way the CLI package itself would (its own optional dependencies). */
  readonly resolvePackage: (name: string) => string | undefined
}

const here = (): string => {
  // Built: `build/esm/internal/binary.js`; from source: `src/internal/binary.ts`. Either way this
  // file sits inside the installed `@tether/drivers`, so resolving from it is resolving from the app.
  const url = import.meta.url
  return url.startsWith("file:") ? fileURLToPath(url) : url
}

/** Whether `file` is a regular file (and, with `executable`, one this process may execute). @internal */
export const isFile = (file: string, executable: boolean): boolean => {
  try {
    if (!NodeFs.statSync(file).isFile()) return false
    if (executable) NodeFs.accessSync(file, NodeFs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

const resolvePackageDir = (from: string, name: string): string | undefined => {
  const require = createRequire(from)
  try {
    return NodePath.dirname(require.resolve(`${name}/package.json`))
  } catch {
    // A package whose `exports` do not list `./package.json` (e.g. `@tencent-ai/agent-sdk`): the
    // first `node_modules/<name>` on Node's own lookup path, as `require(name)` would find it.
    for (const dir of require.resolve.paths(name) ?? []) {
      const candidate = NodePath.join(dir, name)
      if (isFile(NodePath.join(candidate, "package.json"), false)) return candidate
    }
    return undefined
  }
}

const readInstalled = (dir: string): Installed | undefined => {
  try {
    const manifest = JSON.parse(NodeFs.readFileSync(NodePath.join(dir, "package.json"), "utf8")) as {
      readonly version?: unknown
      readonly bin?: unknown
    }
    const bin: { [name: string]: string } = {}
    if (typeof manifest.bin === "object" && manifest.bin !== null) {
      for (const [name, file] of Object.entries(manifest.bin)) if (typeof file === "string") bin[name] = file
    }
    return {
      dir,
      version: typeof manifest.version === "string" ? manifest.version : "unknown",
      bin,
      resolvePackage: (name) => resolvePackageDir(NodePath.join(dir, "package.json"), name)
    }
  } catch {
    return undefined
  }
}

/**
 * Resolves the CLI. `from` is the file module resolution starts at (this package, in the app);
 * a test passes another one.
 *
 * @internal
 */
export const resolve = (spec: Spec, explicit: string | undefined, from: string = here()): Binary => {
  if (explicit !== undefined) return { command: explicit, prefix: [], source: "the `binary` option" }
  const tried: Array<string> = []
  const dir = resolvePackageDir(from, spec.packageName)
  const installed = dir === undefined ? undefined : readInstalled(dir)
  if (installed === undefined) {
    tried.push(`${spec.packageName} is not installed where the app resolves packages (from ${NodePath.dirname(from)})`)
  } else {
    for (const candidate of spec.candidates(installed)) {
      if (isFile(candidate.file, !candidate.script)) {
        const described = `${spec.packageName} ${installed.version} installed at ${installed.dir}`
        return candidate.script
          ? {
            command: process.execPath,
            prefix: [candidate.file],
            source: `${described}, run with ${process.execPath}`
          }
          : { command: candidate.file, prefix: [], source: described }
      }
      tried.push(`${candidate.file} (${candidate.script ? "missing" : "missing or not executable"})`)
    }
  }
  return {
    command: spec.pathName,
    prefix: [],
    source: `\`${spec.pathName}\` on the PATH given to the process, after trying: ${tried.join("; ")}`
  }
}

/**
 * An effect that logs the choice the first time it runs and does nothing after (one line per
 * driver, not per turn).
 *
 * @internal
 */
export const announce = (driver: string, binary: Binary): Effect.Effect<void> => {
  let done = false
  return Effect.suspend(() => {
    if (done) return Effect.void
    done = true
    return Effect.logInfo(`${driver} driver runs ${[binary.command, ...binary.prefix].join(" ")}`).pipe(
      Effect.annotateLogs({ driver, binarySource: binary.source })
    )
  })
}

/**
 * The native binary of a platform package (`<scope>/<name>-<platform>-<arch>[-musl]`), looked
 * up as the CLI package resolves its own optional dependencies.
 *
 * @internal
 */
export const platformPackages = (base: string): ReadonlyArray<string> => {
  const platform = process.platform === "android" ? "linux" : process.platform
  return [`${base}-${platform}-${process.arch}`, `${base}-${platform}-${process.arch}-musl`]
}
