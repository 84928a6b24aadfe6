// Unit tests of the skillhost JavaScript guest SDK under plain Node: schema output per
// kind, validation error paths, error mapping to the world's call-error, dispatch, log and
// progress through the native host. Run: node --test guest-sdk/js/test/

import { test } from "node:test";
import assert from "node:assert/strict";
import { nativeHost } from "../skillhost-native.js";

const { tool, skill, s, ToolError, log, progress, http, toCallError } = await import("../skillhost.js");

const callError = (fn) => {
  try {
    fn();
  } catch (e) {
    return { tag: e.tag, val: e.val, keys: Object.keys(e).sort() };
  }
  assert.fail("expected a call-error");
};

test("schema output per kind", () => {
  assert.deepEqual(s.string("Who.").toJSON(), { type: "string", description: "Who." });
  assert.deepEqual(s.string({ minLength: 1, pattern: /^a/ }).toJSON(), { type: "string", minLength: 1, pattern: "^a" });
  assert.deepEqual(s.number({ minimum: 0, maximum: 1 }).toJSON(), { type: "number", minimum: 0, maximum: 1 });
  assert.deepEqual(s.integer({ description: "n", default: 3 }).toJSON(), { type: "integer", description: "n", default: 3 });
  assert.deepEqual(s.boolean().toJSON(), { type: "boolean" });
  assert.deepEqual(s.enum(["plain", "warm"]).toJSON(), { enum: ["plain", "warm"] });
  assert.deepEqual(s.array(s.string(), { maxItems: 3 }).toJSON(), { type: "array", items: { type: "string" }, maxItems: 3 });
  assert.deepEqual(s.nullable(s.string("d")).toJSON(), { anyOf: [{ type: "string" }, { type: "null" }], description: "d" });
  assert.deepEqual(
    s.object({ name: s.string(), tone: s.optional(s.enum(["a"])), n: s.integer().default(1), when: s.string().describe("When.") }).toJSON(),
    {
      type: "object",
      properties: { name: { type: "string" }, tone: { enum: ["a"] }, n: { type: "integer", default: 1 }, when: { type: "string", description: "When." } },
      required: ["name", "when"],
      additionalProperties: false,
    },
  );
  assert.deepEqual(s.object({}).toJSON(), { type: "object", properties: {}, additionalProperties: false });
});

test("schema builder refuses mistakes", () => {
  assert.throws(() => s.string({ minLenght: 1 }), /unknown schema option `minLenght`/);
  assert.throws(() => s.integer({ default: 1.5 }), /default is not valid.*expected an integer/);
  assert.throws(() => s.array("string"), /s.array takes the schema/);
  assert.throws(() => s.object({ a: "string" }), /s.object takes an object of field schemas/);
  assert.throws(() => s.enum([]), /non-empty array/);
});

test("validation names the field path", () => {
  const input = s.object({ name: s.string(), places: s.optional(s.array(s.object({ city: s.string() }))), "odd key": s.optional(s.boolean()) });
  assert.deepEqual(input.parse({ name: "Ada", places: [{ city: "Rome" }] }), { name: "Ada", places: [{ city: "Rome" }] });
  const message = (value) => {
    try {
      input.parse(value);
    } catch (e) {
      assert.equal(e.kind, "invalid-input");
      return e.message;
    }
    assert.fail("expected invalid input");
  };
  assert.throws(() => input.parse({}), ToolError);
  assert.equal(message({ name: "Ada", places: [{ city: "Rome" }, { city: 3 }] }), "places[1].city: expected a string, got number 3");
  assert.equal(message({ places: [] }), "name: required");
  assert.equal(message({ name: "A", extra: 1 }), "extra: unknown field (known: name, places, odd key)");
  assert.equal(message({ name: "A", "odd key": "yes" }), '["odd key"]: expected true or false, got string "yes"');
  assert.equal(message([1]), "input: expected an object, got an array");
  assert.equal(message({ name: 1, places: "x" }), "name: expected a string, got number 1; places: expected an array, got string \"x\"");
});

