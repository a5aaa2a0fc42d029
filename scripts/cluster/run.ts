// npm run test:cluster — Hearth on several "hosts" made of network namespaces (scripts/cluster/topology.ts): an API
// host, a Redis host (redis-server with AOF), two worker hosts each with its own HEARTH_HOME and no shared files
// (HEARTH_STORAGE=fetch), and a client host. This process builds the network, runs scripts/cluster/scenarios.ts
// inside the client's namespace (which starts the other processes in theirs and cuts their links), and removes
// everything afterwards, also on failure or Ctrl-C. Skips, saying why, where the machine cannot (not root, no `ip`,
// no namespaces); exit code 0 then, so CI on such machines is not red for it. The whole run is bounded.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTopology, destroyTopology, qdiscAvailable, whyNotSupported } from './topology.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const RUN_LIMIT_MS = 15 * 60_000;

async function main(): Promise<number> {
  const why = whyNotSupported();
  if (why) {
    console.log(`test:cluster skipped: ${why}. (It needs root, iproute2 and network namespaces: see docs/testing.md.)`);
    return 0;
  }
  const workdir = fs.mkdtempSync(path.join(os.tmpdir(), 'hearth-cluster-'));
  const topo = createTopology(['api', 'redis', 'w1', 'w2', 'client']);
  let child: ReturnType<typeof spawn> | null = null;
  const cleanup = () => {
    // The scenarios' own processes (API, Redis, workers), by the ids it recorded, then the scenarios themselves.
    const pids = fs.existsSync(path.join(workdir, 'pids')) ? fs.readFileSync(path.join(workdir, 'pids'), 'utf8').split('\n').map(Number).filter(Boolean) : [];
    for (const pid of [...pids, child?.pid ?? 0].filter(Boolean)) {
      try {
        // Only if that id is still one of ours (not reused since): its command line names Hearth or redis-server.
        const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
        if (/hearth|redis-server|scenarios\.ts/.test(cmdline)) process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    destroyTopology(topo);
  };
  const onSignal = (sig: NodeJS.Signals) => {
    cleanup();
    process.exit(sig === 'SIGINT' ? 130 : 143);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const env = {
      ...process.env,
      HEARTH_CLUSTER: JSON.stringify(topo),
      HEARTH_CLUSTER_DIR: workdir,
      HEARTH_CLUSTER_TBF: qdiscAvailable('tbf') ? '1' : '',
      HEARTH_CLUSTER_NETEM: qdiscAvailable('netem') ? '1' : '',
    };
    child = spawn('ip', ['netns', 'exec', topo.hosts.client.ns, process.execPath, '--import', 'tsx', path.join(REPO, 'scripts/cluster/scenarios.ts')], {
      env, stdio: 'inherit', cwd: REPO,
    });
    const limit = setTimeout(() => child?.kill('SIGKILL'), RUN_LIMIT_MS);
    const code = await new Promise<number>((resolve) => child!.on('exit', (c, sig) => resolve(c ?? (sig ? 1 : 0))));
    clearTimeout(limit);
    return code;
  } finally {
    cleanup();
    // HEARTH_CLUSTER_KEEP=1 keeps the hosts' homes and logs for a look after a failure.
    if (process.env.HEARTH_CLUSTER_KEEP === '1') console.log(`test:cluster: kept ${workdir}`);
    else fs.rmSync(workdir, { recursive: true, force: true });
  }
}

process.exitCode = await main();
