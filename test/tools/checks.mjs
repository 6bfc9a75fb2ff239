// The check runner of the node-based tests (chart_grafana, topology_draw_render): each check
// prints "ok   NAME" or "FAIL NAME: why"; finish() prints the summary and exits 0, or 1 when a
// check failed.
export function checks(label) {
  let failures = 0;
  return {
    check(name, fn) {
      try {
        fn();
        console.log(`ok   ${name}`);
      } catch (e) {
        failures++;
        console.log(`FAIL ${name}: ${e.message}`);
      }
    },
    assert(cond, msg) {
      if (!cond) throw new Error(msg);
    },
    finish() {
      console.log(failures === 0 ? `${label}: all checks passed` : `${label}: ${failures} check(s) failed`);
      process.exit(failures === 0 ? 0 : 1);
    },
  };
}
