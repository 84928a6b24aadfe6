// sdk-example: a skillhost skill written with the JavaScript guest SDK (`skillhost.js`,
// which `skillhost build` writes beside this file). Two tools: `hello` greets, with
// nested optional input; `split` divides a total into parts and reports progress, and
// fails with a ToolError when asked to divide by zero.

import { tool, skill, s, ToolError, log, progress } from "./skillhost.js";

const hello = tool({
  name: "hello",
  description: "Greet someone by name.",
  input: s.object({
    name: s.string("Who to greet."),
    tone: s.optional(s.enum(["plain", "warm"], "How warm the greeting is.")),
    places: s.optional(s.array(s.object({ city: s.string("A city they visited.") }))),
  }),
  output: s.object({ greeting: s.string() }),
  readOnly: true,
  idempotent: true,
  examples: [{ name: "Ada" }, { name: "Ada", tone: "warm", places: [{ city: "London" }] }],
  run({ name, tone, places }) {
    log.debug("greeting", name);
    const cities = places?.length ? `, traveller of ${places.map((p) => p.city).join(" and ")}` : "";
    return { greeting: tone === "warm" ? `Dear ${name}${cities}, so good to see you!` : `Hello, ${name}${cities}!` };
  },
});

const split = tool({
  name: "split",
  description: "Divide a total into equal parts.",
  input: s.object({ total: s.number("The amount to divide."), parts: s.integer({ description: "How many parts.", minimum: 0, default: 2 }) }),
  output: s.object({ each: s.number() }),
  readOnly: true,
  idempotent: true,
  examples: [{ total: 10, parts: 4 }],
  run({ total, parts }) {
    if (parts === 0) throw ToolError.failed("cannot split into 0 parts; ask for 1 or more");
    progress(1, 1, "divided");
    return { each: total / parts };
  },
});

export const guest = skill(hello, split);
