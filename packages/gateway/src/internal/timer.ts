/**
 * A one-shot timer for any `Duration`: Node clamps a delay above 2^31-1 ms (about 24.8 days), or
 * an infinite one, to 1 ms, so a long handler deadline would fire at once.
 *
 * @internal
 */
import * as Duration from "effect/Duration"

/** The largest delay Node's `setTimeout` honours. */
const maxTimerMillis = 2 ** 31 - 1

/**
 * Runs `onFire` once `duration` has passed, unless the returned function is called first. An
 * infinite duration never fires (no timer is set); a finite one above {@link maxTimerMillis} is
 * re-armed in steps of at most that. The timer never keeps the event loop alive.
 *
 * @internal
 */
export const after = (duration: Duration.Duration, onFire: () => void): () => void => {
  if (!Duration.isFinite(duration)) return () => {}
  let timer: ReturnType<typeof setTimeout>
  const arm = (remaining: number) => {
    const step = Math.min(remaining, maxTimerMillis)
    timer = setTimeout(() => remaining > step ? arm(remaining - step) : onFire(), step)
    timer.unref()
  }
  arm(Duration.toMillis(duration))
  return () => clearTimeout(timer)
}
