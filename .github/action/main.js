'use strict';
// The talkops action's main step (action.yml: runs.main). Plain Node, no dependencies.
//
// 1. Installs talkops with install.sh (checksum-verified release, or a build of this
//    checkout) and, for sandbox: bwrap, makes bubblewrap usable with bwrap.sh.
// 2. Runs `talkops run` (or `talkops report --from`) with the inputs as arguments and
//    environment variables, built from inputs.json. Each value is one argv element
//    (--flag=value); nothing goes through a shell.
// 3. Forwards SIGINT and SIGTERM to talkops at once, so a cancelled job still tears its
//    sandbox down, and exits with talkops's exit code (128+N when a signal killed it).
// 4. Saves the run id and the sandbox provider in the step state before talkops starts:
//    the post step (post.js) deletes that run's sandboxes and nothing else.
const { spawn } = require('node:child_process');
const crypto = require('node:crypto');
const os = require('node:os');
const path = require('node:path');
const table = require('./inputs.json');
const { input, saveState, setOutput } = require('./workflow.js');

let child = null; // the process signals go to
let signalled = '';

for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    signalled = signalled || sig;
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill(sig);
    }
  });
}

// start runs a command and resolves to {code, signal} when it has exited. Its stdout and
// stderr, when piped, are passed on; a process it leaves behind (a sandbox of a killed
// talkops) may hold those pipes open, so after the exit their end is awaited for 2 s at
// most, never for as long as the leftover lives: the runner's own pipe or terminal stays
// with node, and the step ends when talkops does.
function start(file, args, options) {
  return new Promise((resolve, reject) => {
    child = spawn(file, args, options);
    const proc = child;
    for (const [from, to] of [[proc.stdout, process.stdout], [proc.stderr, process.stderr]]) {
      if (from && to) from.pipe(to, { end: false });
    }
    proc.on('error', reject);
    proc.on('exit', (code, signal) => {
      const done = () => resolve({ code, signal });
      const timer = setTimeout(() => {
        proc.stdout?.destroy();
        proc.stderr?.destroy();
        done();
      }, 2000);
      proc.on('close', () => {
        clearTimeout(timer);
        done();
      });
    });
  });
}

function exitCodeOf({ code, signal }) {
  return signal ? 128 + (os.constants.signals[signal] || 0) : code;
}

function fail(title, message, code) {
  console.log(`::error title=${title}::${message}`);
  process.exit(code);
}

