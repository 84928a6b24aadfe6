// {{name}}: a skillhost skill in JavaScript, built with `skillhost build`.
//
// Each tool is described with `tool({...})`: its input and output schemas (the SDK checks
// every input against them before `run` sees it), behaviour hints and examples. `guest`
// is the export componentize-js turns into the skill's component. Each call runs in a
// fresh instance. `skillhost.js`, the SDK, is written beside this file by `skillhost build`.

import { tool, skill, s, ToolError, log } from "./skillhost.js";

const hello = tool({
  name: "hello",
  description: "Greet someone by name.",
  input: s.object({ name: s.string("Who to greet.") }),
  output: s.object({ greeting: s.string() }),
  readOnly: true,
  idempotent: true,
  examples: [{ name: "Ada" }],
  run({ name }) {
    if (!name.trim()) throw ToolError.invalidInput("name: must not be empty");
    log.debug(`greeting ${name}`);
    return { greeting: `Hello, ${name}!` };
  },
});

export const guest = skill(hello);
