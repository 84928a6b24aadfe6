// Native test mode of the skillhost JavaScript guest SDK: run a skill's module under plain
// Node, without the component.
//
// `skillhost.js` imports the host interface `skillhost:skill/host@0.1.0`, which exists only
// inside the component. Importing this module first registers a Node module hook that
// maps that import to a recorder, so `skill.js` can then be imported and its `guest`
// called in ordinary tests:
//
//     import { nativeHost } from "./skillhost-native.js";
//     const { guest } = await import("./skill.js");   // dynamic: after the hook
//     guest.call("hello", '{"name": "Ada"}');
//     nativeHost.logs;                                  // [{ level, message }, ...]
//
// Or for a whole run: `node --import ./skillhost-native.js --test`. Needs Node 20.6+.

import { register } from "node:module";

/** What the skill sent the host: log lines and progress reports, in order. */
export const nativeHost = {
  /** `{ level, message }` per log line. */
  logs: [],
  /** `{ done, total, message }` per progress report (numbers; `total`/`message` undefined when none). */
  progress: [],
  /** Also print log lines to stderr (off by default). */
  echo: false,
  /** Forget what was recorded. */
  reset() {
    this.logs.length = 0;
    this.progress.length = 0;
  },
};

globalThis.__skillhostNativeHost = {
  log(level, message) {
    if (typeof level !== "string" || typeof message !== "string") throw new TypeError("host.log takes (level: string, message: string)");
    nativeHost.logs.push({ level, message });
    if (nativeHost.echo) process.stderr.write(`[${level}] ${message}\n`);
  },
  progress(done, total, message) {
    // The component lowers u64 from BigInt: insist on it here too, so a mistake shows in tests.
    if (typeof done !== "bigint" || (total !== undefined && typeof total !== "bigint")) throw new TypeError("host.progress takes u64 values as BigInt");
    nativeHost.progress.push({ done: Number(done), total: total === undefined ? undefined : Number(total), message });
  },
};

const STUB = `export const log = (l, m) => globalThis.__skillhostNativeHost.log(l, m);
export const progress = (d, t, m) => globalThis.__skillhostNativeHost.progress(d, t, m);`;

const HOOKS = `export async function resolve(specifier, context, next) {
  if (specifier === "skillhost:skill/host@0.1.0") {
    return { url: ${JSON.stringify("data:text/javascript," + encodeURIComponent(STUB))}, shortCircuit: true };
  }
  return next(specifier, context);
}`;

register("data:text/javascript," + encodeURIComponent(HOOKS));