test("validation checks each kind and fills defaults", () => {
  const input = s.object({
    n: s.integer({ minimum: 1, maximum: 5 }),
    x: s.number(),
    tone: s.enum(["plain", "warm"]),
    maybe: s.nullable(s.string()),
    parts: s.integer().default(2),
  });
  assert.deepEqual(input.parse({ n: 1, x: 0.5, tone: "warm", maybe: null }), { n: 1, x: 0.5, tone: "warm", maybe: null, parts: 2 });
  const m = (value) => {
    try {
      input.parse(value);
    } catch (e) {
      return e.message;
    }
    assert.fail("expected invalid input");
  };
  assert.equal(m({}), "n: required; x: required; tone: required; maybe: required");
  assert.equal(m({ n: 1.5, x: 1, tone: "plain", maybe: "a" }), "n: expected an integer, got number 1.5");
  assert.equal(m({ n: 9, x: 1, tone: "plain", maybe: "a" }), "n: must be at most 5, got 9");
  assert.equal(m({ n: 1, x: "1", tone: "plain", maybe: "a" }), 'x: expected a number, got string "1"');
  assert.equal(m({ n: 1, x: 1, tone: "loud", maybe: "a" }), 'tone: expected one of "plain", "warm", got string "loud"');
  assert.equal(m({ n: 1, x: 1, tone: "plain", maybe: 2 }), "maybe: expected a string, got number 2");
});

const hello = tool({
  name: "hello",
  description: "Greet someone by name.",
  input: s.object({ name: s.string("Who to greet."), tone: s.optional(s.enum(["plain", "warm"])) }),
  output: s.object({ greeting: s.string() }),
  readOnly: true,
  idempotent: true,
  examples: [{ name: "Ada" }],
  run({ name, tone }) {
    log.info("greeting", name);
    progress(1, 2, "half");
    return { greeting: tone === "warm" ? `Dear ${name}!` : `Hello, ${name}!` };
  },
});

const fails = (name, run, output) => tool({ name, description: "Fails.", output, run });

const guest = skill(
  hello,
  fails("invalid", () => {
    throw ToolError.invalidInput("when: must be in the future");
  }),
  fails("denied", () => {
    throw ToolError.denied("/data/secret.txt: not granted");
  }),
  fails("plain-error", () => {
    throw new Error("disk full");
  }),
  fails("type-error", () => null.x),
  fails("thrown-string", () => {
    throw "just a string";
  }),
  fails("bad-output", () => ({ greeting: 1 }), s.object({ greeting: s.string() })),
  fails("async-ok", async () => ({ ok: true })),
  fails("async-denied", async () => {
    throw ToolError.denied("host api.example.com");
  }),
);

test("tools() describes each tool", () => {
  const [d] = guest.tools();
  assert.equal(d.name, "hello");
  assert.deepEqual(JSON.parse(d.inputSchema), {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    type: "object",
    properties: { name: { type: "string", description: "Who to greet." }, tone: { enum: ["plain", "warm"] } },
    required: ["name"],
    additionalProperties: false,
  });
  assert.equal(JSON.parse(d.outputSchema).properties.greeting.type, "string");
  assert.deepEqual(d.annotations, { readOnly: true, destructive: false, idempotent: true, openWorld: false });
  assert.deepEqual(d.examples, ['{"name":"Ada"}']);
  assert.equal(guest.tools()[1].outputSchema, undefined);
  assert.deepEqual(guest.tools().map((t) => t.name), ["hello", "invalid", "denied", "plain-error", "type-error", "thrown-string", "bad-output", "async-ok", "async-denied"]);
});

test("call dispatches, validates and logs through the host", () => {
  nativeHost.reset();
  assert.equal(guest.call("hello", '{"name":"Ada","tone":"warm"}'), '{"greeting":"Dear Ada!"}');
  assert.deepEqual(nativeHost.logs, [{ level: "info", message: "greeting Ada" }]);
  assert.deepEqual(nativeHost.progress, [{ done: 1, total: 2, message: "half" }]);
  assert.deepEqual(callError(() => guest.call("hello", '{"name":3}')), { tag: "invalid-input", val: "name: expected a string, got number 3", keys: ["tag", "val"] });
  assert.deepEqual(callError(() => guest.call("hello", "{nope")).tag, "invalid-input");
  assert.match(callError(() => guest.call("hello", "{nope")).val, /^the input is not valid JSON/);
  const unknown = callError(() => guest.call("bye", "{}"));
  assert.equal(unknown.tag, "unknown-tool");
  assert.match(unknown.val, /no tool `bye`/);
});