// install runs install.sh and returns the path of the talkops binary it prints. Its other
// lines are passed on.
async function install() {
  const env = { ...process.env, INPUT_VERSION: input('version') };
  delete env.GITHUB_OUTPUT; // install.sh then prints bin=PATH instead of writing an output
  let out = '';
  const ran = start('bash', [path.join(__dirname, 'install.sh')], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.unpipe(process.stdout);
  child.stdout.on('data', (chunk) => { out += chunk; });
  const res = await ran;
  let bin = '';
  for (const line of out.split('\n')) {
    if (line.startsWith('bin=')) {
      bin = line.slice(4);
    } else if (line !== '') {
      console.log(line);
    }
  }
  if (signalled) process.exit(exitCodeOf(res));
  if (res.code !== 0 || bin === '') process.exit(res.code || 1); // install.sh printed ::error
  return bin;
}

// args builds the talkops command line for command ("run" or "report") from inputs.json.
function args(command) {
  const t = table[command];
  const out = [command];
  for (const [name, flag] of Object.entries(t.flags)) {
    let value = input(name);
    if (value === '' && name in t.pinned) value = t.pinned[name];
    if (value !== '' || name in t.pinned) out.push(`${flag}=${value}`);
  }
  for (const [name, flag] of Object.entries(t.switches)) {
    const value = input(name);
    if (value === 'true') out.push(flag);
    else if (value !== 'false' && value !== '') {
      fail('talkops', `the input ${name} (${flag}) must be true or false, got "${value}"`, 2);
    }
  }
  for (const line of input('extra-args').split('\n')) {
    const arg = line.trim();
    if (arg === '') continue;
    const refused = refusedExtraArg(arg);
    if (refused) fail('talkops', `extra-args: ${arg}: ${refused}`, 2);
    out.push(arg);
  }
  return out;
}

// refusedExtraArg says why an extra-args line is not passed on, or returns ''. The post
// step reaps by the run id this action chooses, so extra-args cannot set one or end the
// flags (after `--` the action's own --run-id would be a word of the prompt). A bare
// --sandbox would let the repository's config choose the sandbox; --sandbox=NAME is
// fine: the post step reaps whatever provider the run recorded.
function refusedExtraArg(arg) {
  if (arg === '--run-id' || arg.startsWith('--run-id=')) {
    return 'the action sets the run id (the post step deletes that run\'s sandboxes); remove it';
  }
  if (arg === '--') return 'the action adds flags after extra-args; remove the --';
  if (arg === '--sandbox') return 'a bare --sandbox lets the repository\'s config choose the sandbox; set the sandbox input (or --sandbox=NAME)';
  return '';
}

// sandboxOf is the provider argv asks for: the last --sandbox=NAME, as for talkops.
function sandboxOf(argv) {
  let name = '';
  for (const arg of argv) {
    if (arg.startsWith('--sandbox=')) name = arg.slice('--sandbox='.length);
  }
  return name;
}

// environment is talkops's environment: the job's, without the action's inputs (they
// carry secrets the sandbox must not see under another name), plus the env inputs.
function environment(command) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('INPUT_')) env[k] = v;
  }
  for (const [name, variable] of Object.entries(table[command].env)) {
    const value = input(name);
    if (value !== '') env[variable] = value;
  }
  if (command === 'run') {
    // The approval mode is the action's decision too: the flags above set yes or smart,
    // and this pins the rest to default, above whatever the project file says.
    env.TALKOPS_APPROVAL_MODE = input('auto-approve') === 'true' ? 'yes'
      : input('smart-approve') === 'true' ? 'smart' : 'default';
  }
  return env;
}

// newRunID is unique per job attempt and says where it came from.
function newRunID() {
  const run = /^[0-9]+$/.test(process.env.GITHUB_RUN_ID || '') ? process.env.GITHUB_RUN_ID : '0';
  const attempt = /^[0-9]+$/.test(process.env.GITHUB_RUN_ATTEMPT || '') ? process.env.GITHUB_RUN_ATTEMPT : '1';
  return `gh-${run}-${attempt}-${crypto.randomBytes(4).toString('hex')}`;
}

async function main() {
  const command = input('report-from') !== '' ? 'report' : 'run';
  const argv = args(command);
  const bin = await install();
  const sandbox = sandboxOf(argv);
  if (command === 'run' && sandbox === 'bwrap' && process.platform === 'linux') {
    const res = await start('bash', [path.join(__dirname, 'bwrap.sh')], { stdio: ['ignore', 'pipe', 'pipe'] });
    if (signalled || res.code !== 0) process.exit(exitCodeOf(res) || 1);
  }
  if (signalled) process.exit(128 + os.constants.signals[signalled]);

  if (command === 'run') {
    const runID = newRunID();
    argv.push(`--run-id=${runID}`);
    saveState('run_id', runID);
    saveState('bin', bin);
    saveState('sandbox', sandbox);
  }
  const cwd = path.resolve(process.env.GITHUB_WORKSPACE || process.cwd(), input('working-directory') || '.');
  // stdin is closed: the prompt comes from the inputs, and talkops must never wait on it.
  const running = start(bin, argv, { cwd, env: environment(command), stdio: ['ignore', 'pipe', 'pipe'] });
  if (command === 'run') saveState('pid', String(child.pid));
  const res = await running;
  const code = exitCodeOf(res);
  // talkops sets its outputs when it publishes; a usage error (exit 2) or a kill ends it
  // before that, so the exit code is always set here too (the same value when both are).
  setOutput('exit-code', String(code));
  if (res.signal) {
    console.log(`::error title=talkops::talkops was killed by ${res.signal}; the post step deletes what it left behind`);
  }
  console.log(`talkops exited with code ${code}${signalled ? ` after ${signalled}` : ''}`);
  process.exit(code);
}

main().catch((err) => fail('talkops', err.message, 1));
