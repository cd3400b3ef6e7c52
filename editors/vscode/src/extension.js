// VS Code entry point: starts `txcl lsp` (stdio) as the language server for .txcl files, and
// `txcl dap` as the debug adapter for launch configurations of type "txcl". Highlighting and
// snippets work without either; diagnostics, hover, completion, navigation, code lenses and
// formatting come from the server.
'use strict';
const vscode = require('vscode');
const { LanguageClient, TransportKind } = require('vscode-languageclient/node');

let client;

function txclCommand() {
  return vscode.workspace.getConfiguration('txcl').get('server.command', 'txcl');
}

function serverOptions() {
  const config = vscode.workspace.getConfiguration('txcl');
  const command = config.get('server.command', 'txcl');
  const args = config.get('server.args', ['lsp']);
  return { command, args, transport: TransportKind.stdio };
}

// `txcl dap` over stdio for every debug session of type "txcl"
const debugAdapterFactory = {
  createDebugAdapterDescriptor() {
    return new vscode.DebugAdapterExecutable(txclCommand(), ['dap']);
  },
};

// The case of a rule test file the cursor stands in: its `- name:` line at or above the cursor.
function caseAt(document, line) {
  for (let i = line; i >= 0; i--) {
    const m = /^\s*-\s*name:\s*(.+?)\s*$/.exec(document.lineAt(i).text);
    if (m) return m[1].replace(/^(["'])(.*)\1$/, '$2');
  }
  return undefined;
}

function folderOf(uri) {
  return (uri && vscode.workspace.getWorkspaceFolder(uri)) || (vscode.workspace.workspaceFolders || [])[0];
}

// code lens "Run" / "Test": the txcl command in a terminal, in the workspace
function runInTerminal(workspace, args) {
  const terminal = vscode.window.createTerminal({ name: 'txcl', cwd: workspace });
  const quoted = args.map((a) => (/^[\w./:=@-]+$/.test(a) ? a : `'${String(a).replace(/'/g, "'\\''")}'`));
  terminal.show();
  terminal.sendText([txclCommand(), ...quoted].join(' '));
}

// code lens "Debug": a txcl launch configuration
function debug(config) {
  const uri = config.workspace ? vscode.Uri.file(config.workspace) : undefined;
  return vscode.debug.startDebugging(folderOf(uri), config);
}

// "TXCL: Debug this case" from a rule test file (the case under the cursor)
function debugCase() {
  const editor = vscode.window.activeTextEditor;
  if (!editor) return undefined;
  const name = caseAt(editor.document, editor.selection.active.line);
  if (!name) {
    vscode.window.showWarningMessage('TXCL: put the cursor in a case (below its "- name:" line).');
    return undefined;
  }
  const folder = folderOf(editor.document.uri);
  return debug({
    type: 'txcl', request: 'launch', name: `Debug ${name}`,
    workspace: folder ? folder.uri.fsPath : undefined,
    test: `${editor.document.uri.fsPath}::${name}`,
  });
}

async function activate(context) {
  const clientOptions = {
    documentSelector: [
      { scheme: 'file', language: 'txcl' },
      { scheme: 'untitled', language: 'txcl' },
      // rule test files: the server reports their TX4xx problems and puts lenses on their cases
      { scheme: 'file', pattern: '**/*.test.{yaml,yml,json}' },
    ],
    synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher('**/*.txcl') },
  };
  client = new LanguageClient('txcl', 'TXCL language server', serverOptions(), clientOptions);
  context.subscriptions.push(
    vscode.commands.registerCommand('txcl.restartServer', async () => {
      if (client) await client.restart();
    }),
    vscode.commands.registerCommand('txcl.runInTerminal', runInTerminal),
    vscode.commands.registerCommand('txcl.debug', debug),
    vscode.commands.registerCommand('txcl.debugCase', debugCase),
    vscode.debug.registerDebugAdapterDescriptorFactory('txcl', debugAdapterFactory),
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

module.exports = { activate, deactivate, caseAt };