test("errors map to the world's call-error", async () => {
  assert.deepEqual(callError(() => guest.call("invalid", "{}")), { tag: "invalid-input", val: "when: must be in the future", keys: ["tag", "val"] });
  assert.deepEqual(callError(() => guest.call("denied", "{}")), { tag: "denied", val: "/data/secret.txt: not granted", keys: ["tag", "val"] });
  assert.deepEqual(callError(() => guest.call("plain-error", "{}")), { tag: "failed", val: "disk full", keys: ["tag", "val"] });
  assert.equal(callError(() => guest.call("type-error", "{}")).tag, "failed");
  assert.match(callError(() => guest.call("type-error", "{}")).val, /^TypeError: /);
  assert.deepEqual(callError(() => guest.call("thrown-string", "{}")).val, "just a string");
  assert.match(callError(() => guest.call("bad-output", "{}")).val, /does not match its output schema: output.greeting: expected a string/);
  assert.equal(await guest.call("async-ok", "{}"), '{"ok":true}');
  await assert.rejects(guest.call("async-denied", "{}"), (e) => e.tag === "denied" && e.val === "host api.example.com");
  assert.deepEqual({ ...toCallError(ToolError.failed("x")) }, { tag: "failed", val: "x" });
});

test("tool() and skill() refuse mistakes at definition", () => {
  assert.throws(() => tool({ name: "Hello", description: "d", run() {} }), /lowercase/);
  assert.throws(() => tool({ name: "a", run() {} }), /needs a description/);
  assert.throws(() => tool({ name: "a", description: "d" }), /needs run/);
  assert.throws(() => tool({ name: "a", description: "d", input: s.string(), run() {} }), /input must be an s.object/);
  assert.throws(() => tool({ name: "a", description: "d", readonly: true, run() {} }), /unknown field readonly/);
  assert.throws(() => tool({ name: "a", description: "d", input: s.object({ n: s.integer() }), examples: [{ n: "x" }], run() {} }), /examples\[0\] is not a valid input: n: expected an integer/);
  assert.throws(() => skill(hello, hello), /two tools are named `hello`/);
  assert.throws(() => skill(), /at least one tool/);
  assert.throws(() => new ToolError("oops", "m"), /kind must be one of/);
});

test("log and progress never throw and reach the host", () => {
  nativeHost.reset();
  log.warn("rows", { n: 2 }, new Error("late"));
  progress(-3, undefined, undefined);
  progress(2.7, 10);
  assert.deepEqual(nativeHost.logs, [{ level: "warn", message: 'rows {"n":2} late' }]);
  assert.deepEqual(nativeHost.progress, [
    { done: 0, total: undefined, message: undefined },
    { done: 2, total: 10, message: undefined },
  ]);
});

test("http: a request with no response is a failed call naming the host", async () => {
  const saved = globalThis.fetch;
  globalThis.fetch = async () => {
    throw new TypeError("NetworkError when attempting to fetch resource");
  };
  try {
    await assert.rejects(http.get("https://api.example.com/v1?q=1"), (e) => e.kind === "failed" && e.message.includes('no response from api.example.com') && e.message.includes('"https://api.example.com"'));
    globalThis.fetch = async () => new Response("skillhost refused a request of skill `x`: not allowed", { status: 403, headers: { "content-type": "text/plain; charset=utf-8" } });
    await assert.rejects(http.post("https://api.example.com/", { a: 1 }), (e) => e.kind === "denied" && e.message.startsWith("api.example.com: skillhost refused"));
    let sent;
    globalThis.fetch = async (url, init) => {
      sent = { url, init };
      return new Response("{}", { status: 403, headers: { "content-type": "text/plain" } });
    };
    assert.equal((await http.post("https://api.example.com/x", { a: 1 })).status, 403);
    assert.equal(sent.init.body, '{"a":1}');
    assert.equal(sent.init.headers.get("content-type"), "application/json");
  } finally {
    globalThis.fetch = saved;
  }
});
