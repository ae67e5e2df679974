'use strict';
// The talkops action's post step (action.yml: runs.post, post-if: always()). It runs after
// the job's steps on success, failure and cancellation alike, and deletes what this
// action's talkops run left behind, nothing else:
//
// 1. When the talkops process the main step started is still running (the main step was
//    killed before it could stop it), it sends SIGTERM and waits up to 30 s for talkops's
//    own teardown, then SIGKILL.
// 2. It runs `talkops sandbox gc --run-id <id> --older-than=0s`, which deletes the
//    sandboxes of this run whose talkops process is gone (a SIGKILL after the runner's
//    cancel window, a crash), and prints what it deleted. It names no --provider: gc asks
//    the provider the main step passed (as TALKOPS_SANDBOX_PROVIDER, so the repository's
//    config cannot swap it) and every provider the run recorded a sandbox with in
//    talkops's ledger, whichever way the run chose it (the sandbox input, a
//    --sandbox=NAME in extra-args). Nothing is built for providers the run never used.
//
// It never fails the job: a failed sweep is a warning, the verdict is the main step's.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');

const runID = process.env.STATE_run_id || '';
const bin = process.env.STATE_bin || '';
const sandbox = process.env.STATE_sandbox || '';
const pid = Number(process.env.STATE_pid || 0);

function warn(message) {
  console.log(`::warning title=talkops reap::${message}`);
}

// isOurTalkops reports whether pid is still the talkops binary the main step started
// (a pid can be reused). Only Linux can tell; elsewhere the process is left alone.
function isOurTalkops() {
  if (!pid) return false;
  try {
    return fs.readlinkSync(`/proc/${pid}/exe`).replace(/ \(deleted\)$/, '') === fs.realpathSync(bin);
  } catch {
    return false;
  }
}

function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

// signal sends sig to talkops; it may have exited in the meantime, which is fine.
function signal(sig) {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if (err.code !== 'ESRCH') throw err;
  }
}

function stopTalkops() {
  if (!isOurTalkops()) return;
  console.log(`talkops (pid ${pid}) still runs after the main step ended; sending SIGTERM so it tears its sandbox down`);
  signal('SIGTERM');
  for (let waited = 0; waited < 30000 && isOurTalkops(); waited += 200) sleep(200);
  if (isOurTalkops()) {
    warn(`talkops (pid ${pid}) did not stop within 30 s of SIGTERM; killing it`);
    signal('SIGKILL');
    for (let waited = 0; waited < 5000 && isOurTalkops(); waited += 100) sleep(100);
  }
}

function main() {
  if (runID === '' || bin === '') {
    console.log('talkops run did not start in this job; nothing to reap');
    return;
  }
  try {
    stopTalkops();
  } catch (err) {
    warn(`could not stop talkops (pid ${pid}): ${err.message}`);
  }
  const args = ['sandbox', 'gc', `--run-id=${runID}`, '--older-than=0s'];
  console.log(`talkops ${args.join(' ')}`);
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('INPUT_') && !k.startsWith('STATE_')) env[k] = v;
  }
  if (sandbox !== '') env.TALKOPS_SANDBOX_PROVIDER = sandbox;
  const res = spawnSync(bin, args, { env, stdio: ['ignore', 'inherit', 'inherit'] });
  if (res.error || res.status !== 0) {
    warn(`talkops ${args.join(' ')} failed (${res.error ? res.error.message : `exit ${res.status}`}); list what is left with: talkops sandbox ls --run-id=${runID}`);
  }
}

try {
  main();
} catch (err) {
  warn(err.message);
}
process.exitCode = 0;
