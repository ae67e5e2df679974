'use strict';
// The few GitHub Actions runner conventions main.js and post.js use: inputs arrive as
// INPUT_<NAME> variables; step state and outputs are name=value lines appended to the
// files GITHUB_STATE and GITHUB_OUTPUT name.
const fs = require('node:fs');

function input(name) {
  return (process.env[`INPUT_${name.replace(/ /g, '_').toUpperCase()}`] || '').trim();
}

function appendLine(variable, name, value) {
  if (/[\r\n]/.test(value)) throw new Error(`${name}: a value with a line break cannot be saved`);
  const file = process.env[variable];
  if (file) fs.appendFileSync(file, `${name}=${value}\n`);
}

// saveState makes value available to the post step as STATE_<name>.
function saveState(name, value) {
  appendLine('GITHUB_STATE', name, value);
}

function setOutput(name, value) {
  appendLine('GITHUB_OUTPUT', name, value);
}

module.exports = { input, saveState, setOutput };
