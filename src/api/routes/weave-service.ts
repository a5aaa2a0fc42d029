// GET /health and GET /server_info: the probes Weave's SDKs make at the trace server's root before any
// table or object call (the JS SDK's `weave.login` checks /health; the Python SDK's `weave.init` reads
// /server_info and compares its own version with min_required_weave_python_version).
import { defineRoute, type RouteDef } from '../route.js';
import type { AppContext } from '../context.js';
import { ServerInfoRes, WeaveHealthRes } from '../../schemas/weave-objects.js';

/** Hearth serves the object and table slice every released weave client speaks: no version is too old. */
const MIN_REQUIRED_WEAVE_PYTHON_VERSION = '0.0.0';

export function weaveServiceRoutes(_ctx: AppContext): RouteDef[] {
  const tags = ['weave'];
  const common = { method: 'GET', tags, auth: 'none', errorStyle: 'reason' } as const;
  return [
    defineRoute({
      ...common, url: '/health', operationId: 'read_root_health_get', summary: 'Read Root', response: WeaveHealthRes,
      handler: () => ({ status: 'ok' as const }),
    }),
    defineRoute({
      ...common, url: '/server_info', operationId: 'server_info_server_info_get', summary: 'Server Info', response: ServerInfoRes,
      handler: () => ({ min_required_weave_python_version: MIN_REQUIRED_WEAVE_PYTHON_VERSION }),
    }),
  ];
}
