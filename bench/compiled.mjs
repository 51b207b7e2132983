/**
 * The benchmarks measure the packages as an app that installs them runs them: the JavaScript
 * `tsc` emits into each package's `build/esm` (`npm run bench` builds it first). Run without the
 * `@tether/source` condition, `@tether/*` imports already resolve there; this hook sends a
 * bench's own imports of package sources (`../packages/<name>/src/<path>`, for internals no
 * package exports) to the same build. tsx's transform of the sources is not what an app runs: it
 * keeps every function's name with a call per closure created, a cost in hot code that
 * creates closures.
 *
 * Use: node --import tsx --import ./bench/compiled.mjs bench/<file>.ts
 */
import { register } from "node:module"

register("./compiledHooks.mjs", import.meta.url)
