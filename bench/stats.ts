/** Small statistics shared by the bench files. */

/**
 * The first and third quartiles (nearest rank) of paired ratios: on a shared VM one round's ratio
 * can be far off, and they say how far the middle half of the rounds spread around the median.
 */
export const quartiles = (values: ReadonlyArray<number>): readonly [number, number] => {
  const sorted = [...values].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!
  return [at(0.25), at(0.75)]
}

/** The median (the upper one of an even count). */
export const median = (values: ReadonlyArray<number>): number =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
