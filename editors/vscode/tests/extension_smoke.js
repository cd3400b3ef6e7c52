// Loads src/extension.js (the source esbuild bundles into dist/) with stub `vscode` and `vscode-languageclient/node` modules and checks
// that activate() starts a client that runs `txcl lsp` for the txcl language, that debug sessions of type "txcl" run `txcl dap`, and
// that the code lens commands and "Debug this case" start what they should.
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
const settings = { 'server.command': '/venv/bin/txcl', 'server.args': ['lsp'] };
const commands = {};
const factories = {};
const debugged = [];
const terminals = [];
const folder = { uri: { fsPath: '/ws' }, name: 'ws' };
const caseFile = ['stack: flow', 'cases:', '  - name: first', '    input: {}', '  - name: "second one"', '    input: {}'];
let active;
const stubs = {
  vscode: {
    workspace: {
      getConfiguration: () => ({ get: (key, dflt) => (key in settings ? settings[key] : dflt) }),
      createFileSystemWatcher: (glob) => ({ glob }),
      getWorkspaceFolder: () => folder,
      workspaceFolders: [folder],
    },
    window: {
      showWarningMessage: (msg) => { throw new Error('unexpected warning: ' + msg); },
      createTerminal: (opts) => {
        const t = { opts, sent: [], show() {}, sendText(text) { this.sent.push(text); } };
        terminals.push(t);
        return t;
      },
      get activeTextEditor() { return active; },
    },
    commands: { registerCommand: (name, fn) => { commands[name] = fn; return { dispose() {} }; } },
    debug: {
      registerDebugAdapterDescriptorFactory: (type, factory) => { factories[type] = factory; return { dispose() {} }; },
      startDebugging: async (f, config) => { debugged.push([f, config]); return true; },
    },
    DebugAdapterExecutable: class { constructor(command, args) { Object.assign(this, { command, args }); } },
    Uri: { file: (p) => ({ fsPath: p }) },
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
  assert.deepStrictEqual(client.server, { command: '/venv/bin/txcl', args: ['lsp'], transport: 0 });
  assert.ok(client.client.documentSelector.some((s) => s.language === 'txcl'));
  assert.ok(client.client.documentSelector.some((s) => s.pattern === '**/*.test.{yaml,yml,json}'));
  assert.deepStrictEqual(Object.keys(commands).sort(),
    ['txcl.debug', 'txcl.debugCase', 'txcl.restartServer', 'txcl.runInTerminal']);
  // a debug session of type txcl runs `txcl dap` with the configured executable
  const adapter = factories.txcl.createDebugAdapterDescriptor({});
  assert.deepStrictEqual([adapter.command, adapter.args], ['/venv/bin/txcl', ['dap']]);
  // the Run lens: the command in a terminal in the workspace, arguments quoted
  commands['txcl.runInTerminal']('/ws', ['test', '/ws/flow.test.yaml', '-k', "it's one"]);
  assert.strictEqual(terminals[0].opts.cwd, '/ws');
  assert.deepStrictEqual(terminals[0].sent, ["/venv/bin/txcl test /ws/flow.test.yaml -k 'it'\\''s one'"]);
  // the Debug lens: its launch configuration, started in the workspace folder
  await commands['txcl.debug']({ type: 'txcl', request: 'launch', name: 'x', workspace: '/ws', test: 'f::c' });
  assert.deepStrictEqual(debugged[0], [folder, { type: 'txcl', request: 'launch', name: 'x', workspace: '/ws', test: 'f::c' }]);
  // "Debug this case": the case whose `- name:` is at or above the cursor
  active = {
    document: { uri: { fsPath: '/ws/flow.test.yaml' }, lineAt: (i) => ({ text: caseFile[i] }) },
    selection: { active: { line: 5 } },
  };
  await commands['txcl.debugCase']();
  assert.strictEqual(debugged[1][1].test, '/ws/flow.test.yaml::second one');
  assert.strictEqual(debugged[1][1].type, 'txcl');
  await ext.deactivate();
  assert.ok(client.stopped);
  console.log('extension smoke test ok');
})().catch((err) => { console.error(err); process.exit(1); });
