// throttle(fn, ms): calls fn at most once per `ms`; calls in between are
// folded into one trailing call, so the last change is never lost. The
// returned function has cancel(). `now`/`setTimer`/`clearTimer` are
// injectable for tests.
export function throttle(fn, ms, timers = {}) {
  const now = timers.now || (() => Date.now());
  const setTimer = timers.setTimer || ((f, d) => setTimeout(f, d));
  const clearTimer = timers.clearTimer || ((h) => clearTimeout(h));
  let last = -Infinity;
  let timer = null;
  let pendingArgs = null;
  function run() {
    timer = null;
    last = now();
    const args = pendingArgs;
    pendingArgs = null;
    fn(...args);
  }
  function throttled(...args) {
    pendingArgs = args;
    if (timer) return;
    const wait = last + ms - now();
    if (wait <= 0) run();
    else timer = setTimer(run, wait);
  }
  throttled.cancel = () => {
    if (timer) clearTimer(timer);
    timer = null;
    pendingArgs = null;
  };
  return throttled;
}
