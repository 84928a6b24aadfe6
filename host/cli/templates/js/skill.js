// {{name}}: a skillhost skill in JavaScript, built with `skillhost build`.
//
// componentize-js turns this module into a component of the `skillhost:skill` world: the
// `guest` object below implements its `guest` interface. Each call runs in a fresh instance.

import { log } from "skillhost:skill/host@0.1.0";

const HELLO = {
  name: "hello",
  description: "Greet someone by name.",
  inputSchema: JSON.stringify({
    type: "object",
    properties: { name: { type: "string", description: "Who to greet." } },
    required: ["name"],
  }),
  outputSchema: JSON.stringify({
    type: "object",
    properties: { greeting: { type: "string" } },
    required: ["greeting"],
  }),
  annotations: { readOnly: true, destructive: false, idempotent: true, openWorld: false },
  examples: [JSON.stringify({ name: "Ada" })],
};

/** A `call-error` of the world: throw it to fail a call. */
class CallError {
  constructor(tag, val) {
    this.tag = tag;
    this.val = val;
  }
}

function hello({ name }) {
  if (typeof name !== "string") throw new CallError("invalid-input", "`name` must be a string");
  log("debug", `greeting ${name}`);
  return { greeting: `Hello, ${name}!` };
}

export const guest = {
  tools() {
    return [HELLO];
  },

  call(tool, input) {
    if (tool !== "hello") throw new CallError("unknown-tool", tool);
    try {
      return JSON.stringify(hello(JSON.parse(input)));
    } catch (e) {
      // Anything else thrown would abort the instance: report it as a failure.
      throw e instanceof CallError ? e : new CallError(e instanceof SyntaxError ? "invalid-input" : "failed", String(e));
    }
  },
};
