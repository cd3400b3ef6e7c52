// Tokenize .txcl files with the TextMate grammar (the engine VS Code uses) and print
// JSON: {file: [[startOffset, endOffset, "scope scope ..."], ...]}. Offsets count UTF-16
// units from the start of the file. Used by tests/editors to compare with the Pygments lexer.
'use strict';
const fs = require('fs');
const path = require('path');
const vsctm = require('vscode-textmate');
const oniguruma = require('vscode-oniguruma');

const root = path.resolve(__dirname, '..');
const wasm = fs.readFileSync(require.resolve('vscode-oniguruma/release/onig.wasm')).buffer;

async function main() {
  await oniguruma.loadWASM(wasm);
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (sources) => new oniguruma.OnigScanner(sources),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async (scopeName) => {
      if (scopeName !== 'source.txcl') return null;
      const file = path.join(root, 'syntaxes', 'txcl.tmLanguage.json');
      return vsctm.parseRawGrammar(fs.readFileSync(file, 'utf8'), file);
    },
  });
  const grammar = await registry.loadGrammar('source.txcl');
  const result = {};
  for (const file of process.argv.slice(2)) {
    const text = fs.readFileSync(file, 'utf8');
    const lines = text.split('\n');
    let ruleStack = vsctm.INITIAL;
    let offset = 0;
    const tokens = [];
    for (const raw of lines) {
      const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
      const r = grammar.tokenizeLine(line, ruleStack);
      for (const t of r.tokens) {
        const end = Math.min(t.endIndex, line.length);
        if (end > t.startIndex) tokens.push([offset + t.startIndex, offset + end, t.scopes.join(' ')]);
      }
      ruleStack = r.ruleStack;
      offset += raw.length + 1;
    }
    result[file] = tokens;
  }
  process.stdout.write(JSON.stringify(result));
}

main().catch((err) => { console.error(err); process.exit(1); });
