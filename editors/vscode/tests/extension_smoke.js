// Loads src/extension.js (the source esbuild bundles into dist/) with stub `vscode` and `vscode-languageclient/node` modules and checks
// that activate() starts a client that runs `txcl lsp` for the txcl language.
'use strict';
const Module = require('module');
const assert = require('assert');
const path = require('path');

const started = [];
class FakeClient {
  constructor(id, name, server, client) {
    Object.assign(this, { id, name, server, client });
  }
  async start() { started.push(this); }
  async stop() { this.stopped = true; }
  async restart() {}
}
const settings = { 'server.command': 'txcl', 'server.args': ['lsp'] };
const commands = [];
const stubs = {
  vscode: {
    workspace: {
      getConfiguration: () => ({ get: (key, dflt) => (key in settings ? settings[key] : dflt) }),
      createFileSystemWatcher: (glob) => ({ glob }),
    },
    window: { showWarningMessage: (msg) => { throw new Error('unexpected warning: ' + msg); } },
    commands: { registerCommand: (name, fn) => { commands.push(name); return { dispose() {} }; } },
  },
  'vscode-languageclient/node': { LanguageClient: FakeClient, TransportKind: { stdio: 0 } },
};
const load = Module._load;
Module._load = function (request, ...rest) {
  if (request in stubs) return stubs[request];
  return load.call(this, request, ...rest);
};

(async () => {
  const ext = require(path.join(__dirname, '..', 'src', 'extension.js'));
  const context = { subscriptions: [] };
  await ext.activate(context);
  assert.strictEqual(started.length, 1);
  const client = started[0];
  assert.deepStrictEqual(client.server, { command: 'txcl', args: ['lsp'], transport: 0 });
  assert.ok(client.client.documentSelector.some((s) => s.language === 'txcl'));
  assert.ok(client.client.documentSelector.some((s) => s.pattern === '**/*.test.{yaml,yml,json}'));
  assert.deepStrictEqual(commands, ['txcl.restartServer']);
  await ext.deactivate();
  assert.ok(client.stopped);
  console.log('extension smoke test ok');
})().catch((err) => { console.error(err); process.exit(1); });
