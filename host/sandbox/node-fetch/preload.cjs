// Loaded by node in a networked skillhost sandbox (NODE_OPTIONS=--require=...) before the
// skill's own code: node's fetch, and every undici client on the global dispatcher, goes
// through the egress proxy that HTTPS_PROXY and HTTP_PROXY name. Node 20 ignores those
// variables (node 22.21 and 24.5 on honour them with NODE_USE_ENV_PROXY=1, also set).
// Not a security boundary: the sandbox has no network but the proxy, so code that undoes
// this (another NODE_OPTIONS, its own dispatcher) only reaches nothing.
'use strict';
// undici's global dispatcher, which node's fetch reads at each request. undici itself is
// loaded only when something first asks for it (it adds a tenth of a second to a start).
const key = Symbol.for('undici.globalDispatcher.1');
if (globalThis[key] === undefined) {
  const plain = (value) => Object.defineProperty(globalThis, key, { value, writable: true, enumerable: false, configurable: true });
  Object.defineProperty(globalThis, key, {
    configurable: true,
    get() {
      // undici reads the key while it loads: a plain, empty one until it has.
      plain(undefined);
      try {
        const { EnvHttpProxyAgent, setGlobalDispatcher } = require('./node_modules/undici');
        setGlobalDispatcher(new EnvHttpProxyAgent());
      } catch (error) {
        // A node older than undici supports: fetch goes without the proxy, as without this file.
        process.emitWarning(`skillhost: node's fetch cannot use the egress proxy: ${error.message}`);
      }
      return globalThis[key];
    },
    set: plain,
  });
}
