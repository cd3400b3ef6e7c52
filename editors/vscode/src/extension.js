// VS Code entry point: starts `txcl lsp` (stdio) as the language server for .txcl files.
// Highlighting and snippets work without it; diagnostics, hover, completion, outline and
// formatting come from the server.
'use strict';
const vscode = require('vscode');
const { LanguageClient, TransportKind } = require('vscode-languageclient/node');

let client;

function serverOptions() {
  const config = vscode.workspace.getConfiguration('txcl');
  const command = config.get('server.command', 'txcl');
  const args = config.get('server.args', ['lsp']);
  return { command, args, transport: TransportKind.stdio };
}

async function activate(context) {
  const clientOptions = {
    documentSelector: [
      { scheme: 'file', language: 'txcl' },
      { scheme: 'untitled', language: 'txcl' },
      // rule test files: the server reports their TX4xx problems
      { scheme: 'file', pattern: '**/*.test.{yaml,yml,json}' },
    ],
    synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher('**/*.txcl') },
  };
  client = new LanguageClient('txcl', 'TXCL language server', serverOptions(), clientOptions);
  context.subscriptions.push(
    vscode.commands.registerCommand('txcl.restartServer', async () => {
      if (client) await client.restart();
    }),
  );
  try {
    await client.start();
  } catch (err) {
    vscode.window.showWarningMessage(
      `TXCL: could not start "${serverOptions().command} lsp" (${err.message}). ` +
        'Install txcl (pip install txcl) or set txcl.server.command.',
    );
  }
}

async function deactivate() {
  if (client) await client.stop();
}

module.exports = { activate, deactivate };
