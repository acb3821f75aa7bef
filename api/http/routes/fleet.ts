import type { RouteSpec } from '../route-spec.js';
import * as S from '../../contract/schemas.js';
import type { FleetService } from '../../services/fleet/fleet-service.js';

export interface FleetRoutesOptions {
  fleet: FleetService;
}

/** What the live fleet can do: capabilities (account key) and capacity (public). */
export function fleetRoutes({ fleet }: FleetRoutesOptions): RouteSpec[] {
  return [
    {
      method: 'get',
      path: '/v1/capabilities',
      operationId: 'getCapabilities',
      summary: 'Every kind, its input schema, its outputs, and how many workers serve it right now',
      tag: 'fleet',
      auth: 'account',
      responses: { 200: { description: 'The live catalogue', schema: S.capabilities } },
      async handler(ctx) {
        ctx.body = await fleet.capabilities();
      },
    },
    {
      method: 'get',
      path: '/v1/network/capacity',
      operationId: 'getCapacity',
      summary: 'Live fleet capacity (no credential)',
      tag: 'fleet',
      auth: 'none',
      responses: { 200: { description: 'Workers, slots and queued jobs now', schema: S.capacity } },
      async handler(ctx) {
        ctx.body = await fleet.capacity();
      },
    },
  ];
}
