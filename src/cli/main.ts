// `hearth <command> …`: each command lives in src/cli/commands/<command>.ts and exports run(argv) → exit code.
import { COMMAND_HELP, wantsHelp } from './help.js';

const COMMANDS: Record<string, string> = {
  serve: 'run the HTTP service (embedded store and queue unless REDIS_URL is set)',
  keys: 'create, list and revoke API keys',
  worker: 'run a worker: --kind inference|training --device cpu|cuda[:N]|webgpu[:N]|auto --redis <url>',
  models: 'import, list, remove and export base models',
  generate: 'raw text generation with a local model (no chat template)',
  bench: 'bench hardware --model <id>: measure a model on this device and print its prices',
  tour: 'fine-tune the demo model on a small corpus through a running server, and compare it with the base',
};

type Command = { run: (argv: string[]) => Promise<number> };
const load = (name: string) => import(`./commands/${name}.js`) as Promise<Command>;

function usage(): string {
  const lines = Object.entries(COMMANDS).map(([name, describe]) => `  ${name.padEnd(10)} ${describe}`);
  return `usage: hearth <command> [options]\n\ncommands:\n${lines.join('\n')}\n\n"hearth <command> --help" tells more.\n`;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === 'help' && rest[0] && rest[0] in COMMAND_HELP) {
    process.stdout.write(`${COMMAND_HELP[rest[0]]}\n`);
    return 0;
  }
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(usage());
    return name ? 0 : 1;
  }
  if (name in COMMAND_HELP && wantsHelp(rest)) {
    process.stdout.write(`${COMMAND_HELP[name]}\n`);
    return 0;
  }
  if (!(name in COMMANDS)) {
    process.stderr.write(`hearth: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  let mod;
  try {
    mod = await load(name);
  } catch (err) {
    process.stderr.write(`hearth ${name}: not available in this build (${(err as Error).message})\n`);
    return 2;
  }
  return mod.run(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== 0) process.exitCode = code;
  },
  (err: Error) => {
    process.stderr.write(`hearth: ${err.message}\n`);
    process.exitCode = 1;
  },
);
