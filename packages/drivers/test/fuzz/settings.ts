/**
 * How much the fuzz tests run. `npm test` runs the short, fixed-seed setting; `npm run fuzz`
 * sets `TETHER_FUZZ=long` (minutes, more and larger inputs). `FUZZ_SEED=<integer>` replays or
 * varies a run in either setting; `FUZZ_RUNS=<integer>` overrides the number of runs per property.
 */
const integer = (name: string): number | undefined => {
  const value = process.env[name]
  if (value === undefined || value === "") return undefined
  const parsed = Number(value)
  if (!Number.isSafeInteger(parsed)) throw new Error(`${name} must be an integer, got ${JSON.stringify(value)}`)
  return parsed
}

export const long = process.env["TETHER_FUZZ"] === "long"

/** The fixed default keeps `npm test` reproducible; a failure prints the seed and path to replay it. */
export const seed = integer("FUZZ_SEED") ?? 26

export const runs = (short: number, longRuns: number): number => integer("FUZZ_RUNS") ?? (long ? longRuns : short)

/** Prints a summary line in the long setting (the counts a long run reports). */
export const report = (line: string): void => {
  if (long) process.stdout.write(`${line}\n`)
}
