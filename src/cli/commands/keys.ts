// hearth keys create --entity <name> | list | revoke <prefix>
import { dbPath, loadConfig } from '../../config/config.js';
import { makeHomePrivate } from '../../config/private-home.js';
import { Store } from '../../store/sqlite/store.js';
import { ApiKeys } from '../../services/api-keys.js';
import { parseArgs, stringFlag } from '../args.js';

export async function run(argv: string[]): Promise<number> {
  const args = parseArgs(argv);
  const [sub, arg] = args.positionals;
  const config = loadConfig();
  makeHomePrivate(config.home);
  const store = Store.open(dbPath(config.home));
  try {
    const keys = new ApiKeys(store);
    switch (sub) {
      case 'create': {
        const entity = stringFlag(args, 'entity') ?? config.apiKeyEntity;
        const { key, prefix } = keys.create(entity);
        process.stderr.write(`Created a key for entity "${entity}" (prefix ${prefix}). It is shown once; store it now.\n`);
        process.stdout.write(`${key}\n`);
        return 0;
      }
      case 'list':
        for (const k of keys.list()) {
          process.stdout.write(`${k.prefix}  ${k.entity.padEnd(20)} created ${k.createdAt}${k.revokedAt ? `  REVOKED ${k.revokedAt}` : ''}\n`);
        }
        return 0;
      case 'revoke': {
        if (!arg) throw new Error('usage: hearth keys revoke <prefix>');
        const n = keys.revoke(arg);
        if (n === 0) {
          process.stderr.write(`no live key starts with "${arg}"\n`);
          return 1;
        }
        process.stdout.write(`revoked ${n} key(s)\n`);
        return 0;
      }
      default:
        process.stderr.write('usage: hearth keys create --entity <name> | list | revoke <prefix>\n');
        return 2;
    }
  } finally {
    store.close();
  }
}
